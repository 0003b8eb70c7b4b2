package ech

import (
	"bytes"
	"crypto/rand"
	"strings"
	"testing"
)

func mustKey(t testing.TB, id uint8, publicName string) *Key {
	t.Helper()
	k, err := GenerateKey(id, publicName, 64, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestConfigRoundTrip(t *testing.T) {
	k := mustKey(t, 7, "public.example")
	k.Config.Extensions = []ConfigExtension{{Type: 0x1234, Data: []byte("x")}}
	raw, err := k.Config.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	if c.ConfigID != 7 || c.PublicName != "public.example" || c.MaxNameLength != 64 ||
		!bytes.Equal(c.PublicKey, k.Config.PublicKey) || len(c.Suites) != 2 || !bytes.Equal(c.Raw, raw) ||
		len(c.Extensions) != 1 || c.Extensions[0].Type != 0x1234 {
		t.Fatalf("round trip changed the config: %+v", c)
	}
	if err := c.Usable(); err != nil {
		t.Fatalf("a non-mandatory unknown extension made the config unusable: %v", err)
	}
}

func TestConfigListSkipsOtherVersions(t *testing.T) {
	k := mustKey(t, 1, "public.example")
	list, err := MarshalConfigList([]*Config{k.Config})
	if err != nil {
		t.Fatal(err)
	}
	// A config of a future version (0xfe0e, 3 bytes of contents) first.
	future := []byte{0xfe, 0x0e, 0x00, 0x03, 1, 2, 3}
	body := append(future, list[2:]...)
	withFuture := append([]byte{byte(len(body) >> 8), byte(len(body))}, body...)
	cs, err := ParseConfigList(withFuture)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || !bytes.Equal(cs[0].Raw, k.Config.Raw) {
		t.Fatalf("got %d configs, want the one of version 0xfe0d", len(cs))
	}
	only := append([]byte{0, byte(len(future))}, future...)
	if cs, err := ParseConfigList(only); err != nil || len(cs) != 0 {
		t.Fatalf("a list of unknown versions: %d configs, %v; want none and no error", len(cs), err)
	}
}

func TestConfigListMalformed(t *testing.T) {
	k := mustKey(t, 1, "public.example")
	list, _ := MarshalConfigList([]*Config{k.Config})
	for name, b := range map[string][]byte{
		"empty":           {},
		"empty list":      {0, 0},
		"truncated":       list[:len(list)-1],
		"trailing":        append(append([]byte(nil), list...), 0),
		"short contents":  {0, 4, 0xfe, 0x0d, 0, 0},
		"config overruns": {0, 6, 0xfe, 0x0d, 0, 9, 1, 2},
	} {
		if _, err := ParseConfigList(b); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

func TestConfigUsable(t *testing.T) {
	for name, mutate := range map[string]func(c *Config){
		"mandatory extension": func(c *Config) { c.Extensions = []ConfigExtension{{Type: 0x8001}} },
		"unknown KEM":         func(c *Config) { c.KEM = 0x0010 },
		"no usable suite":     func(c *Config) { c.Suites = []Suite{{KDF: 0x0002, AEAD: 1}} },
		"numeric last label":  func(c *Config) { c.PublicName = "example.123" },
		"hex last label":      func(c *Config) { c.PublicName = "example.0x1f" },
		"IPv4 address":        func(c *Config) { c.PublicName = "192.0.2.1" },
		"not LDH":             func(c *Config) { c.PublicName = "ex_ample.org" },
		"trailing dot":        func(c *Config) { c.PublicName = "example.org." },
		"short public key":    func(c *Config) { c.PublicKey = c.PublicKey[:31] },
	} {
		c := *mustKey(t, 1, "public.example").Config
		mutate(&c)
		if err := c.Usable(); err == nil {
			t.Errorf("%s: usable", name)
		} else if !strings.HasPrefix(err.Error(), "ech: ") {
			t.Errorf("%s: error %q does not say where it comes from", name, err)
		}
	}
}

func TestLoadKeyRefusesAnotherKey(t *testing.T) {
	a, b := mustKey(t, 1, "public.example"), mustKey(t, 1, "public.example")
	priv, err := b.PrivateKeyBytes()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKey(a.Config.Raw, priv); err == nil {
		t.Fatal("a config loaded with another config's private key")
	}
	privA, _ := a.PrivateKeyBytes()
	k, err := LoadKey(a.Config.Raw, privA)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(k.Config.Raw, a.Config.Raw) {
		t.Fatal("LoadKey changed the config")
	}
}

func TestSealOpen(t *testing.T) {
	k := mustKey(t, 3, "public.example")
	cc, err := NewClientContext(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	aad, msg := []byte("outer aad"), []byte("encoded inner")
	ct, err := cc.Seal(aad, msg)
	if err != nil {
		t.Fatal(err)
	}
	if len(ct) != len(msg)+TagLen {
		t.Fatalf("payload of %d bytes for %d, want +%d", len(ct), len(msg), TagLen)
	}
	sc, err := NewServerContext(k, cc.Suite, cc.Enc)
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := sc.Open(aad, ct); err != nil || !bytes.Equal(pt, msg) {
		t.Fatalf("open: %q, %v", pt, err)
	}
	// Another AAD, another key, or a suite the config lacks: refused.
	sc2, _ := NewServerContext(k, cc.Suite, cc.Enc)
	if _, err := sc2.Open([]byte("other aad"), ct); err != ErrDecrypt {
		t.Fatalf("other AAD: %v, want ErrDecrypt", err)
	}
	other := mustKey(t, 3, "public.example")
	if sc3, err := NewServerContext(other, cc.Suite, cc.Enc); err == nil {
		if _, err := sc3.Open(aad, ct); err != ErrDecrypt {
			t.Fatalf("other key: %v, want ErrDecrypt", err)
		}
	}
	if _, err := NewServerContext(k, Suite{KDFHKDFSHA256, AEADAES256GCM}, cc.Enc); err == nil {
		t.Fatal("a suite the config does not offer was accepted")
	}
}

func TestClientExtension(t *testing.T) {
	e := &ClientExtension{Type: TypeOuter, Suite: Suite{1, 1}, ConfigID: 9, Enc: []byte{1, 2}, Payload: []byte{3}}
	b, err := e.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseClientExtension(b)
	if err != nil || got.ConfigID != 9 || !bytes.Equal(got.Enc, e.Enc) || !bytes.Equal(got.Payload, e.Payload) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for name, c := range map[string]struct {
		b    []byte
		want error
	}{
		"empty":         {nil, ErrDecode},
		"unknown type":  {[]byte{2}, ErrIllegal},
		"inner + bytes": {[]byte{1, 0}, ErrDecode},
		"no payload":    {[]byte{0, 0, 1, 0, 1, 9, 0, 0, 0, 0}, ErrDecode},
		"trailing":      {append(append([]byte(nil), b...), 0), ErrDecode},
	} {
		if _, err := ParseClientExtension(c.b); err != c.want {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
}
