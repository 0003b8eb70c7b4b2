package sig

import (
	"crypto/rsa"
	"crypto/x509"
	"testing"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/tls13/internal/alert"
)

func FuzzParsePublicKeySPKI(f *testing.F) {
	k := testpki.NewKey(f, "rsa2048").(*rsa.PrivateKey)
	pss := buildSPKI(f, &k.PublicKey, oidRSASSAPSS, nil)
	f.Add(pss)
	f.Add(buildSPKI(f, &k.PublicKey, oidRSASSAPSS, sha256PSSParams))
	f.Add(buildSPKI(f, &k.PublicKey, oidRSAEncryption, []byte{5, 0}))
	f.Add(pss[:len(pss)/2])
	f.Add([]byte{0x30, 0x00})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, der []byte) {
		pub, err := parsePSSSPKI(der)
		if err != nil {
			return
		}
		if pub.N.Sign() <= 0 || pub.N.Bit(0) == 0 || pub.E < 3 || pub.N.BitLen() > maxRSABits {
			t.Fatalf("accepted a bad key: %d-bit modulus, e=%d", pub.N.BitLen(), pub.E)
		}
		// A parsed key re-encodes to something that parses to the same key.
		again, err := parsePSSSPKI(buildSPKI(t, pub.PublicKey, oidRSASSAPSS, nil))
		if err != nil || !again.Equal(pub) {
			t.Fatalf("re-encoded key: %v", err)
		}
		// The key must be usable without panics whatever its size.
		_ = SchemesForKey(pub)
		_ = Verify(pub, PSSPSSWithSHA256, ServerContext, make([]byte, 32), der)
	})
}

func FuzzParsePSSPrivateKey(f *testing.F) {
	k := testpki.NewKey(f, "rsa2048").(*rsa.PrivateKey)
	good := buildPSSPKCS8(f, k, nil, nil)
	f.Add(good)
	f.Add(buildPSSPKCS8(f, k, sha256PSSParams, []byte{0xa0, 0x00}))
	rsaPKCS8, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(rsaPKCS8)
	f.Add(good[:40])
	f.Add([]byte{0x30, 0x03, 0x02, 0x01, 0x00})
	f.Fuzz(func(t *testing.T, der []byte) {
		key, err := ParsePSSPrivateKey(der)
		if err != nil {
			return
		}
		if err := key.Validate(); err != nil {
			t.Fatalf("accepted an invalid key: %v", err)
		}
		if _, ok := key.Public().(PSSPublicKey); !ok {
			t.Fatal("Public is not a PSSPublicKey")
		}
	})
}

// FuzzVerify feeds arbitrary schemes and signatures to Verify for each key
// type: it must return an *alert.Error, never panic.
func FuzzVerify(f *testing.F) {
	var keys []namedKey
	for _, kt := range testpki.KeyTypes {
		keys = append(keys, namedKey{kt, testpki.NewKey(f, kt)})
	}
	keys = append(keys, namedKey{"rsa-pss", PSSPrivateKey{testpki.NewKey(f, "rsa2048").(*rsa.PrivateKey)}})
	th := transcript("fuzz")
	for i, k := range keys {
		s := SchemesForKey(k.key.Public())[0]
		signature, err := Sign(nil, k.key, s, ServerContext, th)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(i), s, signature)
	}
	f.Fuzz(func(t *testing.T, which uint8, scheme uint16, signature []byte) {
		pub := keys[int(which)%len(keys)].key.Public()
		err := Verify(pub, scheme, ServerContext, th, signature)
		if err == nil {
			return
		}
		if _, ok := err.(*alert.Error); !ok {
			t.Fatalf("Verify returned %T: %v", err, err)
		}
	})
}
