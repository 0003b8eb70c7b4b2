package wire

import (
	"bufio"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/ztls-project/ztls/tls13/internal/alert"
)

// rfc8448 loads the RFC 8448 trace values, keyed "[section] label".
func rfc8448(tb testing.TB) map[string][]byte {
	tb.Helper()
	f, err := os.Open("../../testdata/rfc8448.txt")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	out := make(map[string][]byte)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "[") {
			continue
		}
		key, val, ok := strings.Cut(line, " = ")
		if !ok {
			continue
		}
		b, err := hex.DecodeString(strings.TrimSpace(val))
		if err != nil {
			tb.Fatalf("rfc8448.txt: %s: %v", key, err)
		}
		out[key] = b
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

// vec returns one RFC 8448 value or fails the test.
func vec(tb testing.TB, v map[string][]byte, key string) []byte {
	tb.Helper()
	b, ok := v[key]
	if !ok {
		tb.Fatalf("rfc8448.txt has no %q", key)
	}
	return b
}

// rfcMessages lists the handshake messages of RFC 8448 Sections 3 and 4.
var rfcMessages = []string{
	"[3] client.hello", "[3] server.hello", "[3] server.encrypted_extensions",
	"[3] server.certificate", "[3] server.certificate_verify", "[3] server.finished",
	"[3] client.finished", "[3] server.new_session_ticket",
	"[4] client.hello", "[4] server.hello", "[4] server.encrypted_extensions",
	"[4] server.finished", "[4] client.end_of_early_data", "[4] client.finished",
}

// wantAlert fails unless err is an *alert.Error carrying alert a.
func wantAlert(tb testing.TB, err error, a alert.Alert) {
	tb.Helper()
	var we *alert.Error
	if !errors.As(err, &we) {
		tb.Fatalf("error %v is not a *wire.Error (want %v)", err, a)
	}
	if we.Alert != a {
		tb.Fatalf("error %q carries %v, want %v", err, we.Alert, a)
	}
}

// message is what every handshake message type offers.
type message interface {
	Marshal() ([]byte, error)
}

// withoutRaw returns a shallow copy of the message m points to with Raw cleared.
func withoutRaw(m any) any {
	v := reflect.ValueOf(m).Elem()
	c := reflect.New(v.Type()).Elem()
	c.Set(v)
	c.FieldByName("Raw").SetZero()
	return c.Addr().Interface()
}

// --- random message constructors (testing/quick style, seeded) ---

func fill(r *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(r.Uint32())
	}
}

func randBytes(r *rand.Rand, min, max int) []byte {
	n := min + r.IntN(max-min+1)
	if n == 0 {
		return nil
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func randU16s(r *rand.Rand, min, max int) []uint16 {
	n := min + r.IntN(max-min+1)
	if n == 0 {
		return nil
	}
	out := make([]uint16, n)
	for i := range out {
		out[i] = uint16(r.Uint32())
	}
	return out
}

func maybe(r *rand.Rand) bool { return r.IntN(2) == 0 }

func randName(r *rand.Rand) string {
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789-./"
	n := 1 + r.IntN(30)
	b := make([]byte, n)
	for i := range b {
		b[i] = letters[r.IntN(len(letters))]
	}
	return string(b)
}

// randExtra returns opaque extensions with distinct types drawn from pool.
func randExtra(r *rand.Rand, pool []uint16) []Extension {
	var out []Extension
	for _, i := range r.Perm(len(pool))[:r.IntN(len(pool)+1)] {
		out = append(out, Extension{Type: pool[i], Data: randBytes(r, 0, 40)})
	}
	return out
}

// unknownExts are codepoints this package keeps opaque everywhere.
var unknownExts = []uint16{0x0a0a, 0x1234, 0x7777, 0xfe0d, 0x0039}

func randClientHello(r *rand.Rand) *ClientHello {
	m := &ClientHello{
		SessionID:          randBytes(r, 0, 32),
		CipherSuites:       randU16s(r, 1, 8),
		CompressionMethods: []byte{0},
	}
	fill(r, m.Random[:])
	if r.IntN(4) == 0 {
		m.LegacyVersion = 0x0301
	}
	if r.IntN(4) == 0 {
		m.CompressionMethods = randBytes(r, 1, 4)
	}
	if maybe(r) {
		m.ServerName = randName(r)
	}
	if maybe(r) {
		m.SupportedVersions = randU16s(r, 1, 5)
	}
	if maybe(r) {
		m.SupportedGroups = randU16s(r, 1, 6)
	}
	if maybe(r) {
		m.SignatureAlgorithms = randU16s(r, 1, 10)
	}
	if maybe(r) {
		m.SignatureAlgorithmsCert = randU16s(r, 1, 4)
	}
	if maybe(r) {
		m.HasKeyShare = true
		for _, g := range r.Perm(5)[:r.IntN(4)] {
			m.KeyShares = append(m.KeyShares, KeyShare{Group: uint16(g + 23), Data: randBytes(r, 1, 70)})
		}
	}
	if maybe(r) {
		m.PSKModes = randBytes(r, 1, 3)
	}
	if maybe(r) {
		for range 1 + r.IntN(3) {
			m.ALPN = append(m.ALPN, randName(r))
		}
	}
	if maybe(r) {
		m.Cookie = randBytes(r, 1, 60)
	}
	m.EarlyData = maybe(r)
	if maybe(r) {
		m.RecordSizeLimit = uint16(64 + r.IntN(65536-64))
	}
	m.StatusRequest = maybe(r)
	m.SCT = maybe(r)
	m.PostHandshakeAuth = maybe(r)
	if maybe(r) {
		for range 1 + r.IntN(3) {
			m.CertificateAuthorities = append(m.CertificateAuthorities, randBytes(r, 1, 40))
		}
	}
	switch r.IntN(3) {
	case 0:
		for range 1 + r.IntN(3) {
			m.PSKIdentities = append(m.PSKIdentities, PSKIdentity{Identity: randBytes(r, 1, 50), ObfuscatedTicketAge: r.Uint32()})
			m.PSKBinders = append(m.PSKBinders, randBytes(r, 32, 64))
		}
	case 1:
		z := &ZTLSClientHello{ZDataID: r.Uint32(), EarlySuite: uint16(r.Uint32()), ObfuscatedTimeMS: r.Uint64(), Binder: randBytes(r, 32, 255)}
		fill(r, z.ZDataHash[:])
		if maybe(r) {
			z.CertHash = randBytes(r, 32, 32)
		}
		m.ZTLS = z
		if maybe(r) {
			m.ZTLSBFE = randBytes(r, 1, 600)
		}
		if maybe(r) {
			m.ZTLSKEM = randBytes(r, 1, 1200)
		}
	}
	m.Extra = randExtra(r, append([]uint16{ExtPadding, ExtRenegotiationInfo, 35}, unknownExts...))
	return m
}

func randServerHello(r *rand.Rand) *ServerHello {
	m := &ServerHello{SessionID: randBytes(r, 0, 32), CipherSuite: uint16(r.Uint32())}
	if r.IntN(3) == 0 {
		m.Random = HelloRetryRequestRandom
		if maybe(r) {
			m.SelectedGroup = uint16(1 + r.IntN(65535))
		}
		if maybe(r) {
			m.Cookie = randBytes(r, 1, 100)
		}
	} else {
		fill(r, m.Random[:])
		if maybe(r) {
			m.HasKeyShare = true
			m.KeyShare = KeyShare{Group: uint16(r.Uint32()), Data: randBytes(r, 1, 100)}
		}
		if maybe(r) {
			m.HasPSK = true
			m.PSKIdentity = uint16(r.IntN(3))
		}
		if maybe(r) {
			m.HasZTLS = true
			m.ZTLSID = r.Uint32()
		}
	}
	if maybe(r) {
		m.SupportedVersion = uint16(1 + r.IntN(65535))
	}
	m.Extra = randExtra(r, unknownExts)
	return m
}

func randEncryptedExtensions(r *rand.Rand) *EncryptedExtensions {
	m := &EncryptedExtensions{ServerName: maybe(r), EarlyData: maybe(r)}
	if maybe(r) {
		m.ALPN = randName(r)
	}
	if maybe(r) {
		m.RecordSizeLimit = uint16(64 + r.IntN(1000))
	}
	if maybe(r) {
		m.SupportedGroups = randU16s(r, 1, 5)
	}
	m.Extra = randExtra(r, unknownExts)
	return m
}

func randCertificate(r *rand.Rand) *Certificate {
	m := &Certificate{RequestContext: randBytes(r, 0, 8)}
	for range r.IntN(4) {
		e := CertificateEntry{Data: randBytes(r, 1, 300)}
		if maybe(r) {
			e.OCSPStaple = randBytes(r, 1, 50)
		}
		if maybe(r) {
			for range 1 + r.IntN(3) {
				e.SCTs = append(e.SCTs, randBytes(r, 1, 40))
			}
		}
		e.Extra = randExtra(r, unknownExts)
		m.Entries = append(m.Entries, e)
	}
	return m
}

func randCertificateRequest(r *rand.Rand) *CertificateRequest {
	m := &CertificateRequest{RequestContext: randBytes(r, 0, 8), SignatureAlgorithms: randU16s(r, 1, 8)}
	if maybe(r) {
		m.SignatureAlgorithmsCert = randU16s(r, 1, 4)
	}
	if maybe(r) {
		for range 1 + r.IntN(3) {
			m.CertificateAuthorities = append(m.CertificateAuthorities, randBytes(r, 1, 60))
		}
	}
	m.Extra = randExtra(r, append([]uint16{ExtStatusRequest, ExtSCT, 48}, unknownExts...))
	return m
}

func randCertificateVerify(r *rand.Rand) *CertificateVerify {
	return &CertificateVerify{Scheme: uint16(r.Uint32()), Signature: randBytes(r, 0, 300)}
}

func randFinished(r *rand.Rand) *Finished {
	return &Finished{VerifyData: randBytes(r, 0, 64)}
}

func randNewSessionTicket(r *rand.Rand) *NewSessionTicket {
	m := &NewSessionTicket{Lifetime: r.Uint32(), AgeAdd: r.Uint32(), Nonce: randBytes(r, 0, 16), Ticket: randBytes(r, 1, 200)}
	if maybe(r) {
		m.HasEarlyData = true
		m.MaxEarlyData = r.Uint32()
	}
	m.Extra = randExtra(r, unknownExts)
	return m
}

func randKeyUpdate(r *rand.Rand) *KeyUpdate { return &KeyUpdate{UpdateRequested: maybe(r)} }

func randEndOfEarlyData(*rand.Rand) *EndOfEarlyData { return &EndOfEarlyData{} }

// generators builds one random message of each type.
var generators = []struct {
	name  string
	gen   func(r *rand.Rand) message
	parse func([]byte) (any, error)
}{
	{"ClientHello", func(r *rand.Rand) message { return randClientHello(r) }, func(b []byte) (any, error) { return asAny(ParseClientHello(b)) }},
	{"ServerHello", func(r *rand.Rand) message { return randServerHello(r) }, func(b []byte) (any, error) { return asAny(ParseServerHello(b)) }},
	{"EncryptedExtensions", func(r *rand.Rand) message { return randEncryptedExtensions(r) }, func(b []byte) (any, error) { return asAny(ParseEncryptedExtensions(b)) }},
	{"Certificate", func(r *rand.Rand) message { return randCertificate(r) }, func(b []byte) (any, error) { return asAny(ParseCertificate(b)) }},
	{"CertificateRequest", func(r *rand.Rand) message { return randCertificateRequest(r) }, func(b []byte) (any, error) { return asAny(ParseCertificateRequest(b)) }},
	{"CertificateVerify", func(r *rand.Rand) message { return randCertificateVerify(r) }, func(b []byte) (any, error) { return asAny(ParseCertificateVerify(b)) }},
	{"Finished", func(r *rand.Rand) message { return randFinished(r) }, func(b []byte) (any, error) { return asAny(ParseFinished(b)) }},
	{"NewSessionTicket", func(r *rand.Rand) message { return randNewSessionTicket(r) }, func(b []byte) (any, error) { return asAny(ParseNewSessionTicket(b)) }},
	{"KeyUpdate", func(r *rand.Rand) message { return randKeyUpdate(r) }, func(b []byte) (any, error) { return asAny(ParseKeyUpdate(b)) }},
	{"EndOfEarlyData", func(r *rand.Rand) message { return randEndOfEarlyData(r) }, func(b []byte) (any, error) { return asAny(ParseEndOfEarlyData(b)) }},
}
