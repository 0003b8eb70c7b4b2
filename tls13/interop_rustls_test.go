//go:build linux

package tls13

// Interop with rustls 0.23 (aws-lc-rs provider), both roles: a small cargo
// program in testdata/peers/rustls, built from crates.io with its committed
// Cargo.lock by `make peers` (or here, once per test process) into the
// user's cache directory.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

var rustlsBuild buildOnce

// rustlsPeerBinary builds the rustls peer (a no-op when it is up to date)
// and returns its path; without cargo it uses an earlier build if any.
func rustlsPeerBinary(t *testing.T) (string, []string) {
	t.Helper()
	target := peerCacheDir(t, "rustls")
	src := peerDir(t, "rustls")
	path, err := rustlsBuild.do(func() (string, error) {
		bin := filepath.Join(target, "release", "ztls-rustls-peer")
		cargo, err := exec.LookPath("cargo")
		if err != nil {
			if _, serr := os.Stat(bin); serr == nil {
				return bin, nil
			}
			return "", fmt.Errorf("cargo is not installed (rustup, or 'make peers' on a machine with it): %v", err)
		}
		t.Logf("building the rustls peer: cargo build --locked --release (in %s; minutes the first time)", target)
		cmd := exec.Command(cargo, "build", "--locked", "--release", "--quiet",
			"--manifest-path", filepath.Join(src, "Cargo.toml"), "--target-dir", target)
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("cargo build of the rustls peer: %v\n%s", err, out)
		}
		return bin, nil
	})
	if err != nil {
		t.Skipf("rustls peer unavailable: %v", err)
	}
	return path, nil
}

var rustlsPeer = &linePeer{
	name:    "rustls",
	command: rustlsPeerBinary,
	// The program takes IANA codepoints.
	suites: map[CipherSuite]string{
		TLS_AES_128_GCM_SHA256: "0x1301", TLS_AES_256_GCM_SHA384: "0x1302", TLS_CHACHA20_POLY1305_SHA256: "0x1303",
	},
	groups: map[CurveID]string{
		X25519: "0x001d", P256: "0x0017", P384: "0x0018", X25519MLKEM768: "0x11ec",
	},
	compress:    map[CertCompressionAlgorithm]string{CertCompressionZlib: "zlib", CertCompressionBrotli: "brotli"},
	earlyServer: true,
	earlyClient: true,
	hrrClient:   []CurveID{X25519},
	hrrServer:   P384,
}

func TestRustls(t *testing.T) {
	t.Parallel()
	rustlsPeer.runMatrix(t)
}
