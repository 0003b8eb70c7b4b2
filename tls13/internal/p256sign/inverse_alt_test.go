package p256sign

import (
	"crypto/elliptic"
	"math/big"
)

// The two inversions measured against invertSafegcd before it was chosen
// (docs/bench/p256sign-2026-11-28.txt): Fermat's, constant time and 5x
// slower; a blinded variable-time one, 0.3-0.6 us faster but with
// allocations and an argument instead of a property. Kept in a test file as
// references FuzzScalarOps checks and BenchmarkParts times.

var orderBig = elliptic.P256().Params().N

// invertFermat sets z = x^(n-2) mod n, the inverse of a nonzero x < n (and 0
// for 0), in constant time: a fixed 4-bit window over the public exponent
// n-2, every window a table lookup by a public index.
func (z *scalar) invertFermat(x *scalar) {
	// Work in the Montgomery domain: xm = x*R.
	var xm scalar
	xm.montMul(x, &rr)
	var table [16]scalar // table[i] = xm^i (Montgomery form); table[0] = R mod n
	one := scalar{1}
	table[0].montMul(&one, &rr)
	table[1] = xm
	for i := 2; i < 16; i++ {
		table[i].montMul(&table[i-1], &xm)
	}
	e := n
	e[0] -= 2 // n's low limb ends in ...51: no borrow
	acc := table[0]
	for limb := 3; limb >= 0; limb-- {
		for shift := 60; shift >= 0; shift -= 4 {
			for range 4 {
				acc.montMul(&acc, &acc)
			}
			// The exponent is public: indexing by it leaks nothing.
			acc.montMul(&acc, &table[(e[limb]>>shift)&15])
		}
	}
	// Leave the Montgomery domain: acc * 1 * R^-1.
	z.montMul(&acc, &one)
}

// invertBlinded sets z = k^-1 mod n for 0 < k < n, given a secret b < n.
//
// Why a variable-time inversion is safe here: u = k*b mod n is what math/big
// sees. For b uniform in [1, n-1] and any fixed k in [1, n-1], u is uniform in
// [1, n-1] (multiplication by k permutes the nonzero residues), so u, and
// anything its inversion's timing or memory accesses reveal, carries no
// information about k. b is never handled by variable-time code: it is
// multiplied in constant time. In the signer it was the DRBG's block after
// k, so secret even when rand is broken (it depends on the private key); b is not
// exactly uniform (a 256-bit value reduced mod n), off by at most 2^-32 in
// statistical distance. b = 0 (u = 0) falls back to invertFermat.
func (z *scalar) invertBlinded(k, b *scalar) {
	var u scalar
	u.mul(k, b)
	if isZero(&u) == 1 {
		z.invertFermat(k)
		return
	}
	ub := u.bytes()
	ui := new(big.Int).SetBytes(ub[:])
	ui.ModInverse(ui, orderBig)
	ui.FillBytes(ub[:])
	var uinv scalar
	uinv.setBytes(&ub)
	z.mul(&uinv, b)
}
