package wire

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"reflect"
	"testing"

	"github.com/ztls-project/ztls/tls13/internal/alert"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// remarshal checks that a parsed message marshals back to exactly its bytes.
func remarshal(t *testing.T, m message, want []byte) {
	t.Helper()
	got, err := m.Marshal()
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Marshal = %x\nwant      %x", got, want)
	}
}

// RFC 8446, Section 4.2.3 list as RFC 8448's client sends it.
var rfcSigAlgs = []uint16{0x0403, 0x0503, 0x0603, 0x0203, 0x0804, 0x0805, 0x0806,
	0x0401, 0x0501, 0x0601, 0x0201, 0x0402, 0x0502, 0x0602, 0x0202}

var rfcGroups = []uint16{0x001d, 0x0017, 0x0018, 0x0019, 0x0100, 0x0101, 0x0102, 0x0103, 0x0104}

func TestRFC8448Section3ClientHello(t *testing.T) {
	v := rfc8448(t)
	msg := vec(t, v, "[3] client.hello")
	m, err := ParseClientHello(msg)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m.Raw, msg) {
		t.Fatal("Raw differs from the parsed bytes")
	}
	want := &ClientHello{
		Random:              [32]byte(unhex(t, "cb34ecb1e78163ba1c38c6dacb196a6dffa21a8d9912ec18a2ef6283024dece7")),
		CipherSuites:        []uint16{0x1301, 0x1303, 0x1302},
		CompressionMethods:  []byte{0},
		ServerName:          "server",
		SupportedVersions:   []uint16{VersionTLS13},
		SupportedGroups:     rfcGroups,
		SignatureAlgorithms: rfcSigAlgs,
		KeyShares:           []KeyShare{{Group: 0x001d, Data: vec(t, v, "[3] client.x25519.public")}},
		HasKeyShare:         true,
		PSKModes:            []uint8{PSKModeDHEKE},
		RecordSizeLimit:     0x4001,
		// renegotiation_info (RFC 5746, empty renegotiated_connection) and
		// session_ticket (RFC 5077, type 35) stay opaque.
		Extra: []Extension{{Type: ExtRenegotiationInfo, Data: []byte{0}}, {Type: 35}},
		Order: []uint16{ExtServerName, ExtRenegotiationInfo, ExtSupportedGroups, 35, ExtKeyShare,
			ExtSupportedVersions, ExtSignatureAlgorithms, ExtPSKModes, ExtRecordSizeLimit},
	}
	if got := withoutRaw(m); !reflect.DeepEqual(got, want) {
		t.Fatalf("parsed\n %+v\nwant\n %+v", got, want)
	}
	if m.BindersLen() != 0 {
		t.Fatalf("BindersLen = %d without PSK", m.BindersLen())
	}
	remarshal(t, m, msg)
	// A hello built by hand with the same fields and order gives the same bytes.
	remarshal(t, want, msg)
}

func TestRFC8448Section3ServerFlight(t *testing.T) {
	v := rfc8448(t)

	sh, err := ParseServerHello(vec(t, v, "[3] server.hello"))
	if err != nil {
		t.Fatal(err)
	}
	if sh.IsHelloRetryRequest() || sh.CipherSuite != 0x1301 || sh.SupportedVersion != VersionTLS13 ||
		!sh.HasKeyShare || sh.KeyShare.Group != 0x001d ||
		!bytes.Equal(sh.KeyShare.Data, vec(t, v, "[3] server.x25519.public")) || sh.HasPSK || sh.HasZTLS ||
		sh.SessionID != nil || len(sh.Extra) != 0 {
		t.Fatalf("ServerHello parsed as %+v", sh)
	}
	remarshal(t, sh, vec(t, v, "[3] server.hello"))

	ee, err := ParseEncryptedExtensions(vec(t, v, "[3] server.encrypted_extensions"))
	if err != nil {
		t.Fatal(err)
	}
	wantEE := &EncryptedExtensions{ServerName: true, RecordSizeLimit: 0x4001, SupportedGroups: rfcGroups,
		Order: []uint16{ExtSupportedGroups, ExtRecordSizeLimit, ExtServerName}}
	if got := withoutRaw(ee); !reflect.DeepEqual(got, wantEE) {
		t.Fatalf("EncryptedExtensions parsed as %+v", got)
	}
	remarshal(t, ee, vec(t, v, "[3] server.encrypted_extensions"))

	ct, err := ParseCertificate(vec(t, v, "[3] server.certificate"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ct.RequestContext) != 0 || len(ct.Entries) != 1 ||
		!bytes.Equal(ct.Entries[0].Data, vec(t, v, "[3] server.certificate.cert_data")) ||
		ct.Entries[0].OCSPStaple != nil || ct.Entries[0].SCTs != nil || ct.Entries[0].Extra != nil {
		t.Fatalf("Certificate parsed as %+v", ct)
	}
	remarshal(t, ct, vec(t, v, "[3] server.certificate"))

	cv, err := ParseCertificateVerify(vec(t, v, "[3] server.certificate_verify"))
	if err != nil {
		t.Fatal(err)
	}
	if cv.Scheme != 0x0804 || len(cv.Signature) != 128 {
		t.Fatalf("CertificateVerify parsed as scheme %#04x, %d signature bytes", cv.Scheme, len(cv.Signature))
	}
	remarshal(t, cv, vec(t, v, "[3] server.certificate_verify"))

	for _, who := range []string{"server", "client"} {
		fin, err := ParseFinished(vec(t, v, "[3] "+who+".finished"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(fin.VerifyData, vec(t, v, "[3] "+who+".finished.verify_data")) {
			t.Fatalf("%s Finished verify_data = %x", who, fin.VerifyData)
		}
		remarshal(t, fin, vec(t, v, "[3] "+who+".finished"))
	}

	// The flight is one record: EncryptedExtensions, Certificate,
	// CertificateVerify, Finished. Split it at every byte.
	flight := vec(t, v, "[3] server.hs_flight.record.payload")
	wantTypes := []uint8{TypeEncryptedExtensions, TypeCertificate, TypeCertificateVerify, TypeFinished}
	for cut := range len(flight) + 1 {
		var hb HandshakeBuffer
		var got [][]byte
		for _, part := range [][]byte{flight[:cut], flight[cut:]} {
			hb.Write(part)
			for {
				typ, msg, ok, err := hb.Next()
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					break
				}
				if typ != msg[0] {
					t.Fatalf("Next type %d for message of type %d", typ, msg[0])
				}
				got = append(got, msg)
			}
		}
		if len(got) != len(wantTypes) || hb.Len() != 0 {
			t.Fatalf("cut %d: %d messages, %d bytes left", cut, len(got), hb.Len())
		}
		for i, msg := range got {
			if msg[0] != wantTypes[i] {
				t.Fatalf("cut %d: message %d has type %d", cut, i, msg[0])
			}
			if _, err := Parse(msg); err != nil {
				t.Fatalf("cut %d: %v", cut, err)
			}
		}
		if !bytes.Equal(bytes.Join(got, nil), flight) {
			t.Fatalf("cut %d: messages do not add up to the flight", cut)
		}
	}
}

func TestRFC8448Section3NewSessionTicket(t *testing.T) {
	v := rfc8448(t)
	msg := vec(t, v, "[3] server.new_session_ticket")
	m, err := ParseNewSessionTicket(msg)
	if err != nil {
		t.Fatal(err)
	}
	want := &NewSessionTicket{
		Lifetime: 30, AgeAdd: 0xfad6aac5, Nonce: []byte{0, 0},
		Ticket:       vec(t, v, "[3] server.new_session_ticket.ticket"),
		MaxEarlyData: 1024, HasEarlyData: true,
	}
	if got := withoutRaw(m); !reflect.DeepEqual(got, want) {
		t.Fatalf("parsed %+v\nwant %+v", got, want)
	}
	remarshal(t, m, msg)
	remarshal(t, want, msg)
}

func TestRFC8448Section4ClientHello(t *testing.T) {
	v := rfc8448(t)
	msg := vec(t, v, "[4] client.hello")
	m, err := ParseClientHello(msg)
	if err != nil {
		t.Fatal(err)
	}
	if m.ServerName != "server" || !m.EarlyData || !reflect.DeepEqual(m.SupportedGroups, rfcGroups) ||
		!reflect.DeepEqual(m.SupportedVersions, []uint16{VersionTLS13}) || m.RecordSizeLimit != 0x4001 ||
		len(m.KeyShares) != 1 || !bytes.Equal(m.KeyShares[0].Data, vec(t, v, "[4] client.x25519.public")) {
		t.Fatalf("ClientHello parsed as %+v", m)
	}
	wantIDs := []PSKIdentity{{
		Identity:            vec(t, v, "[4] client.hello.psk.identity"),
		ObfuscatedTicketAge: 0xfad6aacb,
	}}
	if !reflect.DeepEqual(m.PSKIdentities, wantIDs) || len(m.PSKBinders) != 1 ||
		!bytes.Equal(m.PSKBinders[0], vec(t, v, "[4] binder")) {
		t.Fatalf("pre_shared_key parsed as %+v / %x", m.PSKIdentities, m.PSKBinders)
	}
	// padding (RFC 7685) is kept opaque: 87 zero bytes.
	if len(m.Extra) != 2 || m.Extra[1].Type != ExtPadding || !bytes.Equal(m.Extra[1].Data, make([]byte, 87)) {
		t.Fatalf("Extra = %+v", m.Extra)
	}
	if last := m.Order[len(m.Order)-1]; last != ExtPreSharedKey {
		t.Fatalf("Order ends in %d", last)
	}
	remarshal(t, m, msg)

	// The binders: 2-byte list length + 1-byte binder length + 32 bytes.
	if got := m.BindersLen(); got != 35 || !bytes.Equal(msg[len(msg)-got:], vec(t, v, "[4] client.hello.psk.binders")) {
		t.Fatalf("BindersLen = %d", got)
	}
	truncated := msg[:len(msg)-m.BindersLen()]
	if !bytes.Equal(truncated, vec(t, v, "[4] client.hello.truncated")) ||
		!bytes.Equal(truncated, vec(t, v, "[4] binder.client_hello_prefix")) {
		t.Fatal("msg[:len-BindersLen] is not RFC 8448's truncated ClientHello")
	}
	if h := sha256.Sum256(truncated); !bytes.Equal(h[:], vec(t, v, "[4] binder.hash")) {
		t.Fatalf("Transcript-Hash(truncated) = %x", h)
	}

	// The engine's path: marshal with a placeholder binder, then patch it.
	m.PSKBinders = [][]byte{make([]byte, 32)}
	placeholder, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(placeholder[:len(placeholder)-m.BindersLen()], truncated) {
		t.Fatal("placeholder hello's truncated part differs")
	}
	if err := m.UpdateBinders(placeholder, [][]byte{vec(t, v, "[4] binder")}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(placeholder, msg) {
		t.Fatalf("after UpdateBinders: %x", placeholder)
	}
	if !bytes.Equal(m.PSKBinders[0], vec(t, v, "[4] binder")) {
		t.Fatal("UpdateBinders did not record the binder")
	}
}

func TestRFC8448Section4Server(t *testing.T) {
	v := rfc8448(t)
	sh, err := ParseServerHello(vec(t, v, "[4] server.hello"))
	if err != nil {
		t.Fatal(err)
	}
	if !sh.HasPSK || sh.PSKIdentity != 0 || !sh.HasKeyShare || sh.SupportedVersion != VersionTLS13 ||
		!reflect.DeepEqual(sh.Order, []uint16{ExtPreSharedKey, ExtKeyShare, ExtSupportedVersions}) {
		t.Fatalf("ServerHello parsed as %+v", sh)
	}
	remarshal(t, sh, vec(t, v, "[4] server.hello"))

	ee, err := ParseEncryptedExtensions(vec(t, v, "[4] server.encrypted_extensions"))
	if err != nil {
		t.Fatal(err)
	}
	if !ee.EarlyData || !ee.ServerName || ee.RecordSizeLimit != 0x4001 {
		t.Fatalf("EncryptedExtensions parsed as %+v", ee)
	}
	remarshal(t, ee, vec(t, v, "[4] server.encrypted_extensions"))

	eoed, err := ParseEndOfEarlyData(vec(t, v, "[4] client.end_of_early_data"))
	if err != nil {
		t.Fatal(err)
	}
	remarshal(t, eoed, vec(t, v, "[4] client.end_of_early_data"))

	for _, who := range []string{"server", "client"} {
		fin, err := ParseFinished(vec(t, v, "[4] "+who+".finished"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(fin.VerifyData, vec(t, v, "[4] "+who+".finished.verify_data")) {
			t.Fatalf("%s Finished verify_data = %x", who, fin.VerifyData)
		}
		remarshal(t, fin, vec(t, v, "[4] "+who+".finished"))
	}
}

// TestParseDispatch checks Parse returns the right type for each RFC 8448
// message and Raw equal to the input.
func TestParseDispatch(t *testing.T) {
	v := rfc8448(t)
	want := map[string]string{
		"[3] client.hello": "*wire.ClientHello", "[3] server.hello": "*wire.ServerHello",
		"[3] server.encrypted_extensions": "*wire.EncryptedExtensions",
		"[3] server.certificate":          "*wire.Certificate", "[3] server.certificate_verify": "*wire.CertificateVerify",
		"[3] server.finished": "*wire.Finished", "[3] server.new_session_ticket": "*wire.NewSessionTicket",
		"[4] client.end_of_early_data": "*wire.EndOfEarlyData",
	}
	for k, typ := range want {
		m, err := Parse(vec(t, v, k))
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		if got := reflect.TypeOf(m).String(); got != typ {
			t.Fatalf("%s: Parse returned %s, want %s", k, got, typ)
		}
	}
	for _, typ := range []uint8{0, 3, 6, TypeMessageHash, 255} {
		m, err := Parse([]byte{typ, 0, 0, 0})
		wantAlert(t, err, alert.UnexpectedMessage)
		if m != nil {
			t.Fatalf("Parse of type %d returned %v with its error", typ, m)
		}
	}
	// A failed parse returns a nil interface, not a typed nil.
	if m, err := Parse([]byte{TypeFinished, 0, 0, 5}); err == nil || m != nil {
		t.Fatalf("Parse of a bad Finished = %v, %v", m, err)
	}
	if _, err := Parse(nil); err == nil {
		t.Fatal("Parse(nil) succeeded")
	}
}
