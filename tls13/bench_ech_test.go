package tls13

// Encrypted ClientHello's cost, side by side in one run (docs/ztls-spec.md,
// Section 10; docs/bench/ech-cpu-2026-11-28.txt): a TLS 1.3 handshake and
// a ZTLS one, each without ECH, with ECH accepted, with ECH rejected (the
// client's config is for a key the server does not hold: the handshake
// runs on the outer ClientHello with the public name's certificate and
// ends in ech_required) and with a GREASE extension. One server config
// serves every case: x25519, ECDSA P-256 leaves, AES-128-GCM, no tickets.

import (
	"crypto/ecdh"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/testsupport/cputime"
)

// echBenchCase is one column of the comparison.
type echBenchCase struct {
	name string
	ech  ECHStatus // what the client ends with
	ztls bool      // a ZTLS first flight with an early request
}

var echBenchCases = []echBenchCase{
	{"tls13", ECHNone, false},
	{"tls13-ech", ECHAccepted, false},
	{"tls13-ech-rejected", ECHRejected, false},
	{"tls13-grease", ECHGrease, false},
	{"ztls", ECHNone, true},
	{"ztls-ech", ECHAccepted, true},
	{"ztls-ech-rejected", ECHRejected, true},
	{"ztls-grease", ECHGrease, true},
}

// echBench is the benchmarks' setup: one server (the inner name's and
// the public name's certificates, an ECH key, a Z-data key for the inner
// name) and the client config and offer of each case.
type echBench struct {
	scfg  *Config
	base  *Config // the client without ECH
	list  []byte  // the server's ECHConfigList
	stale []byte  // a list for a key the server does not hold
	offer *ZDataOffer
}

func newECHBench(b *testing.B) *echBench {
	e := newECHSetup(b)
	offer, key := newZData(b, ecdh.X25519(), X25519, echInnerName, "", e.p)
	scfg := e.scfg
	scfg.ZData = &testZKeys{keys: []*ZDataKey{key}}
	scfg.StrikeRegister = NewMemoryStrikeRegister(1<<30, time.Time{})
	scfg.SessionTicketsDisabled, scfg.MaxEarlyData = true, 4096
	base := benchClientConfig(e.p, X25519)
	base.ServerName, base.SessionTicketsDisabled = echInnerName, true
	return &echBench{scfg: scfg, base: base, list: e.list, stale: echList(b, newECHKey(b, 1)), offer: offer}
}

// client returns the client config and offer of a case.
func (x *echBench) client(c echBenchCase) (*Config, *ZDataOffer, []byte) {
	ccfg := x.base.Clone()
	switch c.ech {
	case ECHAccepted:
		ccfg.ECHConfigList = x.list
	case ECHRejected:
		ccfg.ECHConfigList = x.stale
	case ECHGrease:
		ccfg.ECHGrease = true
	}
	if !c.ztls {
		return ccfg, nil, nil
	}
	return ccfg, x.offer, []byte("GET / HTTP/1.1\r\nHost: server.test\r\n\r\n")
}

// echBenchResult is one handshake's timing and outcome.
type echBenchResult struct {
	ct, st   time.Duration // each side's time inside its engine
	hello    int           // the first ClientHello's length (handshake message, header included)
	cli, srv *engine
	cerr     error // the client's error (a rejection's ECHRejectedError)
}

// echBenchPair drives one handshake between fresh engines until the
// server has nothing more to say or the client failed and the server
// read its alert.
func echBenchPair(ccfg, scfg *Config, offer *ZDataOffer, early []byte) (r echBenchResult, err error) {
	t0 := clock.Now()
	r.cli = newEngine(ccfg, true)
	if err := r.cli.startClient(nil, offer, early); err != nil {
		return r, fmt.Errorf("client start: %w", err)
	}
	out := r.cli.takeOutput()
	r.hello = 4 + (int(out[6])<<16 | int(out[7])<<8 | int(out[8]))
	t1 := clock.Now()
	r.ct += t1.Sub(t0)
	r.srv = newEngine(scfg, false)
	r.srv.startServer()
	for round := 0; len(out) > 0; round++ {
		if round > 6 {
			return r, errors.New("handshake does not converge")
		}
		t0 = clock.Now()
		serr := r.srv.feed(out)
		back := r.srv.takeOutput()
		t1 = clock.Now()
		r.st += t1.Sub(t0)
		if serr != nil {
			if r.cerr == nil {
				return r, fmt.Errorf("server: %w", serr)
			}
			return r, nil
		}
		if len(back) == 0 || r.cerr != nil {
			break
		}
		r.cerr = r.cli.feed(back)
		out = r.cli.takeOutput()
		r.ct += clock.Since(t1)
	}
	return r, nil
}

// check fails unless the handshake ended as the case expects.
func (c echBenchCase) check(b *testing.B, r echBenchResult) {
	var rej *ECHRejectedError
	switch {
	case r.cli.info.ECH != c.ech:
		b.Fatalf("%s: client ECH %q (%v)", c.name, r.cli.info.ECH, r.cerr)
	case c.ech == ECHRejected:
		if !errors.As(r.cerr, &rej) || r.srv.info.ZTLS {
			b.Fatalf("%s: client %v, server ztls %v: want a rejection", c.name, r.cerr, r.srv.info.ZTLS)
		}
	case r.cerr != nil || !r.cli.done || !r.srv.done:
		b.Fatalf("%s: client %v, done %v/%v", c.name, r.cerr, r.cli.done, r.srv.done)
	case c.ztls != r.srv.info.ZTLS || c.ztls != r.cli.info.EarlyDataAccepted:
		b.Fatalf("%s: ztls %v, early data %v (%s)", c.name, r.srv.info.ZTLS, r.cli.info.EarlyDataAccepted, r.srv.info.ZTLSRejectReason)
	}
}

// BenchmarkECH: whole handshakes between two engines in memory, each
// side's working time (client-ns/op, server-ns/op) and the ClientHello's
// size (hello-bytes: the outer one with ECH).
func BenchmarkECH(b *testing.B) {
	x := newECHBench(b)
	for _, c := range echBenchCases {
		b.Run(c.name, func(b *testing.B) {
			ccfg, offer, early := x.client(c)
			b.ReportAllocs()
			var ct, st time.Duration
			hello := 0
			for i := 0; i < b.N; i++ {
				r, err := echBenchPair(ccfg, x.scfg, offer, early)
				if err != nil {
					b.Fatal(err)
				}
				if i == 0 {
					c.check(b, r)
				}
				ct, st, hello = ct+r.ct, st+r.st, r.hello
			}
			reportSides(b, ct, st)
			b.ReportMetric(float64(hello), "hello-bytes")
		})
	}
}

// BenchmarkECHServerFirstFlight isolates the server, where ECH's cost
// lands (the HPKE decapsulation and the inner ClientHello's decryption
// and decoding): client first flights are made before the timer starts,
// and the loop, on one locked OS thread, feeds each to a new server
// engine and takes its first flight. cpu-ns/op is that thread's CPU time
// per handshake (not the time it waited for a core).
func BenchmarkECHServerFirstFlight(b *testing.B) {
	x := newECHBench(b)
	for _, c := range echBenchCases {
		b.Run(c.name, func(b *testing.B) {
			ccfg, offer, early := x.client(c)
			flights := make([][]byte, b.N)
			for i := range flights {
				cli := newEngine(ccfg, true)
				if err := cli.startClient(nil, offer, early); err != nil {
					b.Fatal(err)
				}
				flights[i] = cli.takeOutput()
			}
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.ReportAllocs()
			b.ResetTimer()
			t0, ok := cputime.Thread()
			for i := 0; i < b.N; i++ {
				srv := newEngine(x.scfg, false)
				srv.startServer()
				if err := srv.feed(flights[i]); err != nil {
					b.Fatal(err)
				}
				if len(srv.takeOutput()) == 0 || srv.info.ZTLS != (c.ztls && c.ech != ECHRejected) {
					b.Fatalf("%s: no server flight, or ztls %v (%s)", c.name, srv.info.ZTLS, srv.info.ZTLSRejectReason)
				}
			}
			if t1, _ := cputime.Thread(); ok {
				b.ReportMetric(float64((t1-t0).Nanoseconds())/float64(b.N), "cpu-ns/op")
			}
		})
	}
}
