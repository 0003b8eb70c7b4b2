package resolver

import (
	"context"
	"net"
	"sort"
	"sync"
	"testing"

	"github.com/miekg/dns"
)

// TestLookupServiceQuerySkips: the questions a ServiceQuery leaves out
// reach no server and are nil in the result; the others are asked and
// answered as LookupService asks them.
func TestLookupServiceQuerySkips(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	addr := udpServer(t, func(pc net.PacketConn, from net.Addr, q *dns.Msg) {
		mu.Lock()
		asked = append(asked, dns.TypeToString[q.Question[0].Qtype])
		mu.Unlock()
		m := new(dns.Msg)
		m.SetRcode(q, dns.RcodeNameError)
		pc.WriteTo(pack(t, m), from)
	})
	r, err := New(Config{Servers: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, tc := range []struct {
		q    ServiceQuery
		want []string
	}{
		{ServiceQuery{}, []string{"A", "AAAA", "CERT", "HTTPS", "TLSA", "TXT"}},
		{ServiceQuery{NoTXT: true}, []string{"A", "AAAA", "CERT", "HTTPS", "TLSA"}},
		{ServiceQuery{NoTXT: true, NoTLSA: true, NoCERT: true}, []string{"A", "AAAA", "HTTPS"}},
	} {
		mu.Lock()
		asked = nil
		mu.Unlock()
		var landed []string
		host := "q" + string(rune('a'+len(tc.want))) + ".test" // a name per case: nothing from the cache
		res, err := r.LookupServiceQuery(context.Background(), host, 443, tc.q, func(a Answer) {
			landed = append(landed, dns.TypeToString[a.Qtype])
		})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		got := append([]string(nil), asked...)
		mu.Unlock()
		sort.Strings(got)
		sort.Strings(landed)
		if !equal(got, tc.want) || !equal(landed, tc.want) {
			t.Fatalf("%+v: asked %v, landed %v, want %v", tc.q, got, landed, tc.want)
		}
		if (res.TXT == nil) != tc.q.NoTXT || (res.TLSA == nil) != tc.q.NoTLSA || (res.CERT == nil) != tc.q.NoCERT ||
			res.A == nil || res.AAAA == nil || res.HTTPS == nil {
			t.Fatalf("%+v: result %+v", tc.q, res)
		}
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
