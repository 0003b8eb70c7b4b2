package turbo_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/netip"
	"time"

	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/turbo"
)

// A TurboTLS server and client on loopback. The server keeps a UDP socket
// on its TCP port's number; the client's first flight goes over UDP while
// TCP connects, the server's first flight comes back over UDP, and the
// connection continues on TCP.
func Example() {
	cert, roots := selfSigned("example.com")
	tcpAddr, udpAddr, stop := startServer(&tls13.Config{Certificates: []tls13.Certificate{cert}})
	defer stop()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := turbo.Dial(ctx, tcpAddr, udpAddr, &turbo.ClientConfig{
		TLS:  &tls13.Config{ServerName: "example.com", RootCAs: roots},
		Wait: time.Second, // generous for a busy machine; 0 means half the TCP connect time
	})
	if err != nil {
		log.Fatal(err)
	}
	defer res.Conn.Close()
	fmt.Println("server flight over UDP:", res.Turbo)
	fmt.Println("answer:", request(res.Conn, "client"))
	// Output:
	// server flight over UDP: true
	// answer: hello, client
}

// A caller that decides the fallback itself sends a Hello and takes the
// outcome. Here the server's UDP port is a black hole (a firewall that
// drops UDP): the wait after TCP connected runs out, and the handshake
// begun over UDP continues on the TCP connection with the same
// ClientHello.
func ExampleHello_Dial() {
	cert, roots := selfSigned("example.com")
	tcpAddr, _, stop := startServer(&tls13.Config{Certificates: []tls13.Certificate{cert}})
	defer stop()
	hole, err := net.ListenPacket("udp", "127.0.0.1:0") // reads nothing, answers nothing
	if err != nil {
		log.Fatal(err)
	}
	defer hole.Close()
	udpAddr := netip.MustParseAddrPort(hole.LocalAddr().String())

	cfg := &tls13.Config{ServerName: "example.com", RootCAs: roots}
	hello, err := turbo.NewHello(udpAddr, &turbo.ClientConfig{TLS: cfg, Wait: 20 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	o, err := hello.Dial(ctx, tcpAddr)
	if err != nil {
		log.Fatal(err)
	}
	conn := o.Conn
	if o.Miss != nil {
		fmt.Println("miss:", o.Miss.Kind)
		if o.CanContinue() {
			conn, err = o.ContinueOnTCP() // the same ClientHello, on TCP
		} else {
			conn = tls13.Client(o.TCP, cfg) // a new handshake
		}
		if err == nil {
			err = conn.HandshakeContext(ctx)
		}
		if err != nil {
			o.TCP.Close()
			log.Fatal(err)
		}
	}
	defer conn.Close()
	fmt.Println("answer:", request(conn, "client"))
	// Output:
	// miss: timeout
	// answer: hello, client
}

// startServer starts a TurboTLS server on loopback, TCP and UDP on the
// same port number, whose connections each answer one request with
// "hello, " and the request; stop stops it.
func startServer(cfg *tls13.Config) (tcpAddr, udpAddr netip.AddrPort, stop func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	udp, err := net.ListenPacket("udp", ln.Addr().String())
	if err != nil {
		log.Fatal(err)
	}
	srv := turbo.NewTLSServer(cfg, nil, turbo.Config{}) // nil: no early data answered in the flight
	go srv.ListenAndServe(ln, udp, func(c *turbo.ServerConn) {
		defer c.Close()
		buf := make([]byte, 64)
		n, err := c.Read(buf) // runs the rest of the handshake first
		if err != nil {
			return
		}
		fmt.Fprintf(c, "hello, %s", buf[:n])
	})
	addr := netip.MustParseAddrPort(ln.Addr().String())
	return addr, addr, func() { ln.Close(); srv.Close() }
}

// request sends req on c and reads the answer, until the server closes.
func request(c *tls13.Conn, req string) string {
	if _, err := c.Write([]byte(req)); err != nil {
		log.Fatal(err)
	}
	answer, err := io.ReadAll(c)
	if err != nil {
		log.Fatal(err)
	}
	return string(answer)
}

// selfSigned makes a self-signed ECDSA certificate for name and a pool
// that trusts it: the examples need no files.
func selfSigned(name string) (tls13.Certificate, *x509.CertPool) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		log.Fatal(err)
	}
	now := time.Now() // real time: a certificate for a real program's clock
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		log.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		log.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	return tls13.Certificate{Chain: [][]byte{der}, PrivateKey: key, Leaf: leaf}, roots
}
