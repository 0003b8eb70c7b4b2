package bfe

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
)

// detRand is a deterministic byte source for keys and encapsulations.
type detRand struct{ r *rand.ChaCha8 }

func newDetRand(seed byte) *detRand {
	var s [32]byte
	s[0] = seed
	return &detRand{rand.NewChaCha8(s)}
}

func (d *detRand) Read(p []byte) (int, error) { return d.r.Read(p) }

// testKeys caches small key files per parameter set, copied per test so
// that each test punctures its own.
var testKeys sync.Map

type testKey struct {
	pk           *PublicKey
	file, points []byte
}

// newTestKeyState generates (once per params) a key and opens a fresh copy
// of its file and point table in t's temporary directory. (openMem opens
// the key file alone, so the tests cover decapsulation with and without
// the table.)
func newTestKeyState(t testing.TB, params Params, opts *Options) (*KeyState, string) {
	t.Helper()
	type id struct{ p Params }
	v, ok := testKeys.Load(id{params})
	if !ok {
		path := filepath.Join(t.TempDir(), "gen.key")
		pk, err := GenerateKey(context.Background(), path, KeyGenConfig{Epoch: 7, Params: params, Rand: newDetRand(1), Workers: 2})
		if err != nil {
			t.Fatal(err)
		}
		v, _ = testKeys.LoadOrStore(id{params}, &testKey{pk, readFile(t, path), readFile(t, PointTablePath(path))})
	}
	tk := v.(*testKey)
	path := filepath.Join(t.TempDir(), "epoch.key")
	writeFile(t, path, tk.file)
	writeFile(t, PointTablePath(path), tk.points)
	ks, err := OpenKeyState(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ks.Close() })
	if !ks.PublicKey().Equal(tk.pk) {
		t.Fatal("opened key differs from the generated one")
	}
	return ks, path
}

var defaultTestParams = Params{M: 400, K: 4}

func TestRoundTrip(t *testing.T) {
	ks, _ := newTestKeyState(t, defaultTestParams, nil)
	pk := ks.PublicKey()
	for i := range 3 {
		ct, key, err := pk.Encapsulate(newDetRand(byte(10 + i)))
		if err != nil {
			t.Fatal(err)
		}
		if len(ct) != pk.Params().CiphertextSize() || len(key) != KeySize {
			t.Fatalf("sizes: ct %d key %d", len(ct), len(key))
		}
		got, err := ks.Decapsulate(context.Background(), ct)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, key) {
			t.Fatalf("decapsulated key %x, want %x", got, key)
		}
	}
}

func TestReplayRefused(t *testing.T) {
	ks, _ := newTestKeyState(t, defaultTestParams, nil)
	ct, _, err := ks.PublicKey().Encapsulate(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ks.Decapsulate(context.Background(), ct); err != nil {
		t.Fatal(err)
	}
	before := ks.Punctured()
	if _, err := ks.Decapsulate(context.Background(), ct); !errors.Is(err, ErrPunctured) {
		t.Fatalf("replay: err = %v, want ErrPunctured", err)
	}
	if ks.Punctured() != before {
		t.Fatal("a replay punctured more slots")
	}
}
