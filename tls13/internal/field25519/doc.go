// Package field25519 is arithmetic in GF(2^255-19) for X25519: four 64-bit
// limbs, radix 2^64, each element any value below 2^256 that is congruent to
// the one it stands for, made canonical only when encoded. On amd64 with BMI2
// and ADX (MULX, ADCX, ADOX) the routines are the generated assembly in
// field_amd64.s (its generator, with a description of the method, is
// _asm/field_amd64_asm.go; run `go generate` here after changing it);
// elsewhere, without those instructions, or with the purego build tag they
// are the same algorithms in Go (field_generic.go). Accelerated reports which.
//
// ScalarMult is X25519 (RFC 7748, Section 5) on this field: a Montgomery
// ladder of 255 steps whose step is one assembly call on the fast path.
// ScalarBaseMult is X25519(k, 9), a public key, on the birationally
// equivalent edwards25519 (basemult.go): 64 signed radix-16 digits, a table
// of affine points built once on first use, each constant-time lookup and
// mixed addition one generated call (baseAdd) on the fast path, and one
// inversion for u = (Z+Y)/(Z-Y). PublicAndShared is both for one scalar, a
// server's fresh share, with the two inversions made one (Montgomery's
// trick, guarded for the zero Z of a low-order u).
//
// Everything runs in constant time: no branch and no memory index depends on
// secret data. TestGeneratedCodeIsStraightLine checks the assembly
// (instructions from a list of data-independent ones, no jump, no CMOV, every
// address a pointer parameter plus a constant); the Go code turns carries
// into multipliers and masks, never conditions; TestScalarMultDudect, a
// dudect-style timing test (and TestScalarBaseMultDudect), runs with
// ZTLS_DUDECT=1 on a quiet machine.
//
// Proofs of equality with the portable reference: FuzzFieldOps and
// FuzzInvertBytes compare every operation, assembly and Go, with
// filippo.io/edwards25519/field on any 256-bit inputs; FuzzScalarMult
// and FuzzScalarBaseMult compare ScalarMult and ScalarBaseMult with
// crypto/ecdh, FuzzPublicAndShared PublicAndShared with the two of them
// (TestPublicAndSharedLowOrder runs every low-order u); the RFC 7748
// vectors and iterated test run here, Wycheproof's x25519 vectors in
// package kex.
package field25519

//go:generate sh -c "cd _asm && go run . -out ../field_amd64.s -stubs ../field_amd64_stubs.go -pkg field25519"
