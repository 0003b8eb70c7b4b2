// Command _asm generates field_amd64.s, the BMI2/ADX arithmetic of package
// field25519, with avo. Run `go generate` in the parent directory (or
// `go run . -out ../field_amd64.s -stubs ../field_amd64_stubs.go -pkg field25519`
// here); the generated files are committed, so building ztls needs neither
// this module nor avo.
//
// What is implemented. An element is four 64-bit limbs, radix 2^64,
// little-endian, holding any value in [0, 2^256) (not necessarily below
// p = 2^255-19: every routine accepts and returns that range, and only the
// Go code's final reduction makes a value canonical). Reduction uses
// 2^256 = 38 (mod p):
//
//   - mul: schoolbook 4x4 product into eight limbs, one row per limb of a
//     with the limb in RDX for MULX. Row 0 is one ADD/ADC chain; rows 1-3
//     add the low halves on the carry flag (ADCX) and the high halves on
//     the overflow flag (ADOX), two independent carry chains: the
//     technique of Intel's white paper "New Instructions Supporting Large
//     Integer Arithmetic on Intel Architecture Processors" (Ozturk,
//     Guilford, Gopal and Feghali, 2012), which the four-limb, radix-2^64
//     X25519 arithmetic of Oliveira, López, Hışıl, Faz-Hernández and
//     Rodríguez-Henríquez ("How to (pre-)compute a ladder", SAC 2017) and
//     other fast X25519 code for BMI2/ADX processors build on.
//   - square: the six cross products a_i*a_j (i<j) once, doubled by
//     ADCX x,x on the carry chain while the four squares a_i^2 are added
//     on the overflow chain: ten MULX instead of sixteen.
//   - reduce (after mul and square): the high four limbs H times 38 with
//     MULX (again two chains) added to the low four limbs L, leaving
//     L + 38*H < 39*2^256, i.e. four limbs and a top word t <= 38; then
//     38*t is added to the lowest limb, and a carry out of that chain
//     (then the limbs are below 38*39) adds 38 once more, which cannot
//     carry. The carries become masks (SBB r,r; AND $38): no branch.
//   - add, sub: a 4-limb ADD/ADC (SUB/SBB) chain; a carry (borrow) out
//     means 2^256 too much (too little), corrected by adding
//     (subtracting) 38 through the chain, and once more for a second
//     carry (borrow), which then cannot propagate past the lowest limb.
//   - mul121666: MULX by the constant, a fifth limb t < 121666, reduced as
//     above.
//   - cswap: the RFC 7748 cswap with a mask (0 - swap) and XORs.
//   - ladderStep: one step of the Montgomery ladder of RFC 7748,
//     Section 5 (the cswap, then the differential addition and doubling:
//     5 multiplications, 4 squarings, one multiplication by 121666, with
//     the routines above inlined), on a state array the Go code keeps, so
//     each of the 255 steps is one call; the loop over the scalar bits,
//     the final cswap and the inversion stay in Go. DA + CB, DA - CB,
//     E = AA - BB and BB + 121666*E are formed from the registers a
//     product left CB, BB and 121666*E in (addSubInto), and the products
//     are ordered so that independent ones overlap (see ladderStep).
//
// Constant time: the generated code has no conditional jump, no CMOV and
// no memory address that depends on data: every address is a parameter
// plus a constant offset. field25519's TestGeneratedCodeIsStraightLine
// scans field_amd64.s for that.
//
// Registers: the eight product limbs live in R8-R15, MULX's implicit
// operand in DX, AX and CX are scratch, BX is a zero register (its XOR
// also clears CF and OF before an ADCX/ADOX row), SI and DI hold
// pointers. BP and SP are never touched.
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

//go:generate go run . -out ../field_amd64.s -stubs ../field_amd64_stubs.go -pkg field25519

// t holds the eight limbs of a product, t[0] the lowest.
var t = [8]GPPhysical{R8, R9, R10, R11, R12, R13, R14, R15}

func main() {
	ConstraintExpr("amd64,gc,!purego")

	TEXT("feMul", NOSPLIT, "func(out, a, b *[4]uint64)")
	Pragma("noescape")
	Doc("feMul sets out = a * b mod p, with out < 2^256.")
	Load(Param("a"), RSI)
	Load(Param("b"), RDI)
	mul(Mem{Base: RSI}, Mem{Base: RDI})
	reduce()
	Load(Param("out"), RSI)
	store(Mem{Base: RSI})
	RET()

	TEXT("feSquare", NOSPLIT, "func(out, a *[4]uint64)")
	Pragma("noescape")
	Doc("feSquare sets out = a * a mod p, with out < 2^256.")
	Load(Param("a"), RSI)
	square(Mem{Base: RSI})
	reduce()
	Load(Param("out"), RSI)
	store(Mem{Base: RSI})
	RET()

	TEXT("feAdd", NOSPLIT, "func(out, a, b *[4]uint64)")
	Pragma("noescape")
	Doc("feAdd sets out = a + b mod p, with out < 2^256.")
	Load(Param("a"), RSI)
	Load(Param("b"), RDI)
	add(Mem{Base: RSI}, Mem{Base: RDI})
	Load(Param("out"), RSI)
	store(Mem{Base: RSI})
	RET()

	TEXT("feSub", NOSPLIT, "func(out, a, b *[4]uint64)")
	Pragma("noescape")
	Doc("feSub sets out = a - b mod p, with out < 2^256.")
	Load(Param("a"), RSI)
	Load(Param("b"), RDI)
	sub(Mem{Base: RSI}, Mem{Base: RDI})
	Load(Param("out"), RSI)
	store(Mem{Base: RSI})
	RET()

	TEXT("feMul121666", NOSPLIT, "func(out, a *[4]uint64)")
	Pragma("noescape")
	Doc("feMul121666 sets out = a * 121666 mod p, with out < 2^256.")
	Load(Param("a"), RSI)
	mul121666(Mem{Base: RSI})
	Load(Param("out"), RSI)
	store(Mem{Base: RSI})
	RET()

	TEXT("feCSwap", NOSPLIT, "func(a, b *[4]uint64, swap uint64)")
	Pragma("noescape")
	Doc("feCSwap swaps a and b if swap is 1 and leaves them if it is 0, in constant time.")
	Load(Param("a"), RDI)
	Load(Param("b"), RCX)
	Load(Param("swap"), RSI)
	NEGQ(RSI)
	cswap(Mem{Base: RDI}, Mem{Base: RCX}, RSI)
	RET()

	ladderStep()
	baseAdd()

	Generate()
}

// The ladder state: field elements at these indexes of a [stateLen][4]uint64.
const (
	sX1 = iota
	sX2
	sZ2
	sX3
	sZ3
	sA
	sB
	sC
	sD
	sAA
	sBB
	sDA
	sCB
	sE
	sT
	stateLen
)

func ladderStep() {
	TEXT("ladderStep", NOSPLIT, fmt.Sprintf("func(s *[%d][4]uint64, swap uint64)", stateLen))
	Pragma("noescape")
	Doc(
		"ladderStep runs one step of the RFC 7748 Montgomery ladder on s: it swaps",
		"(x2, z2) with (x3, z3) if swap is 1, then sets (x2, z2) to the double",
		"of (x2, z2) and (x3, z3) to the sum of both (difference x1).",
	)
	Load(Param("s"), RDI)
	e := func(i int) Mem { return Mem{Base: RDI, Disp: 32 * i} }

	Comment("cswap(x2, x3), cswap(z2, z3)")
	Load(Param("swap"), RSI)
	NEGQ(RSI)
	cswap(e(sX2), e(sX3), RSI)
	cswap(e(sZ2), e(sZ3), RSI)

	Comment("A = x2 + z2, B = x2 - z2, C = x3 + z3, D = x3 - z3")
	add(e(sX2), e(sZ2))
	store(e(sA))
	sub(e(sX2), e(sZ2))
	store(e(sB))
	add(e(sX3), e(sZ3))
	store(e(sC))
	sub(e(sX3), e(sZ3))
	store(e(sD))

	// Results that feed an add or sub are used from the registers the
	// product leaves them in (CB, BB, 121666*E); the order below (the
	// longest chain, DA - CB squared and times x1, started early, with
	// independent products between dependent ones) was measured fastest of
	// eight tried: about 1 us less per ladder than AA, BB, DA, CB, x2, x3,
	// z3, z2 (AMD EPYC).
	lo, hi := [4]GPPhysical(t[:4]), [4]GPPhysical(t[4:])
	Comment("DA = D*A; CB = C*B, kept in registers for DA + CB (to T) and DA - CB (to CB)")
	mul(e(sD), e(sA))
	reduce()
	store(e(sDA))
	mul(e(sC), e(sB))
	reduce()
	addSubInto(hi, memLimbs(e(sDA)), regLimbs(lo), false)
	store4(hi, e(sT))
	addSubInto(hi, memLimbs(e(sDA)), regLimbs(lo), true)
	store4(hi, e(sCB))

	Comment("AA = A^2; BB = B^2, kept in registers for E = AA - BB")
	square(e(sA))
	reduce()
	store(e(sAA))
	square(e(sB))
	reduce()
	store(e(sBB))
	addSubInto(hi, memLimbs(e(sAA)), regLimbs(lo), true)
	store4(hi, e(sE))

	Comment("(DA - CB)^2, to CB")
	square(e(sCB))
	reduce()
	store(e(sCB))

	Comment("BB + 121666*E, to A (free now)")
	mul121666(e(sE))
	addSubInto(lo, regLimbs(lo), memLimbs(e(sBB)), false)
	store(e(sA))

	Comment("z3 = x1 * (DA - CB)^2")
	mul(e(sCB), e(sX1))
	reduce()
	store(e(sZ3))

	Comment("x3 = (DA + CB)^2")
	square(e(sT))
	reduce()
	store(e(sX3))

	Comment("x2 = AA*BB")
	mul(e(sAA), e(sBB))
	reduce()
	store(e(sX2))

	Comment("z2 = E * (BB + 121666*E), which is E * (AA + 121665*E)")
	mul(e(sA), e(sE))
	reduce()
	store(e(sZ2))
	RET()
}

// limb returns the i-th 64-bit limb of the element at m.
func limb(m Mem, i int) Mem { return m.Offset(8 * i) }

// store writes t[0..3] to the element at m.
func store(m Mem) {
	for i := 0; i < 4; i++ {
		MOVQ(t[i], limb(m, i))
	}
}

// mul leaves the 512-bit product of the elements at a and b in t[0..7].
func mul(a, b Mem) {
	Comment("a * b: row 0")
	MOVQ(limb(a, 0), RDX)
	MULXQ(limb(b, 0), t[0], t[1])
	MULXQ(limb(b, 1), RAX, t[2])
	ADDQ(RAX, t[1])
	MULXQ(limb(b, 2), RAX, t[3])
	ADCQ(RAX, t[2])
	MULXQ(limb(b, 3), RAX, t[4])
	ADCQ(RAX, t[3])
	ADCQ(Imm(0), t[4])
	for i := 1; i < 4; i++ {
		Comment(fmt.Sprintf("row %d: low halves on CF (ADCX), high halves on OF (ADOX)", i))
		MOVQ(limb(a, i), RDX)
		XORQ(RBX, RBX)
		for j := 0; j < 3; j++ {
			MULXQ(limb(b, j), RAX, RCX)
			ADCXQ(RAX, t[i+j])
			ADOXQ(RCX, t[i+j+1])
		}
		MULXQ(limb(b, 3), RAX, t[i+4])
		ADCXQ(RAX, t[i+3])
		ADOXQ(RBX, t[i+4])
		ADCXQ(RBX, t[i+4])
	}
}

// square leaves the 512-bit square of the element at a in t[0..7].
func square(a Mem) {
	Comment("a^2: cross products a0*a1, a0*a2, a0*a3")
	MOVQ(limb(a, 0), RDX)
	MULXQ(limb(a, 1), t[1], t[2])
	MULXQ(limb(a, 2), RAX, t[3])
	MULXQ(limb(a, 3), RCX, t[4])
	ADDQ(RAX, t[2])
	ADCQ(RCX, t[3])
	ADCQ(Imm(0), t[4])
	Comment("a1*a2, a1*a3")
	MOVQ(limb(a, 1), RDX)
	XORQ(RBX, RBX)
	MULXQ(limb(a, 2), RAX, RCX)
	ADCXQ(RAX, t[3])
	ADOXQ(RCX, t[4])
	MULXQ(limb(a, 3), RAX, t[5])
	ADCXQ(RAX, t[4])
	ADOXQ(RBX, t[5])
	ADCXQ(RBX, t[5])
	Comment("a2*a3")
	MOVQ(limb(a, 2), RDX)
	MULXQ(limb(a, 3), RAX, t[6])
	ADDQ(RAX, t[5])
	ADCQ(Imm(0), t[6])
	Comment("double the cross products (CF) and add the squares (OF)")
	XORQ(RBX, RBX)
	MOVQ(limb(a, 0), RDX)
	MULXQ(RDX, t[0], RAX)
	ADCXQ(t[1], t[1])
	ADOXQ(RAX, t[1])
	for i := 1; i < 4; i++ {
		MOVQ(limb(a, i), RDX)
		if i < 3 {
			MULXQ(RDX, RAX, RCX)
		} else {
			MULXQ(RDX, RAX, t[7])
		}
		ADCXQ(t[2*i], t[2*i])
		ADOXQ(RAX, t[2*i])
		if i < 3 {
			ADCXQ(t[2*i+1], t[2*i+1])
			ADOXQ(RCX, t[2*i+1])
		}
	}
	ADCXQ(RBX, t[7])
	ADOXQ(RBX, t[7])
}

// reduce folds t[4..7] into t[0..3] with 2^256 = 38 (mod p).
func reduce() {
	Comment("reduce: t[0..3] += 38 * t[4..7]")
	MOVQ(U32(38), RDX)
	XORQ(RBX, RBX)
	for i := 0; i < 3; i++ {
		MULXQ(t[4+i], RAX, RCX)
		ADCXQ(RAX, t[i])
		ADOXQ(RCX, t[i+1])
	}
	MULXQ(t[7], RAX, t[4])
	ADCXQ(RAX, t[3])
	ADOXQ(RBX, t[4])
	ADCXQ(RBX, t[4])
	Comment("the top word (at most 38) times 38, then one more 38 on a carry out")
	IMUL3Q(U8(38), t[4], t[4])
	ADDQ(t[4], t[0])
	ADCQ(RBX, t[1])
	ADCQ(RBX, t[2])
	ADCQ(RBX, t[3])
	fold38(ADDQ)
}

// fold38 turns the carry (borrow) flag into 38 or 0 and adds (subtracts) it
// to t[0] with op, which cannot carry (borrow) again at the places it is used.
func fold38(op func(imr, mr Op)) {
	SBBQ(RAX, RAX)
	ANDQ(U8(38), RAX)
	op(RAX, t[0])
}

// add leaves a + b mod p (below 2^256) in t[0..3].
func add(a, b Mem) {
	Comment("a + b")
	addSubInto([4]GPPhysical(t[:4]), memLimbs(a), memLimbs(b), false)
}

// sub leaves a - b mod p (below 2^256) in t[0..3].
func sub(a, b Mem) {
	Comment("a - b")
	addSubInto([4]GPPhysical(t[:4]), memLimbs(a), memLimbs(b), true)
}

// memLimbs and regLimbs give an element's four limbs as operands: at m, or
// in the registers r (r[0] the lowest).
func memLimbs(m Mem) [4]Op {
	return [4]Op{limb(m, 0), limb(m, 1), limb(m, 2), limb(m, 3)}
}

func regLimbs(r [4]GPPhysical) [4]Op { return [4]Op{r[0], r[1], r[2], r[3]} }

// store4 writes the registers r to the element at m.
func store4(r [4]GPPhysical, m Mem) {
	for i := 0; i < 4; i++ {
		MOVQ(r[i], limb(m, i))
	}
}

// addSubInto leaves a + b (a - b if isSub) mod p, below 2^256, in dst; dst
// may be a's registers but must not overlap b's. It is the add and sub of
// the doc above with operands wherever they are: a product's result is
// added or subtracted in the registers it is left in, without a store and a
// reload, and the result is the same value, bit for bit.
func addSubInto(dst [4]GPPhysical, a, b [4]Op, isSub bool) {
	op, opc := ADDQ, ADCQ
	if isSub {
		op, opc = SUBQ, SBBQ
	}
	for i := 0; i < 4; i++ {
		if a[i] != Op(dst[i]) {
			MOVQ(a[i], dst[i])
		}
	}
	op(b[0], dst[0])
	for i := 1; i < 4; i++ {
		opc(b[i], dst[i])
	}
	SBBQ(RAX, RAX)
	ANDQ(U8(38), RAX)
	op(RAX, dst[0])
	for i := 1; i < 4; i++ {
		opc(Imm(0), dst[i])
	}
	SBBQ(RAX, RAX)
	ANDQ(U8(38), RAX)
	op(RAX, dst[0])
}

// mul121666 leaves 121666 * a mod p (below 2^256) in t[0..3].
func mul121666(a Mem) { mul121666Of(memLimbs(a)) }

// mul121666Of is mul121666 of the limbs a, in memory or in registers; a
// may be t[4..7] (t[4], overwritten by the top word, is read first).
func mul121666Of(a [4]Op) {
	Comment("121666 * a")
	MOVQ(U32(121666), RDX)
	MULXQ(a[0], t[0], RAX)
	MULXQ(a[1], t[1], RCX)
	ADDQ(RAX, t[1])
	MULXQ(a[2], t[2], RAX)
	ADCQ(RCX, t[2])
	MULXQ(a[3], t[3], t[4])
	ADCQ(RAX, t[3])
	ADCQ(Imm(0), t[4])
	IMUL3Q(U8(38), t[4], t[4])
	ADDQ(t[4], t[0])
	for i := 1; i < 4; i++ {
		ADCQ(Imm(0), t[i])
	}
	fold38(ADDQ)
}

// cswap exchanges the elements at a and b where mask is all ones and keeps
// them where it is zero.
func cswap(a, b Mem, mask GPPhysical) {
	for i := 0; i < 4; i++ {
		MOVQ(limb(a, i), RAX)
		MOVQ(limb(b, i), RDX)
		MOVQ(RAX, RBX)
		XORQ(RDX, RBX)
		ANDQ(mask, RBX)
		XORQ(RBX, RAX)
		XORQ(RBX, RDX)
		MOVQ(RAX, limb(a, i))
		MOVQ(RDX, limb(b, i))
	}
}
