package main

import (
	"crypto/tls"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/ztls-project/ztls/tls13"
)

// ztls serve --keyshare-pool: crypto/tls clients offering x25519 and
// X25519MLKEM768 each complete their handshakes and get the answer.
func TestCLIServeKeySharePool(t *testing.T) {
	s := newSite(t)
	addr := "127.0.0.1:" + strconv.Itoa(s.port)
	cmd, _ := startLogCmd(t, "ZTLS on", "serve", "--listen", addr, "--zdata", s.zd, "--respond", "hello", "--keyshare-pool", "4")
	defer stopCmd(cmd)
	roots, err := tls13.LoadCertPool(s.ca)
	if err != nil {
		t.Fatal(err)
	}
	for i, curve := range []tls.CurveID{tls.X25519, tls.X25519MLKEM768, tls.X25519, tls.X25519MLKEM768, tls.X25519} {
		d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: &tls.Config{
			ServerName: s.host, RootCAs: roots, MinVersion: tls.VersionTLS13, CurvePreferences: []tls.CurveID{curve}}}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("handshake %d (%v): %v", i, curve, err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, "GET /")
		b, _ := io.ReadAll(c)
		if got := c.(*tls.Conn).ConnectionState().CurveID; got != curve || string(b) != "hello" {
			t.Fatalf("handshake %d: group %v, answer %q", i, got, b)
		}
		c.Close()
	}
}
