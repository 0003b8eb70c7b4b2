//go:build linux

package tls13

// Interop with Java's JSSE (the JDK's own TLS 1.3; Debian
// default-jdk-headless), both roles: testdata/peers/jsse/Peer.java,
// compiled with javac once per test process. JSSE has no 0-RTT and no
// hybrid post-quantum group in JDK 17.

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
)

var jsseBuild buildOnce

func jssePeerCommand(t *testing.T) (string, []string) {
	t.Helper()
	java, err := exec.LookPath("java")
	if err != nil {
		t.Skipf("java is not installed (Debian package default-jdk-headless): %v", err)
	}
	out := peerCacheDir(t, "jsse")
	src := filepath.Join(peerDir(t, "jsse"), "Peer.java")
	_, err = jsseBuild.do(func() (string, error) {
		javac, err := exec.LookPath("javac")
		if err != nil {
			return "", fmt.Errorf("javac is not installed (Debian package default-jdk-headless): %v", err)
		}
		if b, err := exec.Command(javac, "-d", out, src).CombinedOutput(); err != nil {
			return "", fmt.Errorf("javac Peer.java: %v\n%s", err, b)
		}
		return out, nil
	})
	if err != nil {
		t.Skipf("JSSE peer unavailable: %v", err)
	}
	// The serial GC, C1 only and a small heap keep the JVM cheap on 2 cores.
	return java, []string{"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx128m", "-cp", out, "Peer"}
}

var jssePeer = &linePeer{
	name:    "jsse",
	command: jssePeerCommand,
	suites: map[CipherSuite]string{
		TLS_AES_128_GCM_SHA256: "TLS_AES_128_GCM_SHA256", TLS_AES_256_GCM_SHA384: "TLS_AES_256_GCM_SHA384",
		TLS_CHACHA20_POLY1305_SHA256: "TLS_CHACHA20_POLY1305_SHA256",
	},
	groups: map[CurveID]string{X25519: "x25519", P256: "secp256r1", P384: "secp384r1", P521: "secp521r1"},
	// JDK 17 sends two shares: the first XDH and the first NIST group.
	hrrClient: []CurveID{X25519, P256},
	hrrServer: P384,
}

func TestJSSE(t *testing.T) {
	t.Parallel()
	jssePeer.runMatrix(t)
}
