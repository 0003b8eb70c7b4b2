package zdata

import (
	"bytes"
	"crypto/ecdh"
	"crypto/rand"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/tls13"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
)

func TestKeyringLookup(t *testing.T) {
	f := newFixture(t, "ecdsa-p256", Options{Window: 10 * time.Second}, nil)
	kr := f.svc.Keyring
	a := f.issue(t, t0)
	b := f.issue(t, t0.Add(30*time.Minute))
	kr.Add(a)
	kr.Add(b)
	ha, hb := a.Record.ZDataHash(), b.Record.ZDataHash()
	cases := []struct {
		id   uint32
		hash [32]byte
		now  time.Time
		ok   bool
	}{
		{a.Record.ID, ha, t0, true},
		// Not before its not-before (tls13.ZDataLive): the guards measure
		// from it, so a key taken earlier could be replayed after a restart.
		{a.Record.ID, ha, t0.Add(-time.Millisecond), false},
		{a.Record.ID, ha, t0.Add(-60 * time.Second), false},
		{a.Record.ID, ha, a.Record.NotAfter.Add(10 * time.Second), true},
		{a.Record.ID, ha, a.Record.NotAfter.Add(11 * time.Second), false},
		{a.Record.ID, hb, t0, false},     // id names another record
		{b.Record.ID, ha, t0, false},     // hash of another record
		{a.Record.ID ^ 1, ha, t0, false}, // unknown id
		{b.Record.ID, hb, t0.Add(40 * time.Minute), true},
	}
	for i, c := range cases {
		if got := kr.LookupZData(c.id, c.hash, c.now); (got != nil) != c.ok {
			t.Errorf("case %d: found=%v, want %v", i, got != nil, c.ok)
		}
	}
	if live := kr.Live(t0.Add(45 * time.Minute)); len(live) != 2 || live[0] != a || live[1] != b {
		t.Fatalf("Live: %d keys", len(live))
	}
	if pub := kr.Published(a.Record.NotAfter.Add(time.Second)); len(pub) != 1 || pub[0] != b {
		t.Fatal("Published should hold only the unexpired record")
	}
	// Prune erases a once its not-after plus the window has passed.
	if gone := kr.Prune(a.Record.NotAfter.Add(10 * time.Second)); len(gone) != 0 {
		t.Fatal("pruned inside the window")
	}
	if gone := kr.Prune(a.Record.NotAfter.Add(11 * time.Second)); len(gone) != 1 || gone[0] != a {
		t.Fatal("did not prune the expired key")
	}
	if kr.Get(a.Record.ID) != nil || kr.LookupZData(a.Record.ID, ha, t0) != nil {
		t.Fatal("pruned key still served")
	}
	kr.Remove(b.Record.ID)
	if len(kr.All()) != 0 {
		t.Fatal("Remove left a key")
	}
}

func TestKeyringECDHRejectsBadShares(t *testing.T) {
	for _, group := range []tls13.CurveID{GroupX25519, GroupSecp256r1} {
		f := newFixture(t, "ecdsa-p256", Options{Group: group}, nil)
		k := f.issue(t, t0)
		f.svc.Keyring.Add(k)
		zk := f.svc.Keyring.LookupZData(k.Record.ID, k.Record.ZDataHash(), t0)
		if zk == nil {
			t.Fatal("key not found")
		}
		bad := [][]byte{nil, {1, 2, 3}, make([]byte, 65), make([]byte, 32)}
		// x25519 points of small order give an all-zero secret.
		one := make([]byte, 32)
		one[0] = 1
		bad = append(bad, one)
		for _, b := range bad {
			if s, err := zk.ECDH(b); err == nil {
				t.Errorf("group %d: accepted share %x (secret %x)", group, b, s)
			}
		}
		if err := ValidateShare(group, k.Record.KeyShare); err != nil {
			t.Fatal(err)
		}
	}
	if err := ValidateShare(GroupX25519, make([]byte, 32)); ReasonOf(err) != ReasonInvalidShare {
		t.Fatalf("all-zero share: %v", err)
	}
	if err := ValidateShare(99, make([]byte, 32)); ReasonOf(err) != ReasonUnknownGroup {
		t.Fatalf("unknown group: %v", err)
	}
}

func TestFleetAgrees(t *testing.T) {
	ca := testpki.NewCA(t, "ecdsa-p256")
	for _, keyType := range []string{"ecdsa-p256", "ed25519"} {
		leaf := ca.Issue(t, testpki.LeafOpts{KeyType: keyType, DNSNames: []string{testHost}})
		seed := bytes.Repeat([]byte{7}, 32)
		for _, group := range []tls13.CurveID{GroupX25519, GroupSecp256r1} {
			a := newFixtureWith(t, ca, leaf, Options{Group: group, ALPN: "h2"}, seed)
			b := newFixtureWith(t, ca, leaf, Options{Group: group, ALPN: "h2"}, append([]byte(nil), seed...))
			epoch := EpochOf(t0)
			ka, err := a.svc.Epoch(epoch)
			if err != nil {
				t.Fatal(err)
			}
			kb, err := b.svc.Epoch(epoch)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(ka.Record.TXT(), kb.Record.TXT()) {
				t.Fatalf("%s/%d: fleet members publish different records", keyType, group)
			}
			if !bytes.Equal(ka.Private.Bytes(), kb.Private.Bytes()) || ka.Record.ZDataHash() != kb.Record.ZDataHash() {
				t.Fatal("fleet members hold different keys")
			}
			if ka.Record.ID != EpochID(epoch) || !ka.Record.NotBefore.Equal(time.Unix(epoch*3600, 0)) || ka.Record.NotAfter.Sub(ka.Record.NotBefore) != time.Hour {
				t.Fatalf("epoch record %d %v %v", ka.Record.ID, ka.Record.NotBefore, ka.Record.NotAfter)
			}
			// A client's share agrees with either member.
			ours, want := clientSecret(t, group, ka.Record.KeyShare)
			got, err := SharedSecret(kb.Private, ours)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatal("fleet member b cannot decrypt a client of a's record")
			}
			next, err := a.svc.Epoch(epoch + 1)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Equal(next.Private.Bytes(), ka.Private.Bytes()) || next.Record.ID == ka.Record.ID {
				t.Fatal("two epochs share a key or id")
			}
		}
	}
	// Keys are bound to seed, host, port, epoch and group.
	seed := bytes.Repeat([]byte{1}, 32)
	base, _ := DeriveKey(seed, "a.test", 443, 100, GroupX25519)
	for name, k := range map[string]func() (*ecdh.PrivateKey, error){
		"seed": func() (*ecdh.PrivateKey, error) {
			return DeriveKey(bytes.Repeat([]byte{2}, 32), "a.test", 443, 100, GroupX25519)
		},
		"host":  func() (*ecdh.PrivateKey, error) { return DeriveKey(seed, "b.test", 443, 100, GroupX25519) },
		"port":  func() (*ecdh.PrivateKey, error) { return DeriveKey(seed, "a.test", 444, 100, GroupX25519) },
		"epoch": func() (*ecdh.PrivateKey, error) { return DeriveKey(seed, "a.test", 443, 101, GroupX25519) },
		"group": func() (*ecdh.PrivateKey, error) { return DeriveKey(seed, "a.test", 443, 100, GroupSecp256r1) },
	} {
		other, err := k()
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(other.Bytes(), base.Bytes()) {
			t.Errorf("changing the %s kept the key", name)
		}
	}
	if same, _ := DeriveKey(seed, "A.TEST.", 443, 100, GroupX25519); !bytes.Equal(same.Bytes(), base.Bytes()) {
		t.Error("host spelling changed the key")
	}
	if _, err := DeriveKey(nil, "a.test", 443, 1, GroupX25519); err == nil {
		t.Error("empty seed accepted")
	}
}

func TestEpochOf(t *testing.T) {
	for _, c := range []struct {
		unix int64
		want int64
	}{{0, 0}, {3599, 0}, {3600, 1}, {-1, -1}, {-3600, -1}, {-3601, -2}} {
		if got := EpochOf(time.Unix(c.unix, 0)); got != c.want {
			t.Errorf("EpochOf(%d) = %d, want %d", c.unix, got, c.want)
		}
	}
}

// TestRotationSimulated runs the rotation over several hours of simulated
// time. A rotator runs every minute; clients fetch the published RRset at
// every 37 s step and keep it for its TTL; at every instant of the TTL a
// client's fetched copy must select a record the server accepts.
func TestRotationSimulated(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		seed []byte
	}{
		{"fleet", Options{}, bytes.Repeat([]byte{9}, 32)},
		{"single 1h", Options{}, nil},
		{"single 20m lead 5m", Options{Validity: 20 * time.Minute, LeadTime: 5 * time.Minute}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "ecdsa-p256", tc.opts, tc.seed)
			start := clock.Now().UTC().Truncate(time.Second).Add(-20 * time.Minute)
			end := start.Add(5 * time.Hour)
			// The server's keyring state at every simulated minute.
			type fetch struct {
				at  time.Time
				txt [][]string
				ttl time.Duration
			}
			var fetches []fetch
			nextRotate := start
			checks := 0
			for now := start; now.Before(end); now = now.Add(37 * time.Second) {
				for !nextRotate.After(now) {
					if _, err := f.svc.Rotate(nextRotate); err != nil {
						t.Fatal(err)
					}
					nextRotate = nextRotate.Add(time.Minute)
				}
				recs := f.svc.Records(now)
				if len(recs) == 0 {
					t.Fatalf("nothing published at %v", now)
				}
				var txt [][]string
				for _, r := range recs {
					txt = append(txt, r.TXT())
				}
				fetches = append(fetches, fetch{now, txt, TTLFor(recs, now, 5*time.Minute)})
				// Every client copy still in its TTL must work now.
				// Copies with the same content behave the same: check each once.
				seen := map[string]bool{}
				for _, fe := range fetches {
					if now.After(fe.at.Add(fe.ttl)) {
						continue
					}
					id := fmt.Sprint(fe.txt)
					if seen[id] {
						continue
					}
					seen[id] = true
					r, _, err := selectOne(fe.txt, f.tlsa(), nil, testHost, testPort, f.roots(), now)
					if err != nil {
						t.Fatalf("client that fetched at %v fails at %v: %v", fe.at, now, err)
					}
					if f.svc.Keyring.LookupZData(r.ID, r.ZDataHash(), now) == nil {
						t.Fatalf("server refuses record %d at %v", r.ID, now)
					}
					checks++
				}
				if n := len(f.svc.Keyring.All()); n > 3 {
					t.Fatalf("keyring grew to %d keys", n)
				}
			}
			if checks < 300 {
				t.Fatalf("only %d checks", checks)
			}
		})
	}
}

// TestSizes: default-profile answers fit a 1232-byte UDP response
// (docs/ztls-spec.md, Section 1), also with the next record published.
func TestSizes(t *testing.T) {
	for _, keyType := range []string{"ecdsa-p256", "ed25519"} {
		f := newFixture(t, keyType, Options{}, nil)
		cur := f.issue(t, t0)
		next := f.issue(t, t0.Add(time.Hour))
		rrs := ZoneRRs([]*Record{cur.Record, next.Record}, f.leaf.Chain[0], nil, 300*time.Second)
		var txtAns, tlsaAns []dns.RR
		for _, rr := range rrs {
			switch rr.(type) {
			case *dns.TXT:
				txtAns = append(txtAns, rr)
			case *dns.TLSA:
				tlsaAns = append(tlsaAns, rr)
			}
		}
		for name, c := range map[string]struct {
			qname string
			qtype uint16
			ans   []dns.RR
		}{
			"TXT":  {TXTName(testHost, testPort), dns.TypeTXT, txtAns},
			"TLSA": {TLSAName(testHost, testPort), dns.TypeTLSA, tlsaAns},
		} {
			m := new(dns.Msg)
			m.SetQuestion(c.qname, c.qtype)
			m.Response = true
			m.Authoritative = true
			m.Answer = c.ans
			m.SetEdns0(1232, false)
			b, err := m.Pack()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s leaf: %s answer %d bytes (%d RRs)", keyType, name, len(b), len(c.ans))
			if len(b) >= 1232 {
				t.Errorf("%s %s answer is %d bytes, want < 1232", keyType, name, len(b))
			}
		}
	}
}

func TestZoneLines(t *testing.T) {
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{testHost}, Intermediate: true})
	f := newFixtureWith(t, ca, leaf, Options{}, nil)
	k := f.issue(t, t0)
	lines := ZoneLines([]*Record{k.Record}, leaf.Chain[0], leaf.Chain[1:], 2*time.Hour)
	if len(lines) != 3 {
		t.Fatalf("%d lines: %q", len(lines), lines)
	}
	// Read them back as a zone file.
	zp := dns.NewZoneParser(bytes.NewReader([]byte(lines[0]+"\n"+lines[1]+"\n"+lines[2]+"\n")), "", "")
	var txt [][]string
	var tlsa []*dns.TLSA
	var certs []*dns.CERT
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		if rr.Header().Ttl >= 3600 {
			t.Errorf("TTL %d does not end before not-after", rr.Header().Ttl)
		}
		switch v := rr.(type) {
		case *dns.TXT:
			if v.Hdr.Name != "_ztls._443._tcp.server.test." {
				t.Errorf("TXT owner %q", v.Hdr.Name)
			}
			txt = append(txt, v.Txt)
		case *dns.TLSA:
			if v.Hdr.Name != "_443._tcp.server.test." || v.Usage != 3 || v.Selector != 0 || v.MatchingType != 0 {
				t.Errorf("TLSA %v", v)
			}
			tlsa = append(tlsa, v)
		case *dns.CERT:
			if v.Hdr.Name != "_ztls._443._tcp.server.test." || v.Type != dns.CertPKIX {
				t.Errorf("CERT %v", v)
			}
			certs = append(certs, v)
		}
	}
	if err := zp.Err(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := selectOne(txt, tlsa, certs, testHost, testPort, ca.Pool(), t0); err != nil {
		t.Fatalf("zone lines do not select: %v", err)
	}
	if got := TLSARecordData(leaf.Chain[0]); got != "3 0 0 "+tlsa[0].Certificate {
		t.Fatalf("TLSARecordData %q", got[:20])
	}
	// TTLFor ends before the earliest live not-after.
	now := k.Record.NotAfter.Add(-90 * time.Second)
	if ttl := TTLFor([]*Record{k.Record}, now, time.Hour); ttl != 89*time.Second {
		t.Fatalf("TTLFor = %v", ttl)
	}
	if ttl := TTLFor([]*Record{k.Record}, k.Record.NotAfter.Add(time.Second), time.Hour); ttl != 0 {
		t.Fatalf("TTLFor after expiry = %v", ttl)
	}
}

func TestServiceRejects(t *testing.T) {
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{testHost}})
	cert := f2cert(leaf)
	for name, fn := range map[string]func() error{
		"port 0":     func() error { _, err := NewService(testHost, 0, cert, Options{}, nil); return err },
		"empty host": func() error { _, err := NewService("", 443, cert, Options{}, nil); return err },
		"short seed": func() error { _, err := NewService(testHost, 443, cert, Options{}, []byte("short")); return err },
		"group":      func() error { _, err := NewService(testHost, 443, cert, Options{Group: 4587}, nil); return err },
		"validity 2h": func() error {
			_, err := NewService(testHost, 443, cert, Options{Validity: 2 * time.Hour}, nil)
			return err
		},
		"alpn":    func() error { _, err := NewService(testHost, 443, cert, Options{ALPN: "a b"}, nil); return err },
		"no cert": func() error { _, err := NewService(testHost, 443, f2cert(&testpki.Leaf{}), Options{}, nil); return err },
	} {
		if fn() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	svc, err := NewService(testHost, 443, cert, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Epoch(1); err == nil {
		t.Error("Epoch without a seed")
	}
	if _, err := svc.Issue(t0, rand.Reader); err != nil {
		t.Fatal(err)
	}
}
