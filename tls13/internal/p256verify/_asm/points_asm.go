package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The point routines: the formulas of the Go code (point.go), each field
// operation inlined on 32-byte slots of the stack frame or of the
// arguments (SI points at the first point, DI at the second), the result
// written to the output only at the end, so it may alias an input.

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
	XORQ(RBX, RBX)
	for i := 0; i < 4; i++ {
		MOVQ(limb(a, i), t[i])
	}
	ADDQ(limb(b, 0), t[0])
	for i := 1; i < 4; i++ {
		ADCQ(limb(b, i), t[i])
	}
	ADCQ(Imm(0), RBX)
	for i := 0; i < 4; i++ {
		MOVQ(t[i], t[4+i])
	}
	SUBQ(primeData.Offset(0), t[4])
	SBBQ(primeData.Offset(8), t[5])
	SBBQ(primeData.Offset(16), t[6])
	SBBQ(primeData.Offset(24), t[7])
	SBBQ(Imm(0), RBX)
	for i := 0; i < 4; i++ {
		CMOVQCC(t[4+i], t[i])
		MOVQ(t[i], limb(dst, i))
	}
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
	s := slots(9)
	delta, gamma, beta, alpha, t0, t1, x3, y3, z3 := s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8]
	Load(Param("a"), RSI)
	x, y, z := coord(RSI, 0), coord(RSI, 1), coord(RSI, 2)
	fsqr(delta, z)
	fsqr(gamma, y)
	fmul(beta, x, gamma)
	Comment("alpha = 3(X-delta)(X+delta)")
	fsub(t0, x, delta)
	fadd(t1, x, delta)
	fmul(alpha, t0, t1)
	fadd(t0, alpha, alpha)
	fadd(alpha, t0, alpha)
	Comment("Z3 = (Y+Z)^2 - gamma - delta")
	fadd(t1, y, z)
	fsqr(t1, t1)
	fsub(t1, t1, gamma)
	fsub(z3, t1, delta)
	Comment("X3 = alpha^2 - 8 beta")
	fadd(beta, beta, beta)
	fadd(beta, beta, beta)
	fsqr(t0, alpha)
	fsub(t0, t0, beta)
	fsub(x3, t0, beta)
	Comment("Y3 = alpha(4 beta - X3) - 8 gamma^2")
	fsub(t0, beta, x3)
	fmul(t0, alpha, t0)
	fsqr(gamma, gamma)
	fadd(gamma, gamma, gamma)
	fadd(gamma, gamma, gamma)
	fadd(gamma, gamma, gamma)
	fsub(y3, t0, gamma)
	Load(Param("q"), RDI)
	copyElem(coord(RDI, 0), x3)
	copyElem(coord(RDI, 1), y3)
	copyElem(coord(RDI, 2), z3)
	RET()
}

func pointAddMixed() {
	TEXT("p256PointAddMixed", 0, "func(q, a *[3][4]uint64, b *[2][4]uint64)")
	Pragma("noescape")
	Doc(
		"p256PointAddMixed sets q = a + b (madd-2007-bl; a Jacobian, not the",
		"infinity; b affine). If a = ±b it leaves Z3 = 0, which the caller checks.",
	)
	s := slots(12)
	z1z1, u2, s2, h, hh, i, j, r, v, x3, z3, tt := s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9], s[10], s[11]
	Load(Param("a"), RSI)
	Load(Param("b"), RDI)
	x1, y1, z1 := coord(RSI, 0), coord(RSI, 1), coord(RSI, 2)
	x2, y2 := coord(RDI, 0), coord(RDI, 1)
	fsqr(z1z1, z1)
	fmul(u2, x2, z1z1)
	fmul(s2, y2, z1)
	fmul(s2, s2, z1z1)
	fsub(h, u2, x1)
	fsub(r, s2, y1)
	fadd(r, r, r)
	fsqr(hh, h)
	fadd(i, hh, hh)
	fadd(i, i, i)
	fmul(j, h, i)
	fmul(v, x1, i)
	addX3(x3, r, j, v)
	Comment("Z3 = (Z1+H)^2 - Z1Z1 - HH")
	fadd(tt, z1, h)
	fsqr(tt, tt)
	fsub(tt, tt, z1z1)
	fsub(z3, tt, hh)
	storeAddY3(tt, r, v, x3, j, y1, z3, "Y3 = r(V - X3) - 2 Y1 J")
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
	fsqr(x3, r)
	fsub(x3, x3, j)
	fsub(x3, x3, v)
	fsub(x3, x3, v)
}

// storeAddY3 emits Y3 = r(V - X3) - 2 s J (s is Y1 or S1; tt is scratch, J is
// overwritten) and stores X3, Y3 and Z3 into the result q, then returns.
func storeAddY3(tt, r, v, x3, j, s, z3 Mem, comment string) {
	Comment(comment)
	fsub(tt, v, x3)
	fmul(tt, r, tt)
	fmul(j, s, j)
	fadd(j, j, j)
	Load(Param("q"), RDI)
	fsub(coord(RDI, 1), tt, j)
	copyElem(coord(RDI, 0), x3)
	copyElem(coord(RDI, 2), z3)
	RET()
}
