package bench

import (
	"testing"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/zdata"
)

// TestECHContendersLoopback drives tls-ech and ztls-ech end to end on
// loopback through the real worker: the server's HTTPS record carries
// the ECH configs of its Z-data directory, the client encrypts its
// ClientHello to them, the server accepts (ZTLS inside: early data
// accepted), and the report's ech is checked by the contender.
func TestECHContendersLoopback(t *testing.T) {
	w := newLoopbackWorld(t)
	for _, name := range []string{"tls-ech", "ztls-ech"} {
		for _, scen := range []string{"local-warm", "stub", "local-cold"} {
			t.Run(name+"/"+scen, func(t *testing.T) {
				cl := w.visits(t, name, scen, 2, func(i int, s Sample) {
					if want := name == "ztls-ech"; s.Early != want || s.FirstByte <= 0 {
						t.Fatalf("visit %d: sample %+v, want early data accepted %v", i, s, want)
					}
				})
				// The HTTPS record the authority serves carries the ech
				// SvcParam of the server's directory.
				owner := dns.Fqdn(zdata.HTTPSOwner(ServerName, int(cl.Port)))
				rrs := w.d.auth.rrs[rrKey{owner, dns.TypeHTTPS}]
				if len(rrs) != 1 || !hasECH(rrs[0]) {
					t.Fatalf("HTTPS RRset at %s: %v, want one record with ech", owner, rrs)
				}
			})
		}
	}
}

func hasECH(rr dns.RR) bool {
	h, ok := rr.(*dns.HTTPS)
	if !ok {
		return false
	}
	for _, kv := range h.Value {
		if e, ok := kv.(*dns.SVCBECHConfig); ok && len(e.ECH) > 0 {
			return true
		}
	}
	return false
}

// TestVariantCheck: a visit counts only with the variant actually used.
func TestVariantCheck(t *testing.T) {
	pqOK := dial.Report{Mode: "ztls", ECH: dial.ECHReportNone, EarlyData: dial.EarlyReport{Accepted: true, PostQuantum: true},
		TLS: dial.TLSReport{Group: "X25519MLKEM768"}}
	kept := dotWindow{before: 1, after: 1}
	for _, tc := range []struct {
		what string
		v    variant
		mode string
		r    func(r *dial.Report)
		dw   dotWindow
		ok   bool
	}{
		{"pq accepted", variant{pq: true}, "ztls", nil, kept, true},
		{"pq fell back to classical", variant{pq: true}, "ztls", func(r *dial.Report) { r.EarlyData.PostQuantum = false }, kept, false},
		{"pq early data rejected", variant{pq: true}, "ztls", func(r *dial.Report) { r.EarlyData.Accepted = false }, kept, false},
		{"pq with a classical handshake", variant{pq: true}, "ztls", func(r *dial.Report) { r.TLS.Group = "X25519" }, kept, false},
		{"classical took v3", variant{}, "ztls", nil, kept, false},
		{"dot kept open", variant{pq: true, dot: true}, "ztls", nil, kept, true},
		{"dot reconnected", variant{pq: true, dot: true}, "ztls", nil, dotWindow{before: 1, after: 2}, false},
		{"dot reconnected, stub", variant{pq: true, dot: true}, "ztls", nil, dotWindow{before: 1, after: 2, stub: true}, true},
		{"dot never opened", variant{pq: true, dot: true}, "ztls", nil, dotWindow{}, false},
		{"ech accepted", variant{ech: true}, "tls", func(r *dial.Report) { *r = dial.Report{Mode: "tls", ECH: "accepted"} }, kept, true},
		{"ech rejected", variant{ech: true}, "tls", func(r *dial.Report) { *r = dial.Report{Mode: "tls", ECH: "rejected"} }, kept, false},
		{"ech none", variant{ech: true}, "tls", func(r *dial.Report) { *r = dial.Report{Mode: "tls", ECH: "none"} }, kept, false},
		{"ech without keys", variant{}, "tls", func(r *dial.Report) { *r = dial.Report{Mode: "tls", ECH: "grease"} }, kept, false},
	} {
		r := pqOK
		if tc.r != nil {
			tc.r(&r)
		}
		err := tc.v.check("x", tc.mode, r, tc.dw)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok %v", tc.what, err, tc.ok)
		}
	}
}

func TestBaseName(t *testing.T) {
	for in, want := range map[string]string{"ztls-pq-dot": "ztls", "ztls-pq-prefetch": "ztls", "tls-ech": "tls",
		"ztls-https-held": "ztls-https-held", "ztls-bfe-prefetch": "ztls-bfe", "ztls-ocsp-prefetch": "ztls", "ztls": "ztls"} {
		if got := baseName(in); got != want {
			t.Errorf("baseName(%q) = %q, want %q", in, got, want)
		}
	}
}
