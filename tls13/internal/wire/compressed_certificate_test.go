package wire

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/ztls-project/ztls/tls13/internal/alert"
)

func randCompressedCertificate(r *rand.Rand) *CompressedCertificate {
	return &CompressedCertificate{
		Algorithm:          uint16(r.Uint32()),
		UncompressedLength: 1 + r.Uint32N(1<<24-1),
		Compressed:         randBytes(r, 1, 300),
	}
}

// TestCompressedCertificateRoundTrip: marshal, parse, marshal again (RFC
// 8879, Section 4), and no strict prefix parses.
func TestCompressedCertificateRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 25))
	for range 300 {
		m := randCompressedCertificate(r)
		b, err := m.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		p, err := ParseCompressedCertificate(b)
		if err != nil {
			t.Fatalf("%x: %v", b, err)
		}
		if !bytes.Equal(p.Raw, b) || !reflect.DeepEqual(withoutRaw(p), withoutRaw(m)) {
			t.Fatalf("parsed %+v, built %+v", p, m)
		}
		for i := range len(b) {
			if _, err := ParseCompressedCertificate(b[:i]); err == nil {
				t.Fatalf("prefix %x of %x parses", b[:i], b)
			}
			fixed := append([]byte(nil), b[:i]...)
			if i >= 4 {
				n := i - 4
				fixed[1], fixed[2], fixed[3] = byte(n>>16), byte(n>>8), byte(n)
				if _, err := ParseCompressedCertificate(fixed); err == nil {
					t.Fatalf("prefix %x (header fixed) of %x parses", fixed, b)
				}
			}
		}
		// Wire through the generic dispatcher and the reassembly buffer.
		var hb HandshakeBuffer
		hb.Write(b)
		typ, got, ok, err := hb.Next()
		if err != nil || !ok || typ != TypeCompressedCertificate || !bytes.Equal(got, b) {
			t.Fatalf("HandshakeBuffer: %d %x %v %v", typ, got, ok, err)
		}
		if v, err := Parse(b); err != nil || !reflect.DeepEqual(v, p) {
			t.Fatalf("Parse = %+v, %v", v, err)
		}
	}
}

func TestCompressedCertificateRejects(t *testing.T) {
	msg := func(body ...byte) []byte {
		return append([]byte{TypeCompressedCertificate, 0, byte(len(body) >> 8), byte(len(body))}, body...)
	}
	for _, tc := range []struct {
		name string
		msg  []byte
		want alert.Alert
	}{
		{"empty compressed data", msg(0, 1, 0, 0, 9, 0, 0, 0), alert.DecodeError},
		{"zero uncompressed_length", msg(0, 1, 0, 0, 0, 0, 0, 1, 0xaa), alert.BadCertificate},
		{"trailing byte", msg(0, 1, 0, 0, 9, 0, 0, 1, 0xaa, 0), alert.DecodeError},
		{"length beyond the body", msg(0, 1, 0, 0, 9, 0, 0, 2, 0xaa), alert.DecodeError},
		{"wrong type", append([]byte{TypeCertificate}, msg(0, 1, 0, 0, 9, 0, 0, 1, 0xaa)[1:]...), alert.UnexpectedMessage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseCompressedCertificate(tc.msg)
			if m != nil {
				t.Fatalf("parsed %+v", m)
			}
			wantAlert(t, err, tc.want)
		})
	}
}

func TestCompressCertificateExtension(t *testing.T) {
	for _, algs := range [][]uint16{{1}, {2, 1, 3}, {0xffff}} {
		e, err := CompressCertificateExtension(algs)
		if err != nil {
			t.Fatal(err)
		}
		if e.Type != ExtCompressCertificate {
			t.Fatalf("type %d", e.Type)
		}
		got, err := FindCompressCertificate([]Extension{{Type: 0x1234}, e})
		if err != nil || !reflect.DeepEqual(got, algs) {
			t.Fatalf("read back %v, %v; want %v", got, err, algs)
		}
	}
	if _, err := CompressCertificateExtension(nil); err == nil {
		t.Fatal("an empty list was built")
	}
	if got, err := FindCompressCertificate([]Extension{{Type: 0x1234}}); got != nil || err != nil {
		t.Fatalf("absent extension read as %v, %v", got, err)
	}
	for _, tc := range []struct {
		name string
		data []byte
		want alert.Alert
	}{
		{"no data", nil, alert.DecodeError},
		{"empty list", []byte{0}, alert.DecodeError},
		{"odd length", []byte{3, 0, 1, 0}, alert.DecodeError},
		{"length beyond data", []byte{4, 0, 1}, alert.DecodeError},
		{"trailing byte", []byte{2, 0, 1, 0}, alert.DecodeError},
		{"duplicate algorithm", []byte{4, 0, 2, 0, 2}, alert.IllegalParameter},
	} {
		t.Run(tc.name, func(t *testing.T) {
			algs, err := ReadCompressCertificate(tc.data)
			if algs != nil {
				t.Fatalf("read %v", algs)
			}
			wantAlert(t, err, tc.want)
		})
	}
}

// TestCompressCertificatePlacement: compress_certificate belongs in
// ClientHello and CertificateRequest only (RFC 8879, Section 3); twice in
// one message is an illegal_parameter (RFC 8446, Section 4.2).
func TestCompressCertificatePlacement(t *testing.T) {
	ext, err := CompressCertificateExtension([]uint16{2})
	if err != nil {
		t.Fatal(err)
	}
	ch := &ClientHello{CipherSuites: []uint16{0x1301}, SupportedVersions: []uint16{VersionTLS13}, Extra: []Extension{ext}}
	b, err := ch.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParseClientHello(b)
	if err != nil {
		t.Fatal(err)
	}
	if algs, err := FindCompressCertificate(p.Extra); err != nil || !reflect.DeepEqual(algs, []uint16{2}) {
		t.Fatalf("ClientHello: %v, %v", algs, err)
	}
	cr := &CertificateRequest{SignatureAlgorithms: []uint16{0x0403}, Extra: []Extension{ext}}
	if b, err = cr.Marshal(); err != nil {
		t.Fatal(err)
	}
	pcr, err := ParseCertificateRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	if algs, err := FindCompressCertificate(pcr.Extra); err != nil || !reflect.DeepEqual(algs, []uint16{2}) {
		t.Fatalf("CertificateRequest: %v, %v", algs, err)
	}

	ch.Extra = []Extension{ext, ext}
	if b, err = ch.Marshal(); err != nil {
		t.Fatal(err)
	}
	_, err = ParseClientHello(b)
	wantAlert(t, err, alert.IllegalParameter)

	ee := &EncryptedExtensions{Extra: []Extension{ext}}
	if b, err = ee.Marshal(); err != nil {
		t.Fatal(err)
	}
	_, err = ParseEncryptedExtensions(b)
	wantAlert(t, err, alert.IllegalParameter)
}

// FuzzParseCompressedCertificate: whatever parses re-marshals to the same
// bytes and value; failures are *alert.Error.
func FuzzParseCompressedCertificate(f *testing.F) {
	r := rand.New(rand.NewPCG(8879, 4))
	for range 8 {
		b, err := randCompressedCertificate(r).Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkReparse(t, data, func(b []byte) (any, error) { return asAny(ParseCompressedCertificate(b)) })
	})
}

// FuzzReadCompressCertificate: a list that reads builds back to the same
// extension data.
func FuzzReadCompressCertificate(f *testing.F) {
	f.Add([]byte{2, 0, 2})
	f.Add([]byte{6, 0, 1, 0, 2, 0, 3})
	f.Add([]byte{4, 0, 2, 0, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		algs, err := ReadCompressCertificate(data)
		if err != nil {
			if algs != nil {
				t.Fatalf("%v with error %v", algs, err)
			}
			if _, ok := err.(*alert.Error); !ok {
				t.Fatalf("error %v is not a *wire.Error", err)
			}
			return
		}
		e, err := CompressCertificateExtension(algs)
		if err != nil {
			t.Fatalf("%v read but does not build: %v", algs, err)
		}
		if !bytes.Equal(e.Data, data) {
			t.Fatalf("rebuilt %x from %x", e.Data, data)
		}
	})
}
