//go:build linux

package tls13

import (
	"crypto/tls"
	"fmt"
	"net"
	"testing"
)

// TestChainCacheInterop: against OpenSSL's s_server, GnuTLS's gnutls-serv
// and crypto/tls, a client with a ChainCache verifies the server's chain
// on its first connection and takes it from the cache on the second, which
// still reports the verified chain and carries data both ways.
func TestChainCacheInterop(t *testing.T) {
	t.Parallel()
	f := writeInteropFiles(t)
	twice := func(t *testing.T, dial func(cfg *Config, n int) net.Conn) {
		cfg := clientConfig(f.p)
		cfg.ChainCache = NewChainCache(0)
		for n := 1; n <= 2; n++ {
			c := dial(cfg, n)
			st := c.(*Conn).ConnectionState()
			if len(st.VerifiedChains) == 0 || !st.VerifiedChains[0][0].Equal(f.p.server.Leaf) {
				t.Fatalf("connection %d: no verified chain for the server's leaf", n)
			}
			c.Close()
		}
		if cs := cfg.ChainCache.Stats(); cs.Misses != 1 || cs.Hits != 1 {
			t.Fatalf("chain cache after two connections: %+v, want one miss then one hit", cs)
		}
	}
	for _, peer := range []struct {
		name     string
		start    func(t *testing.T) *peerProc
		exchange func(*testing.T, net.Conn, *peerProc, string)
	}{
		{"openssl", func(t *testing.T) *peerProc { return opensslServer(t, f) }, exchangeInteractive},
		{"gnutls", func(t *testing.T) *peerProc { return gnutlsServer(t, f, "--disable-client-cert") }, echoRoundTrip},
	} {
		t.Run(peer.name, func(t *testing.T) {
			t.Parallel()
			srv := peer.start(t)
			twice(t, func(cfg *Config, n int) net.Conn {
				c := srv.mustDialZTLS(t, cfg)
				peer.exchange(t, c, srv, fmt.Sprintf("chaincache%d", n))
				return c
			})
		})
	}
	t.Run("crypto/tls", func(t *testing.T) {
		t.Parallel()
		addr := goServer(t, &tls.Config{Certificates: []tls.Certificate{f.p.goSrv}, MinVersion: tls.VersionTLS13}, goEcho)
		twice(t, func(cfg *Config, n int) net.Conn {
			c, err := Dial("tcp", addr, cfg)
			if err != nil {
				t.Fatal(err)
			}
			roundTrip(t, c, "chain cache")
			return c
		})
	})
}
