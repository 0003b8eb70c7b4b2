package bfe

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"

	bls "github.com/consensys/gnark-crypto/ecc/bls12-381"
	"github.com/consensys/gnark-crypto/ecc/bls12-381/fr"
)

// Every hash of the construction has its own domain-separation tag. The
// paper's random oracles are (Section 3, the BFE from Boneh-Franklin IBE,
// and its FO transform):
//
//	H_j : the Bloom filter's k hash functions, ciphertext tag -> [m]
//	G   : slot index -> G1 (here H_G1), whose image raised to alpha is sk_i
//	G'  : GT -> {0,1}^λ, the mask of the key in each ciphertext component
//	R   : key -> (randomness, output key), the FO transform's hash
//
// Each input below starts with the public key's digest, which covers the
// suite, the epoch, m, k and g2^alpha, so no value of one key or epoch can
// be replayed into another.
const (
	// dstHashToG1 is the RFC 9380 DST for H_G1 (Section 3.1 of RFC 9380:
	// the suite ID ends the tag).
	dstHashToG1 = "ZTLS-BFE-V01-CS01-with-BLS12381G1_XMD:SHA-256_SSWU_RO_"
	// dstFORandomness is the DST of RFC 9380 hash_to_field for the FO
	// transform's r.
	dstFORandomness = "ZTLS-BFE-V01-FO-randomness"
	dstPublicKey    = "ztls bfe v01 public key digest"
	dstPositions    = "ztls bfe v01 bloom positions"
	dstMask         = "ztls bfe v01 ibe mask"
	dstOutputKey    = "ztls bfe v01 output key"
)

// newHasher is SHA-256 over a length-prefixed tag and then fields of fixed
// length: each tag is used with one layout, so no two inputs collide.
func newHasher(tag string) *hashState {
	h := &hashState{h: sha256.New()}
	var l [2]byte
	binary.BigEndian.PutUint16(l[:], uint16(len(tag)))
	h.h.Write(l[:])
	h.h.Write([]byte(tag))
	return h
}

type hashState struct{ h hash.Hash }

func (h *hashState) write(b []byte) *hashState { h.h.Write(b); return h }

func (h *hashState) u32(v uint32) *hashState {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return h.write(b[:])
}

func (h *hashState) sum() (out [32]byte) {
	h.h.Sum(out[:0])
	return out
}

func publicKeyDigest(enc []byte) [32]byte {
	return newHasher(dstPublicKey).write(enc).sum()
}

// positions are the paper's H_1..H_k applied to the ciphertext's tag c0 =
// g2^r: k indices in [0, m), uniform by rejection sampling. Duplicates are
// possible, as in any Bloom filter.
func positions(digest *[32]byte, p Params, tag []byte, out []uint32) []uint32 {
	out = out[:0]
	m := uint64(p.M)
	// limit is the largest multiple of m that fits in 2^64; values at or
	// above it are rejected so that v mod m is uniform.
	limit := -(-m % m) // 2^64 - (2^64 mod m), wrapping to 0 when m | 2^64
	for block := uint32(0); len(out) < int(p.K); block++ {
		sum := newHasher(dstPositions).write(digest[:]).write(tag).u32(block).sum()
		for i := 0; i < 4 && len(out) < int(p.K); i++ {
			v := binary.BigEndian.Uint64(sum[8*i:])
			if limit != 0 && v >= limit {
				continue
			}
			out = append(out, uint32(v%m))
		}
	}
	return out
}

// hashToG1 is H_G1(key, i): RFC 9380 hash_to_curve into G1, with the
// public key's digest and the slot index as the message.
func hashToG1(digest *[32]byte, i uint32) bls.G1Affine {
	var msg [36]byte
	copy(msg[:], digest[:])
	binary.BigEndian.PutUint32(msg[32:], i)
	p, err := bls.HashToG1(msg[:], []byte(dstHashToG1))
	if err != nil {
		// HashToG1 fails only if SHA-256's expand_message_xmd is asked
		// for more than 255 blocks; it is asked for 2.
		panic("bfe: hash_to_curve: " + err.Error())
	}
	return p
}

// mask is G'(y_j) bound to its context: which key, which tag, which of the
// k components and which slot.
func (pk *PublicKey) mask(tag []byte, j int, pos uint32, y *bls.GT) [maskSize]byte {
	yb := y.Bytes()
	s := newHasher(dstMask).write(pk.digest[:]).write(tag).u32(uint32(j)).u32(pos).write(yb[:]).sum()
	clear(yb[:])
	return s
}

// foRandomness is the FO transform's r = R(K): RFC 9380 hash_to_field into
// the scalar field, with 128 bits of margin against bias.
func foRandomness(digest *[32]byte, key *[KeySize]byte) fr.Element {
	var msg [32 + KeySize]byte
	copy(msg[:], digest[:])
	copy(msg[32:], key[:])
	e, err := fr.Hash(msg[:], []byte(dstFORandomness), 1)
	clear(msg[:])
	if err != nil {
		panic("bfe: hash_to_field: " + err.Error())
	}
	r := e[0]
	clear(e)
	return r
}

// outputKey is the key the KEM returns: a hash of the encapsulated key and
// the whole ciphertext (FO with explicit rejection, the variant that hashes
// the ciphertext into the key), so a ciphertext that decapsulates yields a
// key bound to exactly its bytes.
func outputKey(digest *[32]byte, key *[KeySize]byte, ciphertext []byte) []byte {
	s := newHasher(dstOutputKey).write(digest[:]).write(key[:]).write(ciphertext).sum()
	return s[:]
}
