package tls13

// A GREASE encrypted_client_hello is the size a real one would be for
// the same ClientHello (RFC 9849, Section 6.2), so a path cannot tell a
// GREASE ClientHello from a real ECH one by its length.

import (
	"bytes"
	"crypto/ecdh"
	"crypto/rand"
	"fmt"
	"sort"
	"strings"
	"testing"

	"golang.org/x/crypto/cryptobyte"

	"github.com/ztls-project/ztls/tls13/internal/ech"
	"github.com/ztls-project/ztls/tls13/internal/wire"
)

// helloExtLens returns a ClientHello message's extension lengths by type
// (4 bytes of type and length, and the body).
func helloExtLens(t *testing.T, msg []byte) map[uint16]int {
	t.Helper()
	s := cryptobyte.String(msg[4:])
	var sid, suites, comp, exts cryptobyte.String
	if !s.Skip(2+32) || !s.ReadUint8LengthPrefixed(&sid) || !s.ReadUint16LengthPrefixed(&suites) ||
		!s.ReadUint8LengthPrefixed(&comp) || !s.ReadUint16LengthPrefixed(&exts) || !s.Empty() {
		t.Fatal("malformed ClientHello")
	}
	m := map[uint16]int{}
	for !exts.Empty() {
		var typ uint16
		var body cryptobyte.String
		if !exts.ReadUint16(&typ) || !exts.ReadUint16LengthPrefixed(&body) {
			t.Fatal("malformed ClientHello extensions")
		}
		m[typ] = 4 + len(body)
	}
	return m
}

// echSizeCase is a client configuration whose GREASE ClientHello is
// compared with its real-ECH one.
type echSizeCase struct {
	name    string
	alpn    []string
	compat  bool
	resume  bool // a ticket, with early data
	ztls    bool // a Z-data offer, with early data
	zalpn   string
	request []byte
}

var echSizeCases = []echSizeCase{
	{name: "tls13"},
	{name: "alpn", alpn: []string{"h2", "http/1.1"}},
	{name: "middlebox-compat", compat: true, alpn: []string{"http/1.1"}},
	{name: "resumption-early-data", resume: true, request: []byte("GET /again")},
	{name: "resumption-alpn", resume: true, alpn: []string{"h2"}, request: []byte("GET /again")},
	{name: "ztls", ztls: true, request: []byte("GET /z")},
	{name: "ztls-alpn-reordered", ztls: true, zalpn: "h2", alpn: []string{"http/1.1", "h2"}, request: []byte("GET /z")},
}

// echSizeSetup is newECHZTLS with a server whose ECH key has
// greaseMaxNameLength and a public name of the inner name's length, the
// config a GREASE ClientHello is to look like.
func echSizeSetup(t *testing.T, c echSizeCase) *echZTLS {
	x := newECHZTLS(t)
	public := "p" + strings.Repeat("x", len(echInnerName)-6) + ".test" // as long as the inner name
	k, err := GenerateECHKey(9, public, greaseMaxNameLength, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	x.scfg.ECHKeys = []ECHKey{k}
	x.ccfg.ECHConfigList = echList(t, k)
	x.ccfg.NextProtos, x.scfg.NextProtos = c.alpn, c.alpn
	x.ccfg.MiddleboxCompat = c.compat
	if c.zalpn != "" {
		x.z.offer, x.z.key = newZData(t, ecdh.X25519(), X25519, echInnerName, c.zalpn, x.z.p)
		x.scfg.ZData = &testZKeys{keys: []*ZDataKey{x.z.key}}
	}
	return x
}

// echSizeFlights runs the case's client once with GREASE and once with
// the real config against the same server, and returns both first
// flights' ClientHellos. Both handshakes must complete.
func echSizeFlights(t *testing.T, c echSizeCase) (grease, real []byte) {
	x := echSizeSetup(t, c)
	var session *ClientSession
	if c.resume {
		cl, s := handshakeEngines(t, x.ccfg, x.scfg)
		if err := s.feed(cl.takeOutput()); err != nil {
			t.Fatal(err)
		}
		if err := cl.feed(s.takeOutput()); err != nil {
			t.Fatal(err)
		}
		if session = cl.lastSession(); session == nil {
			t.Fatal("no ticket")
		}
	}
	var z *ZDataOffer
	if c.ztls {
		z = x.z.offer
	}
	gcfg := x.ccfg.Clone()
	gcfg.ECHConfigList, gcfg.ECHGrease = nil, true
	for _, cfg := range []*Config{gcfg, x.ccfg} {
		cl, _, first, read, cerr, serr := earlyRun(t, cfg, x.scfg, z, session, c.request)
		if cerr != nil || serr != nil {
			t.Fatalf("%s, GREASE %v: client %v, server %v", c.name, cfg.ECHGrease, cerr, serr)
		}
		want := map[bool]ECHStatus{true: ECHGrease, false: ECHAccepted}[cfg.ECHGrease]
		if c.ztls && cfg.ECHGrease {
			want = ECHNone // no GREASE beside a ZTLS offer (Section 10.2)
		}
		if cl.info.ECH != want {
			t.Fatalf("%s: ECH %q, want %q", c.name, cl.info.ECH, want)
		}
		if c.request != nil && !bytes.Equal(read, c.request) {
			t.Fatalf("%s, GREASE %v: the server read early data %q, want %q", c.name, cfg.ECHGrease, read, c.request)
		}
		msg := append([]byte(nil), firstHandshakeMessage(t, first)...)
		if cfg.ECHGrease {
			grease = msg
		} else {
			real = msg
		}
	}
	return grease, real
}

func TestECHGreaseSizeMatchesReal(t *testing.T) {
	for _, c := range echSizeCases {
		grease, real := echSizeFlights(t, c)
		g, r := helloExtLens(t, grease), helloExtLens(t, real)
		t.Logf("%s: ClientHello GREASE %d bytes, real ECH %d; encrypted_client_hello %d and %d",
			c.name, len(grease), len(real), g[ech.ExtEncryptedClientHello], r[ech.ExtEncryptedClientHello])
		if !c.ztls {
			if g[ech.ExtEncryptedClientHello] != r[ech.ExtEncryptedClientHello] {
				t.Errorf("%s: encrypted_client_hello of %d bytes with GREASE, %d with ECH",
					c.name, g[ech.ExtEncryptedClientHello], r[ech.ExtEncryptedClientHello])
			}
			if len(grease) != len(real) || !sameLens(g, r) {
				t.Errorf("%s: ClientHello of %d bytes with GREASE, %d with ECH (extensions %v and %v)",
					c.name, len(grease), len(real), lensString(g), lensString(r))
			}
			continue
		}
		// ZTLS without an ECH config sends no GREASE (spec Section
		// 10.2): its ztls extension in clear already shows it is not an
		// ECH outer, and a server with ECH keys would ignore the ztls of
		// an outer it cannot decrypt. The early data went through
		// (checked in echSizeFlights).
		if g[ech.ExtEncryptedClientHello] != 0 || g[wire.ExtZTLS] == 0 || r[wire.ExtZTLS] != 0 {
			t.Errorf("%s: encrypted_client_hello %d, ztls %d without a config; ztls %d in the ECH outer",
				c.name, g[ech.ExtEncryptedClientHello], g[wire.ExtZTLS], r[wire.ExtZTLS])
		}
	}
}

func sameLens(a, b map[uint16]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func lensString(m map[uint16]int) string {
	var keys []int
	for k := range m {
		keys = append(keys, int(k))
	}
	sort.Ints(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%#04x:%d ", k, m[uint16(k)])
	}
	return b.String()
}

// hrrFlights runs cfg against scfg, which takes only P-256 and so asks
// for it with a HelloRetryRequest, and returns both ClientHellos.
func hrrFlights(t *testing.T, cfg, scfg *Config) (first, second []byte) {
	t.Helper()
	c, s := newEngine(cfg, true), newEngine(scfg, false)
	if err := c.startClient(nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	s.startServer()
	out := c.takeOutput()
	first = append([]byte(nil), firstHandshakeMessage(t, out)...)
	for i := 0; i < 6 && !(c.done && s.done); i++ {
		if err := s.feed(out); err != nil {
			t.Fatalf("GREASE %v: server: %v", cfg.ECHGrease, err)
		}
		if err := c.feed(s.takeOutput()); err != nil {
			t.Fatalf("GREASE %v: client: %v", cfg.ECHGrease, err)
		}
		out = c.takeOutput()
		if i == 0 {
			second = append([]byte(nil), firstHandshakeMessage(t, out)...)
		}
	}
	if !c.done || !s.done || !hasEventOrder(c.events, EventClientHelloSent, EventHelloRetryRequest, EventServerHelloReceived) {
		t.Fatalf("GREASE %v: no completed handshake after a HelloRetryRequest (%v)", cfg.ECHGrease, c.events)
	}
	return first, second
}

// With a HelloRetryRequest the first ClientHellos have the same length.
// The second ones cannot: RFC 9849, Section 6.2 has a GREASE client copy
// its first encrypted_client_hello into the second ClientHello, while a
// real second ClientHelloOuter has an empty enc and the second inner's
// payload (Section 6.1.5). The RFC accepts that a HelloRetryRequest
// shows GREASE for what it is.
func TestECHGreaseSizeHelloRetryRequest(t *testing.T) {
	x := echSizeSetup(t, echSizeCase{alpn: []string{"h2"}})
	x.scfg.Groups = []CurveID{P256}
	gcfg := x.ccfg.Clone()
	gcfg.ECHConfigList, gcfg.ECHGrease = nil, true
	g1, g2 := hrrFlights(t, gcfg, x.scfg)
	r1, r2 := hrrFlights(t, x.ccfg, x.scfg)
	t.Logf("first ClientHello GREASE %d bytes, real ECH %d; second %d and %d", len(g1), len(r1), len(g2), len(r2))
	if len(g1) != len(r1) || !sameLens(helloExtLens(t, g1), helloExtLens(t, r1)) {
		t.Fatalf("first ClientHello of %d bytes with GREASE, %d with ECH", len(g1), len(r1))
	}
	ge1, _ := findExtension(outerHelloMsg(t, g1).Extra, ech.ExtEncryptedClientHello)
	ge2, _ := findExtension(outerHelloMsg(t, g2).Extra, ech.ExtEncryptedClientHello)
	if len(ge1.Data) == 0 || !bytes.Equal(ge1.Data, ge2.Data) {
		t.Fatal("the second GREASE ClientHello does not repeat the first's encrypted_client_hello (RFC 9849, Section 6.2)")
	}
	re2, _ := findExtension(outerHelloMsg(t, r2).Extra, ech.ExtEncryptedClientHello)
	if x, err := ech.ParseClientExtension(re2.Data); err != nil || len(x.Enc) != 0 {
		t.Fatalf("second ClientHelloOuter's encrypted_client_hello %+v, %v: want an empty enc", x, err)
	}
}

func outerHelloMsg(t *testing.T, msg []byte) *wire.ClientHello {
	t.Helper()
	ch, err := wire.ParseClientHello(msg)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}
