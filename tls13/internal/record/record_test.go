package record

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ztls-project/ztls/tls13/internal/alert"
	"github.com/ztls-project/ztls/tls13/internal/keyschedule"
	"github.com/ztls-project/ztls/tls13/internal/suite"
)

// pair returns a sealing and an opening HalfConn for the same secret.
func pair(t testing.TB, s *suite.Suite) (out, in *HalfConn) {
	t.Helper()
	secret := bytes.Repeat([]byte{0x5a}, s.Hash.Size())
	return mustHalfConn(t, s, secret, 0), mustHalfConn(t, s, secret, 0)
}

func allSuites() []*suite.Suite { return suite.All() }

func TestSealOpenAllSuites(t *testing.T) {
	for _, s := range allSuites() {
		t.Run(s.Name, func(t *testing.T) {
			out, in := pair(t, s)
			rng := rand.New(rand.NewPCG(1, 2))
			for i, n := range []int{0, 1, 2, 100, 1000, MaxPlaintext - 1, MaxPlaintext} {
				msg := make([]byte, n)
				for j := range msg {
					msg[j] = byte(rng.Uint32())
				}
				typ := []ContentType{TypeApplicationData, TypeHandshake, TypeAlert}[i%3]
				rec, err := out.Seal(nil, typ, msg, 0)
				if err != nil {
					t.Fatal(err)
				}
				if len(rec) != HeaderLen+n+1+16 || rec[0] != 23 || rec[1] != 3 || rec[2] != 3 ||
					int(rec[3])<<8|int(rec[4]) != len(rec)-HeaderLen {
					t.Fatalf("record header % x, length %d", rec[:HeaderLen], len(rec))
				}
				if n > 16 && bytes.Contains(rec, msg[:16]) {
					t.Fatal("plaintext visible in the record")
				}
				gotTyp, plain, err := in.Open(rec[HeaderLen:], MaxPlaintext)
				if err != nil || gotTyp != typ || !bytes.Equal(plain, msg) {
					t.Fatalf("Open(%d bytes) = %v, %d bytes, %v", n, gotTyp, len(plain), err)
				}
			}
			if out.Seq() != 7 || in.Seq() != 7 {
				t.Errorf("sequence numbers %d/%d, want 7", out.Seq(), in.Seq())
			}
			if out.Suite() != s || out.Overhead() != HeaderLen+1+16 {
				t.Errorf("Suite/Overhead wrong")
			}
		})
	}
}

// TestTrafficKeysPerSuite checks that each suite's HalfConn uses the key
// length and hash of its suite: a record sealed by a HalfConn must open
// with an AEAD built by hand from keyschedule.TrafficKeys.
func TestTrafficKeysPerSuite(t *testing.T) {
	for _, s := range allSuites() {
		secret := bytes.Repeat([]byte{7}, s.Hash.Size())
		key, iv := keyschedule.TrafficKeys(s.Hash, s.KeyLen, secret)
		if len(key) != s.KeyLen || len(iv) != 12 {
			t.Fatalf("%s: key %d iv %d bytes", s.Name, len(key), len(iv))
		}
		aead, err := s.NewAEAD(key)
		if err != nil {
			t.Fatal(err)
		}
		out := mustHalfConn(t, s, secret, 0)
		for seq := range uint64(3) {
			rec, err := out.Seal(nil, TypeHandshake, []byte("hello"), 2)
			if err != nil {
				t.Fatal(err)
			}
			nonce := bytes.Clone(iv)
			for i := range 8 {
				nonce[4+i] ^= byte(seq >> (56 - 8*i))
			}
			plain, err := aead.Open(nil, nonce, rec[HeaderLen:], rec[:HeaderLen])
			if err != nil {
				t.Fatalf("%s seq %d: %v", s.Name, seq, err)
			}
			if want := []byte("hello\x16\x00\x00"); !bytes.Equal(plain, want) {
				t.Fatalf("%s: inner plaintext %q, want %q", s.Name, plain, want)
			}
		}
		if !bytes.Equal(out.Secret(), secret) {
			t.Error("Secret() differs")
		}
	}
}

func TestNewHalfConnErrors(t *testing.T) {
	if _, err := NewHalfConn(nil, make([]byte, 32)); alertOf(err) != alert.InternalError {
		t.Errorf("nil suite: %v", err)
	}
	if _, err := NewHalfConn(aes128, make([]byte, 48)); alertOf(err) != alert.InternalError {
		t.Errorf("wrong secret length: %v", err)
	}
	aes256 := suite.Lookup(suite.TLS_AES_256_GCM_SHA384)
	if _, err := NewHalfConn(aes256, make([]byte, 32)); err == nil {
		t.Error("SHA-256 sized secret accepted for the SHA-384 suite")
	}
	secret := make([]byte, 32)
	h := mustHalfConn(t, aes128, secret, 0)
	secret[0] = 1
	if h.Secret()[0] != 0 {
		t.Error("NewHalfConn kept the caller's secret slice")
	}
}

// A handshake makes six to eight HalfConns, so NewHalfConn derives the
// key and IV on the stack and allocates the HalfConn with its keys at
// once: what remains is the AEAD's own state (AES-GCM: the block cipher
// and the GCM; ChaCha20-Poly1305: one) and the closure that hides the
// keys. A regression guard with a little slack, not an exact count.
func TestNewHalfConnAllocations(t *testing.T) {
	for _, s := range allSuites() {
		secret := make([]byte, s.Hash.Size())
		n := testing.AllocsPerRun(20, func() {
			if _, err := NewHalfConn(s, secret); err != nil {
				t.Fatal(err)
			}
		})
		if n > 5 {
			t.Errorf("%s: NewHalfConn made %v allocations, want at most 5", s.Name, n)
		}
	}
}

func TestPaddingStripped(t *testing.T) {
	for _, s := range allSuites() {
		out, in := pair(t, s)
		for _, pad := range []int{0, 1, 15, 255, 1000, MaxPlaintext - 5} {
			rec, err := out.Seal(nil, TypeApplicationData, []byte("abcde"), pad)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(rec) - HeaderLen - 16; got != 5+1+pad {
				t.Fatalf("padding %d: inner plaintext %d bytes", pad, got)
			}
			typ, plain, err := in.Open(rec[HeaderLen:], MaxPlaintext)
			if err != nil || typ != TypeApplicationData || string(plain) != "abcde" {
				t.Fatalf("padding %d: %v %q %v", pad, typ, plain, err)
			}
		}
		// Content ending in zero bytes keeps them: only bytes after the
		// type are padding.
		rec, _ := out.Seal(nil, TypeApplicationData, []byte{1, 0, 0}, 7)
		if _, plain, err := in.Open(rec[HeaderLen:], MaxPlaintext); err != nil || !bytes.Equal(plain, []byte{1, 0, 0}) {
			t.Fatalf("content with trailing zeros: %x %v", plain, err)
		}
		// Only padding, no content: an empty record of the type.
		rec, _ = out.Seal(nil, TypeApplicationData, nil, 10)
		if typ, plain, err := in.Open(rec[HeaderLen:], MaxPlaintext); err != nil || typ != TypeApplicationData || len(plain) != 0 {
			t.Fatalf("empty padded record: %v %x %v", typ, plain, err)
		}
	}
}

// sealRaw protects an arbitrary TLSInnerPlaintext, which Seal refuses to
// build, to test what Open does with it.
func sealRaw(t *testing.T, h *HalfConn, inner []byte) []byte {
	t.Helper()
	k := h.keys()
	clen := len(inner) + k.aead.Overhead()
	hdr := []byte{23, 3, 3, byte(clen >> 8), byte(clen)}
	ct := k.aead.Seal(nil, k.makeNonce(h.seq), inner, hdr)
	h.seq++
	return ct
}

func TestOpenErrors(t *testing.T) {
	for _, s := range allSuites() {
		out, in := pair(t, s)
		tests := []struct {
			name  string
			inner []byte
			max   int
			alert alert.Alert
		}{
			{"all zero", make([]byte, 20), 0, alert.UnexpectedMessage},
			{"empty inner", nil, 0, alert.UnexpectedMessage},
			{"protected CCS", []byte{1, 20}, 0, alert.UnexpectedMessage},
			{"unknown type", []byte{1, 99, 0}, 0, alert.UnexpectedMessage},
			{"over 2^14", append(make([]byte, MaxPlaintext+1), 23), 0, alert.RecordOverflow},
			{"padding over 2^14", append(append([]byte{1}, 23), make([]byte, MaxPlaintext)...), 0, alert.RecordOverflow},
			{"over record_size_limit", append(make([]byte, 64), 23), 63, alert.RecordOverflow},
			{"at record_size_limit", append(make([]byte, 63), 23), 63, 0},
			{"at 2^14", append(make([]byte, MaxPlaintext), 23), 0, 0},
		}
		for _, tt := range tests {
			ct := sealRaw(t, out, tt.inner)
			_, _, err := in.Open(ct, tt.max)
			if got := alertOf(err); got != tt.alert || (tt.alert == 0) != (err == nil) {
				t.Errorf("%s %s: err = %v, want alert %d", s.Name, tt.name, err, tt.alert)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "tls13: ") {
				t.Errorf("error %q lacks the tls13 prefix", err)
			}
			in.seq = out.seq // keep in step after records the test expects to fail
		}
		// Too short to hold a tag, and too long to be a record.
		for _, n := range []int{0, 1, 15, 16} {
			if _, _, err := in.Open(make([]byte, n), 0); alertOf(err) != alert.BadRecordMAC {
				t.Errorf("%d-byte payload: %v", n, err)
			}
		}
		if _, _, err := in.Open(make([]byte, MaxCiphertext+1), 0); alertOf(err) != alert.RecordOverflow {
			t.Errorf("oversized payload: %v", err)
		}
	}
}

func TestSealErrors(t *testing.T) {
	out, _ := pair(t, aes128)
	for _, tt := range []struct {
		typ ContentType
		n   int
		pad int
	}{
		{TypeChangeCipherSpec, 1, 0},
		{0, 1, 0},
		{99, 1, 0},
		{TypeApplicationData, MaxPlaintext + 1, 0},
		{TypeApplicationData, MaxPlaintext, 1},
		{TypeApplicationData, 1, MaxPlaintext},
		{TypeApplicationData, 1, -1},
		{TypeApplicationData, 1, math.MaxInt},
	} {
		dst := []byte("keep")
		got, err := out.Seal(dst, tt.typ, make([]byte, tt.n), tt.pad)
		if alertOf(err) != alert.InternalError || string(got) != "keep" {
			t.Errorf("Seal(%v, %d bytes, pad %d) = %d bytes, %v", tt.typ, tt.n, tt.pad, len(got), err)
		}
	}
	if out.Seq() != 0 {
		t.Error("failed Seal advanced the sequence number")
	}
}

func TestSequenceNumberWrap(t *testing.T) {
	out, in := pair(t, aes128)
	out.seq, in.seq = math.MaxUint64-1, math.MaxUint64-1
	rec, err := out.Seal(nil, TypeApplicationData, []byte("last"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, plain, err := in.Open(rec[HeaderLen:], 0); err != nil || string(plain) != "last" {
		t.Fatalf("last record: %q %v", plain, err)
	}
	if _, err := out.Seal(nil, TypeApplicationData, []byte("wrap"), 0); err == nil {
		t.Fatal("Seal wrapped the sequence number")
	}
	if out.Seq() != math.MaxUint64 {
		t.Fatal("sequence number moved")
	}
	if _, _, err := in.Open(rec[HeaderLen:], 0); err == nil {
		t.Fatal("Open wrapped the sequence number")
	}
}

func TestHalfConnDoesNotPrintKeys(t *testing.T) {
	secret := bytes.Repeat([]byte{0xee}, 32)
	h := mustHalfConn(t, aes128, secret, 3)
	type holder struct{ in *HalfConn }
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%d", "%q"} {
		for _, v := range []any{h, holder{h}, []*HalfConn{h}} {
			out := fmt.Sprintf(verb, v)
			if strings.Contains(out, "eeee") || strings.Contains(out, "238 238") || strings.Contains(out, "EEEE") {
				t.Errorf("Sprintf(%q) leaks the secret: %s", verb, out)
			}
		}
	}
	if got := h.String(); got != "record.HalfConn{TLS_AES_128_GCM_SHA256 seq=3}" {
		t.Errorf("String() = %q", got)
	}
}

func TestAppendPlain(t *testing.T) {
	got := AppendPlain([]byte{0xff}, TypeAlert, 0x0303, []byte{2, 40})
	if want := []byte{0xff, 21, 3, 3, 0, 2, 2, 40}; !bytes.Equal(got, want) {
		t.Errorf("alert = %x, want %x", got, want)
	}
	got = AppendPlain(nil, TypeChangeCipherSpec, 0x0303, []byte{1})
	if want := []byte{20, 3, 3, 0, 1, 1}; !bytes.Equal(got, want) {
		t.Errorf("CCS = %x", got)
	}
	if got := AppendPlain(nil, TypeHandshake, 0x0301, nil); !bytes.Equal(got, []byte{22, 3, 1, 0, 0}) {
		t.Errorf("empty = %x", got)
	}
	// A long handshake fragment is split into records of at most 2^14.
	msg := bytes.Repeat([]byte{9}, 2*MaxPlaintext+10)
	out := AppendPlain(nil, TypeHandshake, 0x0303, msg)
	var d Deframer
	d.Write(out)
	var joined []byte
	var sizes []int
	for {
		typ, p, ok, err := d.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if typ != TypeHandshake {
			t.Fatal(typ)
		}
		sizes = append(sizes, len(p))
		joined = append(joined, p...)
	}
	if !bytes.Equal(joined, msg) || fmt.Sprint(sizes) != "[16384 16384 10]" {
		t.Errorf("split into %v", sizes)
	}
}

func TestContentTypeString(t *testing.T) {
	if TypeHandshake.String() != "handshake" || ContentType(7).String() != "content_type(7)" {
		t.Error(TypeHandshake.String(), ContentType(7).String())
	}
}

// TestProtectsWith: a HalfConn matches only its own suite and secret, so the
// engine keeps it (and its sequence number) only when reinstalling that key.
func TestProtectsWith(t *testing.T) {
	aes128 := suite.Lookup(suite.TLS_AES_128_GCM_SHA256)
	chacha := suite.Lookup(suite.TLS_CHACHA20_POLY1305_SHA256)
	secret := bytes.Repeat([]byte{0x5a}, 32)
	h := mustHalfConn(t, aes128, secret, 0)
	other := bytes.Clone(secret)
	other[31] ^= 1
	var none *HalfConn
	for _, c := range []struct {
		name   string
		h      *HalfConn
		s      *suite.Suite
		secret []byte
		want   bool
	}{
		{"same suite and secret", h, aes128, bytes.Clone(secret), true},
		{"last secret bit differs", h, aes128, other, false},
		{"other suite, same secret", h, chacha, secret, false},
		{"secret prefix", h, aes128, secret[:31], false},
		{"empty secret", h, aes128, nil, false},
		{"no HalfConn yet", none, aes128, secret, false},
	} {
		if got := c.h.ProtectsWith(c.s, c.secret); got != c.want {
			t.Errorf("%s: ProtectsWith = %v, want %v", c.name, got, c.want)
		}
	}
	// Keeping the HalfConn keeps its sequence number: the next record does
	// not reuse the nonce of the first.
	if _, err := h.Seal(nil, TypeAlert, []byte{1, 0}, 0); err != nil {
		t.Fatal(err)
	}
	if !h.ProtectsWith(aes128, secret) || h.Seq() != 1 {
		t.Fatalf("after one record: ProtectsWith false or seq %d, want 1", h.Seq())
	}
}
