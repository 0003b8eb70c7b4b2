package kex

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
)

// wycheproofXDH is the part of Wycheproof's XDH test file (schema
// xdh_comp_schema_v1.json) the test reads.
type wycheproofXDH struct {
	Algorithm     string `json:"algorithm"`
	NumberOfTests int    `json:"numberOfTests"`
	TestGroups    []struct {
		Curve string `json:"curve"`
		Tests []struct {
			TcID    int      `json:"tcId"`
			Comment string   `json:"comment"`
			Flags   []string `json:"flags"`
			Public  string   `json:"public"`
			Private string   `json:"private"`
			Shared  string   `json:"shared"`
			Result  string   `json:"result"`
		} `json:"tests"`
	} `json:"testGroups"`
}

// TestX25519Wycheproof runs Wycheproof's x25519 vectors (testdata/README.md
// names their origin): twist points, non-canonical and special public
// keys, edge cases of the arithmetic, low-order points. Each ladder must
// give the listed shared secret; a share (client, server, static) must
// give it too, or refuse with illegal_parameter exactly when it is all
// zeros (RFC 8446, Section 7.4.2), as before the assembly.
func TestX25519Wycheproof(t *testing.T) {
	raw, err := os.ReadFile("testdata/wycheproof_x25519_test.json")
	if err != nil {
		t.Fatal(err)
	}
	var file wycheproofXDH
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	if file.Algorithm != "XDH" {
		t.Fatalf("algorithm %q, want XDH", file.Algorithm)
	}
	ran, zeros := 0, 0
	for _, g := range file.TestGroups {
		if g.Curve != "curve25519" {
			continue
		}
		for _, tc := range g.Tests {
			ran++
			pub, priv, want := unhex(t, tc.Public), unhex(t, tc.Private), unhex(t, tc.Shared)
			if tc.Result == "invalid" || len(pub) != 32 || len(priv) != 32 {
				t.Fatalf("tcId %d: the file has a kind of vector this test does not expect (%s, %d/%d bytes)", tc.TcID, tc.Result, len(pub), len(priv))
			}
			for _, l := range ladders {
				var out [32]byte
				if err := l.f(&out, (*[32]byte)(priv), pub); err != nil || !bytes.Equal(out[:], want) {
					t.Errorf("tcId %d (%s) %s: %x, %v; want %x", tc.TcID, tc.Comment, l.name, out, err, want)
				}
			}
			zero := bytes.Equal(want, make([]byte, 32))
			if zero {
				zeros++
			}
			k := &x25519Key{}
			copy(k.scalar[:], priv)
			got, err := k.shared(pub)
			sk, skErr := NewStaticKey(X25519, priv)
			if skErr != nil {
				t.Fatal(skErr)
			}
			gotStatic, errStatic := sk.Shared(pub)
			if zero {
				wantIllegal(t, err, "share with an all-zero secret")
				wantIllegal(t, errStatic, "static key with an all-zero secret")
				continue
			}
			if err != nil || !bytes.Equal(got, want) || errStatic != nil || !bytes.Equal(gotStatic, want) {
				t.Errorf("tcId %d (%s): share %x, %v; static %x, %v; want %x", tc.TcID, tc.Comment, got, err, gotStatic, errStatic, want)
			}
		}
	}
	if ran != file.NumberOfTests || zeros == 0 {
		t.Fatalf("ran %d of %d vectors (%d with an all-zero secret)", ran, file.NumberOfTests, zeros)
	}
	t.Logf("%d vectors, %d of them with an all-zero shared secret", ran, zeros)
}
