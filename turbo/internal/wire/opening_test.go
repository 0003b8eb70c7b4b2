package wire

import (
	"errors"
	"testing"
)

// testHello is a flight that passes CheckOpening once padded.
func testHello(size int) []byte {
	b := make([]byte, size)
	b[0], b[1], b[2] = recordHandshake, 3, 3
	b[3], b[4] = byte((size-5)>>8), byte(size-5)
	b[5] = handshakeHello
	b[6], b[7], b[8] = byte((size-9)>>16), byte((size-9)>>8), byte(size-9)
	b[9], b[10] = 3, 3
	return b
}

func TestCheckOpening(t *testing.T) {
	hello := testHello(300)
	long := testHello(3000)
	tests := []struct {
		name string
		d    Datagram
		pad  int
		want error
	}{
		{"padded ClientHello", Datagram{FlightLength: len(hello), Fragment: hello}, MaxDatagram, nil},
		{"first fragment of a long one", Datagram{FlightLength: len(long), Fragment: long[:MaxFragment]}, MaxDatagram, nil},
		{"unpadded", Datagram{FlightLength: len(hello), Fragment: hello}, 0, ErrNotPadded},
		{"short of 1200", Datagram{FlightLength: len(hello), Fragment: hello}, 1199, ErrNotPadded},
		{"no flight bytes", Datagram{FlightLength: 3000}, MaxDatagram, ErrNotOpening},
		{"middle fragment", Datagram{FlightLength: len(long), Offset: MaxFragment, Fragment: long[MaxFragment : 2*MaxFragment]}, MaxDatagram, ErrNotOpening},
		{"application data", Datagram{FlightLength: 300, Fragment: append([]byte{23}, hello[1:]...)}, MaxDatagram, ErrNotOpening},
		{"ServerHello", Datagram{FlightLength: 300, Fragment: append(append([]byte(nil), hello[:5]...), append([]byte{2}, hello[6:]...)...)}, MaxDatagram, ErrNotOpening},
		{"record past the flight", Datagram{FlightLength: 100, Fragment: hello[:100]}, MaxDatagram, ErrNotOpening},
		{"too short to be a ClientHello", Datagram{FlightLength: 20, Fragment: testHello(20)}, MaxDatagram, ErrNotOpening},
		{"SSL 3.0 legacy_version", Datagram{FlightLength: 300, Fragment: append(append([]byte(nil), hello[:9]...), append([]byte{3, 0}, hello[11:]...)...)}, MaxDatagram, ErrNotOpening},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.d.Type = TypeRequest
			b, err := AppendDatagram(nil, tt.d, tt.pad)
			if err != nil {
				t.Fatal(err)
			}
			d, err := ParseDatagram(b)
			if err != nil {
				t.Fatal(err)
			}
			if err := CheckOpening(d, len(b)); !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("CheckOpening: %v, want %v", err, tt.want)
			}
		})
	}
	// No truncation of a good opening request opens an entry.
	good, _ := AppendDatagram(nil, Datagram{Type: TypeRequest, FlightLength: len(hello), Fragment: hello}, MaxDatagram)
	for n := 0; n < len(good); n++ {
		if d, err := ParseDatagram(good[:n]); err == nil && CheckOpening(d, n) == nil {
			t.Fatalf("a %d-byte prefix opens an entry", n)
		}
	}
}

// FuzzCheckOpening: whatever the bytes, CheckOpening does not panic, and
// what it accepts is a 1200-byte request starting a ClientHello.
func FuzzCheckOpening(f *testing.F) {
	hello := testHello(300)
	good, _ := AppendDatagram(nil, Datagram{Type: TypeRequest, FlightLength: len(hello), Fragment: hello}, MaxDatagram)
	f.Add(good)
	f.Add(good[:100])
	f.Add(PaddingRequest(ConnID{}, 3000))
	long := testHello(3000)
	first, _ := AppendDatagram(nil, Datagram{Type: TypeRequest, FlightLength: len(long), Fragment: long[:MaxFragment]}, MaxDatagram)
	f.Add(first)
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseDatagram(b)
		if err != nil {
			return
		}
		if CheckOpening(d, len(b)) != nil {
			return
		}
		if len(b) != MaxDatagram || d.Type != TypeRequest || d.Offset != 0 || len(d.Fragment) < openingPrefixLength ||
			d.Fragment[0] != recordHandshake || d.Fragment[5] != handshakeHello {
			t.Fatalf("accepted %x", b)
		}
	})
}
