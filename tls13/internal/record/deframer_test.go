package record

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/ztls-project/ztls/tls13/internal/alert"
)

func TestDeframerSplits(t *testing.T) {
	var stream []byte
	var want [][]byte
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 50 {
		frag := make([]byte, rng.IntN(300))
		for j := range frag {
			frag[j] = byte(i)
		}
		typ := []ContentType{TypeHandshake, TypeApplicationData, TypeAlert, TypeChangeCipherSpec}[i%4]
		stream = AppendPlain(stream, typ, 0x0303, frag)
		want = append(want, append([]byte{byte(typ)}, frag...))
	}
	// A big protected-size record too.
	big := make([]byte, MaxCiphertext)
	stream = append(stream, 23, 3, 3, byte(MaxCiphertext>>8), byte(MaxCiphertext&0xff))
	stream = append(stream, big...)
	want = append(want, append([]byte{23}, big...))

	for trial := range 20 {
		var d Deframer
		var got [][]byte
		for off := 0; off < len(stream); {
			n := 1 + rng.IntN(700)
			if trial == 0 {
				n = 1
			}
			n = min(n, len(stream)-off)
			d.Write(stream[off : off+n])
			off += n
			for {
				typ, p, ok, err := d.Next()
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					break
				}
				got = append(got, append([]byte{byte(typ)}, p...))
			}
		}
		if len(got) != len(want) {
			t.Fatalf("trial %d: %d records, want %d", trial, len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("trial %d: record %d differs", trial, i)
			}
		}
		if d.Buffered() != 0 {
			t.Fatalf("%d bytes left", d.Buffered())
		}
	}
}

func TestDeframerIncomplete(t *testing.T) {
	var d Deframer
	d.Write([]byte{22, 3, 3, 0, 4, 1, 2})
	if _, _, ok, err := d.Next(); ok || err != nil {
		t.Fatalf("incomplete record returned: ok=%v err=%v", ok, err)
	}
	if d.Buffered() != 7 {
		t.Fatalf("Buffered = %d", d.Buffered())
	}
	d.Write([]byte{3, 4, 21})
	typ, p, ok, err := d.Next()
	if !ok || err != nil || typ != TypeHandshake || !bytes.Equal(p, []byte{1, 2, 3, 4}) {
		t.Fatalf("Next = %v %x %v %v", typ, p, ok, err)
	}
	if d.Buffered() != 1 {
		t.Fatalf("Buffered = %d", d.Buffered())
	}
	if _, _, ok, err := d.Next(); ok || err != nil {
		t.Fatal("partial header returned a record")
	}
	// A zero-length record is a record.
	d.Write([]byte{3, 3, 0, 0})
	if typ, p, ok, err := d.Next(); !ok || err != nil || typ != TypeAlert || len(p) != 0 {
		t.Fatalf("empty record: %v %x %v %v", typ, p, ok, err)
	}
	var empty Deframer
	if _, _, ok, err := empty.Next(); ok || err != nil {
		t.Fatal("empty deframer returned something")
	}
}

func TestDeframerErrors(t *testing.T) {
	tests := []struct {
		name      string
		in        []byte
		alert     alert.Alert
		protected bool // the reader has a key
	}{
		{"type 0", []byte{0}, alert.UnexpectedMessage, false},                              // RFC 8446, Section 5
		{"type 24 (heartbeat)", []byte{24, 3, 3, 0, 0}, alert.UnexpectedMessage, false},    // RFC 8446, Section 5
		{"type 0x80 (SSLv2)", []byte{0x80, 0x2e, 1, 3, 1}, alert.UnexpectedMessage, false}, // RFC 8446, Section 5
		{"HTTP", []byte("GET / HTTP/1.1\r\n"), alert.UnexpectedMessage, false},             // RFC 8446, Section 5
		// RFC 8446, Appendix D: a TLSCiphertext's version is validated.
		{"ciphertext major 2", []byte{23, 2}, alert.DecodeError, true},
		{"ciphertext 0x0301", []byte{23, 3, 1}, alert.DecodeError, true},
		{"ciphertext 0xfefd (DTLS)", []byte{23, 0xfe, 0xfd, 0, 1, 0}, alert.DecodeError, true},
		{"ciphertext over 2^14+256", []byte{23, 3, 3, 0x41, 0x01}, alert.RecordOverflow, false},
		{"length 0xffff", []byte{23, 3, 3, 0xff, 0xff}, alert.RecordOverflow, false},
		{"handshake over 2^14", []byte{22, 3, 3, 0x40, 0x01}, alert.RecordOverflow, false},
		{"alert over 2^14", []byte{21, 3, 1, 0x40, 0x01}, alert.RecordOverflow, false},
		{"CCS over 2^14", []byte{20, 3, 3, 0x41, 0x00}, alert.RecordOverflow, false},
	}
	for _, tt := range tests {
		d := Deframer{Protected: tt.protected}
		d.Write(tt.in)
		_, _, ok, err := d.Next()
		if ok || alertOf(err) != tt.alert {
			t.Errorf("%s: ok=%v err=%v, want alert %d", tt.name, ok, err, tt.alert)
			continue
		}
		// Sticky: more input is ignored, the error repeats.
		d.Write([]byte{22, 3, 3, 0, 0})
		if _, _, _, err2 := d.Next(); err2 != err || d.Buffered() != 0 {
			t.Errorf("%s: error not sticky (%v, %d buffered)", tt.name, err2, d.Buffered())
		}
	}
	// Accepted limits and versions: an unprotected record's
	// legacy_record_version is ignored (RFC 8446, Section 5.1), and before
	// any key an application_data record is unprotected too (Appendix D):
	// 17 03 01 00 00 is left to the caller, who refuses the record itself.
	for _, in := range [][]byte{
		{23, 3, 1, 0, 0},
		{23, 3, 1, 0, 5, 1, 2, 3, 4, 5},
		{23, 0xfe, 0xfd, 0, 0},
		{23, 3, 3, byte(MaxCiphertext >> 8), byte(MaxCiphertext & 0xff)},
		{22, 3, 3, 0x40, 0x00},
		{22, 3, 1, 0, 0},
		{22, 3, 0, 0, 0},
		{21, 3, 4, 0, 0},
		{22, 0, 0, 0, 0},
		{22, 2, 0, 0, 0},
		{21, 0xff, 0xff, 0, 0},
		{20, 0xfe, 0xfd, 0, 0},
	} {
		var d Deframer
		d.Write(in)
		if _, _, _, err := d.Next(); err != nil {
			t.Errorf("header % x rejected: %v", in, err)
		}
	}
}

// TestDeframerBounded checks that the buffer does not keep growing when the
// caller drains it after every Write, even when writes straddle records.
func TestDeframerBounded(t *testing.T) {
	rec := AppendPlain(nil, TypeHandshake, 0x0303, make([]byte, 1000))
	stream := bytes.Repeat(rec, 200)
	var d Deframer
	maxCap := 0
	for off := 0; off < len(stream); off += 777 {
		d.Write(stream[off:min(off+777, len(stream))])
		for {
			_, _, ok, err := d.Next()
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
		}
		maxCap = max(maxCap, cap(d.buf))
	}
	if maxCap > 4*len(rec) {
		t.Errorf("buffer grew to %d bytes for %d-byte records", maxCap, len(rec))
	}
}

// TestAllocations checks that steady-state Seal, Open and Deframer use do
// not allocate (an allocation count, not a timing).
func TestAllocations(t *testing.T) {
	for _, s := range allSuites() {
		out, in := pair(t, s)
		msg := make([]byte, 1000)
		buf := make([]byte, 0, 2*MaxCiphertext)
		var d Deframer
		// Warm up so the Deframer's buffer reaches its working size.
		for range 3 {
			rec, err := out.Seal(buf[:0], TypeApplicationData, msg, 16)
			if err != nil {
				t.Fatal(err)
			}
			d.Write(rec[:7])
			d.Write(rec[7:])
			_, p, _, _ := d.Next()
			if _, _, err := in.Open(p, MaxPlaintext); err != nil {
				t.Fatal(err)
			}
		}
		allocs := testing.AllocsPerRun(100, func() {
			rec, err := out.Seal(buf[:0], TypeApplicationData, msg, 16)
			if err != nil {
				t.Fatal(err)
			}
			// Split the record over two writes so compaction runs.
			d.Write(rec[:7])
			if _, _, ok, _ := d.Next(); ok {
				t.Fatal("partial record returned")
			}
			d.Write(rec[7:])
			typ, p, ok, err := d.Next()
			if !ok || err != nil || typ != TypeApplicationData {
				t.Fatal("record not deframed")
			}
			if _, _, err := in.Open(p, MaxPlaintext); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per Seal+Deframe+Open, want 0", s.Name, allocs)
		}
	}
}

// Reading into Space and committing is Write without the copy: the same
// records come out for any split, and a payload stays where it is until
// the next Write or Space, through later Next calls and a failure.
func TestDeframerSpaceCommit(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var stream []byte
	for i := range 40 {
		stream = AppendPlain(stream, TypeApplicationData, 0x0303, bytes.Repeat([]byte{byte(i + 1)}, rng.IntN(3000)))
	}
	for trial := range 10 {
		var viaWrite, viaSpace Deframer
		for off := 0; off < len(stream); {
			n := min(1+rng.IntN(5000), len(stream)-off)
			viaWrite.Write(stream[off : off+n])
			room := viaSpace.Space(n)
			if len(room) < n {
				t.Fatalf("Space(%d) gave %d bytes", n, len(room))
			}
			copy(room, stream[off:off+n])
			viaSpace.Commit(n)
			off += n
			var kept [][]byte
			var want [][]byte
			for {
				_, p, ok, err := viaSpace.Next()
				_, w, okw, _ := viaWrite.Next()
				if err != nil || ok != okw {
					t.Fatalf("trial %d: ok %v, Write's %v, err %v", trial, ok, okw, err)
				}
				if !ok {
					break
				}
				kept, want = append(kept, p), append(want, append([]byte(nil), w...))
			}
			for i := range kept {
				if !bytes.Equal(kept[i], want[i]) {
					t.Fatalf("trial %d: record %d changed before the next Space", trial, i)
				}
			}
		}
	}

	// A failure leaves the payloads already returned alone.
	var d Deframer
	rec := AppendPlain(nil, TypeApplicationData, 0x0303, []byte("kept"))
	d.Write(append(rec, 99, 3, 3))
	_, p, ok, _ := d.Next()
	if !ok {
		t.Fatal("no record")
	}
	if _, _, _, err := d.Next(); err == nil {
		t.Fatal("bad content type accepted")
	}
	if string(p) != "kept" {
		t.Fatalf("payload after the failure: %q", p)
	}
	if d.Space(10) != nil {
		t.Fatal("Space after a failure")
	}
}

// TestDeframerMissingFit: Missing counts what completes the record being
// received, and Fit moves a half record out of a large buffer into one
// that holds it and its rest, keeping the bytes and the records' order.
func TestDeframerMissingFit(t *testing.T) {
	rec := func(n int, fill byte) []byte {
		return append([]byte{byte(TypeApplicationData), 3, 3, byte(n >> 8), byte(n)}, bytes.Repeat([]byte{fill}, n)...)
	}
	var d Deframer
	if d.Missing() != 0 {
		t.Fatalf("empty: Missing %d", d.Missing())
	}
	d.Write(rec(100, 1)[:3])
	if got, want := d.Missing(), HeaderLen+MaxCiphertext-3; got != want {
		t.Fatalf("partial header: Missing %d, want %d", got, want)
	}
	d = Deframer{}
	first, second := rec(100, 1), rec(3000, 2)
	room := d.Space(64 << 10)
	n := copy(room, first)
	n += copy(room[n:], second[:1000])
	d.Commit(n)
	if _, p, ok, err := d.Next(); !ok || err != nil || len(p) != 100 {
		t.Fatalf("first record: %d bytes, %v, %v", len(p), ok, err)
	}
	if got, want := d.Missing(), len(second)-1000; got != want {
		t.Fatalf("half record: Missing %d, want %d", got, want)
	}
	d.Fit(d.Missing())
	if c := cap(d.buf); c != len(second) {
		t.Fatalf("after Fit the buffer holds %d bytes, want %d", c, len(second))
	}
	room = d.Space(d.Missing())
	d.Commit(copy(room, second[1000:]))
	typ, p, ok, err := d.Next()
	if !ok || err != nil || typ != TypeApplicationData || !bytes.Equal(p, second[HeaderLen:]) {
		t.Fatalf("second record after Fit: %v, %v, %d bytes", ok, err, len(p))
	}
	if d.Missing() != 0 {
		t.Fatalf("all read: Missing %d", d.Missing())
	}
	// A buffer already small enough is kept.
	d.Write(second[:10])
	before := cap(d.buf)
	d.Fit(d.Missing())
	if cap(d.buf) != before {
		t.Fatalf("Fit reallocated a buffer of %d for %d", before, d.Buffered()+d.Missing())
	}
}
