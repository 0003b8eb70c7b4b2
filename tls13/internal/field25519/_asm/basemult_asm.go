package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The fixed-base state (field25519's basemult.go declares the same list):
// the accumulated point in extended coordinates, the selected affine Niels
// point, a zero element, and the addition's temporaries.
const (
	bX = iota
	bY
	bZ
	bT
	bQp // y + x of the selected point
	bQm // y - x
	bQd // 2*d*x*y
	bZero
	bA
	bB
	bC
	bD
	bE
	bF
	bG
	bH
	baseStateLen
)

// baseAdd is one addition of the fixed-base multiplication, in two parts.
//
// The constant-time lookup: row is eight affine Niels points (y+x, y-x,
// 2dxy), entry j-1 being j times a multiple of the base point. Every word
// of every entry is read; the mask of entry j is all ones when abs == j
// ((abs XOR j) - 1 borrows only for 0; SBB turns the borrow into the mask)
// and zero otherwise, and the accumulators collect entry AND mask with XOR
// (at most one mask is set). abs == 0 selects the identity (1, 1, 0). Then
// neg (0 or 1) applies the sign: the mask -neg swaps y+x with y-x and
// picks 0 - 2dxy over 2dxy, both with XORs.
//
// The mixed addition (extended + affine Niels, a = -1, seven
// multiplications): A = (Y-X)(y-x), B = (Y+X)(y+x), C = T*2dxy, D = 2Z,
// E = B-A, F = D-C, G = D+C, H = B+A; X = E*F, Y = G*H, T = E*H, Z = F*G.
//
// Tried and not kept (AMD EPYC, calls of baseAdd in a loop, alternated
// rounds; about 69 ns a call): what made ladderStep faster does not here.
// E, H, F, G formed from the registers B and C are left in, with D = 2Z
// first, cost 2-3 ns a call; masks counted down in one register (SUB, SBB)
// instead of reloading abs, 2 ns; negating C by swapping F and G instead
// of 0 - 2dxy, and 0 - 2dxy kept in registers, no change; the 2dxy scan
// after B's product, or E*H before C's, 3-6 ns slower. Moving the lookup
// to the middle of the previous call (select the next digit's point after
// C's product; a different interface) saved about 0.1 us a public key,
// under the 0.2 us the change would have to earn. The lookup is about 8 ns
// of a call; the seven products are the rest.
func baseAdd() {
	TEXT("baseAdd", NOSPLIT, fmt.Sprintf("func(s *[%d][4]uint64, row *[8][3][4]uint64, abs, neg uint64)", baseStateLen))
	Pragma("noescape")
	Doc(
		"baseAdd sets the point (X, Y, Z, T) in s to itself plus abs times the",
		"point of row's first entry, negated if neg is 1 (abs in [0, 8], neg",
		"0 or 1), reading every entry of row: one step of the fixed-base",
		"multiplication.",
	)
	Load(Param("row"), RSI)
	entry := func(j, c int) Mem { return Mem{Base: RSI, Disp: 96*j + 32*c} }
	mask := func(j int) {
		Load(Param("abs"), RCX)
		XORQ(U8(j), RCX)
		SUBQ(U8(1), RCX)
		SBBQ(RCX, RCX)
	}

	Comment("select y+x (R8-R11) and y-x (R12-R15) from all eight entries")
	for i := 0; i < 8; i++ {
		XORQ(t[i], t[i])
	}
	mask(0)
	ANDQ(U8(1), RCX)
	XORQ(RCX, t[0])
	XORQ(RCX, t[4])
	for j := 1; j <= 8; j++ {
		mask(j)
		for c := 0; c < 2; c++ {
			for i := 0; i < 4; i++ {
				MOVQ(limb(entry(j-1, c), i), RAX)
				ANDQ(RCX, RAX)
				XORQ(RAX, t[4*c+i])
			}
		}
	}
	Comment("a negative digit swaps y+x and y-x")
	Load(Param("neg"), RCX)
	NEGQ(RCX)
	for i := 0; i < 4; i++ {
		MOVQ(t[i], RAX)
		XORQ(t[4+i], RAX)
		ANDQ(RCX, RAX)
		XORQ(RAX, t[i])
		XORQ(RAX, t[4+i])
	}
	Load(Param("s"), RDI)
	e := func(i int) Mem { return Mem{Base: RDI, Disp: 32 * i} }
	store(e(bQp))
	for i := 0; i < 4; i++ {
		MOVQ(t[4+i], limb(e(bQm), i))
	}

	Comment("select 2dxy (R8-R11)")
	for i := 0; i < 4; i++ {
		XORQ(t[i], t[i])
	}
	for j := 1; j <= 8; j++ {
		mask(j)
		for i := 0; i < 4; i++ {
			MOVQ(limb(entry(j-1, 2), i), RAX)
			ANDQ(RCX, RAX)
			XORQ(RAX, t[i])
		}
	}
	store(e(bQd))
	Comment("a negative digit takes 0 - 2dxy")
	sub(e(bZero), e(bQd))
	Load(Param("neg"), RCX)
	NEGQ(RCX)
	for i := 0; i < 4; i++ {
		MOVQ(limb(e(bQd), i), RAX)
		XORQ(RAX, t[i])
		ANDQ(RCX, t[i])
		XORQ(RAX, t[i])
	}
	store(e(bQd))

	Comment("A = (Y-X)(y-x), B = (Y+X)(y+x), C = T*2dxy, D = 2Z")
	sub(e(bY), e(bX))
	store(e(bA))
	mul(e(bA), e(bQm))
	reduce()
	store(e(bA))
	add(e(bY), e(bX))
	store(e(bB))
	mul(e(bB), e(bQp))
	reduce()
	store(e(bB))
	mul(e(bT), e(bQd))
	reduce()
	store(e(bC))
	add(e(bZ), e(bZ))
	store(e(bD))

	Comment("E = B-A, F = D-C, G = D+C, H = B+A")
	sub(e(bB), e(bA))
	store(e(bE))
	sub(e(bD), e(bC))
	store(e(bF))
	add(e(bD), e(bC))
	store(e(bG))
	add(e(bB), e(bA))
	store(e(bH))

	Comment("X = E*F, Y = G*H, T = E*H, Z = F*G")
	for _, m := range [][3]int{{bX, bE, bF}, {bY, bG, bH}, {bT, bE, bH}, {bZ, bF, bG}} {
		mul(e(m[1]), e(m[2]))
		reduce()
		store(e(m[0]))
	}
	RET()
}
