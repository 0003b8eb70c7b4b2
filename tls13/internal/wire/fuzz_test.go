package wire

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"

	"golang.org/x/crypto/cryptobyte"

	"github.com/ztls-project/ztls/tls13/internal/alert"
)

// addSeeds seeds a fuzz target with the RFC 8448 messages and random
// messages of every type.
func addSeeds(f *testing.F) {
	v := rfc8448(f)
	for _, k := range rfcMessages {
		f.Add(vec(f, v, k))
	}
	r := rand.New(rand.NewPCG(11, 11))
	for _, g := range generators {
		for range 4 {
			b, err := g.gen(r).Marshal()
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
}

// checkReparse parses data; whatever parses must keep data as Raw,
// re-marshal, and re-parse to the same value, and marshalling is stable.
// Failures must be *alert.Error with a nil message.
func checkReparse(t *testing.T, data []byte, parse func([]byte) (any, error)) {
	m, err := parse(data)
	if err != nil {
		var we *alert.Error
		if !errors.As(err, &we) {
			t.Fatalf("error %v is not a *wire.Error", err)
		}
		if m != nil {
			t.Fatalf("parse returned %+v with error %v", m, err)
		}
		return
	}
	if raw := reflect.ValueOf(m).Elem().FieldByName("Raw").Bytes(); !bytes.Equal(raw, data) {
		t.Fatalf("Raw = %x, input %x", raw, data)
	}
	b, err := m.(message).Marshal()
	if err != nil {
		t.Fatalf("parsed %+v but Marshal fails: %v", m, err)
	}
	m2, err := parse(b)
	if err != nil {
		t.Fatalf("re-marshalled %x does not parse: %v", b, err)
	}
	if !reflect.DeepEqual(withoutRaw(m), withoutRaw(m2)) {
		t.Fatalf("re-parse differs\nfirst  %+v\nsecond %+v", m, m2)
	}
	b2, err := m2.(message).Marshal()
	if err != nil || !bytes.Equal(b, b2) {
		t.Fatalf("second Marshal = %x, %v; first %x", b2, err, b)
	}
}

func fuzzParser(f *testing.F, parse func([]byte) (any, error)) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		checkReparse(t, data, parse)
	})
}

func FuzzParseClientHello(f *testing.F) {
	fuzzParser(f, func(b []byte) (any, error) { return asAny(ParseClientHello(b)) })
}

// FuzzParseClientHelloAtCodepoint: the hellos with the ztls extension
// configured at another codepoint must parse, marshal and reparse alike.
func FuzzParseClientHelloAtCodepoint(f *testing.F) {
	fuzzParser(f, func(b []byte) (any, error) { return asAny(ParseClientHelloZTLS(b, 0xfe77)) })
}

func FuzzParseServerHelloAtCodepoint(f *testing.F) {
	fuzzParser(f, func(b []byte) (any, error) { return asAny(ParseServerHelloZTLS(b, 0xfe77)) })
}

func FuzzParseServerHello(f *testing.F) {
	fuzzParser(f, func(b []byte) (any, error) { return asAny(ParseServerHello(b)) })
}

func FuzzParseEncryptedExtensions(f *testing.F) {
	fuzzParser(f, func(b []byte) (any, error) { return asAny(ParseEncryptedExtensions(b)) })
}

func FuzzParseCertificate(f *testing.F) {
	fuzzParser(f, func(b []byte) (any, error) { return asAny(ParseCertificate(b)) })
}

func FuzzParseCertificateRequest(f *testing.F) {
	fuzzParser(f, func(b []byte) (any, error) { return asAny(ParseCertificateRequest(b)) })
}

func FuzzParseCertificateVerify(f *testing.F) {
	fuzzParser(f, func(b []byte) (any, error) { return asAny(ParseCertificateVerify(b)) })
}

func FuzzParseFinished(f *testing.F) {
	fuzzParser(f, func(b []byte) (any, error) { return asAny(ParseFinished(b)) })
}

func FuzzParseNewSessionTicket(f *testing.F) {
	fuzzParser(f, func(b []byte) (any, error) { return asAny(ParseNewSessionTicket(b)) })
}

func FuzzParseKeyUpdate(f *testing.F) {
	fuzzParser(f, func(b []byte) (any, error) { return asAny(ParseKeyUpdate(b)) })
}

func FuzzParseEndOfEarlyData(f *testing.F) {
	fuzzParser(f, func(b []byte) (any, error) { return asAny(ParseEndOfEarlyData(b)) })
}

// FuzzParse drives the dispatcher.
func FuzzParse(f *testing.F) {
	fuzzParser(f, Parse)
}

// FuzzHandshakeBuffer feeds a byte stream in chunks chosen by cuts, with a
// limit chosen by max. However the stream is cut, the buffer must return
// the same messages and the same error as when it is fed whole, the
// messages must be the stream's leading bytes, and each must survive the
// parse/re-marshal check.
func FuzzHandshakeBuffer(f *testing.F) {
	v := rfc8448(f)
	f.Add(vec(f, v, "[3] server.hs_flight.record.payload"), []byte{1, 7, 200}, uint16(0))
	f.Add(vec(f, v, "[4] server.hs_flight.record.payload"), []byte{3}, uint16(40))
	f.Add(append(vec(f, v, "[3] client.hello"), vec(f, v, "[3] server.hello")...), []byte{}, uint16(1000))
	f.Add([]byte{TypeFinished, 0, 0, 1, 0, 99, 0, 0, 0}, []byte{2, 2}, uint16(0))
	f.Fuzz(func(t *testing.T, stream, cuts []byte, max uint16) {
		run := func(chunks [][]byte) (msgs [][]byte, err error) {
			hb := HandshakeBuffer{Max: int(max)}
			fed := 0
			for _, c := range chunks {
				hb.Write(c)
				fed += len(c)
				for {
					typ, msg, ok, e := hb.Next()
					if e != nil {
						var we *alert.Error
						if !errors.As(e, &we) {
							t.Fatalf("error %v is not a *wire.Error", e)
						}
						if ok || msg != nil {
							t.Fatal("Next returned a message with its error")
						}
						return msgs, e
					}
					if !ok {
						break
					}
					if typ != msg[0] {
						t.Fatalf("type %d for a message of type %d", typ, msg[0])
					}
					msgs = append(msgs, msg)
				}
				used := 0
				for _, m := range msgs {
					used += len(m)
				}
				if used+hb.Len() != fed {
					t.Fatalf("returned %d + buffered %d != fed %d", used, hb.Len(), fed)
				}
			}
			return msgs, nil
		}
		whole, wholeErr := run([][]byte{stream})
		var chunks [][]byte
		rest := stream
		for i := 0; len(rest) > 0; i++ {
			n := len(rest)
			if i < len(cuts) {
				n = min(n, int(cuts[i])+1)
			}
			chunks = append(chunks, rest[:n])
			rest = rest[n:]
		}
		split, splitErr := run(chunks)
		if !reflect.DeepEqual(whole, split) {
			t.Fatalf("split feeding returned %d messages, whole %d", len(split), len(whole))
		}
		if (wholeErr == nil) != (splitErr == nil) ||
			(wholeErr != nil && wholeErr.(*alert.Error).Alert != splitErr.(*alert.Error).Alert) {
			t.Fatalf("errors differ: whole %v, split %v", wholeErr, splitErr)
		}
		if !bytes.HasPrefix(stream, bytes.Join(whole, nil)) {
			t.Fatal("messages are not the stream's leading bytes")
		}
		for _, msg := range whole {
			checkReparse(t, msg, Parse)
		}
	})
}

// FuzzCheckRetryClientHello: for any two ClientHellos that parse, the
// retry check never panics, fails only with a *alert.Error, and accepts a
// ClientHello compared with itself.
func FuzzCheckRetryClientHello(f *testing.F) {
	r := rand.New(rand.NewPCG(12, 12))
	for range 4 {
		a, err := randClientHello(r).Marshal()
		if err != nil {
			f.Fatal(err)
		}
		ch := randClientHello(r)
		ch.Cookie = []byte("cookie")
		b, err := ch.Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(a, a)
		f.Add(a, b)
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		first, err1 := ParseClientHello(a)
		second, err2 := ParseClientHello(b)
		if err1 != nil || err2 != nil {
			return
		}
		if err := CheckRetryClientHello(first, first); err != nil {
			t.Fatalf("a ClientHello differs from itself: %v", err)
		}
		if err := CheckRetryClientHello(first, second); err != nil {
			var we *alert.Error
			if !errors.As(err, &we) || we.Alert != alert.IllegalParameter && we.Alert != alert.DecodeError {
				t.Fatalf("error %v", err)
			}
		}
	})
}

// FuzzZTLSKEM feeds arbitrary bodies to the ztls_kem (and ztls_bfe)
// codec (docs/ztls-spec.md, Sections 7.2 and 9.3): what parses is
// non-empty, writes back to the same bytes, and a failure is a
// decode_error.
func FuzzZTLSKEM(f *testing.F) {
	f.Add([]byte{0x04, 0x60})
	f.Add(append([]byte{0x04, 0x60}, make([]byte, 1120)...))
	f.Add([]byte{0x00, 0x00})
	f.Add([]byte{0x00, 0x01, 0x07, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := readOpaque16(cryptobyte.String(data), "ztls_kem kem_share")
		if err != nil {
			var ae *alert.Error
			if !errors.As(err, &ae) || ae.Alert != alert.DecodeError || v != nil {
				t.Fatalf("error %v (value %x), want a decode_error alone", err, v)
			}
			return
		}
		if len(v) == 0 {
			t.Fatal("empty kem_share parsed")
		}
		b := NewBuilder(nil)
		addOpaque16(v, "ztls_kem kem_share")(b)
		out, err := b.Bytes()
		if err != nil || !bytes.Equal(out, data) {
			t.Fatalf("re-encoded %x, %v; input %x", out, err, data)
		}
	})
}
