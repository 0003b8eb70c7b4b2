package p256verify

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"
)

// wycheproofECDSA is the part of Wycheproof's EcdsaVerify test file
// (schema ecdsa_verify_schema_v1.json) the test reads.
type wycheproofECDSA struct {
	Algorithm  string `json:"algorithm"`
	TestGroups []struct {
		PublicKey struct {
			Curve        string `json:"curve"`
			Uncompressed string `json:"uncompressed"`
		} `json:"publicKey"`
		SHA   string `json:"sha"`
		Tests []struct {
			TcID    int      `json:"tcId"`
			Comment string   `json:"comment"`
			Flags   []string `json:"flags"`
			Msg     string   `json:"msg"`
			Sig     string   `json:"sig"`
			Result  string   `json:"result"`
		} `json:"tests"`
	} `json:"testGroups"`
}

// TestWycheproof runs Wycheproof's ECDSA P-256 SHA-256 vectors
// (testdata/README.md names their origin): every "valid" one must verify
// and every "invalid" one must not, on each path; an "acceptable" one must
// get crypto/ecdsa's verdict. crypto/ecdsa is held to the file as well, so
// a disagreement shows which side moved.
func TestWycheproof(t *testing.T) {
	raw, err := os.ReadFile("testdata/wycheproof_ecdsa_secp256r1_sha256_test.json")
	if err != nil {
		t.Fatal(err)
	}
	var file wycheproofECDSA
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	if file.Algorithm != "ECDSA" {
		t.Fatalf("algorithm %q, want ECDSA", file.Algorithm)
	}
	forEachPath(t, func(t *testing.T) {
		ran := map[string]int{}
		for _, g := range file.TestGroups {
			if g.PublicKey.Curve != "secp256r1" || g.SHA != "SHA-256" {
				t.Fatalf("a group for %s with %s: not this file's", g.PublicKey.Curve, g.SHA)
			}
			pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), unhex(t, g.PublicKey.Uncompressed))
			if err != nil {
				t.Fatalf("public key %s: %v", g.PublicKey.Uncompressed, err)
			}
			for _, tc := range g.Tests {
				digest := sha256.Sum256(unhex(t, tc.Msg))
				sig := unhex(t, tc.Sig)
				got, ref := Verify(pub, digest[:], sig), ecdsa.VerifyASN1(pub, digest[:], sig)
				ran[tc.Result]++
				switch tc.Result {
				case "valid", "invalid":
					want := tc.Result == "valid"
					if got != want || ref != want {
						t.Errorf("tcId %d (%s, %v): Verify %v, crypto/ecdsa %v, want %v", tc.TcID, tc.Comment, tc.Flags, got, ref, want)
					}
				case "acceptable":
					if got != ref {
						t.Errorf("tcId %d (%s, %v): Verify %v, crypto/ecdsa %v", tc.TcID, tc.Comment, tc.Flags, got, ref)
					}
				default:
					t.Fatalf("tcId %d: result %q", tc.TcID, tc.Result)
				}
			}
		}
		if ran["valid"] == 0 || ran["invalid"] == 0 {
			t.Fatalf("ran %v: the file lost its vectors", ran)
		}
		t.Logf("ran %v", ran)
	})
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
