package kex

import (
	"bytes"
	"crypto/ecdh"
	"io"
	"os"
	"runtime"
	"testing"

	"github.com/ztls-project/ztls/internal/testsupport/cputime"
	"github.com/ztls-project/ztls/tls13/internal/field25519"
	"golang.org/x/crypto/curve25519"
)

// ecdhPublic is the reference: crypto/ecdh's public key for scalar.
func ecdhPublic(t testing.TB, scalar []byte) []byte {
	t.Helper()
	priv, err := ecdh.X25519().NewPrivateKey(scalar)
	if err != nil {
		t.Fatal(err)
	}
	return priv.PublicKey().Bytes()
}

func fixedBasePublic(scalar []byte) []byte {
	var s, pub [32]byte
	copy(s[:], scalar)
	x25519PublicKey(&pub, &s)
	return pub[:]
}

// TestX25519PublicKeyRFC7748 checks the fixed-base multiplication against
// RFC 7748: the key pairs of Section 6.1, and the first iteration of
// Section 5.2's iterated test, whose input u is the base point 9.
func TestX25519PublicKeyRFC7748(t *testing.T) {
	for _, tc := range []struct{ name, scalar, public string }{
		{"6.1 Alice", "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a",
			"8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"},
		{"6.1 Bob", "5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb",
			"de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f"},
		{"5.2 one iteration", "0900000000000000000000000000000000000000000000000000000000000000",
			"422c8e7a6227d7bca1350b3e2bb7279f7897b87bb6854b783c60e80311ae3079"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, want := fixedBasePublic(unhex(t, tc.scalar)), unhex(t, tc.public); !bytes.Equal(got, want) {
				t.Fatalf("public %x, want %x", got, want)
			}
		})
	}

	// The key pairs agree on Section 6.1's shared secret through the
	// shares this package makes.
	alice, err := GenerateClientShare(X25519, bytes.NewReader(unhex(t, "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")))
	if err != nil {
		t.Fatal(err)
	}
	k, err := alice.Shared(unhex(t, "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f"))
	if want := unhex(t, "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742"); err != nil || !bytes.Equal(k, want) {
		t.Fatalf("shared %x, %v; want %x", k, err, want)
	}
}

// TestX25519PublicKeyMatchesECDH compares the fixed-base public key with
// crypto/ecdh's ladder on random scalars and on scalars at the edges of
// clamping and of the group order.
func TestX25519PublicKeyMatchesECDH(t *testing.T) {
	var scalars [][]byte
	scalars = append(scalars,
		make([]byte, 32),
		bytes.Repeat([]byte{0xff}, 32),
		bytes.Repeat([]byte{0x80}, 32),
		bytes.Repeat([]byte{0x07}, 32),
		// The group order l, l-1, l+1 and 8l mod 2^256 (little-endian).
		unhex(t, "edd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010"),
		unhex(t, "ecd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010"),
		unhex(t, "eed3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010"),
		unhex(t, "689faee7d21893c0b2e6bc17f5cef7a600000000000000000000000000000080"),
	)
	for i := range 256 {
		s := make([]byte, 32)
		s[i/8] = 1 << (i % 8)
		scalars = append(scalars, s)
	}
	n := 3000
	if testing.Short() {
		n = 300
	}
	rnd := seeded(42)
	for range n {
		s := make([]byte, 32)
		if _, err := rnd.Read(s); err != nil {
			t.Fatal(err)
		}
		scalars = append(scalars, s)
	}
	for _, s := range scalars {
		if got, want := fixedBasePublic(s), ecdhPublic(t, s); !bytes.Equal(got, want) {
			t.Fatalf("scalar %x: fixed-base public %x, crypto/ecdh %x", s, got, want)
		}
	}
}

// TestX25519KeyReadsLikeECDH: a key takes exactly 32 bytes from rand (the
// known-answer tests depend on it) and has crypto/ecdh's public key and
// shared secret for the same bytes.
func TestX25519KeyReadsLikeECDH(t *testing.T) {
	src := bytes.Repeat([]byte{0x5a}, 40)
	r := bytes.NewReader(src)
	k, err := newX25519Key(r)
	if err != nil {
		t.Fatal(err)
	}
	if r.Len() != 8 {
		t.Fatalf("read %d bytes, want 32", 40-r.Len())
	}
	priv, err := ecdh.X25519().NewPrivateKey(src[:32])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(priv.PublicKey().Bytes(), k.public()) {
		t.Fatal("crypto/ecdh's public key differs from the fixed-base key")
	}
	peer := ecdhPublic(t, bytes.Repeat([]byte{0xa5}, 32))
	peerKey, _ := ecdh.X25519().NewPublicKey(peer)
	want, err := priv.ECDH(peerKey)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := k.shared(peer); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("shared %x, %v; crypto/ecdh %x", got, err, want)
	}
	if _, err := newX25519Key(bytes.NewReader(src[:31])); err == nil {
		t.Fatal("31 bytes of rand made a key")
	}
	k.erase()
	if k.scalar != ([32]byte{}) {
		t.Fatal("erase left the private key")
	}
}

// ladders are the two implementations of X25519 behind x25519Ladder: the
// one it picks on this machine (field25519's assembly on amd64 with BMI2
// and ADX) and the portable one, so both are tested everywhere.
var ladders = []struct {
	name string
	f    func(out, scalar *[32]byte, u []byte) error
}{
	{"x25519Ladder", x25519Ladder},
	{"portable", x25519LadderPortable},
}

// TestX25519LadderRFC7748: Section 5.2's two test vectors, and its iterated
// test at 1 and 1 000 iterations (k and u start at 9; each step sets u to
// the old k and k to the result), for each ladder. The 1 000 000-iteration
// value is checked too when ZTLS_X25519_MILLION=1 and not -short (about a
// minute per ladder).
func TestX25519LadderRFC7748(t *testing.T) {
	t.Logf("field25519.Accelerated() = %v", field25519.Accelerated())
	for _, l := range ladders {
		t.Run(l.name, func(t *testing.T) { testLadderRFC7748(t, l.f) })
	}
}

func testLadderRFC7748(t *testing.T, x25519Ladder func(out, scalar *[32]byte, u []byte) error) {
	for _, tc := range []struct{ scalar, u, out string }{
		{"a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4",
			"e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c",
			"c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552"},
		{"4b66e9d4d1b4673c5ad22691957d6af5c11b6421e0ea01d42ca4169e7918ba0d",
			"e5210f12786811d3f4b7959d0538ae2c31dbe7106fc03c3efc4cd549c715a493",
			"95cbde9476e8907d7aade45cb4b873f88b595a68799fa152e6f8f7647aac7957"},
	} {
		var k, out [32]byte
		copy(k[:], unhex(t, tc.scalar))
		if err := x25519Ladder(&out, &k, unhex(t, tc.u)); err != nil {
			t.Fatal(err)
		}
		if want := unhex(t, tc.out); !bytes.Equal(out[:], want) {
			t.Fatalf("X25519(%s, %s) = %x, want %x", tc.scalar, tc.u, out, want)
		}
	}
	var k, u [32]byte
	k[0], u[0] = 9, 9
	iterations := 1000
	if os.Getenv("ZTLS_X25519_MILLION") == "1" && !testing.Short() {
		iterations = 1000000
	}
	for i := 1; i <= iterations; i++ {
		var out [32]byte
		if err := x25519Ladder(&out, &k, u[:]); err != nil {
			t.Fatal(err)
		}
		u, k = k, out
		switch i {
		case 1:
			if want := unhex(t, "422c8e7a6227d7bca1350b3e2bb7279f7897b87bb6854b783c60e80311ae3079"); !bytes.Equal(k[:], want) {
				t.Fatalf("after 1 iteration %x, want %x", k, want)
			}
		case 1000:
			if want := unhex(t, "684cf59ba83309552800ef566f2f4d3c1c3887c49360e3875f2eb94d99532c51"); !bytes.Equal(k[:], want) {
				t.Fatalf("after 1000 iterations %x, want %x", k, want)
			}
		case 1000000:
			if want := unhex(t, "7c3911e0ab2586fd864497297e575e6f3bc601c0883c30df5f4dd2d24f665424"); !bytes.Equal(k[:], want) {
				t.Fatalf("after 1000000 iterations %x, want %x", k, want)
			}
		}
	}
}

// ecdhShared25519 is the reference shared secret: crypto/ecdh's, nil when
// it refuses (an all-zero result).
func ecdhShared25519(t testing.TB, scalar, peer []byte) []byte {
	t.Helper()
	priv, err := ecdh.X25519().NewPrivateKey(scalar)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ecdh.X25519().NewPublicKey(peer)
	if err != nil {
		t.Fatal(err)
	}
	secret, err := priv.ECDH(pub)
	if err != nil {
		return nil
	}
	return secret
}

// checkLadder compares a key's shared secret with crypto/ecdh's for one
// scalar and peer key: the same bytes, or both refusing; and the portable
// ladder's result with the one x25519Ladder picked.
func checkLadder(t testing.TB, scalar, peer []byte) {
	t.Helper()
	k := &x25519Key{}
	copy(k.scalar[:], scalar)
	got, err := k.shared(peer)
	var picked, portable [32]byte
	if err := x25519Ladder(&picked, &k.scalar, peer); err != nil {
		t.Fatal(err)
	}
	if err := x25519LadderPortable(&portable, &k.scalar, peer); err != nil {
		t.Fatal(err)
	}
	if picked != portable {
		t.Fatalf("scalar %x, peer %x: x25519Ladder %x, portable ladder %x", scalar, peer, picked, portable)
	}
	want := ecdhShared25519(t, scalar, peer)
	if want == nil {
		if err == nil {
			t.Fatalf("scalar %x, peer %x: ladder gave %x where crypto/ecdh refused", scalar, peer, got)
		}
		return
	}
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("scalar %x, peer %x: ladder %x, %v; crypto/ecdh %x", scalar, peer, got, err, want)
	}
}

// TestX25519LadderMatchesECDH: the ladder agrees with crypto/ecdh on random
// scalars and peer keys, on peer keys with the top bit set or above p
// (taken modulo p, the top bit ignored), and on the low-order points,
// whose all-zero secret both refuse.
func TestX25519LadderMatchesECDH(t *testing.T) {
	rnd := seeded(43)
	draw := func() []byte {
		b := make([]byte, 32)
		if _, err := rnd.Read(b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	p := unhex(t, "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f")
	peers := [][]byte{
		make([]byte, 32), // u = 0, low order
		unhex(t, "0100000000000000000000000000000000000000000000000000000000000000"), // u = 1
		unhex(t, "e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800"), // order 8
		unhex(t, "5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157"), // order 8
		p, // p: 0 modulo p
		unhex(t, "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"), // p+1
		bytes.Repeat([]byte{0xff}, 32),
	}
	n := 500
	if testing.Short() {
		n = 50
	}
	for range n {
		peer := ecdhPublic(t, draw())
		peers = append(peers, peer)
		high := bytes.Clone(peer)
		high[31] |= 0x80
		peers = append(peers, high, draw())
	}
	for _, peer := range peers {
		checkLadder(t, draw(), peer)
	}
}

// FuzzX25519Ladder compares the shared secret with crypto/ecdh's for
// arbitrary scalars and peer keys (each padded or cut to 32 bytes).
func FuzzX25519Ladder(f *testing.F) {
	f.Add(make([]byte, 32), make([]byte, 32))
	f.Add(bytes.Repeat([]byte{0xff}, 32), bytes.Repeat([]byte{0xff}, 32))
	f.Add([]byte("77076d0a7318a57d3c16c17251b26645"), []byte{9})
	f.Fuzz(func(t *testing.T, scalar, peer []byte) {
		s, u := make([]byte, 32), make([]byte, 32)
		copy(s, scalar)
		copy(u, peer)
		checkLadder(t, s, u)
	})
}

// TestEraseForbidsShared: an erased share of any group refuses to compute
// a secret (an x25519 share would otherwise use a zero scalar).
func TestEraseForbidsShared(t *testing.T) {
	for _, g := range allGroups {
		for _, gen := range []func(uint16, io.Reader) (ClientShare, error){GenerateClientShare, func(g uint16, _ io.Reader) (ClientShare, error) { return NewPool(1).ClientShare(g) }} {
			cs, err := gen(g, seeded(5))
			if err != nil {
				t.Fatal(err)
			}
			srvPub, _, err := ServerShare(g, cs.Public(), seeded(6))
			if err != nil {
				t.Fatal(err)
			}
			cs.Erase()
			cs.Erase() // twice is harmless
			if _, err := cs.Shared(srvPub); err == nil {
				t.Fatalf("%s: Shared worked after Erase", Name(g))
			}
		}
	}
}

// FuzzX25519PublicKey compares the fixed-base public key with crypto/ecdh
// for arbitrary scalars (inputs are padded or cut to 32 bytes).
func FuzzX25519PublicKey(f *testing.F) {
	f.Add(make([]byte, 32))
	f.Add(bytes.Repeat([]byte{0xff}, 32))
	f.Add([]byte("77076d0a7318a57d3c16c17251b26645"))
	f.Fuzz(func(t *testing.T, in []byte) {
		s := make([]byte, 32)
		copy(s, in)
		if got, want := fixedBasePublic(s), ecdhPublic(t, s); !bytes.Equal(got, want) {
			t.Fatalf("scalar %x: fixed-base public %x, crypto/ecdh %x", s, got, want)
		}
	})
}

var sinkBytes []byte

// cpuLoop runs f b.N times on one locked OS thread and reports, next to
// ns/op, cpu-ns/op: that thread's CPU time per operation, which on a
// machine shared with other work is the operation's own cost.
func cpuLoop(b *testing.B, f func() error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	t0, ok := cputime.Thread()
	for b.Loop() {
		if err := f(); err != nil {
			b.Fatal(err)
		}
	}
	if t1, _ := cputime.Thread(); ok {
		b.ReportMetric(float64((t1-t0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkX25519KeyGen: an x25519 key pair from 32 random bytes, with the
// fixed-base multiplication (fixedbase) and with crypto/ecdh (ecdh).
func BenchmarkX25519KeyGen(b *testing.B) {
	scalar := bytes.Repeat([]byte{0x5a}, 32)
	b.Run("fixedbase", func(b *testing.B) {
		cpuLoop(b, func() error {
			k, err := newX25519Key(bytes.NewReader(scalar))
			if err == nil {
				sinkBytes = k.pub[:]
			}
			return err
		})
	})
	b.Run("ecdh", func(b *testing.B) {
		cpuLoop(b, func() error {
			priv, err := ecdh.X25519().NewPrivateKey(scalar)
			if err == nil {
				sinkBytes = priv.PublicKey().Bytes()
			}
			return err
		})
	})
}

// BenchmarkX25519Shared: the shared secret from a scalar and a peer's public
// key. ladder is this package's (what a share costs); ecdh-held is
// crypto/ecdh's with its *ecdh.PrivateKey already made; ecdh-new makes that
// key from the scalar first, a second ladder (what the shares cost before);
// curve25519 is x/crypto's X25519.
func BenchmarkX25519Shared(b *testing.B) {
	scalar := bytes.Repeat([]byte{0x5a}, 32)
	peer := ecdhPublic(b, bytes.Repeat([]byte{0xa5}, 32))
	b.Run("ladder", func(b *testing.B) {
		cpuLoop(b, func() (err error) {
			k := &x25519Key{}
			copy(k.scalar[:], scalar)
			sinkBytes, err = k.shared(peer)
			return err
		})
	})
	b.Run("ecdh-held", func(b *testing.B) {
		priv, err := ecdh.X25519().NewPrivateKey(scalar)
		if err != nil {
			b.Fatal(err)
		}
		cpuLoop(b, func() (err error) {
			sinkBytes, err = ecdhShared(X25519, priv, peer)
			return err
		})
	})
	b.Run("ecdh-new", func(b *testing.B) {
		cpuLoop(b, func() error {
			priv, err := ecdh.X25519().NewPrivateKey(scalar)
			if err != nil {
				return err
			}
			sinkBytes, err = ecdhShared(X25519, priv, peer)
			return err
		})
	})
	b.Run("curve25519", func(b *testing.B) {
		cpuLoop(b, func() (err error) {
			sinkBytes, err = curve25519.X25519(scalar, peer)
			return err
		})
	})
}

// BenchmarkX25519UsedShare: an x25519 share that is made and then used once
// (a ClientHello's only share, or the server's): 32 bytes to a public key
// and a shared secret. share is GenerateClientShare (fixed-base public key,
// one ladder); ecdh is crypto/ecdh (a ladder for the public key, another
// for the secret).
func BenchmarkX25519UsedShare(b *testing.B) {
	scalar := bytes.Repeat([]byte{0x5a}, 32)
	peer := ecdhPublic(b, bytes.Repeat([]byte{0xa5}, 32))
	b.Run("share", func(b *testing.B) {
		cpuLoop(b, func() error {
			cs, err := GenerateClientShare(X25519, bytes.NewReader(scalar))
			if err != nil {
				return err
			}
			sinkBytes = cs.Public()
			sinkBytes, err = cs.Shared(peer)
			return err
		})
	})
	b.Run("ecdh", func(b *testing.B) {
		cpuLoop(b, func() error {
			priv, err := ecdh.X25519().GenerateKey(bytes.NewReader(scalar))
			if err != nil {
				return err
			}
			sinkBytes = priv.PublicKey().Bytes()
			sinkBytes, err = ecdhShared(X25519, priv, peer)
			return err
		})
	})
}
