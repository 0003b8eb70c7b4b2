package wire

import (
	"bytes"
	"errors"
	"math/rand"
	"testing"
	"testing/quick"
)

func TestDatagramRoundTrip(t *testing.T) {
	f := func(typ bool, id ConnID, flight []byte, off uint16, pad bool) bool {
		if len(flight) == 0 {
			flight = []byte{1}
		}
		o := int(off) % len(flight)
		end := min(len(flight), o+MaxFragment)
		d := Datagram{Type: TypeResponse, ID: id, FlightLength: len(flight), Offset: o, Fragment: flight[o:end]}
		padTo := 0
		if typ {
			d.Type = TypeRequest
			if pad {
				padTo = MaxDatagram
			}
		}
		b, err := AppendDatagram(nil, d, padTo)
		if err != nil {
			t.Log(err)
			return false
		}
		if padTo > 0 && len(b) != MaxDatagram {
			return false
		}
		got, err := ParseDatagram(b)
		if err != nil {
			t.Log(err)
			return false
		}
		if got.Type != d.Type || got.ID != d.ID || got.FlightLength != d.FlightLength || got.Offset != d.Offset || !bytes.Equal(got.Fragment, d.Fragment) {
			return false
		}
		// No truncated prefix of a response parses (requests may lose padding).
		if d.Type == TypeResponse {
			for i := 0; i < len(b); i++ {
				if _, err := ParseDatagram(b[:i]); err == nil {
					t.Logf("prefix %d parsed", i)
					return false
				}
			}
		}
		return true
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 200}); err != nil {
		t.Fatal(err)
	}
}

func TestParseDatagramErrors(t *testing.T) {
	id := ConnID{1, 2, 3}
	good, _ := AppendDatagram(nil, Datagram{Type: TypeRequest, ID: id, FlightLength: 10, Offset: 2, Fragment: []byte("abc")}, 100)
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrShortDatagram},
		{"short", good[:HeaderLen-1], ErrShortDatagram},
		{"type", mut(func(b []byte) []byte { b[0] = 9; return b }), ErrBadType},
		{"fragment past flight", mut(func(b []byte) []byte { b[1+IDLen+2] = 4; return b }), ErrBadFragment},
		{"zero flight", mut(func(b []byte) []byte { b[1+IDLen+2] = 0; return b }), ErrBadFragment},
		{"length past datagram", mut(func(b []byte) []byte { b[1+IDLen+6] = 0xff; return b }), ErrBadFragment},
		{"padding", mut(func(b []byte) []byte { b[len(b)-1] = 1; return b }), ErrBadPadding},
		{"too long", make([]byte, MaxDatagram+1), ErrTooLong},
		{"response with trailing", mut(func(b []byte) []byte { b[0] = TypeResponse; return b }), ErrTrailing},
		{"padding request at offset", mut(func(b []byte) []byte { b[1+IDLen+7] = 0; return b[:HeaderLen] }), ErrBadFragment},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseDatagram(tc.b); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := ParseDatagram(good); err != nil {
		t.Fatal(err)
	}
}

func TestFragmentAndReassemble(t *testing.T) {
	id := ConnID{7}
	flight := make([]byte, 5000)
	rand.New(rand.NewSource(1)).Read(flight)
	dgrams, err := Fragment(TypeResponse, id, flight)
	if err != nil {
		t.Fatal(err)
	}
	if len(dgrams) != DatagramsFor(len(flight)) || len(dgrams) != 5 {
		t.Fatalf("%d datagrams", len(dgrams))
	}
	// Reverse order with a duplicate.
	var r Reassembler
	order := []int{4, 3, 3, 2, 1, 0}
	for i, k := range order {
		d, err := ParseDatagram(dgrams[k])
		if err != nil || len(dgrams[k]) > MaxDatagram {
			t.Fatal(err)
		}
		if err := r.Add(d.FlightLength, d.Offset, d.Fragment); err != nil {
			t.Fatal(err)
		}
		if r.Complete() != (i == len(order)-1) {
			t.Fatalf("complete after %d: %v", i, r.Complete())
		}
	}
	if !bytes.Equal(r.Flight(), flight) {
		t.Fatal("flight differs")
	}
	req, _ := Fragment(TypeRequest, id, flight[:10])
	if len(req) != 1 || len(req[0]) != MaxDatagram {
		t.Fatal("request not padded to 1200 bytes")
	}
	if p := PaddingRequest(id, 10); len(p) != MaxDatagram {
		t.Fatal("padding request size")
	} else if d, err := ParseDatagram(p); err != nil || len(d.Fragment) != 0 || d.FlightLength != 10 {
		t.Fatal("padding request does not parse", err)
	}
}

func TestReassemblerRejects(t *testing.T) {
	var r Reassembler
	r.Max = 100
	if err := r.Add(101, 0, []byte{1}); !errors.Is(err, ErrFlightTooLong) {
		t.Fatal(err)
	}
	if err := r.Add(10, 0, []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if err := r.Add(11, 3, []byte{4}); !errors.Is(err, ErrLengthChanged) {
		t.Fatal(err)
	}
	if err := r.Add(10, 1, []byte{9}); !errors.Is(err, ErrConflict) {
		t.Fatal(err)
	}
	if err := r.Add(10, 1, []byte{2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	if r.Received() != 4 || r.Complete() {
		t.Fatal("received", r.Received())
	}
	var h Reassembler
	h.Max = 1000
	var err error
	for i := 0; i < 200 && err == nil; i++ {
		err = h.Add(1000, i*4, []byte{1})
	}
	if !errors.Is(err, ErrTooFragmented) {
		t.Fatal("holes not bounded:", err)
	}
}

func TestLinkRecord(t *testing.T) {
	id := ConnID{9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 11, 12}
	b := AppendLink(nil, id)
	if len(b) != LinkLen {
		t.Fatal(len(b))
	}
	got, err := ParseLink(append(b, 0x16, 3, 1))
	if err != nil || got != id {
		t.Fatal(got, err)
	}
	for i := 0; i < len(b); i++ {
		if _, err := ParseLink(b[:i]); err == nil {
			t.Fatalf("prefix %d parsed", i)
		}
	}
	if _, err := ParseLink([]byte{0x16, 3, 1, 0, 5}); !errors.Is(err, ErrNotLink) {
		t.Fatal(err)
	}
	bad := append([]byte(nil), b...)
	bad[5] = 2
	if _, err := ParseLink(bad); !errors.Is(err, ErrLinkVersion) {
		t.Fatal(err)
	}
	bad[5], bad[4] = 1, 14
	if _, err := ParseLink(bad); !errors.Is(err, ErrBadLink) {
		t.Fatal(err)
	}
}

func FuzzParseDatagram(f *testing.F) {
	id := ConnID{1}
	for _, d := range []Datagram{
		{Type: TypeRequest, ID: id, FlightLength: 5, Fragment: []byte("hello")},
		{Type: TypeResponse, ID: id, FlightLength: 3000, Offset: 1179, Fragment: make([]byte, 1179)},
		{Type: TypeRequest, ID: id, FlightLength: 300},
	} {
		b, _ := AppendDatagram(nil, d, 0)
		f.Add(b)
		if d.Type == TypeRequest {
			b, _ = AppendDatagram(nil, d, MaxDatagram)
			f.Add(b)
		}
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseDatagram(b)
		if err != nil {
			return
		}
		padTo := 0
		if d.Type == TypeRequest {
			padTo = len(b)
		}
		again, err := AppendDatagram(nil, d, padTo)
		if err != nil {
			t.Fatalf("parsed datagram does not re-encode: %v", err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs")
		}
	})
}

func FuzzParseLink(f *testing.F) {
	f.Add(AppendLink(nil, ConnID{1, 2}))
	f.Add([]byte{0x16, 3, 1, 0, 100})
	f.Add([]byte{LinkContentType})
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := ParseLink(b)
		if err != nil {
			return
		}
		if !bytes.Equal(AppendLink(nil, id), b[:LinkLen]) {
			t.Fatal("link record does not re-encode")
		}
	})
}

// FuzzReassembler feeds fragments (offset, length pairs over a fixed
// flight, plus stray lengths and conflicting bytes) and checks the
// invariants: no panic, Received never exceeds the flight, a complete
// flight equals the original.
func FuzzReassembler(f *testing.F) {
	f.Add([]byte{0, 10, 10, 10, 20, 10}, uint16(30))
	f.Add([]byte{5, 5, 0, 5, 0, 30}, uint16(30))
	f.Add([]byte{255, 1, 0, 255}, uint16(300))
	f.Fuzz(func(t *testing.T, ops []byte, total uint16) {
		n := int(total)%2000 + 1
		flight := make([]byte, n)
		for i := range flight {
			flight[i] = byte(i * 7)
		}
		r := Reassembler{Max: 1500}
		lied := false
		for i := 0; i+1 < len(ops); i += 2 {
			off, ln := int(ops[i])*8, int(ops[i+1])*8
			if off > n {
				off = n
			}
			end := min(n, off+ln)
			frag := flight[off:end]
			lie := ops[i]&1 == 1 && len(frag) > 0
			if lie {
				frag = append([]byte(nil), frag...)
				frag[0] ^= 0xff
			}
			if r.Add(n, off, frag) == nil && lie {
				lied = true // accepted: nothing held contradicted it
			}
			if r.Received() > n {
				t.Fatal("received more than the flight")
			}
		}
		if r.Complete() && !lied && !bytes.Equal(r.Flight(), flight) {
			t.Fatal("complete flight differs from what was sent")
		}
	})
}
