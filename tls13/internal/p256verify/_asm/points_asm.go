package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The point routines: the formulas of the Go code (point.go), each field
// operation inlined on 32-byte slots of the stack frame or of the
// arguments (SI points at the first point, DI at the second), the result
// written to the output only after the last read of the inputs, so it may
// alias one. A product's reduced result (t4..t7) is doubled, added to or
// subtracted from in registers (dblHigh, addHigh, subHigh, subLow) before it is
// stored, and 2YZ or 2 Z1 H stands for (Y+Z)^2 - Y^2 - Z^2 or
// (Z1+H)^2 - Z1Z1 - HH: the same values, fully reduced, so the same limbs
// as the Go code's (FuzzPointFormulas).

// fmul sets dst = a*b/2^256 mod p.
func fmul(dst, a, b Mem) {
	mul(a, b)
	reduceP()
	storeHigh(dst)
}

// fsqr sets dst = a^2/2^256 mod p.
func fsqr(dst, a Mem) {
	square(a)
	reduceP()
	storeHigh(dst)
}

// fadd sets dst = a+b mod p: the sum, and p subtracted from a copy unless
// that borrows (CMOV, no branch).
func fadd(dst, a, b Mem) {
	for i := 0; i < 4; i++ {
		MOVQ(limb(a, i), t[4+i])
	}
	addHigh(b)
	storeHigh(dst)
}

// fsub sets dst = a-b mod p: the difference, plus p masked by the borrow.
func fsub(dst, a, b Mem) {
	for i := 0; i < 4; i++ {
		MOVQ(limb(a, i), t[i])
	}
	SUBQ(limb(b, 0), t[0])
	for i := 1; i < 4; i++ {
		SBBQ(limb(b, i), t[i])
	}
	SBBQ(RAX, RAX)
	for i := 0; i < 4; i++ {
		MOVQ(primeData.Offset(8*i), t[4+i])
		ANDQ(RAX, t[4+i])
	}
	ADDQ(t[4], t[0])
	for i := 1; i < 4; i++ {
		ADCQ(t[4+i], t[i])
	}
	for i := 0; i < 4; i++ {
		MOVQ(t[i], limb(dst, i))
	}
}

// copyElem copies the element at src to dst through AX.
func copyElem(dst, src Mem) {
	for i := 0; i < 4; i++ {
		MOVQ(limb(src, i), RAX)
		MOVQ(RAX, limb(dst, i))
	}
}

// slots returns n 32-byte slots of the stack frame.
func slots(n int) []Mem {
	base := AllocLocal(32 * n)
	s := make([]Mem, n)
	for i := range s {
		s[i] = base.Offset(32 * i)
	}
	return s
}

// coord returns the i-th coordinate of the point at the pointer in r.
func coord(r GPPhysical, i int) Mem { return Mem{Base: r, Disp: 32 * i} }

func pointDouble() {
	TEXT("p256PointDouble", 0, "func(q, a *[3][4]uint64)")
	Pragma("noescape")
	Doc("p256PointDouble sets q = 2a (Jacobian, dbl-2001-b; a not the infinity).")
	s := slots(7)
	gamma, beta4, beta8, alpha, t0, t1, z3 := s[0], s[1], s[2], s[3], s[4], s[5], s[6]
	Load(Param("a"), RSI)
	x, y, z := coord(RSI, 0), coord(RSI, 1), coord(RSI, 2)
	Comment("delta = Z^2 in registers; alpha = 3(X-delta)(X+delta): alpha + 2 alpha in registers")
	square(z)
	reduceP()
	for i := 0; i < 4; i++ {
		MOVQ(limb(x, i), t[i])
	}
	subLow()
	storeLow(t0)
	addHigh(x)
	storeHigh(t1)
	fsqr(gamma, y)
	mul(t0, t1)
	reduceP()
	storeHigh(t0)
	dblHigh(1)
	addHigh(t0)
	storeHigh(alpha)
	Comment("4 beta and 8 beta (beta = X gamma), doubled in registers")
	mul(x, gamma)
	reduceP()
	dblHigh(2)
	storeHigh(beta4)
	dblHigh(1)
	storeHigh(beta8)
	Comment("Z3 = (Y+Z)^2 - gamma - delta = 2YZ")
	mul(y, z)
	reduceP()
	dblHigh(1)
	storeHigh(z3)
	Comment("X3 = alpha^2 - 8 beta, written to q: every read of a is done")
	Load(Param("q"), RDI)
	square(alpha)
	reduceP()
	subHigh(beta8)
	storeHigh(coord(RDI, 0))
	Comment("Y3 = alpha(4 beta - X3) - 8 gamma^2")
	for i := 0; i < 4; i++ {
		MOVQ(limb(beta4, i), t[i])
	}
	subLow()
	storeLow(t0)
	square(gamma)
	reduceP()
	dblHigh(3)
	storeHigh(gamma)
	mul(alpha, t0)
	reduceP()
	subHigh(gamma)
	storeHigh(coord(RDI, 1))
	copyElem(coord(RDI, 2), z3)
	RET()
}

// subLow sets t[0..3] = t[0..3] - t[4..7] mod p: the difference, plus p
// masked by the borrow, which needs only AX, BX and CX (p's limbs are
// 2^64-1, 2^32-1, 0 and 2^64-2^32+1).
func subLow() {
	SUBQ(t[4], t[0])
	for i := 1; i < 4; i++ {
		SBBQ(t[4+i], t[i])
	}
	SBBQ(RAX, RAX)
	MOVQ(RAX, RBX)
	SHRQ(U8(32), RBX)
	MOVQ(primeData.Offset(24), RCX)
	ANDQ(RAX, RCX)
	ADDQ(RAX, t[0])
	ADCQ(RBX, t[1])
	ADCQ(Imm(0), t[2])
	ADCQ(RCX, t[3])
}

// storeLow writes t[0..3] to the element at m.
func storeLow(m Mem) {
	for i := 0; i < 4; i++ {
		MOVQ(t[i], limb(m, i))
	}
}

// dblHigh doubles t[4..7] mod p k times in place (t[0..3] and BX scratch):
// each time the sum, and p subtracted from a copy unless that borrows.
func dblHigh(k int) {
	for ; k > 0; k-- {
		XORQ(RBX, RBX)
		ADDQ(t[4], t[4])
		for i := 5; i < 8; i++ {
			ADCQ(t[i], t[i])
		}
		ADCQ(Imm(0), RBX)
		reduceHighOnce()
	}
}

// addHigh sets t[4..7] = t[4..7] + b mod p (t[0..3] and BX scratch).
func addHigh(b Mem) {
	XORQ(RBX, RBX)
	ADDQ(limb(b, 0), t[4])
	for i := 1; i < 4; i++ {
		ADCQ(limb(b, i), t[4+i])
	}
	ADCQ(Imm(0), RBX)
	reduceHighOnce()
}

// reduceHighOnce subtracts p from BX:t[4..7] (below 2p) unless that borrows.
func reduceHighOnce() { reduceHighOnceMod(primeData) }

// reduceHighOnceMod subtracts the modulus at m from BX:t[4..7] (below twice
// it) unless that borrows: t[0..3] hold the difference, CMOV keeps it.
func reduceHighOnceMod(m Mem) {
	for i := 0; i < 4; i++ {
		MOVQ(t[4+i], t[i])
	}
	SUBQ(m.Offset(0), t[0])
	SBBQ(m.Offset(8), t[1])
	SBBQ(m.Offset(16), t[2])
	SBBQ(m.Offset(24), t[3])
	SBBQ(Imm(0), RBX)
	for i := 0; i < 4; i++ {
		CMOVQCC(t[i], t[4+i])
	}
}

// subHigh sets t[4..7] = t[4..7] - b mod p: the difference, plus p masked
// by the borrow (t[0..3] and AX scratch).
func subHigh(b Mem) {
	SUBQ(limb(b, 0), t[4])
	for i := 1; i < 4; i++ {
		SBBQ(limb(b, i), t[4+i])
	}
	SBBQ(RAX, RAX)
	for i := 0; i < 4; i++ {
		MOVQ(primeData.Offset(8*i), t[i])
		ANDQ(RAX, t[i])
	}
	ADDQ(t[0], t[4])
	for i := 1; i < 4; i++ {
		ADCQ(t[i], t[4+i])
	}
}

func pointAddMixed() {
	TEXT("p256PointAddMixed", 0, "func(q, a *[3][4]uint64, b *[2][4]uint64)")
	Pragma("noescape")
	Doc(
		"p256PointAddMixed sets q = a + b (madd-2007-bl; a Jacobian, not the",
		"infinity; b affine). If a = ±b it leaves Z3 = 0, which the caller checks.",
	)
	s := slots(9)
	z1z1, h, hh, i, j, r, v, x3, z3 := s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8]
	Load(Param("a"), RSI)
	Load(Param("b"), RDI)
	x1, y1, z1 := coord(RSI, 0), coord(RSI, 1), coord(RSI, 2)
	x2, y2 := coord(RDI, 0), coord(RDI, 1)
	fsqr(z1z1, z1)
	Comment("H = X2 Z1Z1 - X1")
	mul(x2, z1z1)
	reduceP()
	subHigh(x1)
	storeHigh(h)
	Comment("r = 2(Y2 Z1 Z1Z1 - Y1)")
	fmul(r, y2, z1)
	mul(r, z1z1)
	reduceP()
	subHigh(y1)
	dblHigh(1)
	storeHigh(r)
	Comment("HH = H^2, I = 4 HH")
	square(h)
	reduceP()
	storeHigh(hh)
	dblHigh(2)
	storeHigh(i)
	fmul(j, h, i)
	fmul(v, x1, i)
	addX3(x3, r, j, v)
	Comment("Z3 = (Z1+H)^2 - Z1Z1 - HH = 2 Z1 H")
	mul(z1, h)
	reduceP()
	dblHigh(1)
	storeHigh(z3)
	storeAddY3(hh, r, v, x3, j, y1, z3, "Y3 = r(V - X3) - 2 Y1 J")
}

func pointAdd() {
	TEXT("p256PointAdd", 0, "func(q, a, b *[3][4]uint64)")
	Pragma("noescape")
	Doc(
		"p256PointAdd sets q = a + b (add-2007-bl; neither the infinity).",
		"If a = ±b it leaves Z3 = 0, which the caller checks.",
	)
	s := slots(15)
	z1z1, z2z2, u1, u2, s1, s2, h, i, j, r, v, x3, z3, tt := s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9], s[10], s[11], s[12], s[13]
	Load(Param("a"), RSI)
	Load(Param("b"), RDI)
	x1, y1, z1 := coord(RSI, 0), coord(RSI, 1), coord(RSI, 2)
	x2, y2, z2 := coord(RDI, 0), coord(RDI, 1), coord(RDI, 2)
	fsqr(z1z1, z1)
	fsqr(z2z2, z2)
	fmul(u1, x1, z2z2)
	fmul(u2, x2, z1z1)
	fmul(s1, y1, z2)
	fmul(s1, s1, z2z2)
	fmul(s2, y2, z1)
	fmul(s2, s2, z1z1)
	fsub(h, u2, u1)
	fsub(r, s2, s1)
	fadd(r, r, r)
	fadd(i, h, h)
	fsqr(i, i)
	fmul(j, h, i)
	fmul(v, u1, i)
	addX3(x3, r, j, v)
	Comment("Z3 = ((Z1+Z2)^2 - Z1Z1 - Z2Z2) H")
	fadd(tt, z1, z2)
	fsqr(tt, tt)
	fsub(tt, tt, z1z1)
	fsub(tt, tt, z2z2)
	fmul(z3, tt, h)
	storeAddY3(tt, r, v, x3, j, s1, z3, "Y3 = r(V - X3) - 2 S1 J")
}

// addX3 emits X3 = r^2 - J - 2V, the first coordinate of both additions.
func addX3(x3, r, j, v Mem) {
	Comment("X3 = r^2 - J - 2V")
	square(r)
	reduceP()
	subHigh(j)
	subHigh(v)
	subHigh(v)
	storeHigh(x3)
}

// storeAddY3 emits Y3 = r(V - X3) - 2 s J (s is Y1 or S1; tt is scratch, J is
// overwritten) and stores X3, Y3 and Z3 into the result q, then returns.
func storeAddY3(tt, r, v, x3, j, s, z3 Mem, comment string) {
	Comment(comment)
	mul(s, j)
	reduceP()
	dblHigh(1)
	storeHigh(j)
	fsub(tt, v, x3)
	mul(r, tt)
	reduceP()
	subHigh(j)
	Load(Param("q"), RDI)
	storeHigh(coord(RDI, 1))
	copyElem(coord(RDI, 0), x3)
	copyElem(coord(RDI, 2), z3)
	RET()
}
