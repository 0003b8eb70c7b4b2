package wire

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/ztls-project/ztls/tls13/internal/alert"
)

// orderOf returns a pointer to the Order field of m, or nil if it has none.
func orderOf(m any) *[]uint16 {
	f := reflect.ValueOf(m).Elem().FieldByName("Order")
	if !f.IsValid() {
		return nil
	}
	return f.Addr().Interface().(*[]uint16)
}

// TestRoundTrip marshals random messages of every type, parses them back
// and wants the same value; Raw must be exactly the marshalled bytes.
func TestRoundTrip(t *testing.T) {
	for _, g := range generators {
		t.Run(g.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, uint64(len(g.name))))
			for i := range 400 {
				m := g.gen(r)
				b, err := m.Marshal()
				if err != nil {
					t.Fatalf("#%d: Marshal(%+v): %v", i, m, err)
				}
				p, err := g.parse(b)
				if err != nil {
					t.Fatalf("#%d: parse(%x): %v\nmessage %+v", i, b, err, m)
				}
				if raw := reflect.ValueOf(p).Elem().FieldByName("Raw").Bytes(); !bytes.Equal(raw, b) {
					t.Fatalf("#%d: Raw = %x, want %x", i, raw, b)
				}
				// The generator leaves Order nil (canonical order); the parser
				// reports the order it saw, which must be the canonical one.
				if o := orderOf(m); o != nil {
					*o = *orderOf(p)
				}
				if got := withoutRaw(p); !reflect.DeepEqual(got, m) {
					t.Fatalf("#%d: round trip changed the message\n got %+v\nwant %+v", i, got, m)
				}
				// Re-marshalling the parsed message gives the same bytes.
				b2, err := p.(message).Marshal()
				if err != nil || !bytes.Equal(b2, b) {
					t.Fatalf("#%d: re-marshal = %x, %v; want %x", i, b2, err, b)
				}
			}
		})
	}
}

// shuffleOrder permutes an Order while keeping a trailing pre_shared_key or
// ztls last, as the parser demands.
func shuffleOrder(r *rand.Rand, order []uint16) []uint16 {
	out := append([]uint16(nil), order...)
	n := len(out)
	if n > 0 && (out[n-1] == ExtPreSharedKey || out[n-1] == ExtZTLS) {
		n--
	}
	r.Shuffle(n, func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// TestRoundTripOrder checks that Order is honoured: a message re-marshalled
// with its extensions shuffled parses back with that order and the same fields.
func TestRoundTripOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, g := range generators {
		for i := range 200 {
			b, err := g.gen(r).Marshal()
			if err != nil {
				t.Fatal(err)
			}
			p, err := g.parse(b)
			if err != nil {
				t.Fatal(err)
			}
			o := orderOf(p)
			if o == nil {
				break
			}
			*o = shuffleOrder(r, *o)
			b2, err := p.(message).Marshal()
			if err != nil {
				t.Fatalf("%s #%d: Marshal with Order %v: %v", g.name, i, *o, err)
			}
			p2, err := g.parse(b2)
			if err != nil {
				t.Fatalf("%s #%d: parse: %v", g.name, i, err)
			}
			// Extra follows the wire order, so compare it sorted.
			x, y := withoutRaw(p2), withoutRaw(p)
			sortExtra(x)
			sortExtra(y)
			if !reflect.DeepEqual(x, y) {
				t.Fatalf("%s #%d: shuffled round trip differs\n got %+v\nwant %+v", g.name, i, p2, p)
			}
		}
	}
}

// TestCanonicalOrder pins the documented default extension order of a
// ClientHello that carries every typed extension.
func TestCanonicalOrder(t *testing.T) {
	m := &ClientHello{
		CipherSuites: []uint16{0x1301}, ServerName: "a", SupportedVersions: []uint16{VersionTLS13},
		SupportedGroups: []uint16{29}, KeyShares: []KeyShare{{29, []byte{1}}},
		SignatureAlgorithms: []uint16{0x0804}, SignatureAlgorithmsCert: []uint16{0x0804},
		PSKModes: []uint8{PSKModeDHEKE}, ALPN: []string{"h2"}, Cookie: []byte{1},
		StatusRequest: true, SCT: true, RecordSizeLimit: 16385, PostHandshakeAuth: true,
		Extra:     []Extension{{Type: 0x1234}, {Type: ExtPadding, Data: make([]byte, 5)}},
		EarlyData: true,
		ZTLS:      &ZTLSClientHello{Binder: make([]byte, 32)},
	}
	want := []uint16{ExtServerName, ExtSupportedVersions, ExtSupportedGroups, ExtKeyShare,
		ExtSignatureAlgorithms, ExtSignatureAlgorithmsCert, ExtPSKModes, ExtALPN, ExtCookie,
		ExtStatusRequest, ExtSCT, ExtRecordSizeLimit, ExtPostHandshakeAuth, 0x1234, ExtPadding,
		ExtEarlyData, ExtZTLS}
	check := func(m *ClientHello, want []uint16) {
		t.Helper()
		b, err := m.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		p, err := ParseClientHello(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(p.Order, want) {
			t.Fatalf("Order = %v, want %v", p.Order, want)
		}
	}
	check(m, want)
	m.ZTLS = nil
	m.PSKIdentities = []PSKIdentity{{Identity: []byte{1}}}
	m.PSKBinders = [][]byte{make([]byte, 32)}
	want[len(want)-1] = ExtPreSharedKey
	check(m, want)
}

// truncationCases returns marshalled messages: random ones of every type
// and the RFC 8448 ones.
func truncationCases(t *testing.T) [][]byte {
	r := rand.New(rand.NewPCG(3, 3))
	var out [][]byte
	for _, g := range generators {
		for range 25 {
			b, err := g.gen(r).Marshal()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b)
		}
	}
	v := rfc8448(t)
	for _, k := range rfcMessages {
		out = append(out, vec(t, v, k))
	}
	return out
}

// TestNoTruncatedPrefixParses: no strict prefix of a message parses, whether
// the header still claims the full length or is fixed up to the prefix's.
func TestNoTruncatedPrefixParses(t *testing.T) {
	for _, msg := range truncationCases(t) {
		if _, err := Parse(msg); err != nil {
			t.Fatalf("full message %x does not parse: %v", msg, err)
		}
		for i := range len(msg) {
			if v, err := Parse(msg[:i]); err == nil {
				t.Fatalf("prefix %x of %x parsed as %+v", msg[:i], msg, v)
			} else {
				wantAlert(t, err, alert.DecodeError)
			}
			// A Finished's body is whatever length it has: the engine, which
			// knows the hash, checks it.
			if i < 4 || msg[0] == TypeFinished {
				continue
			}
			fixed := append([]byte(nil), msg[:i]...)
			n := i - 4
			fixed[1], fixed[2], fixed[3] = byte(n>>16), byte(n>>8), byte(n)
			if v, err := Parse(fixed); err == nil {
				t.Fatalf("prefix %x (header fixed) of %x parsed as %+v", fixed, msg, v)
			} else if we := err.(*alert.Error); we.Alert != alert.DecodeError && we.Alert != alert.ProtocolVersion {
				// Cutting off a hello's whole extensions block leaves a
				// pre-TLS 1.3 hello: protocol_version.
				t.Fatalf("prefix %x (header fixed): %v", fixed, err)
			}
		}
	}
}

// sortExtra sorts the Extra field of the message m points to by type.
func sortExtra(m any) {
	f := reflect.ValueOf(m).Elem().FieldByName("Extra")
	if !f.IsValid() {
		return
	}
	extra := slices.Clone(f.Interface().([]Extension))
	slices.SortFunc(extra, func(a, b Extension) int { return int(a.Type) - int(b.Type) })
	f.Set(reflect.ValueOf(extra))
}
