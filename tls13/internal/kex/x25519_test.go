package kex

import (
	"bytes"
	"crypto/ecdh"
	"io"
	"runtime"
	"testing"

	"github.com/ztls-project/ztls/internal/cputime"
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
// known-answer tests depend on it) and ends up as crypto/ecdh's key.
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
	priv, err := k.ecdhKey()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(priv.Bytes(), src[:32]) || !bytes.Equal(priv.PublicKey().Bytes(), k.public()) {
		t.Fatal("crypto/ecdh key differs from the fixed-base key")
	}
	ahead, err := newX25519KeyECDH(bytes.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	if ahead.pub != k.pub || ahead.scalar != k.scalar {
		t.Fatal("key made ahead differs from the fixed-base key")
	}
	if _, err := newX25519Key(bytes.NewReader(src[:31])); err == nil {
		t.Fatal("31 bytes of rand made a key")
	}
	k.erase()
	if k.scalar != ([32]byte{}) || k.priv != nil {
		t.Fatal("erase left the private key")
	}
}

// TestSpeculativeShareMatches: a speculative share reads the same bytes
// from rand as GenerateClientShare and yields the same public key and
// shared secrets, for every group.
func TestSpeculativeShareMatches(t *testing.T) {
	for _, g := range allGroups {
		t.Run(Name(g), func(t *testing.T) {
			src := make([]byte, 4096)
			if _, err := seeded(byte(g)).Read(src); err != nil {
				t.Fatal(err)
			}
			r1, r2 := bytes.NewReader(src), bytes.NewReader(src)
			eager, err := GenerateClientShare(g, r1)
			if err != nil {
				t.Fatal(err)
			}
			spec, err := GenerateSpeculativeShare(g, r2)
			if err != nil {
				t.Fatal(err)
			}
			if r1.Len() != r2.Len() {
				t.Fatalf("speculative share read %d bytes, GenerateClientShare %d", len(src)-r2.Len(), len(src)-r1.Len())
			}
			if spec.Group() != g || !bytes.Equal(spec.Public(), eager.Public()) {
				t.Fatal("speculative share's public key differs")
			}
			srvPub, secret, err := ServerShare(g, spec.Public(), seeded(1))
			if err != nil {
				t.Fatal(err)
			}
			for i := range 2 { // Shared may be called twice (ZTLS)
				got, err := spec.Shared(srvPub)
				if err != nil || !bytes.Equal(got, secret) {
					t.Fatalf("call %d: speculative secret %x, %v; want %x", i, got, err, secret)
				}
			}
		})
	}
}

// TestEraseForbidsShared: an erased share of any group refuses to compute
// a secret (an x25519 share would otherwise use a zero scalar).
func TestEraseForbidsShared(t *testing.T) {
	for _, g := range allGroups {
		for _, gen := range []func(uint16, io.Reader) (ClientShare, error){GenerateClientShare, GenerateSpeculativeShare} {
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
// key. ecdh-held has the *ecdh.PrivateKey already (what an x25519 share cost
// before, and what a Pool's keys cost); ecdh-new makes it from the scalar
// first (what a fixed-base key costs); curve25519 is x/crypto's X25519.
func BenchmarkX25519Shared(b *testing.B) {
	scalar := bytes.Repeat([]byte{0x5a}, 32)
	peer := ecdhPublic(b, bytes.Repeat([]byte{0xa5}, 32))
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
		cpuLoop(b, func() (err error) {
			k := &x25519Key{}
			copy(k.scalar[:], scalar)
			sinkBytes, err = k.shared(peer)
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
// and a shared secret. fixedbase is GenerateSpeculativeShare (fixed-base
// public key, then crypto/ecdh's key and the ECDH), ecdh is
// GenerateClientShare (crypto/ecdh's key, then the ECDH).
func BenchmarkX25519UsedShare(b *testing.B) {
	scalar := bytes.Repeat([]byte{0x5a}, 32)
	peer := ecdhPublic(b, bytes.Repeat([]byte{0xa5}, 32))
	for _, v := range []struct {
		name string
		gen  func(uint16, io.Reader) (ClientShare, error)
	}{{"fixedbase", GenerateSpeculativeShare}, {"ecdh", GenerateClientShare}} {
		b.Run(v.name, func(b *testing.B) {
			cpuLoop(b, func() error {
				cs, err := v.gen(X25519, bytes.NewReader(scalar))
				if err != nil {
					return err
				}
				sinkBytes = cs.Public()
				sinkBytes, err = cs.Shared(peer)
				return err
			})
		})
	}
}

// BenchmarkTwoShareClient: the key exchange of a client that offers
// X25519MLKEM768 and x25519 (the default) and gets an X25519MLKEM768
// answer: both shares made, the hybrid one used. speculative makes them
// with GenerateSpeculativeShare, ecdh with GenerateClientShare.
func BenchmarkTwoShareClient(b *testing.B) {
	peer, err := GenerateClientShare(X25519MLKEM768, seeded(1))
	if err != nil {
		b.Fatal(err)
	}
	srvPub, _, err := ServerShare(X25519MLKEM768, peer.Public(), seeded(2))
	if err != nil {
		b.Fatal(err)
	}
	for _, v := range []struct {
		name string
		gen  func(uint16, io.Reader) (ClientShare, error)
	}{{"speculative", GenerateSpeculativeShare}, {"ecdh", GenerateClientShare}} {
		b.Run(v.name, func(b *testing.B) {
			rnd := seeded(3)
			cpuLoop(b, func() error {
				hyb, err := v.gen(X25519MLKEM768, rnd)
				if err != nil {
					return err
				}
				x, err := v.gen(X25519, rnd)
				if err != nil {
					return err
				}
				sinkBytes = append(hyb.Public(), x.Public()...)
				sinkBytes, err = hyb.Shared(srvPub)
				return err
			})
		})
	}
}
