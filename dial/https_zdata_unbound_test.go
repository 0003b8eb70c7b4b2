package dial

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/testsupport/dnstest"
	"github.com/ztls-project/ztls/internal/testsupport/lab"
	"github.com/ztls-project/ztls/zdata"
)

// TestHTTPSZDataThroughUnbound: Unbound, as the client's resolver in
// front of the embedded authority, returns the HTTPS record's key65370
// value byte for byte as published, and the connection takes its Z-data
// from it: ZTLS, no TXT query at the authority.
func TestHTTPSZDataThroughUnbound(t *testing.T) {
	w := startWorld(t, lab.Options{HTTPSZData: true, NoTXT: true})
	u := dnstest.StartUnbound(t, dnstest.UnboundOptions{StubZones: map[string]string{"ztls.test.": w.DNSAddr}})
	res, err := resolver.New(resolver.Config{Servers: []string{u.Addr}, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Close() })

	want, err := w.HTTPSRecord(w.Service.Records(clock.Now()), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	a, err := res.Lookup(context.Background(), zdata.HTTPSOwner(w.Host, w.Port), dns.TypeHTTPS)
	if err != nil {
		t.Fatal(err)
	}
	got := resolver.RecordsOf[*dns.HTTPS](a)
	if len(got) != 1 || zdataValue(got[0]) == nil || !bytes.Equal(zdataValue(got[0]).Data, zdataValue(want).Data) {
		t.Fatalf("through Unbound: %v\n%s", a.RRs, u.Logs())
	}

	// A resolver of its own, whose cache is empty: the connection's
	// HTTPS answer comes from Unbound too.
	fresh, err := resolver.New(resolver.Config{Servers: []string{u.Addr}, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fresh.Close() })
	r, err := connect(t, w, func(o *Options) { o.Resolver = fresh })
	wantZTLSFrom(t, r, err, ZDataFromHTTPS)
	if n := txtQueries(w); n != 0 {
		t.Fatalf("%d TXT queries reached the authority", n)
	}
}
