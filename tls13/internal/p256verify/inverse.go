package p256verify

import "math/bits"

// Variable-time inversion by a binary GCD whose steps run on 128-bit
// approximations of the operands, 62 at a time, each batch then applied to
// the full values as a 2x2 matrix of signed factors (T. Pornin's optimized
// binary GCD, IACR ePrint 2020/972, Algorithm 2, with k = 63: 128-bit
// approximations, 62 steps a batch).
//
// Why variable time is acceptable here: ECDSA verification handles only
// public values (the signature's s, the peer's public key and so the Z of
// its table, the digest of a transcript both sides know). The running time
// depends on those alone, which an observer already has. These routines are
// unexported and called only from Verify (invertPair); nothing that holds a
// secret (p256sign, key generation) may call them: p256sign has its own
// constant-time arithmetic and does not import this package.

// invK is the number of divsteps per batch (k-1 in the paper), and
// invBatches the paper's bound on the batches, ceil((2*256-1)/invK).
const (
	invK       = 62
	invBatches = (2*256 - 1 + invK - 1) / invK
)

// invertVartime sets z = x^-1 mod m for a plain (non-Montgomery) x < m, or
// 0 if x is 0; m is odd (p or n) and m0 is -m^-1 mod 2^64. Its time depends
// on x: public inputs only.
func invertVartime(z, x, m *element, m0 uint64) {
	// Invariants: a = u*x and b = v*x (mod m); the gcd of a and b stays 1
	// (for x != 0) and a reaches 0, leaving b = 1 and v = x^-1.
	a, b := *x, *m
	u, v := element{1}, element{}
	// len(a)+len(b) <= 512 falls by at least invK per batch (the paper's
	// bound: invBatches reach a = 0).
	for i := 0; i < invBatches && !isZero(&a); i++ {
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

// approx returns a's and b's 128-bit approximations (low, high words):
// their lowest 62 bits and, above them, the top 64 bits of an n-bit
// window, n the longer length (at least 126, where the approximation is
// the value itself).
func approx(a, b *element) (alo, ahi, blo, bhi uint64) {
	n := max(bitLen(a), bitLen(b), 2*invK+2)
	s := uint(n - 64)
	const low = 1<<invK - 1
	ta, tb := shr(a, s), shr(b, s)
	return a[0]&low | ta<<invK, ta >> (64 - invK), b[0]&low | tb<<invK, tb >> (64 - invK)
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

// divsteps runs invK binary GCD steps on the 128-bit approximations a and
// b (b odd) and returns the factors: a' = (a*f0 + b*g0) / 2^62 and
// b' = (a*f1 + b*g1) / 2^62, each factor of magnitude at most 2^62.
func divsteps(alo, ahi, blo, bhi uint64) (f0, g0, f1, g1 int64) {
	f0, g0, f1, g1 = 1, 0, 0, 1
	// Each round halves a through its run of zero bits, that many steps at
	// once (all that are left if a is 0), then makes an odd a even again:
	// a-b, after swapping a and b if a < b.
	for j := invK; ; {
		z := j
		if alo != 0 {
			z = min(bits.TrailingZeros64(alo), j)
		} else if ahi != 0 {
			z = min(64+bits.TrailingZeros64(ahi), j)
		}
		if z != 0 { // z <= 62
			alo = alo>>z | ahi<<(64-z)
			ahi >>= z
			f1 <<= z
			g1 <<= z
			j -= z
		}
		if j == 0 {
			return f0, g0, f1, g1
		}
		if ahi < bhi || ahi == bhi && alo < blo {
			alo, ahi, blo, bhi = blo, bhi, alo, ahi
			f0, g0, f1, g1 = f1, g1, f0, g0
		}
		var br uint64
		alo, br = bits.Sub64(alo, blo, 0)
		ahi -= bhi + br
		f0 -= f1
		g0 -= g1
	}
}

// wide is a 320-bit magnitude, least significant limb first.
type wide = [5]uint64

// mulWord returns x*f.
func mulWord(x *element, f uint64) wide {
	var w wide
	var h, l, c uint64
	w[1], w[0] = bits.Mul64(x[0], f)
	h, l = bits.Mul64(x[1], f)
	w[1], c = bits.Add64(w[1], l, 0)
	w[2] = h + c
	h, l = bits.Mul64(x[2], f)
	w[2], c = bits.Add64(w[2], l, 0)
	w[3] = h + c
	h, l = bits.Mul64(x[3], f)
	w[3], c = bits.Add64(w[3], l, 0)
	w[4] = h + c
	return w
}

// sumAbs returns |x*f + y*g| and whether the sum is negative
// (x, y < 2^256, |f|, |g| <= 2^62: the sum stays below 2^319). It runs
// without branches: the signs are masks, not the coin flips a branch
// predictor would miss.
func sumAbs(x *element, f int64, y *element, g int64) (wide, bool) {
	// uint64(f) is f + 2^64 when f < 0: x*uint64(f) - x*2^64 is x*f in
	// two's complement, mod 2^320.
	xf, yg := mulWord(x, uint64(f)), mulWord(y, uint64(g))
	sf, sg := uint64(f>>63), uint64(g>>63)
	var c, b uint64
	xf[1], b = bits.Sub64(xf[1], x[0]&sf, 0)
	xf[2], b = bits.Sub64(xf[2], x[1]&sf, b)
	xf[3], b = bits.Sub64(xf[3], x[2]&sf, b)
	xf[4], _ = bits.Sub64(xf[4], x[3]&sf, b)
	yg[1], b = bits.Sub64(yg[1], y[0]&sg, 0)
	yg[2], b = bits.Sub64(yg[2], y[1]&sg, b)
	yg[3], b = bits.Sub64(yg[3], y[2]&sg, b)
	yg[4], _ = bits.Sub64(yg[4], y[3]&sg, b)
	var t wide
	t[0], c = bits.Add64(xf[0], yg[0], 0)
	t[1], c = bits.Add64(xf[1], yg[1], c)
	t[2], c = bits.Add64(xf[2], yg[2], c)
	t[3], c = bits.Add64(xf[3], yg[3], c)
	t[4], _ = bits.Add64(xf[4], yg[4], c)
	// |t| = (t XOR s) - s for the sign mask s.
	s := uint64(int64(t[4]) >> 63)
	t[0], b = bits.Sub64(t[0]^s, s, 0)
	t[1], b = bits.Sub64(t[1]^s, s, b)
	t[2], b = bits.Sub64(t[2]^s, s, b)
	t[3], b = bits.Sub64(t[3]^s, s, b)
	t[4], _ = bits.Sub64(t[4]^s, s, b)
	return t, s != 0
}

// shrK returns w >> 62 (which the callers know is below 2^256).
func shrK(w *wide) element {
	return element{
		w[0]>>invK | w[1]<<(64-invK),
		w[1]>>invK | w[2]<<(64-invK),
		w[2]>>invK | w[3]<<(64-invK),
		w[3]>>invK | w[4]<<(64-invK),
	}
}

// linComb returns |x*f + y*g| / 2^62 (which the divsteps make exact and
// below 2^256) and whether the sum was negative.
func linComb(x *element, f int64, y *element, g int64) (element, bool) {
	t, neg := sumAbs(x, f, y, g)
	return shrK(&t), neg
}

// linCombMod returns (x*f + y*g) / 2^62 mod m for x, y < m: the magnitude
// of the sum plus the multiple of m that clears its low 62 bits, shifted
// (below 3m), reduced, and negated mod m if the sum was negative.
func linCombMod(x *element, f int64, y *element, g int64, m *element, m0 uint64) element {
	t, neg := sumAbs(x, f, y, g)
	qm := mulWord(m, (t[0]*m0)&(1<<invK-1))
	var c uint64
	t[0], c = bits.Add64(t[0], qm[0], 0)
	t[1], c = bits.Add64(t[1], qm[1], c)
	t[2], c = bits.Add64(t[2], qm[2], c)
	t[3], c = bits.Add64(t[3], qm[3], c)
	t[4], _ = bits.Add64(t[4], qm[4], c)
	r := shrK(&t)
	top := t[4] >> invK // r's bits above 2^256
	for top != 0 || !less(&r, m) {
		var b uint64
		r[0], b = bits.Sub64(r[0], m[0], 0)
		r[1], b = bits.Sub64(r[1], m[1], b)
		r[2], b = bits.Sub64(r[2], m[2], b)
		r[3], b = bits.Sub64(r[3], m[3], b)
		top -= b
	}
	if neg && !isZero(&r) {
		var b uint64
		r[0], b = bits.Sub64(m[0], r[0], 0)
		r[1], b = bits.Sub64(m[1], r[1], b)
		r[2], b = bits.Sub64(m[2], r[2], b)
		r[3], _ = bits.Sub64(m[3], r[3], b)
	}
	return r
}
