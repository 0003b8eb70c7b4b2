package record

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/ztls-project/ztls/tls13/internal/alert"
	"github.com/ztls-project/ztls/tls13/internal/rfc8448"
)

// rfc8448Records returns every record of the RFC 8448 traces, complete with
// header, for fuzz seeds.
func rfc8448Records(t testing.TB) [][]byte {
	var out [][]byte
	for flow, steps := range rfc8448Flows {
		for _, st := range steps {
			out = append(out, rfc8448.Must(t, flow[:2]+st.name+".record"))
		}
	}
	return out
}

// FuzzDeframer feeds arbitrary bytes, cut into chunks at sizes taken from
// the input, and checks that the Deframer returns exactly the records a
// one-shot parse of the stream finds, never panics and never holds more
// than it was given.
func FuzzDeframer(f *testing.F) {
	var all []byte
	for _, r := range rfc8448Records(f) {
		f.Add(r, uint16(7))
		all = append(all, r...)
	}
	f.Add(all, uint16(1))
	f.Add(all, uint16(1000))
	f.Add([]byte{23, 3, 3, 0x41, 0x00}, uint16(2))
	f.Add([]byte{22, 3, 3, 0x40, 0x01}, uint16(3))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"), uint16(4))
	f.Add(all, uint16(0x8000|13))
	f.Fuzz(func(t *testing.T, stream []byte, seed uint16) {
		var d Deframer
		var got []byte
		var gotErr error
		step := int(seed%97) + 1
		for off := 0; off < len(stream) && gotErr == nil; off += step {
			d.Write(stream[off:min(off+step, len(stream))])
			for {
				typ, p, ok, err := d.Next()
				if err != nil {
					gotErr = err
					break
				}
				if !ok {
					break
				}
				if len(p) > MaxCiphertext {
					t.Fatalf("payload of %d bytes", len(p))
				}
				got = append(got, byte(typ), byte(len(p)>>8), byte(len(p)))
				got = append(got, p...)
			}
			if d.Buffered() > len(stream) {
				t.Fatal("buffered more than written")
			}
			if gotErr == nil && d.Buffered() > 0 && d.Missing() <= 0 {
				t.Fatalf("%d bytes of an incomplete record buffered, Missing %d", d.Buffered(), d.Missing())
			}
			if seed&0x8000 != 0 { // what a reader waiting for a record's rest does
				d.Fit(d.Missing())
			}
		}
		// Reference: the same stream parsed in one piece.
		var want []byte
		var wantErr error
		var ref Deframer
		ref.Write(stream)
		for {
			typ, p, ok, err := ref.Next()
			if err != nil {
				wantErr = err
				break
			}
			if !ok {
				break
			}
			want = append(want, byte(typ), byte(len(p)>>8), byte(len(p)))
			want = append(want, p...)
		}
		if !bytes.Equal(got, want) || (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("chunked parse differs from one-shot parse: %v vs %v", gotErr, wantErr)
		}
		if gotErr != nil && alertOf(gotErr) == 0 {
			t.Fatalf("error without alert: %v", gotErr)
		}
	})
}

// FuzzOpen decrypts arbitrary payloads under RFC 8448's client handshake
// key: anything but a genuine record must fail with an alert, never panic.
// The seeds include the genuine record so the fuzzer can mutate it.
func FuzzOpen(f *testing.F) {
	for _, r := range rfc8448Records(f) {
		f.Add(r[HeaderLen:], uint64(0), uint16(0))
	}
	f.Add([]byte{}, uint64(0), uint16(0))
	f.Add(make([]byte, 16), uint64(1), uint16(64))
	f.Add(make([]byte, MaxCiphertext+1), uint64(0), uint16(0))
	secret := rfc8448.Must(f, "3/client.hs_traffic_secret")
	genuine := rfc8448.Must(f, "3/client.finished.record")[HeaderLen:]
	f.Fuzz(func(t *testing.T, payload []byte, seq uint64, limit uint16) {
		h := mustHalfConn(t, aes128, secret, seq)
		isGenuine := seq == 0 && bytes.Equal(payload, genuine)
		typ, plain, err := h.Open(bytes.Clone(payload), int(limit))
		if err != nil {
			if alertOf(err) == 0 {
				t.Fatalf("error without alert: %v", err)
			}
			if h.Seq() != seq && alertOf(err) == alert.BadRecordMAC {
				t.Fatal("failed authentication advanced the sequence number")
			}
			// The genuine record holds a 36-byte Finished: it fails only
			// under a smaller limit, and then with record_overflow.
			small := limit > 0 && limit < 36
			if isGenuine && !(small && alertOf(err) == alert.RecordOverflow) {
				t.Fatalf("genuine record rejected: %v", err)
			}
			return
		}
		if !isGenuine {
			t.Fatalf("forged record accepted: %v %x", typ, plain)
		}
		if typ != TypeHandshake || binary.BigEndian.Uint16(plain[2:4]) != 32 {
			t.Fatalf("genuine record decrypted to %v %x", typ, plain)
		}
	})
}
