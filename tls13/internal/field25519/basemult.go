package field25519

import "sync"

// Fixed-base multiplication: the X25519 public key X25519(k, 9) computed on
// edwards25519, the twisted Edwards curve -x^2 + y^2 = 1 + d*x^2*y^2
// birationally equivalent to Curve25519 (RFC 7748, Section 4.1), whose
// base point B maps to u = 9 by u = (1 + y) / (1 - y). B has prime order,
// so [k]B on the Edwards curve maps to [k](u = 9) on the Montgomery curve,
// and the public key is u = (Z + Y) / (Z - Y) of [k]B in projective
// coordinates: one inversion at the end instead of a ladder.
//
// The method: the clamped scalar k (below 2^255) is recoded into 64 signed
// radix-16 digits e_i in [-8, 8], k = sum e_i * 16^i. A table holds, for
// each of the 32 even positions 2m, the multiples j * 16^(2m) * B for
// j = 1..8 as affine Niels points (y+x, y-x, 2dxy), so adding one costs
// seven multiplications. The odd digits are summed first (32 additions),
// the sum multiplied by 16 (four doublings), then the even digits added
// (32 additions): 64 additions and 4 doublings in all.
//
// Constant time: each lookup reads all eight entries of its row and keeps
// one with masks (never an index derived from the scalar), a negative
// digit is applied by a masked swap of y+x and y-x and a masked choice of
// 2dxy or its negation, and the recoding is arithmetic without branches.
// The addition formulas are complete on this curve (d is not a square), so
// there is no special case for the identity or for doubling.

// edwardsPoint is a point in extended coordinates (X : Y : Z : T) with
// x = X/Z, y = Y/Z, x*y = T/Z.
type edwardsPoint struct {
	X, Y, Z, T Element
}

// nielsPoint is an affine point as (y+x, y-x, 2*d*x*y).
type nielsPoint struct {
	YplusX, YminusX, XY2D Element
}

var (
	// d2 is 2*d, d = -121665/121666 mod p.
	d2 = Element{l: [4]uint64{0xebd69b9426b2f159, 0x00e0149a8283b156, 0x198e80f2eef3d130, 0x2406d9dc56dffce7}}
	// edwardsBase is B, the edwards25519 base point (RFC 8032, Section 5.1),
	// with y = 4/5.
	edwardsBase = edwardsPoint{
		X: Element{l: [4]uint64{0xc9562d608f25d51a, 0x692cc7609525a7b2, 0xc0a4e231fdd6dc5c, 0x216936d3cd6e53fe}},
		Y: Element{l: [4]uint64{0x6666666666666658, 0x6666666666666666, 0x6666666666666666, 0x6666666666666666}},
		Z: Element{l: [4]uint64{1}},
		T: Element{l: [4]uint64{0x6dde8ab3a5b7dda3, 0x20f09f80775152f5, 0x66ea4e8e64abe37d, 0x67875f0fd78b7665}},
	}
)

// baseTableRows holds in row m the points j * 16^(2m) * B for j = 1..8
// (entry j-1), each as the limbs of (y+x, y-x, 2dxy), canonical: the layout
// the generated baseAdd reads.
type baseTableRows [32][8][3][4]uint64

// baseState is the fixed-base multiplication's working state at the
// indexes below, the layout the generated baseAdd reads
// (_asm/basemult_asm.go declares the same list): the point (X, Y, Z, T),
// the selected (y+x, y-x, 2dxy), an element left zero, and temporaries.
type baseState [bStateLen][4]uint64

const (
	bX = iota
	bY
	bZ
	bT
	bQp
	bQm
	bQd
	bZero
	bA
	bB
	bC
	bD
	bE
	bF
	bG
	bH
	bStateLen
)

var (
	baseTableOnce sync.Once
	baseTable     *baseTableRows
)

// basePoints returns the table, computing it on first use (about 512 point
// operations and one batched inversion; BenchmarkBaseTable measures it).
func basePoints() *baseTableRows {
	baseTableOnce.Do(func() { baseTable = computeBaseTable() })
	return baseTable
}

func computeBaseTable() *baseTableRows {
	var proj [32][8]edwardsPoint
	p := edwardsBase
	for m := range proj {
		proj[m][0] = p
		for j := 1; j < 8; j++ {
			proj[m][j].add(&proj[m][j-1], &p)
		}
		for range 8 { // p = 256 * p
			p.double(&p)
		}
	}
	// Batched inversion of the 256 Z coordinates (Montgomery's trick):
	// prefix[i] = Z_0 * ... * Z_(i-1).
	var prefix [256]Element
	var acc Element
	acc.One()
	for i := range prefix {
		prefix[i] = acc
		acc.Multiply(&acc, &proj[i/8][i%8].Z)
	}
	acc.Invert(&acc)
	t := new(baseTableRows)
	for i := len(prefix) - 1; i >= 0; i-- {
		q := &proj[i/8][i%8]
		var zinv, x, y Element
		zinv.Multiply(&acc, &prefix[i]) // 1/Z_i
		acc.Multiply(&acc, &q.Z)        // 1/(Z_0 * ... * Z_(i-1))
		x.Multiply(&q.X, &zinv)
		y.Multiply(&q.Y, &zinv)
		t[i/8][i%8] = affineNiels(&x, &y)
	}
	return t
}

// affineNiels returns the canonical limbs of (y+x, y-x, 2dxy).
func affineNiels(x, y *Element) [3][4]uint64 {
	var ypx, ymx, xy2d Element
	ypx.Add(y, x)
	ymx.Subtract(y, x)
	xy2d.Multiply(x, y)
	xy2d.Multiply(&xy2d, &d2)
	return [3][4]uint64{ypx.canonical(), ymx.canonical(), xy2d.canonical()}
}

// add sets v = p + q (extended coordinates, a = -1: "add-2008-hwcd-3").
// Used only to build the table.
func (v *edwardsPoint) add(p, q *edwardsPoint) *edwardsPoint {
	var a, b, c, d, t Element
	a.Subtract(&p.Y, &p.X)
	t.Subtract(&q.Y, &q.X)
	a.Multiply(&a, &t)
	b.Add(&p.Y, &p.X)
	t.Add(&q.Y, &q.X)
	b.Multiply(&b, &t)
	c.Multiply(&p.T, &q.T)
	c.Multiply(&c, &d2)
	d.Multiply(&p.Z, &q.Z)
	d.Add(&d, &d)
	return v.finish(&a, &b, &c, &d)
}

// addNiels sets v = p + q for an affine q (7 multiplications).
func (v *edwardsPoint) addNiels(p *edwardsPoint, q *nielsPoint) *edwardsPoint {
	var a, b, c, d Element
	a.Subtract(&p.Y, &p.X)
	a.Multiply(&a, &q.YminusX)
	b.Add(&p.Y, &p.X)
	b.Multiply(&b, &q.YplusX)
	c.Multiply(&p.T, &q.XY2D)
	d.Add(&p.Z, &p.Z)
	return v.finish(&a, &b, &c, &d)
}

// finish completes an addition from A, B, C, D: E = B-A, F = D-C,
// G = D+C, H = B+A; X = E*F, Y = G*H, T = E*H, Z = F*G.
func (v *edwardsPoint) finish(a, b, c, d *Element) *edwardsPoint {
	var e, f, g, h Element
	e.Subtract(b, a)
	f.Subtract(d, c)
	g.Add(d, c)
	h.Add(b, a)
	v.X.Multiply(&e, &f)
	v.Y.Multiply(&g, &h)
	v.T.Multiply(&e, &h)
	v.Z.Multiply(&f, &g)
	return v
}

// double sets v = 2p ("dbl-2008-hwcd", a = -1; T of p is not read).
func (v *edwardsPoint) double(p *edwardsPoint) *edwardsPoint {
	var a, b, c, e, f, g, h Element
	a.Square(&p.X)
	b.Square(&p.Y)
	c.Square(&p.Z)
	c.Add(&c, &c)
	// With a = -1 these are the negations of the formula's H, E, G and F,
	// whose signs cancel in the products.
	h.Add(&a, &b) // X^2 + Y^2
	e.Add(&p.X, &p.Y)
	e.Square(&e)
	e.Subtract(&h, &e) // X^2 + Y^2 - (X+Y)^2 = -2XY
	g.Subtract(&a, &b) // X^2 - Y^2
	f.Add(&c, &g)      // 2Z^2 + X^2 - Y^2
	v.X.Multiply(&e, &f)
	v.Y.Multiply(&g, &h)
	v.T.Multiply(&e, &h)
	v.Z.Multiply(&f, &g)
	return v
}

// baseAddGeneric is baseAdd in Go: s's point plus (-1)^neg * abs * P,
// row[j-1] being j * P.
func baseAddGeneric(s *baseState, row *[8][3][4]uint64, abs, neg uint64) {
	var q nielsPoint
	selectNiels(&q, row, abs, neg)
	p := s.point()
	p.addNiels(&p, &q)
	s.setPoint(&p)
}

func (s *baseState) point() edwardsPoint {
	return edwardsPoint{X: Element{s[bX]}, Y: Element{s[bY]}, Z: Element{s[bZ]}, T: Element{s[bT]}}
}

func (s *baseState) setPoint(p *edwardsPoint) {
	s[bX], s[bY], s[bZ], s[bT] = p.X.l, p.Y.l, p.Z.l, p.T.l
}

// digit splits a signed digit into its absolute value and sign (1 if
// negative), without branches.
func digit(e int8) (abs, neg uint64) {
	neg = uint64(uint8(e) >> 7)
	abs = uint64(int64(e)^-int64(neg)) + neg
	return abs, neg
}

// selectNiels sets q to (-1)^neg * abs * P (abs in [0, 8]; row[j-1] is
// j * P), reading every entry of row, in constant time.
func selectNiels(q *nielsPoint, row *[8][3][4]uint64, abs, neg uint64) {
	var ypx, ymx, xy2d [4]uint64
	ypx[0], ymx[0] = 1, 1 // the identity: y+x = y-x = 1, 2dxy = 0
	for j := range row {
		// mask is all ones when abs == j+1 (abs^(j+1) - 1 borrows only for
		// 0), else zero.
		mask := -((abs ^ uint64(j+1) - 1) >> 63)
		pick(&ypx, &row[j][0], mask)
		pick(&ymx, &row[j][1], mask)
		pick(&xy2d, &row[j][2], mask)
	}
	// A negative digit: -(x, y) = (-x, y) swaps y+x and y-x and negates
	// 2dxy.
	m := -neg
	cswapGeneric(&ypx, &ymx, neg)
	q.YplusX.l, q.YminusX.l, q.XY2D.l = ypx, ymx, xy2d
	var minus Element
	minus.Subtract(&minus, &q.XY2D)
	pick(&q.XY2D.l, &minus.l, m)
}

// pick sets dst = src where mask is all ones and leaves it where mask is 0.
func pick(dst, src *[4]uint64, mask uint64) {
	for i := range dst {
		dst[i] = dst[i]&^mask | src[i]&mask
	}
}

// recode16 returns the signed radix-16 digits of k (k < 2^255): 64 digits
// e_i in [-8, 8] with k = sum e_i * 16^i.
func recode16(k *[32]byte) [64]int8 {
	var e [64]int8
	for i, b := range k {
		e[2*i] = int8(b & 15)
		e[2*i+1] = int8(b >> 4)
	}
	// Move each digit into [-8, 8) by carrying into the next; the top digit
	// (at most 7 plus a carry) ends in [0, 8].
	for i := 0; i < 63; i++ {
		carry := (e[i] + 8) >> 4
		e[i] -= carry << 4
		e[i+1] += carry
	}
	return e
}

// ScalarBaseMult sets dst = X25519(scalar, 9) (RFC 7748, Sections 5 and
// 6.1): the public key of the private key scalar, clamped as X25519 clamps
// it, computed on edwards25519 with the precomputed table (see above). It
// gives the bytes of ScalarMult(dst, scalar, 9) and of crypto/ecdh.
func ScalarBaseMult(dst, scalar *[32]byte) {
	num, den := baseFraction(scalar)
	den.Invert(&den)
	num.Multiply(&num, &den)
	num.fillBytes(dst)
}

// baseFraction returns the numerator and denominator of ScalarBaseMult's
// u = (1 + y) / (1 - y) = (Z + Y) / (Z - Y), before the inversion.
func baseFraction(scalar *[32]byte) (num, den Element) {
	k := clamp(scalar)
	e := recode16(&k)
	clear(k[:])

	table := basePoints()
	var s baseState
	s[bY][0], s[bZ][0] = 1, 1 // the identity
	for i := 1; i < 64; i += 2 {
		abs, neg := digit(e[i])
		baseAddStep(&s, &table[i/2], abs, neg)
	}
	p := s.point()
	for range 4 {
		p.double(&p)
	}
	s.setPoint(&p)
	for i := 0; i < 64; i += 2 {
		abs, neg := digit(e[i])
		baseAddStep(&s, &table[i/2], abs, neg)
	}
	clear(e[:])
	p = s.point()
	clear(s[:])

	num.Add(&p.Z, &p.Y)
	den.Subtract(&p.Z, &p.Y)
	return num, den
}
