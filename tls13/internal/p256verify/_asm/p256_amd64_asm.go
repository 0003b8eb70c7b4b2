// Command _asm generates field_amd64.s, the BMI2/ADX Montgomery arithmetic
// of package p256verify, with avo. Run `go generate` in the parent
// directory (or `go run . -out ../field_amd64.s -stubs ../field_amd64_stubs.go
// -pkg p256verify` here); the generated files are committed, so building
// ztls needs neither this module nor avo.
//
// What is implemented. An element is four 64-bit limbs, radix 2^64,
// little-endian, below its modulus (p, the P-256 field, or n, the group
// order), in Montgomery form with R = 2^256. Every routine takes reduced
// inputs and returns a reduced output:
//
//   - the product: a schoolbook 4x4 product into eight limbs t0..t7, one
//     row per limb of a with that limb in RDX for MULX; rows 1-3 add the
//     low halves on the carry flag (ADCX) and the high halves on the
//     overflow flag (ADOX), two independent carry chains (Intel's "New
//     Instructions Supporting Large Integer Arithmetic on Intel
//     Architecture Processors", 2012). The same code as field25519's.
//   - the square: the six cross products once, doubled on the carry chain
//     while the four squares are added on the overflow chain (ten MULX).
//   - Montgomery reduction mod p: the low half L = t0..t3 is reduced on its
//     own, then the high half H = t4..t7 added. Four rounds replace the
//     running value s (first L) by (s + m*p) / 2^64 with m = s0 (for p,
//     -p^-1 mod 2^64 is 1). Since p = 2^256 - 2^224 + 2^192 + 2^96 - 1,
//     s0 + m*(2^64-1) is m*2^64 and the rest of m*p is
//     m*(2^32-1)*2^64 + m*p3*2^192, so a round is s1 + m*2^32 (two shifts),
//     s2, s3 + m*p3 (one MULX) and the high word of m*p3: four limbs, since
//     s < 2^256 gives (s + m*p) / 2^64 < 2^192 + p < 2^256, in the same
//     registers shifted by one. The result is at most p, H is below p (the
//     product is below p^2), so L/2^256 + H is below 2p.
//   - Montgomery reduction mod n: the same rolling four limbs with
//     m = s0 * n0 (n0 = -n^-1 mod 2^64) and m*n added as one MULX row on
//     the two carry chains; (s + m*n) / 2^64 < 2^192 + n < 2^256 again.
//   - the end of both: t4..t7 plus the reduced low half, with its carry,
//     is below 2m; m is subtracted into copies and CMOVs keep the
//     difference unless it borrowed.
//
// Registers: the eight product limbs live in R8-R15, MULX's implicit
// operand in DX, AX, BX, CX, SI and DI are scratch or pointers. BP and SP
// are never touched. The code is straight-line (no jump): not needed for
// verification, whose inputs are public, but it keeps the routines simple
// to review.
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

//go:generate go run . -out ../field_amd64.s -stubs ../field_amd64_stubs.go -pkg p256verify

// t holds the eight limbs of a product, t[0] the lowest.
var t = [8]GPPhysical{R8, R9, R10, R11, R12, R13, R14, R15}

// The group order n and -n^-1 mod 2^64, and the prime p, as read-only data.
var orderData, primeData Mem

// montRoutine emits one Montgomery multiplication (func(out, a, b)) or
// squaring (func(out, a)) followed by reduce (reduceP or reduceN).
func montRoutine(name, doc string, sqr bool, reduce func()) {
	sig := "func(out, a, b *[4]uint64)"
	if sqr {
		sig = "func(out, a *[4]uint64)"
	}
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	Doc(doc)
	Load(Param("a"), RSI)
	if sqr {
		square(Mem{Base: RSI})
	} else {
		Load(Param("b"), RDI)
		mul(Mem{Base: RSI}, Mem{Base: RDI})
	}
	reduce()
	Load(Param("out"), RSI)
	storeHigh(Mem{Base: RSI})
	RET()
}

func main() {
	ConstraintExpr("amd64,gc,!purego")
	orderData = GLOBL("p256Order", RODATA|NOPTR)
	for i, v := range []uint64{0xf3b9cac2fc632551, 0xbce6faada7179e84, 0xffffffffffffffff, 0xffffffff00000000, 0xccd1c8aaee00bc4f} {
		DATA(8*i, U64(v))
	}
	primeData = GLOBL("p256Prime", RODATA|NOPTR)
	for i, v := range []uint64{0xffffffffffffffff, 0x00000000ffffffff, 0, 0xffffffff00000001} {
		DATA(8*i, U64(v))
	}

	montRoutine("p256Mul", "p256Mul sets out = a * b / 2^256 mod p.", false, reduceP)
	montRoutine("p256Sqr", "p256Sqr sets out = a * a / 2^256 mod p.", true, reduceP)
	montRoutine("p256OrdMul", "p256OrdMul sets out = a * b / 2^256 mod n.", false, reduceN)
	montRoutine("p256OrdSqr", "p256OrdSqr sets out = a * a / 2^256 mod n.", true, reduceN)

	pointDouble()
	pointAddMixed()
	pointAdd()
	Generate()
}

// limb returns the i-th 64-bit limb of the element at m.
func limb(m Mem, i int) Mem { return m.Offset(8 * i) }

// storeHigh writes t[4..7] to the element at m.
func storeHigh(m Mem) {
	for i := 0; i < 4; i++ {
		MOVQ(t[4+i], limb(m, i))
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

// reduceP turns t[0..7] into t[4..7] = t / 2^256 mod p (see the file's
// doc). It uses AX, BX, CX and DX only, so SI and DI may hold pointers.
func reduceP() {
	Comment("Montgomery reduction mod p of the low half L = t0..t3, in place")
	w := []GPPhysical{t[0], t[1], t[2], t[3]} // the running value, lowest limb first
	for i := 0; i < 4; i++ {
		Comment(fmt.Sprintf("round %d: (s + m*p) / 2^64 with m = s0: s1 + m*2^32, s2, s3 + m*p3", i))
		MOVQ(w[0], RDX)
		MOVQ(RDX, RAX)
		SHLQ(U8(32), RAX)
		MOVQ(RDX, RCX)
		SHRQ(U8(32), RCX)
		MULXQ(primeData.Offset(24), RBX, w[0])
		ADDQ(RAX, w[1])
		ADCQ(RCX, w[2])
		ADCQ(RBX, w[3])
		ADCQ(Imm(0), w[0])
		w = append(w[1:], w[0])
	}
	addReducedLow(primeData, "p")
}

// reduceN turns t[0..7] into t[4..7] = t / 2^256 mod n: the low half
// reduced in its four registers as for p, each round's m*n added by MULX
// rows on the two carry chains (ADCX for the low halves, ADOX for the high
// ones), then the high half added.
func reduceN() {
	Comment("Montgomery reduction mod n of the low half L = t0..t3, in place; BX = 0")
	w := []GPPhysical{t[0], t[1], t[2], t[3]}
	for i := 0; i < 4; i++ {
		Comment(fmt.Sprintf("round %d: m = s0 * n0; s = (s + m*n) / 2^64", i))
		MOVQ(w[0], RDX)
		IMULQ(orderData.Offset(32), RDX)
		XORQ(RBX, RBX)
		for j := 0; j < 3; j++ {
			MULXQ(orderData.Offset(8*j), RAX, RCX)
			ADCXQ(RAX, w[j])
			ADOXQ(RCX, w[j+1])
		}
		MULXQ(orderData.Offset(24), RAX, w[0]) // s0 is 0 plus a carry by now
		ADCXQ(RAX, w[3])
		ADOXQ(RBX, w[0])
		ADCXQ(RBX, w[0])
		w = append(w[1:], w[0])
	}
	addReducedLow(orderData, "n")
}

// addReducedLow ends a Montgomery reduction mod the modulus at m (named
// name in the comments): t4..t7 += the reduced low half t0..t3 (each below
// twice the modulus in sum), carry in BX, then the modulus subtracted
// unless that borrows.
func addReducedLow(m Mem, name string) {
	Comment("t4..t7 += the reduced low half (the sum is below 2" + name + "), carry in BX")
	XORQ(RBX, RBX)
	ADDQ(t[0], t[4])
	ADCQ(t[1], t[5])
	ADCQ(t[2], t[6])
	ADCQ(t[3], t[7])
	ADCQ(Imm(0), RBX)
	Comment("subtract " + name + " unless that borrows")
	reduceHighOnceMod(m)
}
