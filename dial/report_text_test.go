package dial

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/internal/testsupport/lab"
	"github.com/ztls-project/ztls/zdata"
)

// The report's first line says "fell back" only when ZTLS was tried and
// given up; a connection that never tried it says why not (issue 27: a
// report said "fell back" in mode tls and for a site without Z-data).
func TestReportTextSaysFellBackOnlyWhenItDid(t *testing.T) {
	for _, tc := range []struct {
		mode, reason string
		want         string
	}{
		{"ztls", "", "connected to a:443: ZTLS over tcp\n"},
		{"tls", ReasonModeTLS, "connected to a:443: TLS 1.3 over tcp (no ZTLS: mode tls)\n"},
		{"tls", "no Z-data: no ztls1 TXT record for _443._ztls.a", "connected to a:443: TLS 1.3 over tcp (no ZTLS: no Z-data: no ztls1 TXT record for _443._ztls.a)\n"},
		{"tls", ReasonNoEarly + " (a POST): the request went after the handshake", "connected to a:443: TLS 1.3 over tcp (no ZTLS: " + ReasonNoEarly + " (a POST): the request went after the handshake)\n"},
		{"tls", ReasonIPLiteral, "connected to a:443: TLS 1.3 over tcp (no ZTLS: " + ReasonIPLiteral + ")\n"},
		{"tls", "Z-data expired: expired", "connected to a:443: TLS 1.3 over tcp (fell back from ZTLS because Z-data expired: expired)\n"},
		{"tls", ReasonRejected, "connected to a:443: TLS 1.3 over tcp (fell back from ZTLS because " + ReasonRejected + ")\n"},
		{"tls", ReasonBudget, "connected to a:443: TLS 1.3 over tcp (fell back from ZTLS because " + ReasonBudget + ")\n"},
	} {
		r := &Report{Mode: tc.mode, Transport: "tcp", Address: "a:443", FallbackReason: tc.reason}
		var b bytes.Buffer
		r.WriteText(&b)
		if got, _, _ := strings.Cut(b.String(), "  "); got != tc.want {
			t.Errorf("reason %q: first line %q, want %q", tc.reason, got, tc.want)
		}
	}
}

// A real connection to a site without Z-data: the report says so once.
func TestReportTextNoZDataSaidOnce(t *testing.T) {
	world, err := lab.Start(lab.Options{NoZData: true})
	if err != nil {
		t.Fatal(err)
	}
	defer world.Close()
	res, err := world.Resolver(resolver.UDP)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := Connect(ctx, world.HostPort(), Options{TLS: world.ClientTLS(), Resolver: res, ZDataBudget: time.Second,
		Request: []byte("GET /"), ReplaySafe: true, ReadResponse: 100, Memory: NewMemory()})
	if err != nil {
		t.Fatal(err)
	}
	r.Conn.Close()
	var b bytes.Buffer
	r.Report.WriteText(&b)
	line, _, _ := strings.Cut(b.String(), "\n")
	if !strings.Contains(line, "(no ZTLS: no Z-data: ") || strings.Count(line, string(zdata.ReasonNoZData)) != 1 || strings.Contains(line, "zdata:") {
		t.Errorf("report's first line %q, want the reason 'no Z-data' once, without a package prefix", line)
	}
}
