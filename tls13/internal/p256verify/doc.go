// Package p256verify is ECDSA P-256 signature verification (FIPS 186-5,
// Section 6.4.2) for the TLS 1.3 client's CertificateVerify, faster than
// crypto/ecdsa because it may be variable-time: a verification has only
// public inputs (the key, the digest, the signature), so nothing here is
// secret and branches and table indexes may depend on the data. It must
// never be used for signing or for anything that handles a secret.
//
// Method: R = u1*G + u2*Q with u1 = e/s, u2 = r/s mod n, computed as one
// chain of 256 doublings with interleaved width-w NAFs (G's odd multiples
// up to 127G in an affine table made once, Q's up to 15Q made per call and
// made affine with one inversion, so that every addition is a mixed one), then x(R) = r mod n checked as X = r*Z^2 (or
// (r+n)*Z^2) without an inversion. That inversion mod p and s^-1 mod n are a
// variable-time binary GCD (inverse.go; public inputs only).
//
// The field, GF(p) with p = 2^256 - 2^224 + 2^192 + 2^96 - 1, is four
// 64-bit limbs in Montgomery form (R = 2^256), always fully reduced. On
// amd64 with BMI2 and ADX, multiplication and squaring are the generated
// assembly of field_amd64.s (MULX, ADCX, ADOX; its generator is _asm/, run
// `go generate` here after changing it); elsewhere, without those
// instructions, or with the purego build tag, they are the Go code of
// field.go. Accelerated reports which. Measured on an AMD EPYC (Zen 3):
// 36 us a verification against crypto/ecdsa's 46 (39.6 on the same
// machine and load with inversions by exponentiation), 32.5 against 48
// once the point formulas kept their small multiples and sums in
// registers (FuzzPointFormulas); the Go code takes 117 us,
// slower than crypto/ecdsa's own assembly, so package sig calls Verify only
// when Accelerated (docs/bench/p256verify-2026-11-28.txt).
//
// Proofs: Wycheproof's ecdsa_secp256r1_sha256 vectors (testdata), FuzzVerify
// (the same verdict as crypto/ecdsa.VerifyASN1 on random keys, digests and
// mauled signatures) and FuzzFieldOps (every field operation, the
// inversions included, against math/big, assembly and Go).
package p256verify

//go:generate sh -c "cd _asm && go run . -out ../field_amd64.s -stubs ../field_amd64_stubs.go -pkg p256verify"
