package wire

import (
	"bytes"
	"encoding/hex"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ztls-project/ztls/tls13/internal/alert"
)

func ext(typ uint16, hexData string) Extension {
	b, err := hex.DecodeString(hexData)
	if err != nil {
		panic(err)
	}
	if len(b) == 0 {
		b = nil
	}
	return Extension{Type: typ, Data: b}
}

func mustMarshal(t *testing.T, m message) []byte {
	t.Helper()
	b, err := m.Marshal()
	if err != nil {
		t.Fatalf("Marshal(%+v): %v", m, err)
	}
	return b
}

// ch builds a ClientHello whose extensions are exactly exts, in order.
func ch(t *testing.T, exts ...Extension) []byte {
	return mustMarshal(t, &ClientHello{CipherSuites: []uint16{0x1301}, Extra: exts})
}

func sh(t *testing.T, random [32]byte, exts ...Extension) []byte {
	return mustMarshal(t, &ServerHello{Random: random, CipherSuite: 0x1301, Extra: exts})
}

func ee(t *testing.T, exts ...Extension) []byte {
	return mustMarshal(t, &EncryptedExtensions{Extra: exts})
}

// setLen rewrites msg's header length to match its body.
func setLen(msg []byte) []byte {
	n := len(msg) - 4
	msg[1], msg[2], msg[3] = byte(n>>16), byte(n>>8), byte(n)
	return msg
}

var zeroRandom [32]byte

// ztlsBody returns a ztls ClientHello body with the given cert_hash and binder lengths.
func ztlsBody(certHash, binder int) string {
	return "01020304" + strings.Repeat("ab", 32) + "1301" + "0000000000000001" +
		hexLen8(certHash) + strings.Repeat("cc", certHash) + hexLen8(binder) + strings.Repeat("dd", binder)
}

func hexLen8(n int) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[n>>4], digits[n&15]})
}

func TestAttacks(t *testing.T) {
	v := rfc8448(t)
	ch3 := vec(t, v, "[3] client.hello")
	sigAlgs := ext(ExtSignatureAlgorithms, "00020804")
	cases := []struct {
		name  string
		msg   []byte
		alert alert.Alert
	}{
		// RFC 8446, Section 4.2: no two extensions of one type.
		{"CH duplicate unknown extension", ch(t, ext(0x1234, ""), ext(0x1234, "00")), alert.IllegalParameter},
		{"CH duplicate supported_versions", ch(t, ext(ExtSupportedVersions, "020304"), ext(ExtSupportedVersions, "020304")), alert.IllegalParameter},
		{"SH duplicate key_share", sh(t, zeroRandom, ext(ExtKeyShare, "001d000101"), ext(ExtKeyShare, "001d000101")), alert.IllegalParameter},
		{"EE duplicate early_data", ee(t, ext(ExtEarlyData, ""), ext(ExtEarlyData, "")), alert.IllegalParameter},
		{"CR duplicate signature_algorithms", mustMarshal(t, &CertificateRequest{Extra: []Extension{sigAlgs, sigAlgs}}), alert.IllegalParameter},
		{"NST duplicate early_data", mustMarshal(t, &NewSessionTicket{Ticket: []byte{1}, Extra: []Extension{ext(ExtEarlyData, "00000001"), ext(ExtEarlyData, "00000001")}}), alert.IllegalParameter},
		{"Certificate entry duplicate extension", mustMarshal(t, &Certificate{Entries: []CertificateEntry{{Data: []byte{1}, Extra: []Extension{ext(0x1234, ""), ext(0x1234, "")}}}}), alert.IllegalParameter},

		// RFC 8446, Section 4.2.11 and docs/ztls-spec.md, Section 2: last extension.
		{"CH pre_shared_key not last", ch(t, ext(ExtPreSharedKey, "0007000101"+"00000000"+"0021"+"20"+strings.Repeat("00", 32)), ext(0x1234, "")), alert.IllegalParameter},
		{"CH ztls not last", ch(t, ext(ExtZTLS, ztlsBody(0, 32)), ext(ExtEarlyData, "")), alert.IllegalParameter},
		{"CH ztls before pre_shared_key", ch(t, ext(ExtZTLS, ztlsBody(0, 32)), ext(ExtPreSharedKey, "0007000101"+"00000000"+"0021"+"20"+strings.Repeat("00", 32))), alert.IllegalParameter},
		{"CH PSK identities and binders differ in number", ch(t, ext(ExtPreSharedKey, "000e000101"+"00000000"+"000102"+"00000000"+"0021"+"20"+strings.Repeat("00", 32))), alert.IllegalParameter},

		// Trailing bytes: after the message body and inside an extension.
		{"CH trailing byte", setLen(append(bytes.Clone(ch3), 0)), alert.DecodeError},
		{"CH trailing byte in supported_versions", ch(t, ext(ExtSupportedVersions, "02030400")), alert.DecodeError},
		{"CH trailing byte in key_share", ch(t, ext(ExtKeyShare, "0005001d00010100")), alert.DecodeError},
		{"SH trailing byte in supported_versions", sh(t, zeroRandom, ext(ExtSupportedVersions, "030400")), alert.DecodeError},
		{"EE trailing byte in record_size_limit", ee(t, ext(ExtRecordSizeLimit, "400100")), alert.DecodeError},
		{"KeyUpdate trailing byte", []byte{TypeKeyUpdate, 0, 0, 2, 0, 0}, alert.DecodeError},
		{"EndOfEarlyData with a body", []byte{TypeEndOfEarlyData, 0, 0, 1, 0}, alert.DecodeError},

		// Oversized lengths.
		{"header longer than the message", append([]byte{TypeClientHello, 0, 1, 0}, ch3[4:]...), alert.DecodeError},
		{"header shorter than the message", append([]byte{TypeFinished, 0, 0, 1}, 1, 2), alert.DecodeError},
		{"CH extension length past its block", func() []byte {
			b := bytes.Clone(ch3)
			i := bytes.Index(b, []byte{0, 0, 0, 0x0b, 0, 0x09}) // server_name
			b[i+2], b[i+3] = 0xff, 0xff
			return b
		}(), alert.DecodeError},
		{"CH legacy_session_id of 33 bytes", func() []byte {
			b := append(bytes.Clone(ch3[:38]), 33)
			b = append(b, make([]byte, 33)...)
			return setLen(append(b, ch3[39:]...))
		}(), alert.DecodeError},
		{"CH cipher_suites length past the message", func() []byte {
			b := bytes.Clone(ch3)
			b[39], b[40] = 0xff, 0xfe
			return b
		}(), alert.DecodeError},
		{"CH cert_hash of 5 bytes", ch(t, ext(ExtEarlyData, ""), ext(ExtZTLS, ztlsBody(5, 32))), alert.DecodeError},
		{"CH cert_hash of 33 bytes", ch(t, ext(ExtZTLS, ztlsBody(33, 32))), alert.DecodeError},
		{"CH ztls binder of 31 bytes", ch(t, ext(ExtZTLS, ztlsBody(32, 31))), alert.DecodeError},
		{"CH ztls trailing byte", ch(t, ext(ExtZTLS, ztlsBody(0, 32)+"00")), alert.DecodeError},
		{"CH PSK binder of 31 bytes", ch(t, ext(ExtPreSharedKey, "0007000101"+"00000000"+"0020"+"1f"+strings.Repeat("00", 31))), alert.DecodeError},
		{"Certificate cert_data past the list", []byte{TypeCertificate, 0, 0, 8, 0, 0, 0, 4, 0, 0, 9, 1}, alert.DecodeError},
		{"NST ticket length past the message", []byte{TypeNewSessionTicket, 0, 0, 11, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0xff, 0xff}, alert.DecodeError},

		// Empty lists where the RFC says <2..> or <1..>.
		{"CH empty supported_groups", ch(t, ext(ExtSupportedGroups, "0000")), alert.DecodeError},
		{"CH empty supported_versions", ch(t, ext(ExtSupportedVersions, "00")), alert.DecodeError},
		{"CH odd supported_groups", ch(t, ext(ExtSupportedGroups, "0003001d00")), alert.DecodeError},
		{"CH empty ALPN list", ch(t, ext(ExtALPN, "0000")), alert.DecodeError},
		{"CH empty ALPN name", ch(t, ext(ExtALPN, "000100")), alert.DecodeError},
		{"CH empty key_exchange", ch(t, ext(ExtKeyShare, "0004001d0000")), alert.DecodeError},
		{"CH empty cookie", ch(t, ext(ExtCookie, "0000")), alert.DecodeError},
		{"CH empty psk_key_exchange_modes", ch(t, ext(ExtPSKModes, "00")), alert.DecodeError},
		{"CH empty server_name host", ch(t, ext(ExtServerName, "0003000000")), alert.DecodeError},
		{"CH early_data with a body", ch(t, ext(ExtEarlyData, "00")), alert.DecodeError},
		{"CH empty cipher_suites", func() []byte {
			b := append(bytes.Clone(ch3[:39]), 0, 0)
			return setLen(append(b, ch3[47:]...))
		}(), alert.DecodeError},
		{"CR empty certificate_authorities", mustMarshal(t, &CertificateRequest{SignatureAlgorithms: []uint16{0x0804}, Extra: []Extension{ext(ExtCertificateAuthorities, "0000")}}), alert.DecodeError},
		{"NST empty ticket", []byte{TypeNewSessionTicket, 0, 0, 13, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0}, alert.DecodeError},
		{"Certificate empty OCSP response", mustMarshal(t, &Certificate{Entries: []CertificateEntry{{Data: []byte{1}, Extra: []Extension{ext(ExtStatusRequest, "01000000")}}}}), alert.DecodeError},
		{"Certificate empty cert_data", []byte{TypeCertificate, 0, 0, 9, 0, 0, 0, 5, 0, 0, 0, 0, 0}, alert.DecodeError},

		// Values that parse but are forbidden.
		{"CH two key shares for one group", ch(t, ext(ExtKeyShare, "000a001d000101001d000102")), alert.IllegalParameter},
		{"CH record_size_limit 63", ch(t, ext(ExtRecordSizeLimit, "003f")), alert.IllegalParameter},
		{"EE record_size_limit 0", ee(t, ext(ExtRecordSizeLimit, "0000")), alert.IllegalParameter},
		{"KeyUpdate request_update 2", []byte{TypeKeyUpdate, 0, 0, 1, 2}, alert.IllegalParameter},
		{"SH legacy_compression_method 1", func() []byte {
			b := bytes.Clone(vec(t, v, "[3] server.hello"))
			b[4+2+32+1+2] = 1
			return b
		}(), alert.IllegalParameter},
		{"SH selected_version 0", sh(t, zeroRandom, ext(ExtSupportedVersions, "0000")), alert.IllegalParameter},
		{"HRR selected_group 0", sh(t, HelloRetryRequestRandom, ext(ExtKeyShare, "0000")), alert.IllegalParameter},
		{"Certificate OCSP status_type 2", mustMarshal(t, &Certificate{Entries: []CertificateEntry{{Data: []byte{1}, Extra: []Extension{ext(ExtStatusRequest, "0200000101")}}}}), alert.IllegalParameter},

		// RFC 8446, Section 4.2: a known extension where it does not belong.
		{"SH cookie", sh(t, zeroRandom, ext(ExtCookie, "000101")), alert.IllegalParameter},
		{"SH server_name", sh(t, zeroRandom, ext(ExtServerName, "")), alert.IllegalParameter},
		{"HRR pre_shared_key", sh(t, HelloRetryRequestRandom, ext(ExtPreSharedKey, "0000")), alert.IllegalParameter},
		{"HRR ztls", sh(t, HelloRetryRequestRandom, ext(ExtZTLS, "00000001")), alert.IllegalParameter},
		{"EE key_share", ee(t, ext(ExtKeyShare, "001d000101")), alert.IllegalParameter},
		{"EE supported_versions", ee(t, ext(ExtSupportedVersions, "0304")), alert.IllegalParameter},
		{"EE pre_shared_key", ee(t, ext(ExtPreSharedKey, "0000")), alert.IllegalParameter},
		{"CR key_share", mustMarshal(t, &CertificateRequest{SignatureAlgorithms: []uint16{0x0804}, Extra: []Extension{ext(ExtKeyShare, "")}}), alert.IllegalParameter},
		{"NST supported_groups", mustMarshal(t, &NewSessionTicket{Ticket: []byte{1}, Extra: []Extension{ext(ExtSupportedGroups, "0002001d")}}), alert.IllegalParameter},
		{"Certificate entry early_data", mustMarshal(t, &Certificate{Entries: []CertificateEntry{{Data: []byte{1}, Extra: []Extension{ext(ExtEarlyData, "")}}}}), alert.IllegalParameter},

		// Versions and required extensions.
		{"CH without extensions", setLen(bytes.Clone(ch3[:4+2+32+1+8+2])), alert.ProtocolVersion},
		// RFC 8446, Appendix D.5: SSL 3.0 or lower, 0x0000 included (it
		// must not read as LegacyVersion 0, which stands for 0x0303).
		{"CH legacy_version 0x0000", withCHVersion(ch3, 0x0000), alert.ProtocolVersion},
		{"CH legacy_version 0x0200", withCHVersion(ch3, 0x0200), alert.ProtocolVersion},
		{"CH legacy_version 0x0300", withCHVersion(ch3, 0x0300), alert.ProtocolVersion},
		{"SH legacy_version 0x0301", func() []byte {
			b := bytes.Clone(vec(t, v, "[3] server.hello"))
			b[5] = 1
			return b
		}(), alert.ProtocolVersion},
		{"SH without extensions", setLen(bytes.Clone(vec(t, v, "[3] server.hello")[:4+2+32+1+2+1])), alert.ProtocolVersion},
		{"CR without signature_algorithms", []byte{TypeCertificateRequest, 0, 0, 11, 0, 0, 8, 0, 0x32, 0, 4, 0, 2, 8, 4}, alert.MissingExtension},
		{"wrong type for the parser", append([]byte{TypeServerHello}, ch3[1:]...), alert.DecodeError},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "wrong type for the parser" {
				_, err := ParseClientHello(c.msg)
				wantAlert(t, err, alert.UnexpectedMessage)
				return
			}
			m, err := Parse(c.msg)
			if err == nil {
				t.Fatalf("parsed %x as %+v", c.msg, m)
			}
			wantAlert(t, err, c.alert)
			if !strings.HasPrefix(err.Error(), "tls13: wire: ") {
				t.Fatalf("error %q lacks the package prefix", err)
			}
		})
	}
	// Cases whose extension bytes read better as Go literals.
	exact := []struct {
		name  string
		msg   []byte
		alert alert.Alert
	}{
		{"CH two host names", ch(t, Extension{ExtServerName, []byte{0, 8, 0, 0, 1, 'a', 0, 0, 1, 'b'}}), alert.IllegalParameter},
		{"EE two ALPN protocols", ee(t, Extension{ExtALPN, []byte{0, 6, 2, 'h', '2', 2, 'h', '3'}}), alert.IllegalParameter},
	}
	for _, c := range exact {
		_, err := Parse(c.msg)
		wantAlert(t, err, c.alert)
	}
}

// TestTrailingBytes appends a byte to the body of every message (header
// fixed up): all but Finished, whose body has no inner structure, must fail
// with decode_error.
func TestTrailingBytes(t *testing.T) {
	for _, msg := range truncationCases(t) {
		if msg[0] == TypeFinished {
			continue
		}
		for _, tail := range [][]byte{{0}, {0, 0, 0, 0}, {0xff}} {
			b := setLen(append(bytes.Clone(msg), tail...))
			_, err := Parse(b)
			wantAlert(t, err, alert.DecodeError)
		}
	}
}

// TestUnknownAndTolerated checks what parsers keep rather than reject.
func TestUnknownAndTolerated(t *testing.T) {
	// server_name of another name_type stays opaque; status_request of
	// another status_type too.
	m, err := ParseClientHello(ch(t, Extension{ExtServerName, []byte{0, 4, 7, 0, 1, 'x'}}, ext(ExtStatusRequest, "02")))
	if err != nil {
		t.Fatal(err)
	}
	if m.ServerName != "" || m.StatusRequest || len(m.Extra) != 2 {
		t.Fatalf("parsed %+v", m)
	}
	// An unknown extension in a ServerHello lands in Extra for the engine
	// to reject with unsupported_extension.
	s, err := ParseServerHello(sh(t, zeroRandom, ext(0x1234, "01")))
	if err != nil || len(s.Extra) != 1 || s.Extra[0].Type != 0x1234 {
		t.Fatalf("ServerHello = %+v, %v", s, err)
	}
	// An empty key_share list is legal (the client asks for HRR).
	m, err = ParseClientHello(ch(t, ext(ExtKeyShare, "0000")))
	if err != nil || !m.HasKeyShare || m.KeyShares != nil {
		t.Fatalf("empty key_share = %+v, %v", m, err)
	}
	// A legacy_version below TLS 1.2 with supported_versions is still a
	// TLS 1.3 ClientHello (RFC 8446, Section 4.2.1).
	m2 := &ClientHello{LegacyVersion: 0x0301, CipherSuites: []uint16{0x1301}, SupportedVersions: []uint16{VersionTLS13}}
	m, err = ParseClientHello(mustMarshal(t, m2))
	if err != nil || m.LegacyVersion != 0x0301 {
		t.Fatalf("legacy_version 0x0301 = %+v, %v", m, err)
	}
	// HelloRetryRequest: key_share is a bare selected_group.
	hrr := &ServerHello{Random: HelloRetryRequestRandom, CipherSuite: 0x1301, SupportedVersion: VersionTLS13,
		SelectedGroup: 0x17, Cookie: []byte("cookie")}
	b := mustMarshal(t, hrr)
	s, err = ParseServerHello(b)
	if err != nil || !s.IsHelloRetryRequest() || s.SelectedGroup != 0x17 || s.HasKeyShare || string(s.Cookie) != "cookie" {
		t.Fatalf("HRR = %+v, %v", s, err)
	}
	if !bytes.Contains(b, []byte{0, 0x33, 0, 2, 0, 0x17}) {
		t.Fatalf("HRR key_share is not a bare selected_group: %x", b)
	}
}

// TestMarshalErrors: Marshal refuses what the wire syntax cannot carry, and
// Order mistakes, with an internal_error.
func TestMarshalErrors(t *testing.T) {
	binder := make([]byte, 32)
	cases := []struct {
		name string
		m    message
	}{
		{"CH session ID of 33 bytes", &ClientHello{CipherSuites: []uint16{1}, SessionID: make([]byte, 33)}},
		{"CH no cipher suites", &ClientHello{}},
		{"CH Order lists an absent extension", &ClientHello{CipherSuites: []uint16{1}, Order: []uint16{ExtALPN}}},
		{"CH Order misses a present extension", &ClientHello{CipherSuites: []uint16{1}, ServerName: "a", Order: []uint16{}}},
		{"CH Order misses an Extra extension", &ClientHello{CipherSuites: []uint16{1}, Extra: []Extension{{Type: 9}}, Order: []uint16{}}},
		{"CH ztls and pre_shared_key", &ClientHello{CipherSuites: []uint16{1}, ZTLS: &ZTLSClientHello{Binder: binder},
			PSKIdentities: []PSKIdentity{{Identity: []byte{1}}}, PSKBinders: [][]byte{binder}}},
		{"CH ztls cert_hash of 5 bytes", &ClientHello{CipherSuites: []uint16{1}, ZTLS: &ZTLSClientHello{CertHash: make([]byte, 5), Binder: binder}}},
		{"CH ztls binder of 31 bytes", &ClientHello{CipherSuites: []uint16{1}, ZTLS: &ZTLSClientHello{Binder: make([]byte, 31)}}},
		{"CH PSK binder of 256 bytes", &ClientHello{CipherSuites: []uint16{1}, PSKIdentities: []PSKIdentity{{Identity: []byte{1}}}, PSKBinders: [][]byte{make([]byte, 256)}}},
		{"CH PSK binder missing", &ClientHello{CipherSuites: []uint16{1}, PSKIdentities: []PSKIdentity{{Identity: []byte{1}}}}},
		{"CH empty PSK identity", &ClientHello{CipherSuites: []uint16{1}, PSKIdentities: []PSKIdentity{{}}, PSKBinders: [][]byte{binder}}},
		{"CH empty ALPN name", &ClientHello{CipherSuites: []uint16{1}, ALPN: []string{""}}},
		{"CH ALPN name of 256 bytes", &ClientHello{CipherSuites: []uint16{1}, ALPN: []string{strings.Repeat("a", 256)}}},
		{"CH empty key_exchange", &ClientHello{CipherSuites: []uint16{1}, KeyShares: []KeyShare{{Group: 29}}}},
		{"CH 128 supported versions", &ClientHello{CipherSuites: []uint16{1}, SupportedVersions: make([]uint16, 128)}},
		{"SH session ID of 33 bytes", &ServerHello{SessionID: make([]byte, 33)}},
		{"SH with cookie", &ServerHello{Cookie: []byte{1}}},
		{"HRR with a key share", &ServerHello{Random: HelloRetryRequestRandom, HasKeyShare: true, KeyShare: KeyShare{29, []byte{1}}}},
		{"EE ALPN of 256 bytes", &EncryptedExtensions{ALPN: strings.Repeat("a", 256)}},
		{"Certificate empty cert_data", &Certificate{Entries: []CertificateEntry{{}}}},
		{"Certificate empty SCT", &Certificate{Entries: []CertificateEntry{{Data: []byte{1}, SCTs: [][]byte{nil}}}}},
		{"Certificate cert_data of 2^24 bytes", &Certificate{Entries: []CertificateEntry{{Data: make([]byte, 1<<24)}}}},
		{"CR no signature algorithms", &CertificateRequest{}},
		{"CR empty distinguished name", &CertificateRequest{SignatureAlgorithms: []uint16{1}, CertificateAuthorities: [][]byte{nil}}},
		{"CV signature of 2^16 bytes", &CertificateVerify{Signature: make([]byte, 1<<16)}},
		{"NST empty ticket", &NewSessionTicket{}},
		{"NST nonce of 256 bytes", &NewSessionTicket{Ticket: []byte{1}, Nonce: make([]byte, 256)}},
	}
	for _, c := range cases {
		b, err := c.m.Marshal()
		if err == nil {
			t.Errorf("%s: Marshal = %x, want an error", c.name, b)
			continue
		}
		wantAlert(t, err, alert.InternalError)
	}
}

func TestUpdateBindersErrors(t *testing.T) {
	binder := make([]byte, 32)
	m := &ClientHello{CipherSuites: []uint16{1}, PSKIdentities: []PSKIdentity{{Identity: []byte{1}}, {Identity: []byte{2}}},
		PSKBinders: [][]byte{binder, make([]byte, 48)}}
	msg := mustMarshal(t, m)
	orig := bytes.Clone(msg)
	for name, err := range map[string]error{
		"too few binders":      m.UpdateBinders(msg, [][]byte{binder}),
		"wrong binder length":  m.UpdateBinders(msg, [][]byte{binder, binder}),
		"not a ClientHello":    m.UpdateBinders(msg[:len(msg)-1], [][]byte{binder, make([]byte, 48)}),
		"no ztls extension":    m.UpdateZTLSBinder(msg, binder),
		"other hello's binder": (&ClientHello{PSKIdentities: []PSKIdentity{{}}, PSKBinders: [][]byte{make([]byte, 33)}}).UpdateBinders(msg, [][]byte{make([]byte, 33)}),
	} {
		if err == nil {
			t.Errorf("%s: UpdateBinders succeeded", name)
			continue
		}
		wantAlert(t, err, alert.InternalError)
	}
	if !bytes.Equal(msg, orig) {
		t.Fatal("a failed UpdateBinders changed the message")
	}
	// A ClientHello without pre_shared_key has nothing to update.
	if err := (&ClientHello{}).UpdateBinders(msg, nil); err == nil {
		t.Fatal("UpdateBinders without PSK succeeded")
	}
	// And the good path with two binders of different lengths.
	r := rand.New(rand.NewPCG(9, 9))
	nb := [][]byte{randBytes(r, 32, 32), randBytes(r, 48, 48)}
	if err := m.UpdateBinders(msg, nb); err != nil {
		t.Fatal(err)
	}
	p, err := ParseClientHello(msg)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(p.PSKBinders[0], nb[0]) || !bytes.Equal(p.PSKBinders[1], nb[1]) {
		t.Fatal("binders not written")
	}
	if !bytes.Equal(msg[:len(msg)-m.BindersLen()], orig[:len(orig)-m.BindersLen()]) {
		t.Fatal("UpdateBinders touched the truncated part")
	}
}

// TestZTLSBinder exercises the ztls path: the binder is the last field of
// the last extension, and the truncated hello ends right before its length.
func TestZTLSBinder(t *testing.T) {
	z := &ZTLSClientHello{ZDataID: 7, EarlySuite: 0x1301, ObfuscatedTimeMS: 42, CertHash: make([]byte, 32), Binder: make([]byte, 32)}
	m := &ClientHello{CipherSuites: []uint16{0x1301}, ServerName: "example.org", EarlyData: true,
		KeyShares: []KeyShare{{29, make([]byte, 32)}}, ZTLS: z}
	msg := mustMarshal(t, m)
	if m.BindersLen() != 33 {
		t.Fatalf("BindersLen = %d", m.BindersLen())
	}
	truncated := bytes.Clone(msg[:len(msg)-33])
	binder := bytes.Repeat([]byte{0x5a}, 32)
	if err := m.UpdateZTLSBinder(msg, binder); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(msg[:len(msg)-33], truncated) || msg[len(msg)-33] != 32 || !bytes.Equal(msg[len(msg)-32:], binder) {
		t.Fatalf("ztls binder not patched in place: %x", msg)
	}
	p, err := ParseClientHello(msg)
	if err != nil {
		t.Fatal(err)
	}
	if p.ZTLS == nil || !bytes.Equal(p.ZTLS.Binder, binder) || p.ZTLS.ZDataID != 7 || p.Order[len(p.Order)-1] != ExtZTLS {
		t.Fatalf("parsed ztls = %+v", p.ZTLS)
	}
	if err := m.UpdateZTLSBinder(msg, make([]byte, 33)); err == nil {
		t.Fatal("UpdateZTLSBinder accepted a binder of the wrong length")
	}
}

// TestZTLSCodepoint: with the ztls extension configured at another
// codepoint, it is written and read there; an extension at the default
// codepoint is then an unknown one (kept opaque and written back as it
// came), and a reader at the default codepoint does not see ztls.
func TestZTLSCodepoint(t *testing.T) {
	const cp = 0xfe77
	z := &ZTLSClientHello{ZDataID: 9, EarlySuite: 0x1301, Binder: make([]byte, 32)}
	m := &ClientHello{CipherSuites: []uint16{0x1301}, EarlyData: true, KeyShares: []KeyShare{{29, make([]byte, 32)}},
		ZTLS: z, ZTLSCodepoint: cp, Extra: []Extension{{Type: cp, Data: []byte{1, 2}}}}
	msg := mustMarshal(t, m)
	// Inside the struct the two codepoints trade places: ztls goes out at
	// cp, and the opaque extension held as cp goes out at ExtZTLS.
	if !bytes.HasSuffix(msg[:len(msg)-0x50], []byte{0xfe, 0x77, 0x00, 0x50}) || !bytes.Contains(msg, []byte{0xff, 0x5a, 0x00, 0x02, 1, 2}) {
		t.Fatalf("codepoints not on the wire as configured: %x", msg)
	}
	p, err := ParseClientHelloZTLS(msg, cp)
	if err != nil {
		t.Fatal(err)
	}
	if p.ZTLS == nil || p.ZTLS.ZDataID != 9 || len(p.Extra) != 1 || p.Extra[0].Type != cp {
		t.Fatalf("parsed at cp: ztls %+v, extra %+v", p.ZTLS, p.Extra)
	}
	again, err := p.Marshal()
	if err != nil || !bytes.Equal(again, msg) {
		t.Fatalf("round trip differs: %v", err)
	}
	// A default reader finds the ztls body at ExtZTLS (the opaque {1,2},
	// which does not parse) and the real one at an unknown codepoint.
	if d, err := ParseClientHello(msg); err == nil && d.ZTLS != nil {
		t.Fatalf("default reader took the extension at %#x for ztls: %+v", cp, d.ZTLS)
	}
	sh := &ServerHello{CipherSuite: 0x1301, SupportedVersion: VersionTLS13, HasKeyShare: true,
		KeyShare: KeyShare{29, make([]byte, 32)}, HasZTLS: true, ZTLSID: 9, ZTLSCodepoint: cp}
	shMsg := mustMarshal(t, sh)
	ps, err := ParseServerHelloZTLS(shMsg, cp)
	if err != nil || !ps.HasZTLS || ps.ZTLSID != 9 {
		t.Fatalf("ServerHello at cp: %+v, %v", ps, err)
	}
	pd, err := ParseServerHello(shMsg)
	if err != nil || pd.HasZTLS || len(pd.Extra) != 1 || pd.Extra[0].Type != cp {
		t.Fatalf("ServerHello read at the default codepoint: %+v, %v", pd, err)
	}
}

// withCHVersion returns a copy of the ClientHello msg with legacy_version v.
func withCHVersion(msg []byte, v uint16) []byte {
	b := bytes.Clone(msg)
	b[4], b[5] = byte(v>>8), byte(v)
	return b
}
