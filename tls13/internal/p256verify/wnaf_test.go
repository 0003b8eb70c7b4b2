package p256verify

import (
	"bytes"
	"math/big"
	"testing"
)

// FuzzWNAF holds wnaf to its definition for both widths the verification
// uses: every digit zero or odd with |d| < 2^(w-1), at most one non-zero
// digit in any w consecutive ones, and sum d_i 2^i = k (rebuilt with
// math/big).
func FuzzWNAF(f *testing.F) {
	for _, x := range fieldEdges() {
		f.Add(x)
	}
	f.Add(bytes.Repeat([]byte{0xff}, 32))
	f.Add(append(make([]byte, 31), 1))
	f.Add(append([]byte{0x80}, make([]byte, 31)...))
	f.Fuzz(func(t *testing.T, kb []byte) {
		if len(kb) < 32 {
			return
		}
		var k element
		for i := 0; i < 4; i++ { // big-endian, any 256-bit value
			for j := 0; j < 8; j++ {
				k[3-i] = k[3-i]<<8 | uint64(kb[8*i+j])
			}
		}
		want := new(big.Int).SetBytes(kb[:32])
		for _, w := range []uint{wG, wQ} {
			checkWNAF(t, wnaf(&k, w), w, want)
		}
	})
}

func checkWNAF(t *testing.T, digits [257]int8, w uint, want *big.Int) {
	t.Helper()
	sum, last := new(big.Int), -int(w)
	for i := len(digits) - 1; i >= 0; i-- {
		sum.Lsh(sum, 1)
		d := int64(digits[i])
		if d == 0 {
			continue
		}
		if d%2 == 0 || d >= 1<<(w-1) || d <= -(1<<(w-1)) {
			t.Fatalf("w=%d: digit %d at %d", w, d, i)
		}
		if last >= 0 && last-i < int(w) {
			t.Fatalf("w=%d: non-zero digits at %d and %d", w, i, last)
		}
		last = i
		sum.Add(sum, big.NewInt(d))
	}
	if sum.Cmp(want) != 0 {
		t.Fatalf("w=%d: digits sum to %x, want %x", w, sum, want)
	}
}
