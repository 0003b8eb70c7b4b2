package rfc8448

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func TestLoad(t *testing.T) {
	v, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	// Spot checks against values printed in RFC 8448, Section 3 and 4.
	if got := v["3/early_secret"]; len(got) != 32 || got[0] != 0x33 || got[31] != 0x2a {
		t.Errorf("3/early_secret = %x", got)
	}
	if got := v["4/client.early_data.record.payload"]; string(got) != "ABCDEF" {
		t.Errorf("4/client.early_data.record.payload = %q", got)
	}
	for _, key := range []string{"3/client.hello", "3/server.hs_flight.record", "4/binder", "4/client.hello"} {
		if len(v[key]) == 0 {
			t.Errorf("missing %s", key)
		}
	}
	if len(v) < 240 {
		t.Errorf("only %d values loaded", len(v))
	}
}

func TestMustCopies(t *testing.T) {
	a := Must(t, "3/client.hello")
	a[0] ^= 0xff
	if b := Must(t, "3/client.hello"); b[0] != 0x01 {
		t.Fatalf("Must returned shared storage: first byte %#x after the caller modified its copy", b[0])
	}
}

func TestParse(t *testing.T) {
	in := "# comment\n\n[3] a.b = 00ff\n  [12] c_d = ABcd  \n"
	v, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(v["3/a.b"], []byte{0, 0xff}) || !bytes.Equal(v["12/c_d"], []byte{0xab, 0xcd}) || len(v) != 2 {
		t.Errorf("Parse = %x", v)
	}
}

func TestParseErrors(t *testing.T) {
	bad := []string{
		"3 a = 00",
		"[3 a = 00",
		"[] a = 00",
		"[x] a = 00",
		"[3] a 00",
		"[3]  = 00",
		"[3] a b = 00",
		"[3] a/b = 00",
		"[3] a = 0",
		"[3] a = zz",
		"[3] a =",
		"[3] a = 00\n[3] a = 01",
		"[3] a = " + strings.Repeat("00", maxLine),
	}
	for _, in := range bad {
		if v, err := Parse(strings.NewReader(in)); err == nil {
			t.Errorf("Parse(%.40q) = %x, want error", in, v)
		} else if !strings.HasPrefix(err.Error(), "rfc8448: line ") {
			t.Errorf("Parse(%.40q) error %q lacks the line prefix", in, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("[3] a = 00ff\n"))
	f.Add([]byte("# x\n[4] client.hello = 0100\n[4] b = 01"))
	f.Add([]byte("[3] a = 00\n[3] a = 01"))
	f.Add([]byte("[] = \n[3"))
	if p, err := Path(); err == nil {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		v, err := Parse(bytes.NewReader(in))
		if err != nil {
			if v != nil {
				t.Fatal("values returned with an error")
			}
			return
		}
		for k, val := range v {
			if len(val) == 0 || !strings.Contains(k, "/") {
				t.Fatalf("bad entry %q = %x", k, val)
			}
		}
	})
}
