package publish

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/ztls-project/ztls/internal/testsupport/dnstest"
)

const bindZone = `$TTL 300
@ IN SOA ns hostmaster 100 3600 600 86400 60
@ IN NS ns
ns IN A 127.0.0.1
www IN A 192.0.2.10
_ztls._443._tcp.www IN TXT "v=ztls1 old"
_ztls._443._tcp.www IN CERT PKIX 1 0 b2xkLWNlcnQ=
_443._tcp.www IN TLSA 3 1 1 00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff
`

// rrsetAt asks the server for one RRset over TCP and renders it sorted.
func rrsetAt(t *testing.T, addr, name string, qtype uint16) []string {
	t.Helper()
	q := new(dns.Msg)
	q.SetQuestion(name, qtype)
	r, _, err := (&dns.Client{Net: "tcp", Timeout: 5 * time.Second}).Exchange(q, addr)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range r.Answer {
		out = append(out, strings.TrimPrefix(a.String(), a.Header().String()))
	}
	slices.Sort(out)
	return out
}

func serialAt(t *testing.T, addr string) uint32 {
	t.Helper()
	q := new(dns.Msg)
	q.SetQuestion("example.test.", dns.TypeSOA)
	r, _, err := (&dns.Client{Net: "tcp", Timeout: 5 * time.Second}).Exchange(q, addr)
	if err != nil || len(r.Answer) != 1 {
		t.Fatalf("SOA: %v %v", r, err)
	}
	return r.Answer[0].(*dns.SOA).Serial
}

func zdataAt(t *testing.T, addr string) [][]string {
	return [][]string{
		rrsetAt(t, addr, svc, dns.TypeTXT),
		rrsetAt(t, addr, svc, dns.TypeCERT),
		rrsetAt(t, addr, tlsa, dns.TypeTLSA),
	}
}

func wantZData(t *testing.T, sets []RRSet) [][]string {
	var out [][]string
	for _, s := range sets {
		var rs []string
		for _, r := range s.Records {
			rs = append(rs, strings.TrimPrefix(r.String(), r.Header().String()))
		}
		slices.Sort(rs)
		out = append(out, rs)
	}
	return out
}

// BIND 9 takes the publisher's signed UPDATE: the old TXT, CERT and TLSA
// sets are gone, the new ones served, and the serial moved by exactly one,
// so all three changed in one transaction. Unsigned and wrongly signed
// UPDATEs are refused and change nothing.
func TestPublishToBind(t *testing.T) {
	key := TSIGKey{Name: "ztls-update.", Secret: testSecret}
	b := dnstest.StartBind(t, dnstest.BindOptions{
		Zones: []dnstest.BindZone{{Origin: "example.test.", Text: bindZone, AllowUpdate: true}},
		Key:   &dnstest.BindKey{Name: key.Name, Secret: key.Secret},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	before := zdataAt(t, b.Addr)
	if !strings.Contains(before[0][0], "old") || len(before[1]) != 1 || len(before[2]) != 1 {
		t.Fatalf("zone not loaded as written: %q", before)
	}
	serial := serialAt(t, b.Addr)

	for gen := 1; gen <= 2; gen++ {
		sets := newSets(t, gen)
		if err := Publish(ctx, b.Addr, "example.test.", key, sets); err != nil {
			t.Fatalf("generation %d: %v\n%s", gen, err, b.Logs())
		}
		got := zdataAt(t, b.Addr)
		if want := wantZData(t, sets); !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("generation %d served\n %q\nwant %q", gen, got, want)
		}
		if s := serialAt(t, b.Addr); s != serial+1 {
			t.Fatalf("serial %d after one UPDATE from %d: not one transaction", s, serial)
		}
		serial++
	}
	published := zdataAt(t, b.Addr)

	// Over UDP too.
	if err := (&Publisher{Server: b.Addr, Zone: "example.test.", Key: key, Net: "udp"}).Publish(ctx, newSets(t, 3)); err != nil {
		t.Fatalf("udp: %v", err)
	}
	if got := zdataAt(t, b.Addr); !slices.EqualFunc(got, wantZData(t, newSets(t, 3)), slices.Equal) {
		t.Fatalf("udp generation served %q", got)
	}
	published = zdataAt(t, b.Addr)
	serial = serialAt(t, b.Addr)

	refusals := []struct {
		name      string
		p         *Publisher
		rcode     int
		tsigError uint16
	}{
		{"unsigned", &Publisher{Server: b.Addr, Zone: "example.test.", DangerousUnsigned: true}, dns.RcodeRefused, 0},
		{"wrong secret", &Publisher{Server: b.Addr, Zone: "example.test.",
			Key: TSIGKey{Name: key.Name, Secret: "d3Jvbmctc2VjcmV0LXdyb25nLXNlY3JldC0wMTIzNDU="}}, dns.RcodeNotAuth, dns.RcodeBadSig},
		{"unknown key", &Publisher{Server: b.Addr, Zone: "example.test.",
			Key: TSIGKey{Name: "stranger.", Secret: testSecret}}, dns.RcodeNotAuth, dns.RcodeBadKey},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Publish(ctx, newSets(t, 99))
			var ue *UpdateError
			if !errors.As(err, &ue) || ue.Rcode != tc.rcode || ue.TSIGError != tc.tsigError {
				t.Fatalf("err = %v, want rcode %s TSIG error %d", err, dns.RcodeToString[tc.rcode], tc.tsigError)
			}
			if got := zdataAt(t, b.Addr); !slices.EqualFunc(got, published, slices.Equal) {
				t.Fatalf("refused UPDATE changed the data: %q", got)
			}
			if s := serialAt(t, b.Addr); s != serial {
				t.Fatalf("refused UPDATE moved the serial to %d", s)
			}
		})
	}

	// Deleting a set: an RRSet without records.
	if err := Publish(ctx, b.Addr, "example.test.", key, []RRSet{{Name: tlsa, Type: dns.TypeTLSA}}); err != nil {
		t.Fatal(err)
	}
	if got := rrsetAt(t, b.Addr, tlsa, dns.TypeTLSA); len(got) != 0 {
		t.Fatalf("TLSA after delete: %q", got)
	}
}
