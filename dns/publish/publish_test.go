package publish

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

const (
	svc  = "_ztls._443._tcp.www.example.test."
	tlsa = "_443._tcp.www.example.test."
	// A test-only secret (base64 of 32 bytes).
	testSecret = "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTAxMjM="
)

func rr(t testing.TB, s string) dns.RR {
	t.Helper()
	r, err := dns.NewRR(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// newSets is the generation of Z-data the tests publish.
func newSets(t testing.TB, gen int) []RRSet {
	return []RRSet{
		{Name: svc, Type: dns.TypeTXT, Records: []dns.RR{
			rr(t, fmt.Sprintf(`%s 300 IN TXT "v=ztls1 gen=%d"`, svc, gen)),
			rr(t, fmt.Sprintf(`%s 300 IN TXT "part2 gen=%d"`, svc, gen)),
		}},
		{Name: svc, Type: dns.TypeCERT, Records: []dns.RR{
			rr(t, fmt.Sprintf("%s 300 IN CERT PKIX %d 0 AAECAwQFBgcICQ==", svc, gen)),
		}},
		{Name: tlsa, Type: dns.TypeTLSA, Records: []dns.RR{
			rr(t, fmt.Sprintf("%s 300 IN TLSA 3 1 1 %064x", tlsa, gen)),
		}},
	}
}

func TestNewUpdate(t *testing.T) {
	m, err := NewUpdate("Example.Test", newSets(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	if m.Opcode != dns.OpcodeUpdate || len(m.Question) != 1 ||
		m.Question[0] != (dns.Question{Name: "example.test.", Qtype: dns.TypeSOA, Qclass: dns.ClassINET}) {
		t.Fatalf("zone section %v opcode %d", m.Question, m.Opcode)
	}
	if len(m.Answer) != 0 || len(m.Extra) != 0 {
		t.Fatalf("prerequisites or additional data: %v %v", m.Answer, m.Extra)
	}
	var got []string
	for _, r := range m.Ns {
		h := r.Header()
		got = append(got, fmt.Sprintf("%s %s %s %d", h.Name, dns.ClassToString[h.Class], dns.TypeToString[h.Rrtype], h.Ttl))
	}
	want := []string{
		svc + " ANY TXT 0", svc + " IN TXT 300", svc + " IN TXT 300",
		svc + " ANY CERT 0", svc + " IN CERT 300",
		tlsa + " ANY TLSA 0", tlsa + " IN TLSA 300",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("update section\n got %q\nwant %q", got, want)
	}
	// The delete-RRset records have no RDATA on the wire.
	wire, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	back := new(dns.Msg)
	if err := back.Unpack(wire); err != nil {
		t.Fatal(err)
	}
	if back.Ns[0].Header().Rdlength != 0 || back.Ns[0].Header().Class != dns.ClassANY {
		t.Fatalf("delete record on the wire: %v", back.Ns[0])
	}

	// A set with no records only deletes.
	m, err = NewUpdate("example.test.", []RRSet{{Name: tlsa, Type: dns.TypeTLSA}})
	if err != nil || len(m.Ns) != 1 {
		t.Fatalf("%v %v", m, err)
	}
}

func TestNewUpdateErrors(t *testing.T) {
	a := rr(t, "www.example.test. 60 IN A 192.0.2.1")
	ch := rr(t, "www.example.test. 60 CH A 192.0.2.1")
	tests := []struct {
		name string
		zone string
		sets []RRSet
		want string
	}{
		{"no sets", "example.test.", nil, "no RRsets"},
		{"bad zone", "exa..mple.", []RRSet{{Name: "www.example.test.", Type: dns.TypeA}}, "bad zone"},
		{"outside zone", "example.test.", []RRSet{{Name: "www.example.net.", Type: dns.TypeA}}, "outside zone"},
		{"SOA", "example.test.", []RRSet{{Name: "example.test.", Type: dns.TypeSOA}}, "cannot replace"},
		{"ANY", "example.test.", []RRSet{{Name: "www.example.test.", Type: dns.TypeANY}}, "cannot replace"},
		{"twice", "example.test.", []RRSet{{Name: "www.example.test.", Type: dns.TypeA}, {Name: "WWW.example.test", Type: dns.TypeA}}, "given twice"},
		{"wrong owner", "example.test.", []RRSet{{Name: "x.example.test.", Type: dns.TypeA, Records: []dns.RR{a}}}, "does not belong"},
		{"wrong type", "example.test.", []RRSet{{Name: "www.example.test.", Type: dns.TypeAAAA, Records: []dns.RR{a}}}, "does not belong"},
		{"wrong class", "example.test.", []RRSet{{Name: "www.example.test.", Type: dns.TypeA, Records: []dns.RR{ch}}}, "does not belong"},
		{"nil record", "example.test.", []RRSet{{Name: "www.example.test.", Type: dns.TypeA, Records: []dns.RR{nil}}}, "nil record"},
		{"empty name", "example.test.", []RRSet{{Type: dns.TypeA}}, "bad owner"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewUpdate(tc.zone, tc.sets)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "publish: ") {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestKeyNeverPrinted(t *testing.T) {
	k := TSIGKey{Name: "k.", Secret: testSecret}
	for _, s := range []string{fmt.Sprint(k), fmt.Sprintf("%v %+v %#v %s", k, k, k, k)} {
		if strings.Contains(s, testSecret) {
			t.Fatalf("secret in %q", s)
		}
	}
	bad := TSIGKey{Name: "k.", Secret: "not base64 !!"}
	err := (&Publisher{Server: "127.0.0.1:1", Zone: "example.test.", Key: bad}).Publish(context.Background(), newSets(t, 1))
	if err == nil || strings.Contains(err.Error(), bad.Secret) {
		t.Fatalf("err = %v", err)
	}
	for _, k := range []TSIGKey{{Name: "", Secret: testSecret}, {Name: "k.", Algorithm: "hmac-md5.sig-alg.reg.int.", Secret: testSecret}} {
		if err := k.check(); err == nil {
			t.Errorf("%v accepted", k)
		}
	}
}

// acceptAll lets the miekg/dns test server see UPDATEs.
func acceptAll(dns.Header) dns.MsgAcceptAction { return dns.MsgAccept }

// fakePrimary is an in-process UPDATE server (miekg/dns) that verifies
// TSIG like a primary would, records what it accepted and answers with
// the given rcode.
type fakePrimary struct {
	addr string
	mu   sync.Mutex
	got  []*dns.Msg
}

func startFakePrimary(t *testing.T, secret string) *fakePrimary {
	t.Helper()
	pc, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fp := &fakePrimary{addr: pc.Addr().String()}
	srv := &dns.Server{Listener: pc, TsigSecret: map[string]string{"ztls-update.": secret}, MsgAcceptFunc: acceptAll}
	srv.Handler = dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		switch {
		case r.IsTsig() == nil:
			m.Rcode = dns.RcodeRefused
		case w.TsigStatus() != nil:
			m.Rcode = dns.RcodeNotAuth
		default:
			fp.mu.Lock()
			fp.got = append(fp.got, r)
			fp.mu.Unlock()
			m.SetTsig(r.IsTsig().Hdr.Name, dns.HmacSHA256, 300, time.Now().Unix()) // real time: TSIG is checked on the system clock
		}
		w.WriteMsg(m)
	})
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go srv.ActivateAndServe()
	<-started
	t.Cleanup(func() { srv.Shutdown() })
	return fp
}

func TestPublishFakePrimary(t *testing.T) {
	fp := startFakePrimary(t, testSecret)
	ctx := context.Background()
	key := TSIGKey{Name: "ztls-update.", Secret: testSecret}
	if err := Publish(ctx, fp.addr, "example.test.", key, newSets(t, 2)); err != nil {
		t.Fatal(err)
	}
	if len(fp.got) != 1 || len(fp.got[0].Ns) != 7 || fp.got[0].IsTsig().Algorithm != dns.HmacSHA256 {
		t.Fatalf("primary received %v", fp.got)
	}
	var ue *UpdateError
	err := (&Publisher{Server: fp.addr, Zone: "example.test.", DangerousUnsigned: true}).Publish(ctx, newSets(t, 3))
	if !errors.As(err, &ue) || ue.Rcode != dns.RcodeRefused {
		t.Fatalf("unsigned: %v", err)
	}
	wrong := TSIGKey{Name: "ztls-update.", Secret: "d3Jvbmctc2VjcmV0LXdyb25nLXNlY3JldC0wMTIzNDU="}
	err = Publish(ctx, fp.addr, "example.test.", wrong, newSets(t, 4))
	if !errors.As(err, &ue) || ue.Rcode != dns.RcodeNotAuth {
		t.Fatalf("wrong key: %v", err)
	}
	if len(fp.got) != 1 {
		t.Fatalf("refused updates reached the primary's data: %d", len(fp.got))
	}
}

// An unsigned success answer to a signed UPDATE is not trusted.
func TestPublishRejectsUnsignedAnswer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{Listener: l, TsigSecret: map[string]string{"ztls-update.": testSecret}, MsgAcceptFunc: acceptAll,
		Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
			m := new(dns.Msg)
			m.SetReply(r)
			w.WriteMsg(m)
		})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go srv.ActivateAndServe()
	<-started
	t.Cleanup(func() { srv.Shutdown() })
	err = Publish(context.Background(), l.Addr().String(), "example.test.",
		TSIGKey{Name: "ztls-update.", Secret: testSecret}, newSets(t, 1))
	if err == nil || !strings.Contains(err.Error(), "not signed") {
		t.Fatalf("err = %v", err)
	}
}

func TestPublishContextCancelled(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	testDone := make(chan struct{})
	defer close(testDone)
	go func() {
		c, err := l.Accept()
		if err == nil {
			defer c.Close()
			c.Read(make([]byte, 4096)) // read the UPDATE, never answer
			<-testDone
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Publish(ctx, l.Addr().String(), "example.test.", TSIGKey{Name: "k.", Secret: testSecret}, newSets(t, 1))
	}()
	cancel()
	if err := <-done; err == nil {
		t.Fatal("Publish succeeded against a silent server")
	}
}
