package redisreg

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ztlsclock "github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/zdata"
)

// The cost the register adds per accepted flight, in one run so that the
// figures share the machine's state: the old hand-written client
// (oldresp_test.go: one EVALSHA of the old script, run_id read per
// connection) against the register on go-redis (one EVALSHA, the process
// id read per connection too), plaintext and TLS, one primary and a
// Cluster. Each variant runs in turn, three rounds:
//
//	go test -run '^$' -bench 'Register|FleetHandshake' -benchtime 3000x ./zdata/redisreg
//
// (issue 28: within 1.2x of the old client per accepted flight on
// plaintext.)

// oldRegister is the pre-issue-28 register's hot path: a pool of old
// connections, each knowing its server's run_id, one EVALSHA per call. It
// skips the old register's policy check (once per ten seconds) and loss
// recording (the marker is set up front).
type oldRegister struct {
	addr string
	pool chan *conn
}

func newOldRegister(b *testing.B, s *redisServer) *oldRegister {
	o := &oldRegister{addr: s.addr, pool: make(chan *conn, 16)}
	c, err := o.get()
	if err != nil {
		b.Fatal(err)
	}
	o.put(c)
	rep := s.raw(b, "SET", "old:marker", "since 0 "+string(c.run))
	if rep.str != "OK" {
		b.Fatal(rep)
	}
	return o
}

func (o *oldRegister) get() (*conn, error) {
	select {
	case c := <-o.pool:
		return c, nil
	default:
	}
	nc, err := net.Dial("tcp", o.addr)
	if err != nil {
		return nil, err
	}
	c := &conn{nc: nc, br: bufio.NewReader(nc)}
	if err := c.readRunID(time.Second); err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

func (o *oldRegister) put(c *conn) {
	select {
	case o.pool <- c:
	default:
		c.close()
	}
}

func (o *oldRegister) CheckAndInsert(key []byte, now, notBefore, expires time.Time) (bool, error) {
	c, err := o.get()
	if err != nil {
		return false, err
	}
	defer o.put(c)
	ttl := max(expires.Sub(now).Milliseconds()+1000, 1)
	rep, err := c.eval(time.Second, oldInsertScript, oldInsertSHA, [][]byte{append([]byte("old:"), key...), []byte("old:marker")},
		strconv.AppendInt(nil, notBefore.UnixMilli()-1000, 10), strconv.AppendInt(nil, ttl, 10), []byte("t"), []byte("2000"), c.run)
	if err != nil {
		return false, err
	}
	if rep.kind != '*' || len(rep.array) == 0 || rep.array[0].kind != ':' {
		return false, errors.New("old script: unexpected reply")
	}
	switch rep.array[0].num {
	case resInserted:
		return true, nil
	case resReplayed:
		return false, nil
	}
	return false, errors.New("old script: refused")
}

// benchRegisters are the variants: the old client and the register on
// each way to Redis. Their clocks run an hour back, so their memory
// (begun at the first call) covers every ClientHello made now.
func benchRegisters(b *testing.B) (names []string, regs map[string]tls13.StrikeRegister) {
	regs = map[string]tls13.StrikeRegister{}
	srv := startTLSRedis(b, false)
	past := func() time.Time { return ztlsclock.Now().Add(-time.Hour) }
	add := func(name string, r tls13.StrikeRegister) {
		names = append(names, name)
		regs[name] = r
	}
	add("resp.go", newOldRegister(b, srv.s))
	mk := func(o Options) *Register {
		o.Now = past
		r, err := New(o)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { r.Close() })
		now := ztlsclock.Now()
		r.CheckAndInsert([]byte("warm"), now, now, now.Add(time.Second))
		return r
	}
	add("go-redis", mk(Options{Addr: srv.s.addr}))
	add("go-redis-TLS", mk(Options{Addr: srv.tlsAddr, TLS: &tls.Config{RootCAs: srv.ca.Pool(), Certificates: []tls.Certificate{srv.client}}}))
	if !testing.Short() {
		c := startCluster(b, time.Second)
		add("go-redis-Cluster", mk(Options{Mode: ModeCluster, Addrs: c.addrs()}))
	}
	return names, regs
}

var benchSeq atomic.Uint64

// BenchmarkRegister is one accepted flight's register round trip, serial
// and from 8 goroutines at once.
func BenchmarkRegister(b *testing.B) {
	names, regs := benchRegisters(b)
	now := ztlsclock.Now()
	for range 3 {
		for _, name := range names {
			r := regs[name]
			b.Run(name, func(b *testing.B) {
				var key [8]byte
				for b.Loop() {
					n := benchSeq.Add(1)
					for j := range key {
						key[j] = byte(n >> (8 * j))
					}
					if fresh, err := r.CheckAndInsert(key[:], now, now, now.Add(10*time.Second)); err != nil || !fresh {
						b.Fatalf("%v %v", fresh, err)
					}
				}
			})
			b.Run(name+"-par8", func(b *testing.B) {
				b.SetParallelism(4) // 4 x GOMAXPROCS(2)
				b.RunParallel(func(pb *testing.PB) {
					var key [8]byte
					for pb.Next() {
						n := benchSeq.Add(1)
						for j := range key {
							key[j] = byte(n >> (8 * j))
						}
						if fresh, err := r.CheckAndInsert(key[:], now, now, now.Add(10*time.Second)); err != nil || !fresh {
							b.Errorf("%v %v", fresh, err)
							return
						}
					}
				})
			})
		}
	}
}

// BenchmarkFleetHandshake is one accepted ZTLS handshake with early data
// (client and server in this process, over a loopback pipe), the server's
// strike register being each variant: what the register costs in
// handshakes per second.
func BenchmarkFleetHandshake(b *testing.B) {
	names, regs := benchRegisters(b)
	ca := testpki.NewCA(b, "ecdsa-p256")
	leaf := ca.Issue(b, testpki.LeafOpts{DNSNames: []string{"server.test"}})
	cert := tls13.Certificate{Chain: leaf.Chain, PrivateKey: leaf.Key, Leaf: leaf.Cert}
	now := ztlsclock.Now()
	svc, err := zdata.NewService("server.test", 443, cert, zdata.Options{}, bytes.Repeat([]byte{0x42}, 32))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := svc.Rotate(now); err != nil {
		b.Fatal(err)
	}
	rec, rleaf := clientSelects(b, svc, leaf, ca, now)
	ccfg := &tls13.Config{ServerName: "server.test", RootCAs: ca.Pool()}
	for range 3 {
		for _, name := range names {
			scfg := &tls13.Config{Certificates: []tls13.Certificate{cert}, ZData: svc.Keyring, StrikeRegister: regs[name]}
			b.Run(name, func(b *testing.B) {
				for b.Loop() {
					if err := earlyHandshake(scfg, ccfg, rec.Offer(rleaf)); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// earlyHandshake runs one ZTLS handshake whose early data must be
// accepted.
func earlyHandshake(scfg, ccfg *tls13.Config, offer *tls13.ZDataOffer) error {
	cn, sn := net.Pipe()
	defer cn.Close()
	var wg sync.WaitGroup
	var serr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer sn.Close()
		s := tls13.Server(sn, scfg)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if serr = s.HandshakeEarly(ctx); serr != nil {
			return
		}
		early, err := io.ReadAll(earlyReader{s})
		if err == nil && string(early) != "GET /" {
			err = errors.New("early data not accepted: " + s.ConnectionState().ZTLSRejectReason)
		}
		if err == nil {
			_, err = s.Write([]byte("ok"))
		}
		if err == nil {
			err = s.HandshakeContext(ctx)
		}
		serr = err
	}()
	c := tls13.Client(cn, ccfg)
	c.SetZData(offer)
	c.SetEarlyData([]byte("GET /"), false)
	err := c.Handshake()
	if err == nil {
		buf := make([]byte, 8)
		_, err = c.Read(buf)
	}
	c.Close()
	wg.Wait()
	if serr != nil {
		return serr
	}
	return err
}
