package bfe

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"math/big"
	"runtime"
	"sync"
	"sync/atomic"

	bls "github.com/consensys/gnark-crypto/ecc/bls12-381"
	"github.com/consensys/gnark-crypto/ecc/bls12-381/fr"
	"golang.org/x/crypto/cryptobyte"
)

// PublicKeySize is the length of a public key's wire encoding.
const PublicKeySize = 2 + 8 + 4 + 1 + g2Compressed

// A PublicKey is an epoch's Bloom filter parameters and g2^alpha. It is
// immutable and safe for concurrent use; obtain one from GenerateKey,
// ParsePublicKey or KeyState.PublicKey.
type PublicKey struct {
	suite  Suite
	epoch  uint64
	params Params
	point  bls.G2Affine // g2^alpha
	enc    []byte
	digest [32]byte // covers enc: every hash of the scheme starts with it
}

var (
	// ErrInvalidPublicKey: the bytes are not a public key of a known
	// suite, or its point is not a valid G2 element other than 1.
	ErrInvalidPublicKey = errors.New("bfe: invalid public key")
	// ErrInvalidCiphertext: the ciphertext is malformed, or it was not
	// produced by Encapsulate for this public key (the FO re-encryption
	// check failed). Its positions are punctured all the same.
	ErrInvalidCiphertext = errors.New("bfe: invalid ciphertext")
)

func newPublicKey(suite Suite, epoch uint64, p Params, point *bls.G2Affine) *PublicKey {
	pk := &PublicKey{suite: suite, epoch: epoch, params: p, point: *point}
	// RFC-style wire syntax of the public key (version 1, 111 bytes):
	//
	//	struct {
	//	    uint16 suite;          /* Suite: pairing, hash_to_curve and hash ids */
	//	    uint64 epoch;          /* the Z-data epoch this key serves */
	//	    uint32 m;              /* Bloom filter bits = secret-key slots */
	//	    uint8  k;              /* Bloom filter hash functions */
	//	    opaque g2_alpha[96];   /* compressed G2 point (ZCash serialization) */
	//	} BFEPublicKey;
	var b cryptobyte.Builder
	b.AddUint16(uint16(suite))
	b.AddUint64(epoch)
	b.AddUint32(p.M)
	b.AddUint8(p.K)
	pb := point.Bytes()
	b.AddBytes(pb[:])
	pk.enc = b.BytesOrPanic()
	pk.digest = publicKeyDigest(pk.enc)
	return pk
}

// ParsePublicKey parses the wire encoding strictly: exact length, a known
// suite, 1 <= m <= MaxSlots, 1 <= k <= MaxHashes, and a canonical compressed
// G2 point on the curve, in the prime-order subgroup and not the identity.
func ParsePublicKey(b []byte) (*PublicKey, error) {
	s := cryptobyte.String(b)
	var suite uint16
	var epoch uint64
	var p Params
	var pb []byte
	if !s.ReadUint16(&suite) || !s.ReadUint64(&epoch) || !s.ReadUint32(&p.M) ||
		!s.ReadUint8(&p.K) || !s.ReadBytes(&pb, g2Compressed) || !s.Empty() {
		return nil, fmt.Errorf("%w: length %d, want %d", ErrInvalidPublicKey, len(b), PublicKeySize)
	}
	if Suite(suite) != SuiteBLS12381SHA256 {
		return nil, fmt.Errorf("%w: unknown suite %v", ErrInvalidPublicKey, Suite(suite))
	}
	if err := p.check(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidPublicKey, err)
	}
	point, err := parseG2(pb)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidPublicKey, err)
	}
	return newPublicKey(Suite(suite), epoch, p, &point), nil
}

// parseG2 accepts exactly the compressed encoding Bytes produces for a
// point of the prime-order subgroup other than the identity.
func parseG2(b []byte) (bls.G2Affine, error) {
	var q bls.G2Affine
	const compressed, infinity = 0x80, 0x40
	if len(b) != g2Compressed || b[0]&compressed == 0 || b[0]&infinity != 0 {
		return q, errors.New("not a compressed G2 point other than the identity")
	}
	if _, err := q.SetBytes(b); err != nil { // on the curve and in the subgroup
		return q, err
	}
	if q.IsInfinity() {
		return q, errors.New("identity")
	}
	if again := q.Bytes(); string(again[:]) != string(b) {
		return q, errors.New("non-canonical encoding")
	}
	return q, nil
}

// parseCiphertext checks a ciphertext's form and returns its tag c0:
//
//	struct {
//	    opaque c0[96];               /* g2^r, compressed G2, not the identity */
//	    opaque c[k][KeySize];        /* key XOR G'(y_j), j = 0..k-1 */
//	} BFECiphertext;                 /* exactly 96 + 32k bytes */
func (pk *PublicKey) parseCiphertext(b []byte) (bls.G2Affine, error) {
	if len(b) != pk.params.CiphertextSize() {
		return bls.G2Affine{}, fmt.Errorf("%w: length %d, want %d", ErrInvalidCiphertext, len(b), pk.params.CiphertextSize())
	}
	c0, err := parseG2(b[:g2Compressed])
	if err != nil {
		return bls.G2Affine{}, fmt.Errorf("%w: c0: %v", ErrInvalidCiphertext, err)
	}
	return c0, nil
}

// Bytes returns the wire encoding.
func (pk *PublicKey) Bytes() []byte { return append([]byte(nil), pk.enc...) }

// Equal reports whether two keys have the same encoding.
func (pk *PublicKey) Equal(other *PublicKey) bool {
	return other != nil && string(pk.enc) == string(other.enc)
}

// Epoch is the epoch the key was generated for.
func (pk *PublicKey) Epoch() uint64 { return pk.epoch }

// Params are the key's Bloom filter parameters.
func (pk *PublicKey) Params() Params { return pk.params }

// Suite is the key's suite.
func (pk *PublicKey) Suite() Suite { return pk.suite }

// Encapsulate returns a fresh ciphertext for pk and the KeySize-byte key it
// carries (DJSS18's BFE KEM made CCA-secure by the FO transform: the
// randomness of the k Boneh-Franklin encryptions is derived from the
// encapsulated key). It costs k hash-to-curve evaluations, two G2 scalar
// multiplications and k pairings with a shared G2 argument; it is meant to
// run before the handshake needs it (when the Z-data is fetched). rand nil
// means crypto/rand.
func (pk *PublicKey) Encapsulate(rand io.Reader) (ciphertext, key []byte, err error) {
	if rand == nil {
		rand = cryptoRand
	}
	var k [KeySize]byte
	defer clear(k[:])
	var r fr.Element
	defer func() { r = fr.Element{} }()
	for {
		if _, err := io.ReadFull(rand, k[:]); err != nil {
			return nil, nil, fmt.Errorf("bfe: encapsulate: %w", err)
		}
		// r = 0 would make c0 the identity, which no parser accepts;
		// it happens with probability 2^-255.
		if r = foRandomness(&pk.digest, &k); !r.IsZero() {
			break
		}
	}
	ciphertext = make([]byte, pk.params.CiphertextSize())
	pk.encrypt(ciphertext, &k, &r, -1, pk.hashPoint)
	return ciphertext, outputKey(&pk.digest, &k, ciphertext), nil
}

var cryptoRand = rand.Reader

// g1Source returns H_G1(pk, i); the server may answer from a table.
type g1Source func(i uint32) bls.G1Affine

func (pk *PublicKey) hashPoint(i uint32) bls.G1Affine { return hashToG1(&pk.digest, i) }

// encrypt writes Enc(pk, key; r) into out, which is CiphertextSize long,
// except component skip (if skip >= 0), which it leaves as it is.
//
// This is the BFE encryption of DJSS18 (Section 3, from Boneh-Franklin IBE)
// with the groups swapped so that secret keys are in G1:
//
//	c0  = g2^r                                  (the tag)
//	i_j = H_j(c0)                               for j < k
//	y_j = e(H_G1(i_j), pk)^r = e(H_G1(i_j), pk^r)
//	c_j = key XOR G'(y_j)
//
// One r serves all k components (the paper's randomness reuse), so pk^r
// is a single G2 element and its Miller-loop lines are computed once for
// the k pairings. Each y_j needs its own final exponentiation: the k values
// are hashed separately, so no product of pairings gives them.
//
// The pieces are independent once r is known: c0 and pk^r, then the k
// pairings. With GOMAXPROCS > 1 they run on up to that many goroutines
// (fanOut), which shortens the wall-clock time of a call and leaves its
// CPU time as it was; each component is written by one goroutine into its
// own bytes of out.
func (pk *PublicKey) encrypt(out []byte, key *[KeySize]byte, r *fr.Element, skip int, h g1Source) {
	var pkrLines [2][len(bls.LoopCounter) - 1]bls.LineEvaluationAff
	defer func() { pkrLines = [2][len(bls.LoopCounter) - 1]bls.LineEvaluationAff{} }()
	fanOut(2, func(task int) {
		rb := r.BigInt(new(big.Int))
		defer clear(rb.Bits())
		switch task {
		case 0:
			var c0 bls.G2Jac
			c0.ScalarMultiplicationBase(rb)
			var c0a bls.G2Affine
			c0a.FromJacobian(&c0)
			tag := c0a.Bytes()
			copy(out, tag[:])
		case 1:
			var pkr bls.G2Affine // pk^r: anyone holding it computes every y_j
			pkr.ScalarMultiplication(&pk.point, rb)
			pkrLines = bls.PrecomputeLines(pkr)
			pkr = bls.G2Affine{}
		}
	})
	tag := out[:g2Compressed]

	var posBuf [MaxHashes]uint32
	pos := positions(&pk.digest, pk.params, tag, posBuf[:0])
	var todo [MaxHashes]int
	n := 0
	for j := range pos {
		if j != skip {
			todo[n] = j
			n++
		}
	}
	fanOut(n, func(task int) {
		j := todo[task]
		i := pos[j]
		P := []bls.G1Affine{h(i)}
		// gnark-crypto's MillerLoopFixedQ evaluates the lines at P in
		// place, so each use gets a fresh copy (TestFixedQMatchesPair).
		lines := [][2][len(bls.LoopCounter) - 1]bls.LineEvaluationAff{pkrLines}
		defer clear(lines)
		ml, err := bls.MillerLoopFixedQ(P, lines)
		if err != nil {
			panic("bfe: miller loop: " + err.Error()) // only on len(P) != len(lines)
		}
		y := bls.FinalExponentiation(&ml)
		m := pk.mask(tag, j, i, &y)
		c := out[g2Compressed+j*maskSize : g2Compressed+(j+1)*maskSize]
		for b := range c {
			c[b] = key[b] ^ m[b]
		}
		ml, y = bls.GT{}, bls.GT{}
	})
}

// fanOut calls task(t) for every t < n and returns when all calls have
// returned. With GOMAXPROCS > 1 the calls are spread over up to that many
// goroutines, the caller's among them; otherwise they run in order on the
// caller's. The tasks must not depend on one another.
func fanOut(n int, task func(t int)) {
	workers := min(n, runtime.GOMAXPROCS(0))
	if workers <= 1 {
		for t := range n {
			task(t)
		}
		return
	}
	var next atomic.Int32
	work := func() {
		for t := int(next.Add(1) - 1); t < n; t = int(next.Add(1) - 1) {
			task(t)
		}
	}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
}
