package p256verify

import "math/bits"

// Variable-time inversion by a binary GCD whose steps run on 64-bit
// approximations of the operands, 31 at a time, each batch then applied to
// the full values as a 2x2 matrix of signed factors (T. Pornin's optimized
// binary GCD, IACR ePrint 2020/972, Algorithm 2, with k = 32).
//
// Why variable time is acceptable here: ECDSA verification handles only
// public values (the signature's s, the peer's public key and so the Z of
// its table, the digest of a transcript both sides know). The running time
// depends on those alone, which an observer already has. These routines are
// unexported and called only from Verify (invertPair); nothing that holds a
// secret (p256sign, key generation) may call them: p256sign has its own
// constant-time arithmetic and does not import this package.

// invK is the number of divsteps per batch (k-1 in the paper).
const invK = 31

// invertVartime sets z = x^-1 mod m for a plain (non-Montgomery) x < m, or
// 0 if x is 0; m is odd (p or n) and m0 is -m^-1 mod 2^64. Its time depends
// on x: public inputs only.
func invertVartime(z, x, m *element, m0 uint64) {
	// Invariants: a = u*x and b = v*x (mod m); the gcd of a and b stays 1
	// (for x != 0) and a reaches 0, leaving b = 1 and v = x^-1.
	a, b := *x, *m
	u, v := element{1}, element{}
	// len(a)+len(b) <= 512 falls by at least invK per batch (the paper's
	// bound: ceil((2*256-1)/31) = 17 batches reach a = 0).
	for i := 0; i < 17 && !isZero(&a); i++ {
		f0, g0, f1, g1 := divsteps(approx(&a, &b))
		na, negA := linComb(&a, f0, &b, g0)
		nb, negB := linComb(&a, f1, &b, g1)
		if negA {
			f0, g0 = -f0, -g0
		}
		if negB {
			f1, g1 = -f1, -g1
		}
		a, b = na, nb
		nu := linCombMod(&u, f0, &v, g0, m, m0)
		v = linCombMod(&u, f1, &v, g1, m, m0)
		u = nu
	}
	*z = v
}

// bitLen returns the length of x in bits.
func bitLen(x *element) int {
	for i := 3; i >= 0; i-- {
		if x[i] != 0 {
			return i*64 + bits.Len64(x[i])
		}
	}
	return 0
}

// approx returns a's and b's 64-bit approximations: their lowest 31 bits
// and, above them, the top 33 bits of an n-bit window, n the longer length
// (at least 64, where the approximation is the value itself).
func approx(a, b *element) (uint64, uint64) {
	n := max(bitLen(a), bitLen(b), 64)
	s := uint(n - 33)
	return a[0]&(1<<invK-1) | shr(a, s)<<invK, b[0]&(1<<invK-1) | shr(b, s)<<invK
}

// shr returns the low 64 bits of x >> s (s < 256).
func shr(x *element, s uint) uint64 {
	i, r := s/64, s%64
	lo := x[i]
	if r == 0 {
		return lo
	}
	var hi uint64
	if i < 3 {
		hi = x[i+1]
	}
	return lo>>r | hi<<(64-r)
}

// divsteps runs invK binary GCD steps on the approximations a and b (b
// odd) and returns the factors: a' = (a*f0 + b*g0) / 2^31 and
// b' = (a*f1 + b*g1) / 2^31, each factor of magnitude at most 2^31.
func divsteps(a, b uint64) (f0, g0, f1, g1 int64) {
	f0, g0, f1, g1 = 1, 0, 0, 1
	for j := 0; j < invK; j++ {
		if a&1 != 0 {
			if a < b {
				a, b = b, a
				f0, g0, f1, g1 = f1, g1, f0, g0
			}
			a -= b
			f0 -= f1
			g0 -= g1
		}
		a >>= 1
		f1 <<= 1
		g1 <<= 1
	}
	return f0, g0, f1, g1
}

// wide is a signed 320-bit value, two's complement, least significant limb
// first.
type wide = [5]uint64

// mulSigned returns x*f as a wide value (x < 2^256, |f| <= 2^31).
func mulSigned(x *element, f int64) wide {
	uf := uint64(f)
	var w wide
	var c uint64
	for i := 0; i < 4; i++ {
		c, w[i] = madd(0, x[i], uf, c)
	}
	w[4] = c
	if f < 0 { // uint64(f) is f + 2^64: take x*2^64 back off
		var b uint64
		for i := 1; i < 5; i++ {
			w[i], b = bits.Sub64(w[i], x[i-1], b)
		}
	}
	return w
}

// addWide returns x + y mod 2^320.
func addWide(x, y *wide) wide {
	var z wide
	var c uint64
	for i := range z {
		z[i], c = bits.Add64(x[i], y[i], c)
	}
	return z
}

// negWide returns -x mod 2^320.
func negWide(x *wide) wide {
	var z wide
	var b uint64
	for i := range z {
		z[i], b = bits.Sub64(0, x[i], b)
	}
	return z
}

// sarWide returns x >> invK, arithmetic (the sign bit shifted in).
func sarWide(x *wide) wide {
	var z wide
	for i := 0; i < 4; i++ {
		z[i] = x[i]>>invK | x[i+1]<<(64-invK)
	}
	z[4] = uint64(int64(x[4]) >> invK)
	return z
}

// linComb returns |x*f + y*g| / 2^31 (which the divsteps make exact and
// below 2^256) and whether the sum was negative.
func linComb(x *element, f int64, y *element, g int64) (element, bool) {
	xf, yg := mulSigned(x, f), mulSigned(y, g)
	t := addWide(&xf, &yg)
	neg := int64(t[4]) < 0
	if neg {
		t = negWide(&t)
	}
	t = sarWide(&t)
	return element{t[0], t[1], t[2], t[3]}, neg
}

// linCombMod returns (x*f + y*g) / 2^31 mod m for x, y < m: the sum plus
// the multiple of m that clears its low 31 bits, shifted; that lands in
// (-3m, 3m), brought into [0, m) by adding or subtracting m.
func linCombMod(x *element, f int64, y *element, g int64, m *element, m0 uint64) element {
	xf, yg := mulSigned(x, f), mulSigned(y, g)
	t := addWide(&xf, &yg)
	q := (t[0] * m0) & (1<<invK - 1)
	qm := mulSigned(m, int64(q))
	t = addWide(&t, &qm)
	t = sarWide(&t)
	mw := wide{m[0], m[1], m[2], m[3], 0}
	for int64(t[4]) < 0 {
		t = addWide(&t, &mw)
	}
	r := element{t[0], t[1], t[2], t[3]}
	for t[4] != 0 || !less(&r, m) {
		nm := negWide(&mw)
		t = addWide(&t, &nm)
		r = element{t[0], t[1], t[2], t[3]}
	}
	return r
}
