package field25519

// ladderState holds the ladder's field elements at the indexes below, the
// layout the generated ladderStep reads (_asm/field_amd64_asm.go declares
// the same list).
type ladderState [stateLen][4]uint64

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

// ScalarMult sets out = X25519(scalar, u) (RFC 7748, Section 5): the
// scalar clamped, u's top bit ignored and a u of p or more taken modulo p,
// 255 ladder steps with a constant-time cswap, then one inversion. It does
// not refuse an all-zero result (a low-order u): callers that must, do.
func ScalarMult(out, scalar, u *[32]byte) {
	var k [32]byte
	copy(k[:], scalar[:])
	k[0] &= 248
	k[31] &= 127
	k[31] |= 64

	var s ladderState
	var x1 Element
	if _, err := x1.SetBytes(u[:]); err != nil {
		panic(err) // unreachable: u is 32 bytes
	}
	s[sX1] = x1.l
	s[sX2] = [4]uint64{1}
	s[sX3] = x1.l
	s[sZ3] = [4]uint64{1}

	swap := uint64(0)
	for t := 254; t >= 0; t-- {
		kt := uint64(k[t/8]>>(t%8)) & 1
		swap ^= kt
		step(&s, swap)
		swap = kt
	}
	cswap(&s[sX2], &s[sX3], swap)
	cswap(&s[sZ2], &s[sZ3], swap)

	var x2, z2 Element
	x2.l, z2.l = s[sX2], s[sZ2]
	z2.Invert(&z2)
	x2.Multiply(&x2, &z2)
	x2.fillBytes(out)
	clear(k[:])
	clear(s[:])
}
