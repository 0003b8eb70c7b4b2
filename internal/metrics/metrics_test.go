package metrics

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ztls-project/ztls/tls13"
)

// Every rejection reason the engine gives maps to a bounded label.
func TestRejectReason(t *testing.T) {
	for reason, want := range map[string]string{
		"replayed ClientHello": "replay",
		"strike register unavailable: redisreg: connection refused":                   "register",
		"client clock 12.3s off (window 10s)":                                         "client_clock",
		"server requires client certificates; early data is not client-authenticated": "client_auth",
		"no live Z-data record with that zdata_id and zdata_hash":                     "unknown_record",
		`SNI "a.example" is not the Z-data's host "b.example"`:                        "sni",
		"binder does not verify":                                                      "binder",
		"early_suite not supported":                                                   "suite",
		`negotiated ALPN "h2" is not the Z-data's "http/1.1"`:                         "alpn",
		"HelloRetryRequest":                                                           "hrr",
		"server has no Z-data keys":                                                   "no_keys",
		"something new":                                                               "other",
	} {
		if got := RejectReason(reason); got != want {
			t.Errorf("RejectReason(%q) = %q, want %q", reason, got, want)
		}
	}
}

// A nil Registry records nothing and panics on nothing (servers without
// --metrics call it all the same); a real one serves what it counted.
func TestRegistry(t *testing.T) {
	var none *Registry
	none.Flight(tls13.ConnectionState{ZTLS: true}, false)
	none.EarlyBytes(5)
	none.HandshakeFailed()
	none.DNSQuery("A", "NOERROR")

	r := New().TLSServer()
	r.Flight(tls13.ConnectionState{ZTLSOffered: true, ZTLSRejectReason: "strike register unavailable: x"}, true)
	r.EarlyBytes(7)
	r.Flight(tls13.ConnectionState{ZTLS: true, ECH: tls13.ECHAccepted}, false)
	r.Flight(tls13.ConnectionState{ECH: tls13.ECHRejected}, false)
	r.Flight(tls13.ConnectionState{ECH: tls13.ECHRejected}, false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := r.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`ztls_handshakes_total{mode="tls",transport="turbo"} 1`,
		`ztls_ztls_offers_total{reason="register",result="rejected"} 1`,
		`ztls_strike_register_errors_total 1`,
		`ztls_early_data_bytes_total 7`,
		`ztls_ech_total{result="accepted"} 1`,
		`ztls_ech_total{result="rejected"} 2`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("no %q in the scrape", want)
		}
	}
}
