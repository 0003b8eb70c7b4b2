package main

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestZTLSCodepointFlag: --ztls-codepoint reaches the TLS configuration
// in hex or decimal; a value that is no 16-bit extension number is an
// error that says what to pass.
func TestZTLSCodepointFlag(t *testing.T) {
	for in, want := range map[string]uint16{"0xfe77": 0xfe77, "65000": 65000, "": 0} {
		var f tlsFlags
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		f.register(fs, false)
		if in != "" {
			if err := fs.Parse([]string{"--ztls-codepoint", in}); err != nil {
				t.Fatal(err)
			}
		}
		cfg, err := f.config(false)
		if err != nil || cfg.ZTLSExtension != want {
			t.Fatalf("--ztls-codepoint %q: %v, %#x", in, err, cfg.ZTLSExtension)
		}
	}
	for _, bad := range []string{"70000", "0", "ff5a", "-1"} {
		f := tlsFlags{ztlsExt: bad}
		if _, err := f.config(false); err == nil || !strings.Contains(err.Error(), "e.g. 0xff5a") {
			t.Errorf("--ztls-codepoint %q: %v", bad, err)
		}
	}
}
