//go:build linux

package tls13

// Interop with tlslite-ng (pure Python, from PyPI; ML-KEM from kyber-py,
// brotli and zstd certificate compression from the brotli and zstandard
// packages), both roles: testdata/peers/tlslite/peer.py. tlslite-ng has no
// 0-RTT.

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func tlslitePeerCommand(t *testing.T) (string, []string) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skipf("python3 is not installed: %v", err)
	}
	if out, err := exec.Command(py, "-c", "import tlslite, kyber_py").CombinedOutput(); err != nil {
		t.Skipf("tlslite-ng is not installed (PyPI packages tlslite-ng and kyber-py: make deps): %v\n%s", err, out)
	}
	return py, []string{filepath.Join(peerDir(t, "tlslite"), "peer.py")}
}

var tlslitePeer = &linePeer{
	name:    "tlslite",
	command: tlslitePeerCommand,
	suites: map[CipherSuite]string{
		TLS_AES_128_GCM_SHA256: "aes128gcm", TLS_AES_256_GCM_SHA384: "aes256gcm", TLS_CHACHA20_POLY1305_SHA256: "chacha20-poly1305",
	},
	groups: map[CurveID]string{
		X25519: "x25519", P256: "secp256r1", P384: "secp384r1", P521: "secp521r1", X25519MLKEM768: "x25519mlkem768",
	},
	// tlslite-ng always has zlib; brotli and zstd when the PyPI brotli and
	// zstandard packages are importable (tlsliteCompression).
	compress: map[CertCompressionAlgorithm]string{
		CertCompressionZlib: "zlib", CertCompressionBrotli: "brotli", CertCompressionZstd: "zstd",
	},
	hrrClient: []CurveID{X25519},
	hrrServer: P256,
}

func TestTLSLite(t *testing.T) {
	t.Parallel()
	lp := *tlslitePeer
	lp.compress = tlsliteCompression(t)
	lp.runMatrix(t)
}

// tlsliteCompression is tlslitePeer.compress without the algorithms whose
// Python module is missing: tlslite-ng offers only what it can import, so
// without it those rows would test nothing (make deps installs both).
func tlsliteCompression(t *testing.T) map[CertCompressionAlgorithm]string {
	modules := map[CertCompressionAlgorithm]string{CertCompressionBrotli: "brotli", CertCompressionZstd: "zstandard"}
	out := map[CertCompressionAlgorithm]string{}
	for alg, name := range tlslitePeer.compress {
		if mod, ok := modules[alg]; ok {
			if b, err := exec.Command("python3", "-c", "import "+mod).CombinedOutput(); err != nil {
				t.Logf("tlslite: no %v certificate compression (PyPI %s is not installed: make deps): %s", alg, mod, strings.TrimSpace(string(b)))
				continue
			}
		}
		out[alg] = name
	}
	return out
}
