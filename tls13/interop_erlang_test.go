//go:build linux

package tls13

// Interop with Erlang/OTP's own TLS (the ssl application; Debian
// erlang-nox), both roles: testdata/peers/erlang/peer.escript. OTP 25 has
// 0-RTT in both roles and no hybrid post-quantum group.

import (
	"os/exec"
	"path/filepath"
	"testing"
)

func erlangPeerCommand(t *testing.T) (string, []string) {
	t.Helper()
	escript, err := exec.LookPath("escript")
	if err != nil {
		t.Skipf("escript is not installed (Debian package erlang-nox): %v", err)
	}
	return escript, []string{filepath.Join(peerDir(t, "erlang"), "peer.escript")}
}

var erlangPeer = &linePeer{
	name:    "erlang",
	command: erlangPeerCommand,
	suites: map[CipherSuite]string{
		TLS_AES_128_GCM_SHA256: "TLS_AES_128_GCM_SHA256", TLS_AES_256_GCM_SHA384: "TLS_AES_256_GCM_SHA384",
		TLS_CHACHA20_POLY1305_SHA256: "TLS_CHACHA20_POLY1305_SHA256",
	},
	groups:      map[CurveID]string{X25519: "x25519", P256: "secp256r1", P384: "secp384r1", P521: "secp521r1"},
	earlyServer: true,
	earlyClient: true,
	hrrClient:   []CurveID{X25519},
	hrrServer:   P384,
	skip: map[string]string{
		"client/resumption": erlangNoTicket,
		"client/0-RTT":      erlangNoTicket,
	},
}

// erlangNoTicket: OTP 25's client sends no psk_key_exchange_modes in a
// ClientHello without a ticket, and ztls (like rustls; RFC 8446, Section
// 4.2.9) issues tickets only for a mode the client offered, so the client
// never gets one. OTP's own server issues tickets anyway, which is why
// OTP clients resume against OTP servers. Not a ztls bug.
const erlangNoTicket = "OTP 25's client offers no psk_key_exchange_modes without a ticket, so ztls (like rustls) issues it none (RFC 8446, Section 4.2.9)"

func TestErlang(t *testing.T) {
	t.Parallel()
	erlangPeer.runMatrix(t)
}
