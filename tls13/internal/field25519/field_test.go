package field25519

import (
	"bytes"
	"crypto/ecdh"
	"encoding/binary"
	"encoding/hex"
	"math/big"
	"os"
	"testing"

	"filippo.io/edwards25519/field"
)

// The reference is filippo.io/edwards25519/field, the arithmetic of
// crypto/ecdh's X25519. Elements here may be any value below 2^256, so
// the tests build them from four raw limbs (bit 255 included) and the
// reference from the same value modulo p.

var p, _ = new(big.Int).SetString("57896044618658097711785492504343953926634992332820282019728792003956564819949", 10)

// fromBytes returns the element whose four limbs are the 32 bytes of b
// (little-endian, all 256 bits) and the reference element of that value.
func fromBytes(t testing.TB, b []byte) (*Element, *field.Element) {
	t.Helper()
	var e Element
	for i := range e.l {
		e.l[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	var le [32]byte
	copy(le[:], b)
	for i, j := 0, 31; i < j; i, j = i+1, j-1 {
		le[i], le[j] = le[j], le[i]
	}
	n := new(big.Int).SetBytes(le[:])
	n.Mod(n, p)
	be := n.FillBytes(make([]byte, 32))
	for i, j := 0, 31; i < j; i, j = i+1, j-1 {
		be[i], be[j] = be[j], be[i]
	}
	r, err := new(field.Element).SetBytes(be)
	if err != nil {
		t.Fatal(err)
	}
	return &e, r
}

// edgeValues are 256-bit limb patterns at the borders of the ranges the
// reductions handle: 0, 1, p-1, p, p+1, 2^255-1, 2^255, 2p, 2^256-38,
// 2^256-1 and a few alternating patterns.
func edgeValues() [][]byte {
	var out [][]byte
	le := func(n *big.Int) []byte {
		b := n.FillBytes(make([]byte, 32))
		for i, j := 0, 31; i < j; i, j = i+1, j-1 {
			b[i], b[j] = b[j], b[i]
		}
		return b
	}
	one := big.NewInt(1)
	two255 := new(big.Int).Lsh(one, 255)
	two256 := new(big.Int).Lsh(one, 256)
	for _, n := range []*big.Int{
		big.NewInt(0), one, big.NewInt(19), big.NewInt(38), big.NewInt(121666),
		new(big.Int).Sub(p, one), p, new(big.Int).Add(p, one),
		new(big.Int).Sub(two255, one), two255, new(big.Int).Add(two255, big.NewInt(18)),
		new(big.Int).Lsh(p, 1), new(big.Int).Sub(two256, big.NewInt(38)),
		new(big.Int).Sub(two256, big.NewInt(39)), new(big.Int).Sub(two256, one),
		new(big.Int).Lsh(one, 64), new(big.Int).Sub(new(big.Int).Lsh(one, 192), one),
	} {
		out = append(out, le(n))
	}
	out = append(out, bytes.Repeat([]byte{0xaa}, 32), bytes.Repeat([]byte{0x55}, 32))
	return out
}

type impl struct {
	name              string
	mul, add, sub     func(out, a, b *[4]uint64)
	square, mul121666 func(out, a *[4]uint64)
	cswap             func(a, b *[4]uint64, swap uint64)
}

// impls lists the dispatching routines (the assembly when Accelerated) and
// the Go ones, so both are compared with the reference on every machine
// that has the instructions.
func impls() []impl {
	return []impl{
		{"dispatch", mul, add, sub, square, mul121666, cswap},
		{"generic", mulGeneric, addGeneric, subGeneric, func(o, a *[4]uint64) { mulGeneric(o, a, a) }, mul121666Generic, cswapGeneric},
	}
}

func checkOps(t *testing.T, x, y []byte) {
	t.Helper()
	a, ra := fromBytes(t, x)
	b, rb := fromBytes(t, y)
	var c121666 field.Element
	c121666.Mult32(new(field.Element).One(), 121666)
	for _, im := range impls() {
		for _, op := range []struct {
			name string
			got  func(out *Element)
			want *field.Element
		}{
			{"mul", func(o *Element) { im.mul(&o.l, &a.l, &b.l) }, new(field.Element).Multiply(ra, rb)},
			{"square", func(o *Element) { im.square(&o.l, &a.l) }, new(field.Element).Square(ra)},
			{"add", func(o *Element) { im.add(&o.l, &a.l, &b.l) }, new(field.Element).Add(ra, rb)},
			{"sub", func(o *Element) { im.sub(&o.l, &a.l, &b.l) }, new(field.Element).Subtract(ra, rb)},
			{"mul121666", func(o *Element) { im.mul121666(&o.l, &a.l) }, new(field.Element).Multiply(ra, &c121666)},
		} {
			var out Element
			op.got(&out)
			if got := out.Bytes(); !bytes.Equal(got, op.want.Bytes()) {
				t.Fatalf("%s %s(%x, %x) = %x, want %x", im.name, op.name, x, y, got, op.want.Bytes())
			}
			// In place: out aliasing the first operand.
			alias := *a
			switch op.name {
			case "mul":
				im.mul(&alias.l, &alias.l, &b.l)
			case "square":
				im.square(&alias.l, &alias.l)
			case "add":
				im.add(&alias.l, &alias.l, &b.l)
			case "sub":
				im.sub(&alias.l, &alias.l, &b.l)
			case "mul121666":
				im.mul121666(&alias.l, &alias.l)
			}
			if !bytes.Equal(alias.Bytes(), op.want.Bytes()) {
				t.Fatalf("%s %s in place: %x, want %x", im.name, op.name, alias.Bytes(), op.want.Bytes())
			}
		}
		for swap := uint64(0); swap < 2; swap++ {
			u, v := *a, *b
			im.cswap(&u.l, &v.l, swap)
			if (swap == 0 && (u != *a || v != *b)) || (swap == 1 && (u != *b || v != *a)) {
				t.Fatalf("%s cswap(%d) wrong", im.name, swap)
			}
		}
	}
}

func TestOpsEdgeValues(t *testing.T) {
	t.Logf("Accelerated() = %v", Accelerated())
	vals := edgeValues()
	for _, x := range vals {
		for _, y := range vals {
			checkOps(t, x, y)
		}
	}
}

// FuzzFieldOps compares mul, square, add, sub, mul121666 and cswap, in
// assembly and in Go, with filippo.io/edwards25519/field on any two
// 256-bit inputs.
func FuzzFieldOps(f *testing.F) {
	vals := edgeValues()
	for i, x := range vals {
		f.Add(x, vals[(i*7+3)%len(vals)])
	}
	f.Fuzz(func(t *testing.T, x, y []byte) {
		if len(x) < 32 || len(y) < 32 {
			return
		}
		checkOps(t, x[:32], y[:32])
	})
}

// FuzzInvertBytes compares Invert, SetBytes and Bytes with the reference.
func FuzzInvertBytes(f *testing.F) {
	for _, x := range edgeValues() {
		f.Add(x)
	}
	f.Fuzz(func(t *testing.T, x []byte) {
		if len(x) < 32 {
			return
		}
		x = x[:32]
		a, ra := fromBytes(t, x)
		if got, want := new(Element).Invert(a).Bytes(), new(field.Element).Invert(ra).Bytes(); !bytes.Equal(got, want) {
			t.Fatalf("Invert(%x) = %x, want %x", x, got, want)
		}
		var e Element
		if _, err := e.SetBytes(x); err != nil {
			t.Fatal(err)
		}
		r, _ := new(field.Element).SetBytes(x)
		if !bytes.Equal(e.Bytes(), r.Bytes()) {
			t.Fatalf("SetBytes(%x).Bytes() = %x, want %x", x, e.Bytes(), r.Bytes())
		}
		if e.Equal(a) != a.Equal(&e) {
			t.Fatal("Equal is not symmetric")
		}
	})
}

func TestSetBytesLength(t *testing.T) {
	if _, err := new(Element).SetBytes(make([]byte, 31)); err == nil {
		t.Fatal("SetBytes took 31 bytes")
	}
}

func unhex(t testing.TB, s string) *[32]byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 32 {
		t.Fatalf("bad hex %q", s)
	}
	return (*[32]byte)(b)
}

// TestScalarMultRFC7748 runs the two vectors of RFC 7748, Section 5.2.
func TestScalarMultRFC7748(t *testing.T) {
	for _, v := range []struct{ k, u, out string }{
		{"a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4",
			"e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c",
			"c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552"},
		{"4b66e9d4d1b4673c5ad22691957d6af5c11b6421e0ea01d42ca4169e7918ba0d",
			"e5210f12786811d3f4b7959d0538ae2c31dbe7106fc03c3efc4cd549c715a493",
			"95cbde9476e8907d7aade45cb4b873f88b595a68799fa152e6f8f7647aac7957"},
	} {
		var out [32]byte
		ScalarMult(&out, unhex(t, v.k), unhex(t, v.u))
		if got := hex.EncodeToString(out[:]); got != v.out {
			t.Errorf("X25519(%s, %s) = %s, want %s", v.k, v.u, got, v.out)
		}
	}
}

// TestScalarMultIterated is the iterated test of RFC 7748, Section 5.2:
// after 1 and 1,000 iterations always; after 1,000,000 only when
// ZTLS_X25519_MILLION=1 and not -short (about a minute).
func TestScalarMultIterated(t *testing.T) {
	k := unhex(t, "0900000000000000000000000000000000000000000000000000000000000000")
	u := *k
	want := map[int]string{
		1:       "422c8e7a6227d7bca1350b3e2bb7279f7897b87bb6854b783c60e80311ae3079",
		1000:    "684cf59ba83309552800ef566f2f4d3c1c3887c49360e3875f2eb94d99532c51",
		1000000: "7c3911e0ab2586fd864497297e575e6f3bc601c0883c30df5f4dd2d24f665424",
	}
	last := 1000
	if os.Getenv("ZTLS_X25519_MILLION") == "1" && !testing.Short() {
		last = 1000000
	}
	kk := *k
	for i := 1; i <= last; i++ {
		var out [32]byte
		ScalarMult(&out, &kk, &u)
		u, kk = kk, out
		if w, ok := want[i]; ok {
			if got := hex.EncodeToString(kk[:]); got != w {
				t.Fatalf("after %d iterations k = %s, want %s", i, got, w)
			}
		}
	}
}

// FuzzScalarMult compares ScalarMult with crypto/ecdh's X25519 (which
// refuses exactly the all-zero results, where ScalarMult returns zeros).
func FuzzScalarMult(f *testing.F) {
	f.Add(bytes.Repeat([]byte{1}, 32), append([]byte{9}, make([]byte, 31)...))
	f.Add(bytes.Repeat([]byte{0xff}, 32), bytes.Repeat([]byte{0xff}, 32))
	f.Add(make([]byte, 32), make([]byte, 32))
	f.Fuzz(func(t *testing.T, scalar, u []byte) {
		if len(scalar) < 32 || len(u) < 32 {
			return
		}
		scalar, u = scalar[:32], u[:32]
		var got [32]byte
		ScalarMult(&got, (*[32]byte)(scalar), (*[32]byte)(u))
		checkAgainstECDH(t, scalar, u, got[:])
		if useADX {
			// The Go ladder on the same input.
			var gen [32]byte
			useGenericStep(t, func() { ScalarMult(&gen, (*[32]byte)(scalar), (*[32]byte)(u)) })
			if gen != got {
				t.Fatalf("Go ladder %x, assembly %x", gen, got)
			}
		}
	})
}

func checkAgainstECDH(t *testing.T, scalar, u, got []byte) {
	t.Helper()
	priv, err := ecdh.X25519().NewPrivateKey(scalar)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ecdh.X25519().NewPublicKey(u)
	if err != nil {
		t.Fatal(err)
	}
	want, err := priv.ECDH(pub)
	if err != nil {
		want = make([]byte, 32) // crypto/ecdh refuses the all-zero secret
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("X25519(%x, %x) = %x, crypto/ecdh %x", scalar, u, got, want)
	}
}
