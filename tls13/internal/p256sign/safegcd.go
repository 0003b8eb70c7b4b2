package p256sign

import "math/bits"

// Constant-time inversion modulo n by Bernstein and Yang's divsteps ("Fast
// constant-time gcd computation and modular inversion", 2019), in the
// variant whose delta starts at 1/2, for which 590 divsteps suffice for a
// 256-bit modulus; this runs 10 batches of 62 (620). Each batch works on the
// low 64 bits of f and g only and yields a 2x2 matrix of 62-bit signed
// integers, then applies it to the full f, g and to d, e (the cofactors,
// modulo n). Everything is masks and fixed-count loops.
//
// Numbers are two's complement in 64-bit limbs, least significant first: f
// and g in five (|f|, |g| <= n < 2^256), d and e in four (kept in [0, n)).

// divsteps62 runs 62 divsteps on the low bits of f and g, with delta kept
// as 2*delta (odd), and returns the new 2*delta and the matrix
// [u v; q r] with 2^62 f' = u f + v g and 2^62 g' = q f + r g.
//
// One divstep: when delta > 0 and g is odd ("swap"), (f, g) becomes
// (g, (g - f)/2) and delta 1 - delta; otherwise g becomes (g + f)/2 if odd,
// g/2 if even, and delta 1 + delta. Written without branches: g += +-f (the
// sign from swap, the addition from g's parity); then f += g, which is the
// old g exactly when swap; the matrix rows follow; g's halving is kept exact
// by doubling the f row instead of halving the g row. The low bits of f and
// g that later steps read stay exact: each step consumes one.
func divsteps62(delta2 int64, f, g uint64) (int64, [4]int64) {
	u, v, q, r := int64(1), int64(0), int64(0), int64(1)
	for range 62 {
		odd := -int64(g & 1)
		swap := (-delta2 >> 63) & odd // delta > 0 and g odd
		g += ((f ^ uint64(swap)) - uint64(swap)) & uint64(odd)
		q += ((u ^ swap) - swap) & odd
		r += ((v ^ swap) - swap) & odd
		f += g & uint64(swap)
		u += q & swap
		v += r & swap
		delta2 = (delta2 ^ swap) - swap + 2
		g >>= 1
		u <<= 1
		v <<= 1
	}
	return delta2, [4]int64{u, v, q, r}
}

// mulAcc returns a x + b y + c as (lo, hi), a signed 128-bit value, for
// a and b signed (sa and sb their sign masks), x and y unsigned limbs and c
// a signed carry; |a| + |b| <= 2^62 keeps it within range.
func mulAcc(a, b, sa, sb, x, y, c uint64) (lo, hi uint64) {
	h1, l1 := bits.Mul64(a, x)
	h2, l2 := bits.Mul64(b, y)
	var k uint64
	lo, k = bits.Add64(l1, l2, 0)
	hi = h1 - sa&x + h2 - sb&y + k
	lo, k = bits.Add64(lo, c, 0)
	return lo, hi + k + uint64(int64(c)>>63)
}

// topAcc is mulAcc for the signed top limbs of f and g: their products are
// small (|x|, |y| < 2^63 at most) and fit 64 bits with room for the carry.
func topAcc(a, b int64, x, y, c uint64) uint64 {
	return uint64(a*int64(x) + b*int64(y) + int64(c))
}

// updateFG sets (f, g) = ((u f + v g) / 2^62, (q f + r g) / 2^62), exact
// divisions, for f and g five-limb two's complement (|f|, |g| <= n).
func updateFG(f, g *[5]uint64, t *[4]int64) {
	u, v, q, r := uint64(t[0]), uint64(t[1]), uint64(t[2]), uint64(t[3])
	su, sv, sq, sr := uint64(t[0]>>63), uint64(t[1]>>63), uint64(t[2]>>63), uint64(t[3]>>63)
	var cf, cg, pf, pg uint64
	for i := range 4 {
		var lf, lg uint64
		lf, cf = mulAcc(u, v, su, sv, f[i], g[i], cf)
		lg, cg = mulAcc(q, r, sq, sr, f[i], g[i], cg)
		if i > 0 {
			f[i-1] = pf>>62 | lf<<2
			g[i-1] = pg>>62 | lg<<2
		}
		pf, pg = lf, lg
	}
	// The top limbs: f[4], g[4] are 0 or -1 (|f|, |g| < 2^256), and the
	// sums fit a signed 64-bit word once carried.
	lf := topAcc(t[0], t[1], f[4], g[4], cf)
	lg := topAcc(t[2], t[3], f[4], g[4], cg)
	f[3] = pf>>62 | lf<<2
	g[3] = pg>>62 | lg<<2
	f[4] = uint64(int64(lf) >> 62)
	g[4] = uint64(int64(lg) >> 62)
}

// updateDE sets (d, e) = ((u d + v e) / 2^62, (q d + r e) / 2^62) mod n,
// each in [0, n), for d and e in [0, n) (four limbs).
func updateDE(d, e *[4]uint64, t *[4]int64) {
	d0, e0 := *d, *e
	updateOne(&d0, &e0, t[0], t[1], d)
	updateOne(&d0, &e0, t[2], t[3], e)
}

// updateOne returns in out (a d + b e) / 2^62 mod n: a multiple m n
// (m < 2^62) makes the low 62 bits zero, the quotient lands in (-n, 2n),
// and one conditional addition or subtraction of n brings it to [0, n). out
// is written after the last read of d and e.
func updateOne(d, e *[4]uint64, a, b int64, out *[4]uint64) {
	ua, ub := uint64(a), uint64(b)
	sa, sb := uint64(a>>63), uint64(b>>63)
	m := ((ua*d[0] + ub*e[0]) * n0inv) & (1<<62 - 1) // a d + b e + m n = 0 mod 2^62
	var z [5]uint64
	var c, prev uint64
	for i := range 4 {
		var lo, hi, k uint64
		lo, hi = mulAcc(ua, ub, sa, sb, d[i], e[i], c)
		h3, l3 := bits.Mul64(m, n[i])
		lo, k = bits.Add64(lo, l3, 0)
		c = hi + h3 + k
		if i > 0 {
			z[i-1] = prev>>62 | lo<<2
		}
		prev = lo
	}
	z[3] = prev>>62 | c<<2
	z[4] = uint64(int64(c) >> 62)
	// z < 0: add n.
	neg := uint64(int64(z[4]) >> 63)
	var k uint64
	for i := range 4 {
		z[i], k = bits.Add64(z[i], n[i]&neg, k)
	}
	z[4] += k
	// z >= n: subtract n.
	var s [4]uint64
	var borrow uint64
	for i := range 4 {
		s[i], borrow = bits.Sub64(z[i], n[i], borrow)
	}
	_, borrow = bits.Sub64(z[4], 0, borrow)
	keep := -borrow // z < n
	for i := range 4 {
		out[i] = z[i]&keep | s[i]&^keep
	}
}

// invertSafegcd sets z = x^-1 mod n for x < n (0 for 0), in constant time.
// Invariants: d x = f and e x = g (mod n); at the end g = 0 and f = +-1,
// so the inverse is d or n - d.
func (z *scalar) invertSafegcd(x *scalar) {
	f := [5]uint64{n[0], n[1], n[2], n[3], 0}
	g := [5]uint64{x[0], x[1], x[2], x[3], 0}
	var d, e [4]uint64
	e[0] = 1
	delta2 := int64(1)
	for range 10 {
		var t [4]int64
		delta2, t = divsteps62(delta2, f[0], g[0])
		updateFG(&f, &g, &t)
		updateDE(&d, &e, &t)
	}
	// f = -1: the inverse is n - d (d = 0 only when x = 0, then f = n > 0).
	neg := uint64(int64(f[4]) >> 63)
	var nd scalar
	var borrow uint64
	for i := range 4 {
		nd[i], borrow = bits.Sub64(n[i], d[i], borrow)
	}
	dd := scalar(d)
	selectScalar(z, &nd, &dd, neg)
}
