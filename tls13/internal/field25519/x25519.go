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
	x2, z2 := ladder(scalar, u)
	z2.Invert(&z2)
	x2.Multiply(&x2, &z2)
	x2.fillBytes(out)
}

// ladder runs ScalarMult's ladder and returns the projective result
// (X2 : Z2); Z2 is 0 exactly when u is a low-order point.
func ladder(scalar, u *[32]byte) (x2, z2 Element) {
	k := clamp(scalar)
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
	x2.l, z2.l = s[sX2], s[sZ2]
	clear(k[:])
	clear(s[:])
	return x2, z2
}

// clamp returns the scalar as X25519 uses it (RFC 7748, Section 5).
func clamp(scalar *[32]byte) [32]byte {
	k := *scalar
	k[0] &= 248
	k[31] &= 127
	k[31] |= 64
	return k
}

// PublicAndShared sets pub = X25519(scalar, 9) and shared =
// X25519(scalar, u), the bytes ScalarBaseMult and ScalarMult give, with one
// inversion where the two take one each: what a TLS server does with a
// fresh key share (its public key, and the secret with the client's).
//
// Montgomery's trick: with the public key's denominator d = Z - Y (never 0:
// a clamped scalar times the base point is never the identity) and the
// ladder's Z2, one inversion of d·Z2 gives 1/d = Z2/(d·Z2) and 1/Z2 =
// d/(d·Z2). A low-order u makes Z2 zero, which would zero the product and
// with it the public key; so w, Z2 with 1 put in its place when it is zero
// (a constant-time swap, no branch), is inverted instead, and 1/w is then
// swapped for zero, so shared is all zeros as ScalarMult gives (callers
// refuse it). Saves one inversion, about 2.3 us of the 27 a server's x25519
// share takes on the assembly path.
func PublicAndShared(pub, shared, scalar, u *[32]byte) {
	num, den := baseFraction(scalar)
	x2, z2 := ladder(scalar, u)

	var zero, one, w Element
	one.One()
	isZero := z2.Equal(&zero)
	w.Set(&z2)
	w.Swap(&one, isZero)

	var prod, inv, denInv, wInv Element
	prod.Multiply(&den, &w)
	inv.Invert(&prod)
	denInv.Multiply(&inv, &w)
	wInv.Multiply(&inv, &den)
	wInv.Swap(&zero, isZero)

	num.Multiply(&num, &denInv)
	num.fillBytes(pub)
	x2.Multiply(&x2, &wInv)
	x2.fillBytes(shared)
}
