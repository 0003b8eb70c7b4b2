package p256sign

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"math/big"
	mathrand "math/rand/v2"
	"os"
	"strings"
	"testing"

	"golang.org/x/crypto/cryptobyte"
	"golang.org/x/crypto/cryptobyte/asn1"
)

// parseSignature splits a DER signature and checks it is minimal DER: the
// reference decoder (crypto/ecdsa.VerifyASN1) would also accept it, but
// cryptobyte's ReadASN1Integer refuses non-minimal INTEGERs.
func parseSignature(t testing.TB, sig []byte) (r, s *big.Int) {
	t.Helper()
	r, s = new(big.Int), new(big.Int)
	in := cryptobyte.String(sig)
	var inner cryptobyte.String
	if !in.ReadASN1(&inner, asn1.SEQUENCE) || !in.Empty() ||
		!inner.ReadASN1Integer(r) || !inner.ReadASN1Integer(s) || !inner.Empty() {
		t.Fatalf("signature %x is not DER SEQUENCE { INTEGER, INTEGER }", sig)
	}
	return r, s
}

type rfcVector struct{ msg, k, r, s string }

func readRFC6979(t *testing.T) (key *ecdsa.PrivateKey, vecs []rfcVector) {
	f, err := os.Open("testdata/rfc6979-a25-p256-sha256.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fields := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		name, val, ok := strings.Cut(line, " = ")
		if !ok {
			t.Fatalf("testdata line %q is not name = value", line)
		}
		fields[name] = val
		if name == "s" {
			vecs = append(vecs, rfcVector{fields["msg"], fields["k"], fields["r"], val})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	unhex := func(s string) []byte {
		b, err := hex.DecodeString(s)
		if err != nil {
			t.Fatalf("bad hex %q in testdata: %v", s, err)
		}
		return b
	}
	key, err = ecdsa.ParseRawPrivateKey(elliptic.P256(), unhex(fields["x"]))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := key.PublicKey.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if want := append(append([]byte{4}, unhex(fields["Ux"])...), unhex(fields["Uy"])...); !bytes.Equal(pub, want) {
		t.Fatalf("the public key of x is %x, the RFC's is %x", pub, want)
	}
	if len(vecs) != 2 {
		t.Fatalf("testdata has %d vectors, want 2", len(vecs))
	}
	return key, vecs
}

// TestRFC6979 checks the deterministic mode end to end: the DRBG's k, and r
// and s exactly as RFC 6979, Appendix A.2.5 prints them for SHA-256.
func TestRFC6979(t *testing.T) {
	key, vecs := readRFC6979(t)
	for _, v := range vecs {
		digest := sha256.Sum256([]byte(v.msg))
		// k: the first candidate of the DRBG seeded with x and bits2octets(h1).
		xs, err := key.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		xb := [32]byte(xs)
		e := hashToScalar(digest[:])
		eb := e.bytes()
		var d hmacDRBG
		d.seed(&xb, &eb, nil)
		if k := d.generate(); !strings.EqualFold(hex.EncodeToString(k[:]), v.k) {
			t.Errorf("%q: k = %x, want %s", v.msg, k, v.k)
		}
		sig, err := signDeterministic(key, digest[:])
		if err != nil {
			t.Fatal(err)
		}
		r, s := parseSignature(t, sig)
		if got := strings.ToUpper(r.Text(16)); got != v.r {
			t.Errorf("%q: r = %s, want %s", v.msg, got, v.r)
		}
		if got := strings.ToUpper(hex.EncodeToString(s.FillBytes(make([]byte, 32)))); got != v.s {
			t.Errorf("%q: s = %s, want %s", v.msg, got, v.s)
		}
		if !ecdsa.VerifyASN1(&key.PublicKey, digest[:], sig) {
			t.Errorf("%q: crypto/ecdsa does not verify the signature", v.msg)
		}
	}
}

func TestSignVerifies(t *testing.T) {
	rng := mathrand.New(mathrand.NewPCG(1, 2))
	for i := range 200 {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		digest := make([]byte, 32)
		for j := range digest {
			digest[j] = byte(rng.Uint32())
		}
		sig, err := Sign(rand.Reader, key, digest)
		if err != nil {
			t.Fatal(err)
		}
		parseSignature(t, sig)
		if !ecdsa.VerifyASN1(&key.PublicKey, digest, sig) {
			t.Fatalf("signature %d (%x) over %x does not verify", i, sig, digest)
		}
	}
}

// TestHedged: the same digest with different randomness gives different
// signatures, both valid; the same randomness gives the same one.
func TestHedged(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	digest := sha256.Sum256([]byte("hedged"))
	a, err := Sign(bytes.NewReader(bytes.Repeat([]byte{1}, 32)), key, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	b, err := Sign(bytes.NewReader(bytes.Repeat([]byte{2}, 32)), key, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a, b) {
		t.Fatal("two signatures with different randomness are equal: the randomness does not reach k")
	}
	for _, s := range [][]byte{a, b} {
		if !ecdsa.VerifyASN1(&key.PublicKey, digest[:], s) {
			t.Fatalf("signature %x does not verify", s)
		}
	}
	again, err := Sign(bytes.NewReader(bytes.Repeat([]byte{1}, 32)), key, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, again) {
		t.Fatal("the same randomness, key and digest gave two signatures")
	}
	det, err := signDeterministic(key, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(det, a) || bytes.Equal(det, b) {
		t.Fatal("a hedged signature equals the deterministic one: the randomness is ignored")
	}
	// A broken source (always the same bytes) still gives different k to
	// different digests: r differs.
	other := sha256.Sum256([]byte("another message"))
	c, err := Sign(bytes.NewReader(bytes.Repeat([]byte{1}, 32)), key, other[:])
	if err != nil {
		t.Fatal(err)
	}
	ra, _ := parseSignature(t, a)
	rc, _ := parseSignature(t, c)
	if ra.Cmp(rc) == 0 {
		t.Fatal("fixed randomness gave the same r (the same k) to two digests")
	}
}

func TestRandomnessError(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if _, err := Sign(bytes.NewReader(make([]byte, 31)), key, make([]byte, 32)); err == nil {
		t.Fatal("Sign succeeded with 31 bytes of randomness")
	}
}

// TestDigestLengths: FIPS 186-5, Section 6.4.1 takes the leftmost 256 bits of
// a longer digest and a shorter one as is; crypto/ecdsa verifies by the same
// rule, and a digest of 0 or with its high bits set (>= n) signs too.
func TestDigestLengths(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	long := sha512.Sum512([]byte("long"))
	cases := map[string][]byte{
		"zero":        make([]byte, 32),
		"all ones":    bytes.Repeat([]byte{0xff}, 32),
		"n":           func() []byte { b := n.bytes(); return b[:] }(),
		"sha-512":     long[:],
		"sha-384":     long[:48],
		"20 bytes":    long[:20],
		"empty":       {},
		"33 high bit": append([]byte{0x80}, make([]byte, 32)...),
	}
	for name, digest := range cases {
		sig, err := Sign(rand.Reader, key, digest)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !ecdsa.VerifyASN1(&key.PublicKey, digest, sig) {
			t.Errorf("%s: crypto/ecdsa does not verify the signature over %x", name, digest)
		}
		if len(digest) > 32 {
			// Only the leftmost 256 bits count: a different tail verifies too.
			other := bytes.Clone(digest)
			other[len(other)-1] ^= 1
			if !ecdsa.VerifyASN1(&key.PublicKey, other, sig) {
				t.Errorf("%s: the signature depends on bits beyond the leftmost 256", name)
			}
			if !bytes.Equal(hashToScalar(digest).bytesSlice(), hashToScalar(digest[:32]).bytesSlice()) {
				t.Errorf("%s: e differs from the leftmost 32 bytes' e", name)
			}
		}
	}
	// e of all ones is 2^256-1 mod n.
	want := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))
	want.Mod(want, orderBig)
	e := hashToScalar(bytes.Repeat([]byte{0xff}, 40))
	if scalarToBig(&e).Cmp(want) != 0 {
		t.Fatalf("e(all ones) = %x, want %x", scalarToBig(&e), want)
	}
}

func (z scalar) bytesSlice() []byte { b := z.bytes(); return b[:] }

func TestRefusesOtherKeys(t *testing.T) {
	for _, c := range []elliptic.Curve{elliptic.P384(), elliptic.P521(), elliptic.P224()} {
		key, err := ecdsa.GenerateKey(c, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Sign(rand.Reader, key, make([]byte, 32)); !errors.Is(err, ErrNotP256) {
			t.Errorf("%s key: err = %v, want ErrNotP256", c.Params().Name, err)
		}
	}
	if _, err := Sign(rand.Reader, nil, make([]byte, 32)); !errors.Is(err, ErrNotP256) {
		t.Errorf("nil key: err = %v, want ErrNotP256", err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for _, d := range []*big.Int{nil, big.NewInt(0), orderBig, new(big.Int).Neg(big.NewInt(5))} {
		bad := *key
		bad.D = d //lint:ignore SA1019 a corrupt key is made by setting D
		if _, err := Sign(rand.Reader, &bad, make([]byte, 32)); err == nil || errors.Is(err, ErrNotP256) {
			t.Errorf("D = %v: err = %v, want a corrupt-key error", d, err)
		}
	}
}

func TestDERMinimal(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"00", "00"},
		{"0000", "00"},
		{"007f", "7f"},
		{"0080", "0080"},
		{"80", "0080"},
		{"000001ff", "01ff"},
	} {
		in, _ := hex.DecodeString(tc.in)
		if got := hex.EncodeToString(derInteger(in)); got != tc.want {
			t.Errorf("derInteger(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
	r := scalar{0x80} // small r: one byte with the high bit set -> 0x00 0x80
	s := scalar{0, 0, 0, 1 << 63}
	got := hex.EncodeToString(encodeSignature(&r, &s))
	want := "3027" + "02020080" + "022100" + "8000000000000000" + strings.Repeat("00", 24)
	if got != want {
		t.Fatalf("encodeSignature = %s, want %s", got, want)
	}
}

// FuzzSign: any key seed, digest and randomness give a signature that
// crypto/ecdsa verifies.
func FuzzSign(f *testing.F) {
	f.Add(make([]byte, 32), make([]byte, 32), make([]byte, 32))
	f.Add(bytes.Repeat([]byte{0xff}, 32), bytes.Repeat([]byte{0xff}, 64), bytes.Repeat([]byte{0xff}, 32))
	f.Add([]byte("seed"), []byte{}, []byte("rand"))
	f.Fuzz(func(t *testing.T, seed, digest, randBytes []byte) {
		seedHash := sha256.Sum256(seed)
		key, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), seedHash[:])
		if err != nil {
			return // 0 or >= n: not a key (probability 2^-32)
		}
		r := bytes.NewReader(append(bytes.Clone(randBytes), make([]byte, 32)...))
		sig, err := Sign(r, key, digest)
		if err != nil {
			t.Fatal(err)
		}
		parseSignature(t, sig)
		if !ecdsa.VerifyASN1(&key.PublicKey, digest, sig) {
			t.Fatalf("signature %x over %x does not verify", sig, digest)
		}
	})
}
