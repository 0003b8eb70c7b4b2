package tls13

import (
	"strings"
	"testing"

	"github.com/ztls-project/ztls/tls13/internal/wire"
)

// TestConfigCheckZTLSExtension: Config.Check refuses a ZTLSExtension that
// is the codepoint of another extension the engine sends or parses, and
// names both extensions; ztls_bfe's 0xff5b was taken at start and failed
// every handshake after it (issue 34). Listen refuses such a Config too.
func TestConfigCheckZTLSExtension(t *testing.T) {
	for _, tc := range []struct {
		cp   uint16
		want []string // in the error; nil: no error
	}{
		{0, nil},
		{wire.ExtZTLS, nil},
		{0xfe77, nil},
		{wire.ExtZTLSBFE, []string{"Config.ZTLSExtension 0xff5b", "ztls_bfe", "the ztls extension"}},
		{wire.ExtPreSharedKey, []string{"0x0029", "pre_shared_key"}},
		{wire.ExtKeyShare, []string{"0x0033", "key_share"}},
		{wire.ExtCompressCertificate, []string{"compress_certificate"}},
		{wire.ExtRenegotiationInfo, []string{"renegotiation_info"}},
	} {
		err := (&Config{ZTLSExtension: ExtensionType(tc.cp)}).Check()
		if tc.want == nil {
			if err != nil {
				t.Errorf("ZTLSExtension %#04x: %v", tc.cp, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("ZTLSExtension %#04x accepted", tc.cp)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("ZTLSExtension %#04x: %q does not say %q", tc.cp, err, w)
			}
		}
	}
	// Every codepoint the engine gives a meaning to, and none other.
	for cp := 1; cp <= 0xffff; cp++ {
		err := (&Config{ZTLSExtension: ExtensionType(cp)}).Check()
		if clash := wire.KnownExtension(uint16(cp)) && uint16(cp) != wire.ExtZTLS; clash != (err != nil) {
			t.Fatalf("ZTLSExtension %#04x: clash %v, Check %v", cp, clash, err)
		}
	}

	p := getPKI(t, "ecdsa-p256")
	cfg := serverConfig(p)
	cfg.ZTLSExtension = ExtensionType(wire.ExtZTLSBFE)
	if ln, err := Listen("tcp", "127.0.0.1:0", cfg); err == nil || !strings.Contains(err.Error(), "ztls_bfe") {
		if ln != nil {
			ln.Close()
		}
		t.Fatalf("Listen with ZTLSExtension = ztls_bfe's codepoint: %v", err)
	}
}
