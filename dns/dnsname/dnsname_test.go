package dnsname

import (
	"strings"
	"testing"
)

func TestCanonical(t *testing.T) {
	for in, want := range map[string]string{
		"WWW.Example.ORG":    "www.example.org.",
		"www.example.org.":   "www.example.org.",
		"\xd3\xd3.Example.":  "\xd3\xd3.example.",
		"a\\065.b.":          "a\\065.b.",
		"":                   ".",
		"_ztls._443._TCP.X.": "_ztls._443._tcp.x.",
	} {
		if got := Canonical(in); got != want {
			t.Errorf("Canonical(%q) = %q, want %q", in, got, want)
		}
	}
	// The bytes that are not UTF-8 survive: the label stays 63 bytes.
	label := "0" + strings.Repeat("\xd3", 62)
	if got := Canonical(label + ".Example.org."); got != label+".example.org." {
		t.Errorf("a 63-byte label became %d bytes", strings.Index(got, "."))
	}
}

func TestEqual(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"WWW.example.org.", "www.EXAMPLE.org.", true},
		{"\xd3.example.", "\xd4.example.", false}, // strings.EqualFold says true
		{"\xd3.example.", "\xd3.EXAMPLE.", true},
		{"a.", "a", false},
		{"[.", "{.", false}, // not letters: no folding
	} {
		if got := Equal(c.a, c.b); got != c.want {
			t.Errorf("Equal(%q, %q) = %v", c.a, c.b, got)
		}
	}
}

// FuzzCanonical: Canonical keeps every byte but ASCII letters' case, is
// idempotent, and Equal agrees with it.
func FuzzCanonical(f *testing.F) {
	f.Add("WWW.Example.ORG.")
	f.Add("\xd3\xd3.A.")
	f.Fuzz(func(t *testing.T, name string) {
		c := Canonical(name)
		if Canonical(c) != c {
			t.Fatalf("not idempotent: %q", name)
		}
		fq := name
		if !strings.HasSuffix(fq, ".") {
			fq += "."
		}
		if len(c) != len(fq) || !Equal(c, fq) {
			t.Fatalf("Canonical(%q) = %q", name, c)
		}
		for i := 0; i < len(c); i++ {
			if 'A' <= c[i] && c[i] <= 'Z' {
				t.Fatalf("upper case left in %q", c)
			}
		}
	})
}

func TestHTTPSOwner(t *testing.T) {
	for _, c := range []struct {
		host string
		port int
		want string
	}{
		{"www.Example.org", 443, "www.example.org."},
		{"www.example.org.", 443, "www.example.org."},
		{"WWW.example.org", 8443, "_8443._https.www.example.org."},
	} {
		if got := HTTPSOwner(c.host, c.port); got != c.want {
			t.Errorf("HTTPSOwner(%q, %d) = %q, want %q", c.host, c.port, got, c.want)
		}
	}
}
