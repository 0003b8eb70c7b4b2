package p256verify

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"math/big"
	"testing"

	"golang.org/x/crypto/cryptobyte"
	"golang.org/x/crypto/cryptobyte/asn1"
)

// FuzzVerify holds Verify to crypto/ecdsa.VerifyASN1: a key from the fuzzed
// private scalar, a signature by it over the fuzzed digest, then mauled as
// mode says (kept, a bit flipped, cut, extended, r or s replaced by an edge
// value or by the fuzzed bytes, r and s swapped, s negated, the fuzzed bytes
// as the whole signature, the key swapped for the fuzzed point's); both
// paths (assembly and Go) must give crypto/ecdsa's verdict every time.
func FuzzVerify(f *testing.F) {
	key := bytes.Repeat([]byte{0x17}, 32)
	for mode := 0; mode < 12; mode++ {
		f.Add(key, []byte("digest"), byte(mode), uint16(mode*37), []byte{0x30, 0x06, 0x02, 0x01, 0x01, 0x02, 0x01, 0x01})
	}
	f.Add(key, make([]byte, 48), byte(0), uint16(0), []byte{})
	f.Fuzz(func(t *testing.T, scalar, digest []byte, mode byte, pos uint16, extra []byte) {
		// Bounded inputs keep the fuzzer's minimization (every run makes a
		// key and a signature and verifies four times) to seconds.
		if len(scalar) != 32 || len(digest) > 64 || len(extra) > 72 {
			return
		}
		priv, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), scalar)
		if err != nil {
			return // 0 or not below n
		}
		sig, err := ecdsa.SignASN1(rand.Reader, priv, digest)
		if err != nil {
			t.Fatal(err)
		}
		pub := &priv.PublicKey
		sig, pub = maul(sig, pub, mode, int(pos), extra)
		want := ecdsa.VerifyASN1(pub, digest, sig)
		got := Verify(pub, digest, sig)
		var gen bool
		withGoPath(func() { gen = Verify(pub, digest, sig) })
		if got != want || gen != want {
			t.Fatalf("signature %x, digest %x: Verify %v (Go code %v), crypto/ecdsa %v", sig, digest, got, gen, want)
		}
	})
}

// maul changes a signature (or the key) as FuzzVerify's mode says.
func maul(sig []byte, pub *ecdsa.PublicKey, mode byte, pos int, extra []byte) ([]byte, *ecdsa.PublicKey) {
	r, s := splitSignature(sig)
	nBig := new(big.Int).SetBytes(beBytes(&n))
	switch mode % 12 {
	case 1:
		sig = bytes.Clone(sig)
		sig[pos%len(sig)] ^= 1 << (pos / len(sig) % 8)
	case 2:
		sig = sig[:pos%len(sig)]
	case 3:
		sig = append(bytes.Clone(sig), extra...)
	case 4:
		edges := []*big.Int{big.NewInt(0), big.NewInt(1), new(big.Int).Sub(nBig, big.NewInt(1)), nBig,
			new(big.Int).Add(nBig, big.NewInt(1)), new(big.Int).SetBytes(beBytes(&p))}
		r = edges[pos%len(edges)]
	case 5:
		s = new(big.Int).SetBytes(extra)
	case 6:
		r, s = s, r
	case 7:
		s = new(big.Int).Sub(nBig, s) // (r, n-s) is valid too
	case 8:
		return extra, pub
	case 9:
		if k, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append([]byte{4}, extra...)); err == nil {
			pub = k
		}
		return sig, pub
	case 10:
		r = new(big.Int).SetBytes(extra)
	case 11:
		r, s = new(big.Int).Neg(r), new(big.Int).Neg(s)
	default:
		return sig, pub
	}
	if mode%12 >= 4 {
		sig = joinSignature(r, s)
	}
	return sig, pub
}

func splitSignature(sig []byte) (r, s *big.Int) {
	r, s = new(big.Int), new(big.Int)
	var inner cryptobyte.String
	in := cryptobyte.String(sig)
	if !in.ReadASN1(&inner, asn1.SEQUENCE) || !inner.ReadASN1Integer(r) || !inner.ReadASN1Integer(s) {
		panic("a signature crypto/ecdsa made does not parse")
	}
	return r, s
}

func joinSignature(r, s *big.Int) []byte {
	var b cryptobyte.Builder
	b.AddASN1(asn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddASN1BigInt(r)
		b.AddASN1BigInt(s)
	})
	return b.BytesOrPanic()
}

// beBytes returns the 32-byte big-endian encoding of a plain element.
func beBytes(x *element) []byte {
	out := make([]byte, 32)
	for i := 0; i < 4; i++ {
		for j := 0; j < 8; j++ {
			out[31-8*i-j] = byte(x[i] >> (8 * j))
		}
	}
	return out
}

// fieldEdges are inputs at the limits of the arithmetic.
func fieldEdges() [][]byte {
	var out [][]byte
	pm1, nm1 := p, n
	pm1[0]--
	nm1[0]--
	for _, x := range []element{{}, {1}, pm1, nm1, {0, 0, 0, 1 << 63}, {^uint64(0)}, {0, 0, 0, 0xffffffff00000000}, {0, 1 << 32}} {
		out = append(out, beBytes(&x))
	}
	return out
}

// FuzzFieldOps compares every field operation, mod p (multiplication,
// squaring, addition, subtraction, both inversions) and mod n
// (multiplication, squaring, the inversion of s), on whichever path runs
// and on the Go code, with math/big, for any two 256-bit values (reduced
// first).
func FuzzFieldOps(f *testing.F) {
	e := fieldEdges()
	for i, x := range e {
		f.Add(x, e[(i*3+1)%len(e)])
	}
	f.Fuzz(func(t *testing.T, xb, yb []byte) {
		if len(xb) < 32 || len(yb) < 32 {
			return
		}
		checkFieldOps(t, xb[:32], yb[:32])
		withGoPath(func() { checkFieldOps(t, xb[:32], yb[:32]) })
	})
}

func checkFieldOps(t *testing.T, xb, yb []byte) {
	t.Helper()
	for _, m := range []struct {
		name    string
		mod     *element
		rr      *element
		mul     func(z, x, y *element)
		sqr     func(z, x *element)
		add     func(z, x, y *element)
		sub     func(z, x, y *element)
		inverse func(z, x *element)
	}{
		{"p", &p, &rrP, fieldMul, fieldSqr, fAdd, fSub, fieldInvert},
		{"p (invertPair)", &p, &rrP, fieldMul, fieldSqr, fAdd, fSub, func(z, x *element) {
			var w element
			invertPair(&w, &element{1}, z, x)
		}},
		{"n", &n, &rrN, ordMul, ordSqr, nil, nil, func(z, x *element) {
			// invertPair takes a plain s and returns Montgomery.
			var plain, zi element
			ordMul(&plain, x, &element{1})
			invertPair(z, &plain, &zi, &one)
		}},
	} {
		checkInvertVartime(t, m.name, m.mod, xb)
		mod := new(big.Int).SetBytes(beBytes(m.mod))
		rInv := new(big.Int).ModInverse(new(big.Int).Lsh(big.NewInt(1), 256), mod)
		xv := new(big.Int).Mod(new(big.Int).SetBytes(xb), mod)
		yv := new(big.Int).Mod(new(big.Int).SetBytes(yb), mod)
		x, y := toElement(xv), toElement(yv)
		// a Montgomery product is x*y/R
		check := func(op string, got element, want *big.Int) {
			t.Helper()
			if w := toElement(want.Mod(want, mod)); got != w {
				t.Fatalf("mod %s: %s(%x, %x) = %x, want %x", m.name, op, xv, yv, got, w)
			}
		}
		var z element
		m.mul(&z, &x, &y)
		check("mul", z, new(big.Int).Mul(new(big.Int).Mul(xv, yv), rInv))
		m.sqr(&z, &x)
		check("sqr", z, new(big.Int).Mul(new(big.Int).Mul(xv, xv), rInv))
		if m.add != nil {
			m.add(&z, &x, &y)
			check("add", z, new(big.Int).Add(xv, yv))
			m.sub(&z, &x, &y)
			check("sub", z, new(big.Int).Sub(xv, yv))
		}
		// The inverse of x as a Montgomery value is (x/R)^-1 * R = R^2/x.
		if xv.Sign() != 0 {
			m.inverse(&z, &x)
			r2 := new(big.Int).Lsh(big.NewInt(1), 512)
			check("invert", z, new(big.Int).Mul(r2, new(big.Int).ModInverse(xv, mod)))
		}
	}
}

// checkInvertVartime compares the variable-time inversion (plain in and
// out) of xb mod m with math/big's ModInverse; 0 is defined to give 0.
func checkInvertVartime(t *testing.T, name string, m *element, xb []byte) {
	t.Helper()
	mod := new(big.Int).SetBytes(beBytes(m))
	xv := new(big.Int).Mod(new(big.Int).SetBytes(xb), mod)
	x := toElement(xv)
	m0 := uint64(1)
	if *m == n {
		m0 = nInv0
	}
	var z element
	invertVartime(&z, &x, m, m0)
	want := element{}
	if xv.Sign() != 0 {
		want = toElement(new(big.Int).ModInverse(xv, mod))
	}
	if z != want {
		t.Fatalf("mod %s: invertVartime(%x) = %x, want %x", name, xv, z, want)
	}
}

// TestInvertVartimeEdges runs the variable-time inversion on values whose
// binary GCD is short or long, lopsided or balanced: 0, small values,
// powers of two, m-1, m-2^k, (m+1)/2 and the like, mod p and mod n.
func TestInvertVartimeEdges(t *testing.T) {
	for _, m := range []*element{&p, &n} {
		mod := new(big.Int).SetBytes(beBytes(m))
		var vals []*big.Int
		for _, v := range []int64{0, 1, 2, 3, 5, 7, 0x7fffffff, 0x80000000, 0xffffffff} {
			vals = append(vals, big.NewInt(v))
		}
		for k := uint(1); k < 256; k += 7 {
			pk := new(big.Int).Lsh(big.NewInt(1), k)
			vals = append(vals, pk, new(big.Int).Sub(mod, pk), new(big.Int).Sub(pk, big.NewInt(1)))
		}
		vals = append(vals, new(big.Int).Sub(mod, big.NewInt(1)), new(big.Int).Rsh(new(big.Int).Add(mod, big.NewInt(1)), 1))
		for _, v := range vals {
			var b [32]byte
			new(big.Int).Mod(v, mod).FillBytes(b[:])
			checkInvertVartime(t, "edge", m, b[:])
		}
	}
}

// toElement returns the limbs of v (0 <= v < 2^256).
func toElement(v *big.Int) element {
	var b [32]byte
	v.FillBytes(b[:])
	var z element
	setBytes(&z, b[:], &element{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)})
	return z
}
