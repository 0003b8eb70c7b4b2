// Package mlkem768 is ML-KEM-768 (FIPS 203) for the engine's
// X25519MLKEM768 key shares and post-quantum Z-data, with two
// implementations behind one API:
//
//   - on amd64 with AVX2, github.com/cloudflare/circl's kem/mlkem/mlkem768,
//     whose NTT, inverse NTT, base multiplication and reductions are AVX2
//     assembly generated with avo and whose matrix expansion runs four
//     Keccak permutations at once; on this project's AMD EPYC it is about
//     3× crypto/mlkem's speed for key generation and 4× for encapsulation
//     and decapsulation (docs/benchmarks.md, "Primitives");
//   - everywhere else, with the purego build tag, and when Go runs in FIPS
//     140-3 mode (crypto/fips140.Enabled), Go's crypto/mlkem.
//
// Encapsulate is parsing and encapsulation in one call, for a key used
// once (a TLS server's answer): on circl's path it is FIPS 203's
// Algorithm 17 over circl's K-PKE (pke/kyber/kyber768) into a pooled key,
// so a handshake does not allocate the key's 4.6 kB matrix.
//
// Fast reports which one runs. Both give the same bytes for the same
// inputs: FuzzKeyGen, FuzzEncapsulate and FuzzDecapsulate compare them on
// any seed, encapsulation key, randomness and ciphertext (a mauled
// ciphertext included: both must give the same implicit-rejection key),
// and TestACVP checks NIST's ACVP known answers (testdata/README.md) on
// whichever path the build selects. `go test -tags purego` tests the
// portable path on any machine.
//
// Constant time: both implementations are written to take no branch and
// index no memory by secret data (circl's decapsulation compares the
// re-encryption with crypto/subtle and selects the key with
// subtle.ConstantTimeCopy; its assembly is straight-line vector code).
// TestCirclAssemblyIsStraightLine checks the assembly for jumps, as
// field25519's test checks its own.
package mlkem768
