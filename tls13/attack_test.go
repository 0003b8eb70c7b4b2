package tls13

// Attacks and bad input: each is tried and must be refused with the right
// alert and a clear error, never a panic or a hang.

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"golang.org/x/crypto/cryptobyte"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/tls13/internal/record"
	"github.com/ztls-project/ztls/tls13/internal/wire"
)

// sentAlert reports whether out holds an unprotected alert record with code a.
func sentAlert(out []byte, a Alert) bool {
	return bytes.Contains(out, []byte{byte(record.TypeAlert), 3, 3, 0, 2, 2, byte(a)})
}

func wantAlert(t *testing.T, err error, a Alert) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s", a)
	}
	if got := alertOf(err); got != int(a) {
		t.Fatalf("error %v carries alert %d, want %s", err, got, a)
	}
}

func TestAttackTamperedRecord(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	c, s := newEngine(clientConfig(p), true), newEngine(serverConfig(p), false)
	c.startClient(nil, nil, nil)
	s.startServer()
	if err := s.feed(c.takeOutput()); err != nil {
		t.Fatal(err)
	}
	flight := append([]byte(nil), s.takeOutput()...)
	flight[len(flight)-20] ^= 0x40 // inside the last protected record
	wantAlert(t, c.feed(flight), AlertBadRecordMAC)
	// The error is sticky: nothing more is processed.
	if err := c.feed([]byte{23, 3, 3, 0, 1, 0}); err == nil {
		t.Fatal("engine went on after a fatal error")
	}
}

func TestAttackWrongFinished(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	corrupt := func(v []byte) { v[0] ^= 1 }
	t.Run("server sends a wrong Finished", func(t *testing.T) {
		scfg := serverConfig(p)
		scfg.testHookFinished = corrupt
		_, _, cerr, _ := pair(t, clientConfig(p), scfg)
		wantAlert(t, cerr, AlertDecryptError)
		if !errors.Is(cerr, errPeerBadFinished) && !strings.Contains(cerr.Error(), "Finished") {
			t.Fatalf("error does not name the Finished: %v", cerr)
		}
	})
	t.Run("client sends a wrong Finished", func(t *testing.T) {
		ccfg := clientConfig(p)
		ccfg.testHookFinished = corrupt
		_, _, _, serr := pair(t, ccfg, serverConfig(p))
		wantAlert(t, serr, AlertDecryptError)
	})
}

func TestAttackBadCertificateVerify(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	// The server presents p's certificate but signs with another P-256 key.
	scfg := &Config{Certificates: []Certificate{{Chain: p.server.Chain, PrivateKey: testpki.NewKey(t, "ecdsa-p256"), Leaf: p.server.Leaf}}}
	_, _, cerr, _ := pair(t, clientConfig(p), scfg)
	if cerr == nil {
		t.Fatal("client accepted a CertificateVerify made with the wrong key")
	}
	if a := alertOf(cerr); a != int(AlertDecryptError) && a != int(AlertIllegalParameter) {
		t.Fatalf("alert %d for a bad CertificateVerify: %v", a, cerr)
	}
}

func TestAttackCertificates(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	expired := p.ca.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256", NotBefore: clock.Now().Add(-48 * time.Hour), NotAfter: clock.Now().Add(-24 * time.Hour)})
	cases := []struct {
		name  string
		cert  Certificate
		ccfg  func(*Config)
		alert Alert
	}{
		{"expired", Certificate{Chain: expired.Chain, PrivateKey: expired.Key}, nil, AlertCertificateExpired},
		{"wrong name", p.server, func(c *Config) { c.ServerName = "evil.test" }, AlertBadCertificate},
		{"unknown CA", p.server, func(c *Config) { c.RootCAs = getPKI(t, "ed25519").pool() }, AlertUnknownCA},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ccfg := clientConfig(p)
			if tc.ccfg != nil {
				tc.ccfg(ccfg)
			}
			_, _, cerr, serr := pair(t, ccfg, &Config{Certificates: []Certificate{tc.cert}})
			wantAlert(t, cerr, tc.alert)
			var cve *CertificateVerificationError
			if !errors.As(cerr, &cve) {
				t.Fatalf("not a CertificateVerificationError: %v", cerr)
			}
			// The server learns why.
			if alertOf(serr) != int(tc.alert) {
				t.Fatalf("server saw %v, want the %s alert", serr, tc.alert)
			}
		})
	}
}

func TestAttackTLS12OnlyPeers(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	t.Run("server", func(t *testing.T) {
		addr := goServer(t, &tls.Config{Certificates: []tls.Certificate{p.goSrv}, MaxVersion: tls.VersionTLS12}, goEcho)
		_, err := DialContext(ctxTimeout(t), "tcp", addr, clientConfig(p))
		wantAlert(t, err, AlertProtocolVersion)
	})
	t.Run("client", func(t *testing.T) {
		errc := make(chan error, 1)
		addr := serve(t, loopback(t), func(raw net.Conn) { errc <- Server(raw, serverConfig(p)).Handshake() })
		_, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: p.pool(), ServerName: "localhost", MaxVersion: tls.VersionTLS12})
		if err == nil || !strings.Contains(err.Error(), "protocol version") {
			t.Fatalf("TLS 1.2 client got %v, want a protocol_version alert", err)
		}
		wantAlert(t, <-errc, AlertProtocolVersion)
	})
}

// clientHelloWith builds a ClientHello record with the given raw extensions.
func clientHelloWith(exts func(b *cryptobyte.Builder)) []byte {
	var b cryptobyte.Builder
	b.AddUint8(wire.TypeClientHello)
	b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) {
		b.AddUint16(0x0303)
		b.AddBytes(make([]byte, 32))
		b.AddUint8(0)
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddUint16(uint16(TLS_AES_128_GCM_SHA256)) })
		b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddUint8(0) })
		b.AddUint16LengthPrefixed(exts)
	})
	msg := b.BytesOrPanic()
	return record.AppendPlain(nil, record.TypeHandshake, 0x0301, msg)
}

func supportedVersionsExt(b *cryptobyte.Builder) {
	b.AddUint16(wire.ExtSupportedVersions)
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
		b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddUint16(0x0304) })
	})
}

func TestAttackMalformedClientHellos(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	cases := []struct {
		name  string
		input []byte
		alert Alert
	}{
		{"duplicate extension", clientHelloWith(func(b *cryptobyte.Builder) {
			supportedVersionsExt(b)
			supportedVersionsExt(b)
		}), AlertIllegalParameter},
		{"trailing bytes in an extension", clientHelloWith(func(b *cryptobyte.Builder) {
			b.AddUint16(wire.ExtSupportedVersions)
			b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
				b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddUint16(0x0304) })
				b.AddUint8(0xff)
			})
		}), AlertDecodeError},
		{"no TLS 1.3", clientHelloWith(func(b *cryptobyte.Builder) {}), AlertProtocolVersion},
		{"truncated message body", record.AppendPlain(nil, record.TypeHandshake, 0x0301, []byte{1, 0, 0, 4, 3, 3, 0, 0}), AlertDecodeError},
		{"oversized handshake message", record.AppendPlain(nil, record.TypeHandshake, 0x0301, []byte{1, 0xff, 0xff, 0xff}), AlertDecodeError},
		{"oversized record", append([]byte{22, 3, 1, 0x48, 0x01}, make([]byte, 0x4801)...), AlertRecordOverflow},
		{"handshake before hello", record.AppendPlain(nil, record.TypeHandshake, 0x0303, []byte{20, 0, 0, 0}), AlertUnexpectedMessage},
		{"application data before keys", record.AppendPlain(nil, record.TypeApplicationData, 0x0303, []byte("GET /")), AlertUnexpectedMessage},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newEngine(serverConfig(p), false)
			s.startServer()
			err := s.feed(tc.input)
			if tc.alert == AlertDecodeError && alertOf(err) == int(AlertUnexpectedMessage) {
				// An oversized length is refused as soon as the header is seen.
			} else {
				wantAlert(t, err, tc.alert)
			}
			if !sentAlert(s.takeOutput(), Alert(alertOf(err))) {
				t.Fatal("the alert was not sent to the peer")
			}
		})
	}
}

func TestAttackGarbageAfterHandshake(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	c, s, cerr, serr := pair(t, clientConfig(p), serverConfig(p))
	if cerr != nil || serr != nil {
		t.Fatal(cerr, serr)
	}
	// Write garbage under the TLS layer, as an attacker on the path would.
	s.NetConn().Write([]byte("HTTP/1.1 200 OK\r\n\r\nnot TLS at all"))
	c.SetDeadline(time.Now().Add(5 * time.Second))
	_, err := c.Read(make([]byte, 10))
	if err == nil || alertOf(err) < 0 {
		t.Fatalf("garbage after the handshake gave %v, want an alert", err)
	}
	if _, err := c.Write([]byte("more")); err == nil {
		t.Fatal("write succeeded after a fatal error")
	}
}

func TestAttackSilentPeerTimesOut(t *testing.T) {
	ln := loopback(t)
	addr := serve(t, ln, func(c net.Conn) { c.Read(make([]byte, 1<<16)); c.Read(make([]byte, 1)) })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := DialContext(ctx, "tcp", addr, &Config{ServerName: "localhost"})
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("handshake with a silent server: %v, want a deadline error", err)
	}
}

func TestAttackClientCertificateRequired(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	scfg := serverConfig(p)
	scfg.ClientAuth, scfg.ClientCAs = RequireAndVerifyClientCert, p.pool()
	c, _, cerr, serr := pair(t, clientConfig(p), scfg)
	wantAlert(t, serr, AlertCertificateRequired)
	if cerr == nil {
		// The client finished first; it learns on its next read.
		c.SetDeadline(time.Now().Add(5 * time.Second))
		_, cerr = c.Read(make([]byte, 1))
	}
	wantAlert(t, cerr, AlertCertificateRequired)
	// A certificate from another CA is refused too.
	ccfg := clientConfig(p)
	ccfg.Certificates = []Certificate{getPKI(t, "ed25519").client}
	_, _, _, serr = pair(t, ccfg, scfg)
	wantAlert(t, serr, AlertUnknownCA)
}

func TestAttackEarlyDataOverLimit(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	scfg := serverConfig(p)
	scfg.MaxEarlyData = 16
	sess := firstTicket(t, clientConfig(p), scfg)
	// A client that ignores the limit (the honest engine refuses to).
	sess.MaxEarlyData = 1000
	c := newEngine(clientConfig(p), true)
	if err := c.startClient(sess, nil, bytes.Repeat([]byte("x"), 100)); err != nil {
		t.Fatal(err)
	}
	s := newEngine(scfg, false)
	s.startServer()
	wantAlert(t, s.feed(c.takeOutput()), AlertUnexpectedMessage)
}
