package kex

import (
	"bytes"
	"crypto/ecdh"
	"crypto/mlkem"
	"encoding/hex"
	"errors"
	"io"
	mathrand "math/rand/v2"
	"strings"
	"testing"

	"github.com/ztls-project/ztls/tls13/internal/alert"
)

var allGroups = []uint16{X25519, P256, P384, P521, X25519MLKEM768}

func seeded(seed byte) io.Reader {
	var s [32]byte
	s[0] = seed
	return mathrand.NewChaCha8(s)
}

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wantIllegal checks that err is an *alert.Error carrying illegal_parameter.
func wantIllegal(t *testing.T, err error, what string) {
	t.Helper()
	var ke *alert.Error
	if !errors.As(err, &ke) {
		t.Fatalf("%s: got %v, want *alert.Error", what, err)
	}
	if ke.Alert != alert.IllegalParameter {
		t.Fatalf("%s: alert %d, want 47 (illegal_parameter)", what, ke.Alert)
	}
	if !strings.HasPrefix(err.Error(), "tls13: ") {
		t.Fatalf("%s: error %q lacks the tls13: prefix", what, err)
	}
}

func TestClientServerAgree(t *testing.T) {
	sizes := map[uint16][3]int{ // client share, server share, secret
		X25519:         {32, 32, 32},
		P256:           {65, 65, 32},
		P384:           {97, 97, 48},
		P521:           {133, 133, 66},
		X25519MLKEM768: {1216, 1120, 64},
	}
	for _, g := range allGroups {
		t.Run(Name(g), func(t *testing.T) {
			for _, rnd := range []io.Reader{nil, seeded(1)} {
				cs, err := GenerateClientShare(g, rnd)
				if err != nil {
					t.Fatal(err)
				}
				if cs.Group() != g {
					t.Fatalf("Group() = %#x", cs.Group())
				}
				if err := ValidateShare(g, cs.Public(), false); err != nil {
					t.Fatalf("own client share invalid: %v", err)
				}
				srvPub, srvSecret, err := ServerShare(g, cs.Public(), rnd)
				if err != nil {
					t.Fatal(err)
				}
				if err := ValidateShare(g, srvPub, true); err != nil {
					t.Fatalf("own server share invalid: %v", err)
				}
				cliSecret, err := cs.Shared(srvPub)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(cliSecret, srvSecret) {
					t.Fatalf("secrets differ:\nclient %x\nserver %x", cliSecret, srvSecret)
				}
				want := sizes[g]
				if len(cs.Public()) != want[0] || len(srvPub) != want[1] || len(cliSecret) != want[2] {
					t.Fatalf("sizes %d/%d/%d, want %v", len(cs.Public()), len(srvPub), len(cliSecret), want)
				}
				// Shared can be called again (ZTLS uses the share twice).
				again, err := cs.Shared(srvPub)
				if err != nil || !bytes.Equal(again, cliSecret) {
					t.Fatalf("second Shared: %x, %v", again, err)
				}
				if bytes.Equal(cliSecret, make([]byte, len(cliSecret))) {
					t.Fatal("shared secret is all zeros")
				}
			}
		})
	}
}

// TestRFC8448X25519 reproduces the x25519 exchange of RFC 8448, Section 3.
func TestRFC8448X25519(t *testing.T) {
	cliPriv := unhex(t, "49af42ba7f7994852d713ef2784bcbcaa7911de26adc5642cb634540e7ea5005")
	cliPub := unhex(t, "99381de560e4bd43d23d8e435a7dbafeb3c06e51c13cae4d5413691e529aaf2c")
	srvPriv := unhex(t, "b1580eeadf6dd589b8ef4f2d5652578cc810e9980191ec8d058308cea216a21e")
	srvPub := unhex(t, "c9828876112095fe66762bdbf7c672e156d6cc253b833df1dd69b1b04e751f0f")
	shared := unhex(t, "8bd4054fb55b9d63fdfbacf9f04b9f0d35e6d63f537563efd46272900f89492d")

	cs, err := GenerateClientShare(X25519, bytes.NewReader(cliPriv))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(cs.Public(), cliPub) {
		t.Fatalf("client public %x, want %x", cs.Public(), cliPub)
	}
	gotSrvPub, srvSecret, err := ServerShare(X25519, cliPub, bytes.NewReader(srvPriv))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gotSrvPub, srvPub) || !bytes.Equal(srvSecret, shared) {
		t.Fatalf("server public %x secret %x", gotSrvPub, srvSecret)
	}
	cliSecret, err := cs.Shared(srvPub)
	if err != nil || !bytes.Equal(cliSecret, shared) {
		t.Fatalf("client secret %x, %v", cliSecret, err)
	}
	sk, err := NewStaticKey(X25519, srvPriv)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := sk.Shared(cliPub); err != nil || !bytes.Equal(got, shared) {
		t.Fatalf("static secret %x, %v", got, err)
	}
}

func TestFixedRandomnessIsDeterministic(t *testing.T) {
	for _, g := range allGroups {
		t.Run(Name(g), func(t *testing.T) {
			run := func() (cli, srv, secret []byte) {
				cs, err := GenerateClientShare(g, seeded(7))
				if err != nil {
					t.Fatal(err)
				}
				srv, secret, err = ServerShare(g, cs.Public(), seeded(8))
				if err != nil {
					t.Fatal(err)
				}
				return cs.Public(), srv, secret
			}
			c1, s1, k1 := run()
			c2, s2, k2 := run()
			if !bytes.Equal(c1, c2) || !bytes.Equal(s1, s2) || !bytes.Equal(k1, k2) {
				t.Fatal("same randomness gave different outputs")
			}
			c3, err := GenerateClientShare(g, seeded(9))
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Equal(c1, c3.Public()) {
				t.Fatal("different randomness gave the same share")
			}
		})
	}
}

// TestHybridLayout checks the draft's byte order independently of the
// package: share = ek || x25519, server = ct || x25519, secret = K || x25519.
func TestHybridLayout(t *testing.T) {
	seed := bytes.Repeat([]byte{0x11}, 64)
	xPriv := bytes.Repeat([]byte{0x22}, 32)
	encRand := bytes.Repeat([]byte{0x33}, 32)
	sxPriv := bytes.Repeat([]byte{0x44}, 32)

	cs, err := GenerateClientShare(X25519MLKEM768, bytes.NewReader(append(append([]byte{}, seed...), xPriv...)))
	if err != nil {
		t.Fatal(err)
	}
	dk, err := mlkem.NewDecapsulationKey768(seed)
	if err != nil {
		t.Fatal(err)
	}
	xk, err := ecdh.X25519().NewPrivateKey(xPriv)
	if err != nil {
		t.Fatal(err)
	}
	pub := cs.Public()
	if !bytes.Equal(pub[:1184], dk.EncapsulationKey().Bytes()) || !bytes.Equal(pub[1184:], xk.PublicKey().Bytes()) {
		t.Fatal("client share is not ML-KEM encapsulation key || x25519 public")
	}

	srvPub, secret, err := ServerShare(X25519MLKEM768, pub, bytes.NewReader(append(append([]byte{}, encRand...), sxPriv...)))
	if err != nil {
		t.Fatal(err)
	}
	sxk, err := ecdh.X25519().NewPrivateKey(sxPriv)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(srvPub[1088:], sxk.PublicKey().Bytes()) {
		t.Fatal("server share does not end with the x25519 public key")
	}
	k, err := dk.Decapsulate(srvPub[:1088])
	if err != nil {
		t.Fatal(err)
	}
	xs, err := xk.ECDH(sxk.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(secret, append(k, xs...)) {
		t.Fatal("secret is not ML-KEM shared secret || x25519 shared secret")
	}
}

func TestNISTScalarRetry(t *testing.T) {
	for _, g := range []uint16{P256, P384, P521} {
		n := scalarLen(g)
		good := bytes.Repeat([]byte{0x5a}, n)
		direct, err := GenerateClientShare(g, bytes.NewReader(good))
		if err != nil {
			t.Fatal(err)
		}
		// Zero and all-ones (above the order) are rejected, then the good value is used.
		stream := append(append(make([]byte, n), bytes.Repeat([]byte{0xff}, n)...), good...)
		retried, err := GenerateClientShare(g, bytes.NewReader(stream))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(direct.Public(), retried.Public()) {
			t.Fatalf("%s: retry did not land on the first valid scalar", Name(g))
		}
		// A reader that never yields a valid scalar fails instead of looping.
		if _, err := GenerateClientShare(g, constReader(0xff)); err == nil || !strings.Contains(err.Error(), "kex: ") {
			t.Fatalf("%s: broken reader: %v", Name(g), err)
		}
	}
}

type constReader byte

func (c constReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(c)
	}
	return len(p), nil
}

func TestShortRandFails(t *testing.T) {
	for _, g := range allGroups {
		if _, err := GenerateClientShare(g, bytes.NewReader(make([]byte, 10))); err == nil {
			t.Errorf("%s: short rand accepted", Name(g))
		}
	}
	cs, err := GenerateClientShare(X25519MLKEM768, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ServerShare(X25519MLKEM768, cs.Public(), bytes.NewReader(make([]byte, 40))); err == nil {
		t.Error("hybrid server: short rand accepted")
	}
}

func TestInvalidShares(t *testing.T) {
	p256, err := GenerateClientShare(P256, seeded(3))
	if err != nil {
		t.Fatal(err)
	}
	offCurve := bytes.Clone(p256.Public())
	offCurve[64] ^= 1
	compressed := append([]byte{0x02 | p256.Public()[64]&1}, p256.Public()[1:33]...)
	badPrefix := bytes.Clone(p256.Public())
	badPrefix[0] = 0x05
	p384, err := GenerateClientShare(P384, seeded(4))
	if err != nil {
		t.Fatal(err)
	}
	p384Off := bytes.Clone(p384.Public())
	p384Off[1] ^= 0x80
	p521, err := GenerateClientShare(P521, seeded(7))
	if err != nil {
		t.Fatal(err)
	}
	p521Off := bytes.Clone(p521.Public())
	p521Off[132] ^= 1
	p521Compressed := append([]byte{0x02 | p521.Public()[132]&1}, p521.Public()[1:67]...)
	hyb, err := GenerateClientShare(X25519MLKEM768, seeded(5))
	if err != nil {
		t.Fatal(err)
	}
	badEK := bytes.Clone(hyb.Public())
	for i := range 1184 {
		badEK[i] = 0xff // every coefficient >= q fails the FIPS 203 modulus check
	}

	cases := []struct {
		name       string
		group      uint16
		share      []byte
		fromServer bool
	}{
		{"x25519 empty", X25519, nil, false},
		{"x25519 short", X25519, make([]byte, 31), false},
		{"x25519 long", X25519, make([]byte, 33), false},
		{"p256 empty", P256, nil, false},
		{"p256 truncated", P256, p256.Public()[:64], false},
		{"p256 off curve", P256, offCurve, false},
		{"p256 compressed", P256, compressed, false},
		{"p256 bad prefix", P256, badPrefix, false},
		{"p256 infinity", P256, []byte{0}, false},
		{"p256 share for p384", P384, p256.Public(), false},
		{"p384 off curve", P384, p384Off, false},
		{"p521 off curve", P521, p521Off, false},
		{"p521 compressed", P521, p521Compressed, false},
		{"p384 share for p521", P521, p384.Public(), false},
		{"hybrid client short", X25519MLKEM768, hyb.Public()[:1215], false},
		{"hybrid bad encapsulation key", X25519MLKEM768, badEK, false},
		{"hybrid server share as client", X25519MLKEM768, make([]byte, 1120), false},
		{"hybrid client share as server", X25519MLKEM768, hyb.Public(), true},
		{"unsupported group", 0x001e, make([]byte, 56), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantIllegal(t, ValidateShare(c.group, c.share, c.fromServer), "ValidateShare")
			if !c.fromServer && Supported(c.group) {
				_, _, err := ServerShare(c.group, c.share, seeded(6))
				wantIllegal(t, err, "ServerShare")
			}
			if c.fromServer || c.group == P256 || c.group == P384 || c.group == P521 || c.group == X25519 {
				if !Supported(c.group) {
					return
				}
				cs, err := GenerateClientShare(c.group, seeded(6))
				if err != nil {
					t.Fatal(err)
				}
				_, err = cs.Shared(c.share)
				wantIllegal(t, err, "Shared")
			}
		})
	}
}

// TestLowOrderX25519 feeds x25519 points of small order; the output is all
// zeros and must be refused (RFC 8446, Section 7.4.2).
func TestLowOrderX25519(t *testing.T) {
	lowOrder := [][]byte{
		make([]byte, 32),                       // 0
		append([]byte{1}, make([]byte, 31)...), // 1
		unhex(t, "e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800"), // order 8
		unhex(t, "5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157"), // order 8
		unhex(t, "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"), // p-1
	}
	cs, err := GenerateClientShare(X25519, seeded(1))
	if err != nil {
		t.Fatal(err)
	}
	sk, err := GenerateStaticKey(X25519, seeded(2))
	if err != nil {
		t.Fatal(err)
	}
	hyb, err := GenerateClientShare(X25519MLKEM768, seeded(3))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range lowOrder {
		if err := ValidateShare(X25519, p, true); err != nil {
			t.Fatalf("encoding of %x should pass ValidateShare: %v", p, err)
		}
		_, err := cs.Shared(p)
		wantIllegal(t, err, "client Shared")
		_, err = sk.Shared(p)
		wantIllegal(t, err, "static Shared")
		_, _, err = ServerShare(X25519, p, seeded(4))
		wantIllegal(t, err, "ServerShare")

		// The hybrid's x25519 half gets the same check on both sides.
		clientShare := append(hyb.Public()[:1184:1184], p...)
		_, _, err = ServerShare(X25519MLKEM768, clientShare, seeded(5))
		wantIllegal(t, err, "hybrid ServerShare")
		srvPub, _, err := ServerShare(X25519MLKEM768, hyb.Public(), seeded(5))
		if err != nil {
			t.Fatal(err)
		}
		_, err = hyb.Shared(append(srvPub[:1088:1088], p...))
		wantIllegal(t, err, "hybrid Shared")
	}
}

func TestStaticKey(t *testing.T) {
	for _, g := range []uint16{X25519, P256} {
		t.Run(Name(g), func(t *testing.T) {
			sk, err := GenerateStaticKey(g, seeded(1))
			if err != nil {
				t.Fatal(err)
			}
			if sk.Group() != g {
				t.Fatal("wrong group")
			}
			again, err := NewStaticKey(g, sk.Private())
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again.Public(), sk.Public()) {
				t.Fatal("NewStaticKey(Private()) changed the public key")
			}
			cs, err := GenerateClientShare(g, seeded(2))
			if err != nil {
				t.Fatal(err)
			}
			a, err := sk.Shared(cs.Public())
			if err != nil {
				t.Fatal(err)
			}
			b, err := cs.Shared(sk.Public())
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a, b) {
				t.Fatal("static and client secrets differ")
			}
			if _, err := NewStaticKey(g, make([]byte, 31)); err == nil {
				t.Fatal("short private key accepted")
			}
		})
	}
	if _, err := NewStaticKey(P256, make([]byte, 32)); err == nil {
		t.Fatal("zero P-256 scalar accepted")
	}
	for _, g := range []uint16{P384, 0x1234} {
		if _, err := GenerateStaticKey(g, seeded(1)); err == nil || !strings.HasPrefix(err.Error(), "kex: ") {
			t.Fatalf("static key for %s: %v", Name(g), err)
		}
		if _, err := NewStaticKey(g, make([]byte, 48)); err == nil {
			t.Fatalf("NewStaticKey for %s accepted", Name(g))
		}
	}
}

// An X25519MLKEM768 static key (docs/ztls-spec.md, Section 9.1) against
// its definition, computed here with crypto/mlkem and crypto/ecdh: the
// public key is the ML-KEM-768 encapsulation key of the first 64 private
// bytes then the x25519 public key of the last 32; the secret of a
// client's answer (ServerShare) is the decapsulated ML-KEM key then the
// x25519 secret; a mauled ciphertext gives another secret and no error
// (implicit rejection); a wrong length is illegal_parameter.
func TestStaticHybridKey(t *testing.T) {
	priv := make([]byte, StaticHybridSize)
	seeded(9).Read(priv)
	sk, err := NewStaticKey(X25519MLKEM768, priv)
	if err != nil {
		t.Fatal(err)
	}
	dk, err := mlkem.NewDecapsulationKey768(priv[:64])
	if err != nil {
		t.Fatal(err)
	}
	xk, err := ecdh.X25519().NewPrivateKey(priv[64:])
	if err != nil {
		t.Fatal(err)
	}
	wantPub := append(dk.EncapsulationKey().Bytes(), xk.PublicKey().Bytes()...)
	if !bytes.Equal(sk.Public(), wantPub) || len(wantPub) != 1216 || !bytes.Equal(sk.Private(), priv) {
		t.Fatal("public key is not ek || x25519 public, or Private changed")
	}
	gen, err := GenerateStaticKey(X25519MLKEM768, seeded(9))
	if err != nil || !bytes.Equal(gen.Public(), wantPub) {
		t.Fatalf("GenerateStaticKey does not read the private bytes as NewStaticKey takes them: %v", err)
	}
	answer, secret, err := ServerShare(X25519MLKEM768, sk.Public(), seeded(10))
	if err != nil || len(answer) != 1120 || len(secret) != 64 {
		t.Fatalf("answer %d bytes, secret %d, %v", len(answer), len(secret), err)
	}
	ssM, err := dk.Decapsulate(answer[:1088])
	if err != nil {
		t.Fatal(err)
	}
	peer, err := ecdh.X25519().NewPublicKey(answer[1088:])
	if err != nil {
		t.Fatal(err)
	}
	ssX, err := xk.ECDH(peer)
	if err != nil {
		t.Fatal(err)
	}
	if want := append(ssM, ssX...); !bytes.Equal(secret, want) {
		t.Fatalf("client secret %x, want ss_M || ss_X %x", secret, want)
	}
	got, err := sk.Shared(answer)
	if err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("static key's secret %x, %v; client's %x", got, err, secret)
	}
	mauled := bytes.Clone(answer)
	mauled[100] ^= 1
	bad, err := sk.Shared(mauled)
	if err != nil || bytes.Equal(bad[:32], secret[:32]) || !bytes.Equal(bad[32:], secret[32:]) {
		t.Fatalf("mauled ciphertext: %v; ML-KEM half must change silently, x25519 half stay", err)
	}
	_, err = sk.Shared(answer[:1119])
	wantIllegal(t, err, "short answer")
}

func TestNamesAndSupport(t *testing.T) {
	want := map[uint16]string{X25519: "x25519", P256: "secp256r1", P384: "secp384r1", P521: "secp521r1", X25519MLKEM768: "X25519MLKEM768", 0x001e: "0x001e"}
	for g, n := range want {
		if Name(g) != n {
			t.Errorf("Name(%#x) = %q, want %q", g, Name(g), n)
		}
	}
	if Supported(0x001e) || Supported(0) {
		t.Error("x448 / 0 reported as supported")
	}
	d := DefaultGroups()
	if len(d) != 5 || d[0] != X25519MLKEM768 || d[1] != X25519 || d[2] != P256 || d[3] != P384 || d[4] != P521 {
		t.Fatalf("DefaultGroups = %#x", d)
	}
	for _, g := range d {
		if !Supported(g) {
			t.Errorf("default group %s not supported", Name(g))
		}
	}
	d[0] = 0
	if DefaultGroups()[0] != X25519MLKEM768 {
		t.Fatal("DefaultGroups shares its backing array")
	}
	if _, err := GenerateClientShare(0x001e, nil); err == nil {
		t.Fatal("x448 share generated")
	}
	if _, _, err := ServerShare(0x001e, make([]byte, 56), nil); err == nil {
		t.Fatal("x448 answered")
	}
}

func FuzzValidateShare(f *testing.F) {
	for i, g := range allGroups {
		cs, err := GenerateClientShare(g, seeded(byte(i)))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(g, cs.Public(), false)
		srv, _, err := ServerShare(g, cs.Public(), seeded(byte(i+10)))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(g, srv, true)
		f.Add(g, cs.Public()[:len(cs.Public())-1], false)
	}
	f.Add(X25519, make([]byte, 32), true)
	f.Add(P256, []byte{0x02, 1, 2, 3}, false)
	f.Add(uint16(0x001e), []byte{}, false)

	shares := map[uint16]ClientShare{}
	for _, g := range allGroups {
		cs, err := GenerateClientShare(g, seeded(99))
		if err != nil {
			f.Fatal(err)
		}
		shares[g] = cs
	}
	static, err := GenerateStaticKey(P256, seeded(98))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, group uint16, share []byte, fromServer bool) {
		verr := ValidateShare(group, share, fromServer)
		if verr != nil {
			var ke *alert.Error
			if !errors.As(verr, &ke) || ke.Alert != alert.IllegalParameter {
				t.Fatalf("ValidateShare error %v is not illegal_parameter", verr)
			}
		}
		cs, ok := shares[group]
		if !ok {
			if verr == nil {
				t.Fatalf("unsupported group %#x validated", group)
			}
			return
		}
		if fromServer {
			secret, err := cs.Shared(share)
			if verr != nil && err == nil {
				t.Fatalf("Shared accepted a share ValidateShare refused: %v", verr)
			}
			if err == nil && len(secret) == 0 {
				t.Fatal("empty secret")
			}
		} else {
			_, _, err := ServerShare(group, share, seeded(1))
			if verr != nil && err == nil {
				t.Fatalf("ServerShare accepted a share ValidateShare refused: %v", verr)
			}
		}
		if group == P256 {
			if _, err := static.Shared(share); (err == nil) != (verr == nil) {
				t.Fatalf("static Shared %v vs ValidateShare %v", err, verr)
			}
		}
	})
}

func BenchmarkHandshakeKex(b *testing.B) {
	for _, g := range allGroups {
		b.Run(Name(g), func(b *testing.B) {
			for b.Loop() {
				cs, err := GenerateClientShare(g, nil)
				if err != nil {
					b.Fatal(err)
				}
				srv, _, err := ServerShare(g, cs.Public(), nil)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := cs.Shared(srv); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
