package wire

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/ztls-project/ztls/tls13/internal/alert"
)

func TestHandshakeBufferSplits(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	var stream []byte
	var want [][]byte
	for range 50 {
		g := generators[r.IntN(len(generators))]
		b, err := g.gen(r).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		stream = append(stream, b...)
		want = append(want, b)
	}
	for trial := range 50 {
		var hb HandshakeBuffer
		var got [][]byte
		for rest := stream; len(rest) > 0; {
			n := 1 + r.IntN(min(len(rest), 1+trial*20))
			hb.Write(rest[:n])
			rest = rest[n:]
			for {
				typ, msg, ok, err := hb.Next()
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					break
				}
				if typ != msg[0] {
					t.Fatalf("type %d for %x", typ, msg[:4])
				}
				got = append(got, msg)
			}
		}
		if len(got) != len(want) || hb.Len() != 0 {
			t.Fatalf("trial %d: %d of %d messages, %d bytes left", trial, len(got), len(want), hb.Len())
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("trial %d: message %d differs", trial, i)
			}
		}
	}
}

func TestHandshakeBufferCopies(t *testing.T) {
	var hb HandshakeBuffer
	rec := []byte{TypeFinished, 0, 0, 2, 0xaa, 0xbb, TypeFinished, 0, 0}
	hb.Write(rec)
	_, msg, ok, err := hb.Next()
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if hb.Len() != 3 {
		t.Fatalf("Len = %d, want 3", hb.Len())
	}
	// Neither overwriting the record nor feeding more bytes changes msg.
	for i := range rec {
		rec[i] = 0
	}
	hb.Write([]byte{1, 0xcc})
	if !bytes.Equal(msg, []byte{TypeFinished, 0, 0, 2, 0xaa, 0xbb}) {
		t.Fatalf("msg changed to %x", msg)
	}
	_, msg2, ok, err := hb.Next()
	if err != nil || !ok || !bytes.Equal(msg2, []byte{TypeFinished, 0, 0, 1, 0xcc}) {
		t.Fatalf("second message %x %v %v", msg2, ok, err)
	}
	msg2[4] = 0
	if !bytes.Equal(msg, []byte{TypeFinished, 0, 0, 2, 0xaa, 0xbb}) {
		t.Fatal("messages share memory")
	}
	if _, _, ok, err := hb.Next(); ok || err != nil || hb.Len() != 0 {
		t.Fatalf("empty buffer: ok=%v err=%v len=%d", ok, err, hb.Len())
	}
}

func TestHandshakeBufferLimits(t *testing.T) {
	// Default limit: 2^17 bytes of body.
	var hb HandshakeBuffer
	hb.Write([]byte{TypeCertificate, 0x02, 0x00, 0x00})
	if _, _, ok, err := hb.Next(); ok || err != nil {
		t.Fatalf("message at the limit: ok=%v err=%v (want: waiting for more)", ok, err)
	}
	hb = HandshakeBuffer{}
	hb.Write([]byte{TypeCertificate, 0x02, 0x00, 0x01})
	_, _, _, err := hb.Next()
	wantAlert(t, err, alert.DecodeError)
	// The error is sticky and later bytes are dropped.
	hb.Write([]byte{1, 2, 3})
	_, _, _, err2 := hb.Next()
	if err2 != err {
		t.Fatalf("second Next = %v, want the same error", err2)
	}

	// A larger Max admits a large Certificate.
	big := mustMarshal(t, &Certificate{Entries: []CertificateEntry{{Data: make([]byte, 300000)}}})
	hb = HandshakeBuffer{Max: 1 << 20}
	hb.Write(big)
	if _, msg, ok, err := hb.Next(); err != nil || !ok || !bytes.Equal(msg, big) {
		t.Fatalf("big certificate: ok=%v err=%v", ok, err)
	}
	// A small Max rejects as soon as the header is in.
	hb = HandshakeBuffer{Max: 10}
	hb.Write([]byte{TypeFinished, 0, 0, 11})
	_, _, _, err = hb.Next()
	wantAlert(t, err, alert.DecodeError)

	// Types TLS 1.3 never sends: unexpected_message, before the body arrives.
	for _, typ := range []uint8{0, 3, 6, 12, TypeMessageHash} {
		hb = HandshakeBuffer{}
		hb.Write([]byte{typ, 0, 0})
		if _, _, ok, err := hb.Next(); ok || err != nil {
			t.Fatalf("type %d with partial header: ok=%v err=%v", typ, ok, err)
		}
		hb.Write([]byte{200})
		_, _, _, err := hb.Next()
		wantAlert(t, err, alert.UnexpectedMessage)
	}
}

func BenchmarkParseClientHello(b *testing.B) {
	msg := vec(b, rfc8448(b), "[4] client.hello")
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		if _, err := ParseClientHello(msg); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMarshalClientHello(b *testing.B) {
	m, err := ParseClientHello(vec(b, rfc8448(b), "[4] client.hello"))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := m.Marshal(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHandshakeBuffer(b *testing.B) {
	flight := vec(b, rfc8448(b), "[3] server.hs_flight.record.payload")
	b.SetBytes(int64(len(flight)))
	var hb HandshakeBuffer
	for b.Loop() {
		hb.Write(flight[:100])
		hb.Write(flight[100:])
		for {
			_, _, ok, err := hb.Next()
			if err != nil {
				b.Fatal(err)
			}
			if !ok {
				break
			}
		}
	}
}
