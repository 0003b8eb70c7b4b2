package keyschedule

import (
	"bytes"
	"crypto"
	"crypto/hkdf"
	"crypto/hmac"
	"encoding/hex"
	"fmt"
	mathrand "math/rand/v2"
	"strings"
	"testing"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestHkdfLabelLimits(t *testing.T) {
	secret := make([]byte, 32)
	if got := ExpandLabel(sha256, secret, strings.Repeat("a", maxLabelLen), nil, 32); len(got) != 32 {
		t.Errorf("label of %d bytes: got %d bytes", maxLabelLen, len(got))
	}
	if got := ExpandLabel(sha256, secret, strings.Repeat("a", maxLabelLen+1), nil, 32); got != nil {
		t.Error("label too long for HkdfLabel was accepted")
	}
	if got := ExpandLabel(sha256, secret, "x", make([]byte, 256), 32); got != nil {
		t.Error("context of 256 bytes was accepted")
	}
	if got := ExpandLabel(sha256, secret, "x", make([]byte, 255), 32); len(got) != 32 {
		t.Error("context of 255 bytes was rejected")
	}
	if got := ExpandLabel(sha256, secret, "x", nil, 255*32+1); got != nil {
		t.Error("output longer than 255*HashLen was accepted")
	}
	if got := ExpandLabel(sha256, secret, "x", nil, -1); got != nil {
		t.Error("negative length was accepted")
	}
	if got := ExpandLabel(crypto.MD4, secret, "x", nil, 16); got != nil {
		t.Error("unlinked hash was accepted")
	}
	if got := NewEarlySecret(crypto.MD4, nil); got.k != nil || got.BinderKey("x") != nil || got.HandshakeSecret(nil).MasterSecret().ExporterMasterSecret(nil) != nil {
		t.Error("early secret with an unlinked hash is usable")
	}
}

// TestFixedLabels checks the encodings of the labels that RFC 8448 does
// not exercise, with the HkdfLabel written out by hand.
func TestFixedLabels(t *testing.T) {
	secret := bytes.Repeat([]byte{7}, 48)
	for _, tt := range []struct {
		name string
		got  []byte
		h    crypto.Hash
		info string
	}{
		// uint16 length, label<7..255> "tls13 traffic upd", context<0..255> empty
		{"traffic upd 256", NextTrafficSecret(crypto.SHA256, secret[:32]), crypto.SHA256, "0020" + "11" + hex.EncodeToString([]byte("tls13 traffic upd")) + "00"},
		{"traffic upd 384", NextTrafficSecret(crypto.SHA384, secret), crypto.SHA384, "0030" + "11" + hex.EncodeToString([]byte("tls13 traffic upd")) + "00"},
		{"ztls time", NewEarlySecret(crypto.SHA256, secret[:32]).Expand("ztls time", 8), crypto.SHA256, "0008" + "0f" + hex.EncodeToString([]byte("tls13 ztls time")) + "00"},
		{"key 32", func() []byte { k, _ := TrafficKeys(crypto.SHA384, 32, secret); return k }(), crypto.SHA384, "0020" + "09" + hex.EncodeToString([]byte("tls13 key")) + "00"},
		{"iv 384", func() []byte { _, iv := TrafficKeys(crypto.SHA384, 32, secret); return iv }(), crypto.SHA384, "000c" + "08" + hex.EncodeToString([]byte("tls13 iv")) + "00"},
	} {
		prk := secret[:tt.h.Size()]
		if tt.name == "ztls time" {
			prk = NewEarlySecret(crypto.SHA256, secret[:32]).k.open().secret
		}
		info := unhex(t, tt.info)
		want, err := hkdf.Expand(tt.h.New, prk, string(info), int(info[0])<<8|int(info[1]))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(tt.got, want) {
			t.Errorf("%s = %x, want %x", tt.name, tt.got, want)
		}
	}
}

func TestSHA384Schedule(t *testing.T) {
	h := crypto.SHA384
	es := NewEarlySecret(h, nil)
	if len(es.k.open().secret) != 48 || es.Hash() != h {
		t.Fatalf("early secret %d bytes, hash %v", len(es.k.open().secret), es.Hash())
	}
	tr := NewTranscript(h)
	tr.Write([]byte{1, 0, 0, 0})
	hs := es.HandshakeSecret(make([]byte, 48))
	ms := hs.MasterSecret()
	if hs.Hash() != h || ms.Hash() != h {
		t.Error("stages lost the hash")
	}
	seen := map[string]bool{}
	for name, sec := range map[string][]byte{
		"binder": es.ResumptionBinderKey(), "cet": es.ClientEarlyTrafficSecret(tr.Sum()),
		"eem":  es.EarlyExporterMasterSecret(tr.Sum()),
		"chts": hs.ClientHandshakeTrafficSecret(tr.Sum()), "shts": hs.ServerHandshakeTrafficSecret(tr.Sum()),
		"cats": ms.ClientApplicationTrafficSecret(tr.Sum()), "sats": ms.ServerApplicationTrafficSecret(tr.Sum()),
		"ems": ms.ExporterMasterSecret(tr.Sum()), "rms": ms.ResumptionMasterSecret(tr.Sum()),
		"fin": FinishedMAC(h, es.ResumptionBinderKey(), tr.Sum()), "psk": ResumptionPSK(h, make([]byte, 48), []byte{0}),
		"upd": NextTrafficSecret(h, make([]byte, 48)),
	} {
		if len(sec) != 48 {
			t.Errorf("%s: %d bytes, want 48", name, len(sec))
		}
		if seen[string(sec)] {
			t.Errorf("%s repeats another secret", name)
		}
		seen[string(sec)] = true
	}
	key, iv := TrafficKeys(h, 32, ms.ClientApplicationTrafficSecret(tr.Sum()))
	if len(key) != 32 || len(iv) != 12 {
		t.Errorf("traffic keys %d/%d bytes", len(key), len(iv))
	}
}

func TestZeroValuesAreInert(t *testing.T) {
	var es EarlySecret
	var hs HandshakeSecret
	var ms MasterSecret
	if es.Hash() != 0 || hs.Hash() != 0 || ms.Hash() != 0 {
		t.Error("zero value has a hash")
	}
	for name, b := range map[string][]byte{
		"binder": es.ResumptionBinderKey(), "cet": es.ClientEarlyTrafficSecret(nil), "expand": es.Expand("x", 8),
		"chts": es.HandshakeSecret([]byte{1}).ClientHandshakeTrafficSecret(nil), "shts": hs.ServerHandshakeTrafficSecret(nil),
		"cats": hs.MasterSecret().ClientApplicationTrafficSecret(nil), "rms": ms.ResumptionMasterSecret(nil),
	} {
		if b != nil {
			t.Errorf("zero value derived %s", name)
		}
	}
}

func TestFinishedMAC(t *testing.T) {
	base := bytes.Repeat([]byte{1}, 32)
	th := bytes.Repeat([]byte{2}, 32)
	mac := FinishedMAC(sha256, base, th)
	if !VerifyFinished(sha256, base, th, mac) {
		t.Fatal("own MAC rejected")
	}
	for i := range mac {
		bad := bytes.Clone(mac)
		bad[i] ^= 0x80
		if VerifyFinished(sha256, base, th, bad) {
			t.Fatalf("MAC with byte %d flipped accepted", i)
		}
	}
	for _, bad := range [][]byte{nil, {}, mac[:31], append(bytes.Clone(mac), 0)} {
		if VerifyFinished(sha256, base, th, bad) {
			t.Errorf("MAC of %d bytes accepted", len(bad))
		}
	}
	if VerifyFinished(crypto.MD4, base, th, mac) {
		t.Error("unlinked hash verified")
	}
}

func TestSecretsDoNotPrint(t *testing.T) {
	es := NewEarlySecret(sha256, bytes.Repeat([]byte{0xab}, 32))
	hs := es.HandshakeSecret(bytes.Repeat([]byte{0xcd}, 32))
	ms := hs.MasterSecret()
	leak := []string{hex.EncodeToString(es.k.open().secret), hex.EncodeToString(hs.k.open().secret), hex.EncodeToString(ms.k.open().secret)}
	type holder struct {
		es EarlySecret
		hs *HandshakeSecret
		MS MasterSecret
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%X", "%d", "%q", "%T"} {
		for _, val := range []any{es, hs, ms, &es, holder{es, &hs, ms}, []any{es}} {
			out := fmt.Sprintf(verb, val)
			for _, l := range leak {
				// Also look for the decimal rendering of the first bytes.
				if strings.Contains(out, l[:8]) || strings.Contains(out, fmt.Sprint(es.k.open().secret[:3])[1:8]) {
					t.Errorf("Sprintf(%q, %T) leaks the secret: %s", verb, val, out)
				}
			}
		}
	}
	if es.String() != "<secret>" || hs.String() != "<secret>" || ms.String() != "<secret>" {
		t.Error("String() is not <secret>")
	}
	if got := fmt.Sprintf("%v", es); got != "<secret>" {
		t.Errorf("%%v = %q", got)
	}
}

func TestExporterErrors(t *testing.T) {
	h := crypto.SHA256
	secret := bytes.Repeat([]byte{3}, 32)
	if got := Exporter(h, secret, "EXPERIMENTAL x", []byte("ctx"), 40); len(got) != 40 {
		t.Errorf("Exporter returned %d bytes", len(got))
	}
	// Context nil and empty are the same (Hash("")), a different context is not.
	if !bytes.Equal(Exporter(h, secret, "l", nil, 16), Exporter(h, secret, "l", []byte{}, 16)) ||
		bytes.Equal(Exporter(h, secret, "l", nil, 16), Exporter(h, secret, "l", []byte{0}, 16)) {
		t.Error("exporter context handling is wrong")
	}
	if _, err := ExportKeyingMaterial(h, secret, strings.Repeat("l", 250), nil, 32); err == nil || !strings.HasPrefix(err.Error(), "keyschedule: ") {
		t.Errorf("overlong exporter label: err = %v", err)
	}
	if _, err := ExportKeyingMaterial(h, nil, "x", nil, 32); err == nil {
		t.Error("exporter without a secret succeeded")
	}
	if Exporter(h, secret, "x", nil, 255*h.Size()+1) != nil {
		t.Error("overlong exporter output accepted")
	}
	if _, err := ExportKeyingMaterial(crypto.MD4, secret, "x", nil, 32); err == nil {
		t.Error("unlinked hash accepted")
	}
}

// sumHMAC, the key schedule's allocation-free HMAC, agrees with
// crypto/hmac on SHA-256 and SHA-384 for every key length up to the block
// and messages up to its limit, and declines what it does not cover.
func TestSumHMACMatchesCryptoHMAC(t *testing.T) {
	r := mathrand.New(mathrand.NewPCG(1, 2))
	for _, h := range []crypto.Hash{crypto.SHA256, crypto.SHA384} {
		block := h.New().BlockSize()
		for i := 0; i < 2000; i++ {
			key := make([]byte, r.IntN(block+1))
			msg := make([]byte, r.IntN(maxHMACMessage+1))
			for j := range key {
				key[j] = byte(r.Uint32())
			}
			for j := range msg {
				msg[j] = byte(r.Uint32())
			}
			var out [maxHashSize]byte
			got, ok := sumHMAC(&out, h, key, msg)
			mac := hmac.New(h.New, key)
			mac.Write(msg)
			if want := mac.Sum(nil); !ok || !bytes.Equal(got, want) {
				t.Fatalf("%v, key %d bytes, message %d bytes: %x, %v; crypto/hmac %x", h, len(key), len(msg), got, ok, want)
			}
		}
		if _, ok := sumHMAC(new([maxHashSize]byte), h, make([]byte, block+1), nil); ok {
			t.Fatalf("%v: a key longer than the block was taken", h)
		}
		if _, ok := sumHMAC(new([maxHashSize]byte), h, nil, make([]byte, maxHMACMessage+1)); ok {
			t.Fatalf("%v: a message past the buffer was taken", h)
		}
	}
	if _, ok := sumHMAC(new([maxHashSize]byte), crypto.SHA512, nil, nil); ok {
		t.Fatal("SHA-512 was taken")
	}
}

// ExpandLabelInto writes what ExpandLabel returns, on the one-block path
// and past it (SHA-512, or more than one block), and refuses what
// ExpandLabel refuses.
func TestExpandLabelIntoMatchesExpandLabel(t *testing.T) {
	for _, h := range []crypto.Hash{crypto.SHA256, crypto.SHA384, crypto.SHA512} {
		secret := bytes.Repeat([]byte{7}, h.Size())
		for _, n := range []int{0, 1, 12, 16, 32, h.Size(), h.Size() + 1, 3 * h.Size()} {
			out := make([]byte, n)
			if !ExpandLabelInto(out, h, secret, "key", []byte("ctx")) {
				t.Fatalf("%v, %d bytes: refused", h, n)
			}
			if want := ExpandLabel(h, secret, "key", []byte("ctx"), n); !bytes.Equal(out, want) {
				t.Fatalf("%v, %d bytes: %x, ExpandLabel %x", h, n, out, want)
			}
		}
	}
	if ExpandLabelInto(make([]byte, 16), crypto.SHA256, nil, strings.Repeat("l", 250), nil) {
		t.Error("overlong label accepted")
	}
	if ExpandLabelInto(make([]byte, 16), crypto.MD4, nil, "key", nil) {
		t.Error("unlinked hash accepted")
	}
}

// The derivations a handshake repeats compute into the caller's or the
// stack's memory: FinishedMAC allocates only its result, VerifyFinished
// and ExpandLabelInto nothing, and a stage one allocation besides the
// closure that hides it.
func TestKeyScheduleAllocations(t *testing.T) {
	for _, h := range []crypto.Hash{crypto.SHA256, crypto.SHA384} {
		secret := bytes.Repeat([]byte{1}, h.Size())
		th := bytes.Repeat([]byte{2}, h.Size())
		mac := FinishedMAC(h, secret, th)
		var key [32]byte
		var iv [ivLen]byte
		for _, c := range []struct {
			name string
			max  float64
			f    func()
		}{
			{"VerifyFinished", 0, func() {
				if !VerifyFinished(h, secret, th, mac) {
					t.Fatal("VerifyFinished rejected its own MAC")
				}
			}},
			{"ExpandLabelInto", 0, func() { ExpandLabelInto(key[:], h, secret, "key", nil) }},
			{"TrafficKeysInto", 0, func() { TrafficKeysInto(key[:16], iv[:], h, secret) }},
			{"FinishedMAC", 1, func() { FinishedMAC(h, secret, th) }},
			{"NewEarlySecret", 2, func() { NewEarlySecret(h, nil) }},
		} {
			if raceEnabled && c.name == "TrafficKeysInto" {
				continue // its pooled worker is dropped at random under -race
			}
			if n := testing.AllocsPerRun(20, c.f); n > c.max {
				t.Errorf("%v %s: %v allocations, want at most %v", h, c.name, n, c.max)
			}
		}
	}
}
