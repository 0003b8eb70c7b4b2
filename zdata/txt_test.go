package zdata

import (
	"crypto/ecdh"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/tls13"
)

// t0 is a recent instant: the test CA is only valid from an hour ago.
var t0 = clock.Now().UTC().Truncate(time.Second).Add(-5 * time.Minute)

// baseTXT returns a signed record with nsc= and alpn= and its strings:
// v, nb, na, med, id, group, share, nsc, alpn, Y/N, scheme, sig.
func baseTXT(t *testing.T) (*fixture, *Key, []string) {
	t.Helper()
	f := newFixture(t, "ecdsa-p256", Options{NSC: []uint16{0x1303}, ALPN: "h2"}, nil)
	k := f.issue(t, t0)
	s := k.Record.TXT()
	if len(s) != 12 {
		t.Fatalf("TXT() has %d strings, want 12: %q", len(s), s)
	}
	return f, k, s
}

func with(s []string, i int, v string) []string {
	c := append([]string(nil), s...)
	c[i] = v
	return c
}

func TestTXTRoundTrip(t *testing.T) {
	for _, keyType := range []string{"ecdsa-p256", "ecdsa-p384", "ed25519", "rsa2048"} {
		for _, opts := range []Options{{}, {Group: GroupSecp256r1, NSC: []uint16{0x1303, 0x1302}, ALPN: "http/1.1", ClientCert: true, MaxEarlyData: 1}} {
			t.Run(keyType, func(t *testing.T) {
				f := newFixture(t, keyType, opts, nil)
				k := f.issue(t, t0)
				txt := k.Record.TXT()
				for _, s := range txt {
					if len(s) > 255 {
						t.Fatalf("character-string of %d bytes", len(s))
					}
				}
				got, err := ParseTXT(txt)
				if err != nil {
					t.Fatal(err)
				}
				if err := got.Verify(f.leaf.Cert, testHost, testPort); err != nil {
					t.Fatal(err)
				}
				want := k.Record
				got.pub, want.pub = nil, nil
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
				}
				if !reflect.DeepEqual(got.TXT(), txt) {
					t.Fatalf("TXT() after parse differs")
				}
				if got.ZDataHash() != k.Record.ZDataHash() {
					t.Fatal("zdata_hash differs after round trip")
				}
				wantScheme := map[string]tls13.SignatureScheme{"ecdsa-p256": 1027, "ecdsa-p384": 1283, "ed25519": 2055, "rsa2048": 2052}[keyType]
				if got.Scheme != wantScheme {
					t.Fatalf("scheme %d, want %d", got.Scheme, wantScheme)
				}
			})
		}
	}
}

func TestParseTXTAccepts(t *testing.T) {
	f, _, s := baseTXT(t)
	pad := make([]string, len(s))
	for i, x := range s {
		pad[i] = "   " + x + "  "
	}
	sig := s[11]
	split := append(append([]string(nil), s[:11]...), " "+sig[:10]+" ", sig[10:30]+"   ", sig[30:])
	cases := map[string][]string{
		"space-padded":               pad,
		"signature split":            split,
		"signature split and padded": append(append([]string(nil), pad[:11]...), " "+sig[:1], sig[1:]+"  "),
	}
	for name, strs := range cases {
		t.Run(name, func(t *testing.T) {
			r, err := ParseTXT(strs)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Verify(f.leaf.Cert, testHost, testPort); err != nil {
				t.Fatalf("verify: %v", err)
			}
		})
	}
}

// TestPublishedFormIsSigned: the signature input uses each field exactly
// as published (lower-case z, upper-case hex, DER share), not a
// re-encoding.
func TestPublishedFormIsSigned(t *testing.T) {
	for _, group := range []tls13.CurveID{GroupX25519, GroupSecp256r1} {
		f := newFixture(t, "ecdsa-p256", Options{Group: group, NSC: []uint16{0x00ff}, ALPN: "h2"}, nil)
		k := f.issue(t, t0)
		pub, err := Curve(group)
		if err != nil {
			t.Fatal(err)
		}
		epub, err := pub.NewPublicKey(k.Record.KeyShare)
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.MarshalPKIXPublicKey(epub)
		if err != nil {
			t.Fatal(err)
		}
		s := k.Record.TXT()
		s[1] = strings.ToLower(s[1])
		s[6] = base64.StdEncoding.EncodeToString(der)
		s[7] = "nsc=00FF"
		r, err := ParseTXT(s)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(r.KeyShare, k.Record.KeyShare) {
			t.Fatal("DER share not converted to the raw key_exchange")
		}
		// The old signature was over the canonical text: it fails now.
		if err := r.Verify(f.leaf.Cert, testHost, testPort); ReasonOf(err) != ReasonBadSignature {
			t.Fatalf("re-encoded fields verified: %v", err)
		}
		r.Host, r.Port = testHost, testPort
		if err := r.Sign(f.leaf.Key, f.leaf.Chain[0]); err != nil {
			t.Fatal(err)
		}
		out := r.TXT()
		if out[1] != s[1] || out[6] != s[6] || out[7] != s[7] {
			t.Fatalf("TXT() lost the published form: %q", out[:8])
		}
		r2, err := ParseTXT(out)
		if err != nil {
			t.Fatal(err)
		}
		if err := r2.Verify(f.leaf.Cert, testHost, testPort); err != nil {
			t.Fatal(err)
		}
		// Canonicalising a signed field breaks the signature.
		canon := with(out, 1, strings.ToUpper(out[1]))
		r3, err := ParseTXT(canon)
		if err != nil {
			t.Fatal(err)
		}
		if err := r3.Verify(f.leaf.Cert, testHost, testPort); ReasonOf(err) != ReasonBadSignature {
			t.Fatalf("upper-cased Z still verified: %v", err)
		}
		// A field changed after parsing is re-encoded canonically.
		r2.MaxEarlyData = 7
		if got := r2.TXT()[3]; got != "7" {
			t.Fatalf("changed field published as %q", got)
		}
		if r2.TXT()[1] != s[1] {
			t.Fatal("unchanged field lost its published form")
		}
	}
}

func TestParseTXTRejects(t *testing.T) {
	_, _, s := baseTXT(t)
	notZTLS := map[string][]string{
		"empty":     nil,
		"v=ztls4":   with(s, 0, "v=ztls4"),
		"upper V":   with(s, 0, "V=ztls1"),
		"other TXT": {"v=spf1 -all"},
		"tab in v":  with(s, 0, "\tv=ztls1"),
	}
	for name, strs := range notZTLS {
		if _, err := ParseTXT(strs); !errors.Is(err, ErrNotZTLS) {
			t.Errorf("%s: err %v, want ErrNotZTLS", name, err)
		}
	}
	drop := func(i int) []string { return append(append([]string(nil), s[:i]...), s[i+1:]...) }
	insert := func(i int, v string) []string {
		return append(append(append([]string(nil), s[:i]...), v), s[i:]...)
	}
	swapped := append([]string(nil), s...)
	swapped[7], swapped[8] = swapped[8], swapped[7]
	long := with(s, 11, s[11]+strings.Repeat("A", 256))
	bad := map[string][]string{
		"tab":                       with(s, 3, "\t16384"),
		"newline":                   with(s, 3, "16384\n"),
		"inner space":               with(s, 3, "16 384"),
		"non-ASCII":                 with(s, 8, "alpn=h\xc32"),
		"empty field":               with(s, 3, "   "),
		"leading zero med":          with(s, 3, "016384"),
		"leading zero id":           with(s, 4, "0"+s[4]),
		"leading zero group":        with(s, 5, "029"),
		"plus sign":                 with(s, 3, "+16384"),
		"negative":                  with(s, 3, "-1"),
		"id out of range":           with(s, 4, "4294967296"),
		"group out of range":        with(s, 5, "65536"),
		"scheme leading zero":       with(s, 10, "01027"),
		"bad month":                 with(s, 1, "20251301000000Z"),
		"february 30":               with(s, 1, "20250230000000Z"),
		"short time":                with(s, 1, "2025010100000Z"),
		"no Z":                      with(s, 1, "20250101000000"),
		"offset":                    with(s, 2, "20250101000000+"),
		"nsc empty":                 with(s, 7, "nsc="),
		"nsc 3 digits":              with(s, 7, "nsc=130"),
		"nsc 0x":                    with(s, 7, "nsc=0x1303"),
		"nsc non-hex":               with(s, 7, "nsc=13g3"),
		"nsc trailing comma":        with(s, 7, "nsc=1303,"),
		"nsc space":                 with(s, 7, "nsc=1303, 1302"),
		"alpn empty":                with(s, 8, "alpn="),
		"alpn comma":                with(s, 8, "alpn=h2,http/1.1"),
		"alpn space":                with(s, 8, "alpn=h 2"),
		"lower y":                   with(s, 9, "y"),
		"YES":                       with(s, 9, "YES"),
		"alpn before nsc":           swapped,
		"unknown field after share": insert(7, "foo=bar"),
		"unknown field after flag":  insert(10, "foo=bar"),
		"unknown field at end":      append(append([]string(nil), s...), "x=1"),
		"duplicate nsc":             insert(7, "nsc=1302"),
		"missing scheme":            drop(10),
		"missing flag":              drop(9),
		"missing signature":         s[:11],
		"missing not-after":         drop(2),
		"bad share base64":          with(s, 6, "!!!"),
		"share wrong length":        with(s, 6, base64.StdEncoding.EncodeToString(make([]byte, 31))),
		"share SPKI wrong curve":    with(s, 6, base64.StdEncoding.EncodeToString(p256SPKI(t))),
		"share unpadded base64":     with(s, 6, strings.TrimRight(s[6], "=")),
		"signature bad base64":      with(s, 11, "$$$$"),
		"string over 255 bytes":     long,
	}
	for name, strs := range bad {
		t.Run(name, func(t *testing.T) {
			_, err := ParseTXT(strs)
			if err == nil {
				t.Fatalf("accepted %q", strs)
			}
			if ReasonOf(err) != ReasonMalformed || !strings.HasPrefix(err.Error(), "zdata: ") {
				t.Fatalf("err %v (reason %q), want a malformed-Z-data error", err, ReasonOf(err))
			}
		})
	}
	// A zero is a valid decimal.
	if _, err := ParseTXT(with(s, 3, "0")); err != nil {
		t.Fatalf("max_early_data 0: %v", err)
	}
	// Unknown groups and schemes parse; Select reports them.
	if r, err := ParseTXT(with(s, 5, "4588")); err != nil || r.Group != 4588 {
		t.Fatalf("unknown group: %v", err)
	}
}

// p256SPKI is a DER P-256 public key: the wrong form for an x25519 record.
func p256SPKI(t *testing.T) []byte {
	k, err := ecdh.P256().GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(k.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func TestNames(t *testing.T) {
	cases := []struct {
		host      string
		port      int
		txt, tlsa string
	}{
		{"Example.COM", 443, "_ztls._443._tcp.example.com.", "_443._tcp.example.com."},
		{"example.com.", 8443, "_ztls._8443._tcp.example.com.", "_8443._tcp.example.com."},
		{"bücher.example", 443, "_ztls._443._tcp.xn--bcher-kva.example.", "_443._tcp.xn--bcher-kva.example."},
	}
	for _, c := range cases {
		if got := TXTName(c.host, c.port); got != c.txt {
			t.Errorf("TXTName(%q) = %q, want %q", c.host, got, c.txt)
		}
		if got := TLSAName(c.host, c.port); got != c.tlsa {
			t.Errorf("TLSAName(%q) = %q, want %q", c.host, got, c.tlsa)
		}
	}
}

// TestSignatureInputLayout checks the signature input byte by byte
// against docs/ztls-spec.md, Section 1.
func TestSignatureInputLayout(t *testing.T) {
	r := &Record{
		NotBefore: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), NotAfter: time.Date(2025, 1, 2, 4, 4, 5, 0, time.UTC),
		MaxEarlyData: 16384, ID: 7, Group: 29, KeyShare: []byte{1, 2, 3}, Scheme: 1027,
	}
	r.LeafHash[0] = 0xAA
	got := r.SignatureInput("Server.Test.", 443)
	var want []byte
	want = append(want, []byte(strings.Repeat(" ", 64))...)
	want = append(want, "ztls v1 Z-data\x00"...)
	for _, e := range []string{"server.test", "443", "v=ztls1", "20250102030405Z", "20250102040405Z", "16384", "7", "29", "AQID", "", "", "N", "1027", string(r.LeafHash[:])} {
		want = append(want, byte(len(e)>>8), byte(len(e)))
		want = append(want, e...)
	}
	if string(got) != string(want) {
		t.Fatalf("signature input\n got %q\nwant %q", got, want)
	}
}
