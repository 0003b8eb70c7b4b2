package tls13_test

import (
	"context"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"time"

	"github.com/ztls-project/ztls/tls13"
)

// newCertificate makes a self-signed ECDSA certificate for name and a pool
// that trusts it: the examples need no files.
func newCertificate(name string) (tls13.Certificate, *x509.CertPool) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		log.Fatal(err)
	}
	now := time.Now() // real time: a certificate and key for a real program's clock
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

// connPair returns the two ends of a loopback TCP connection. net.Pipe
// would not do: it has no buffer, and TLS lets both sides write at once (a
// server sends its tickets while the client sends its request).
func connPair() (client, server net.Conn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		log.Fatal(err)
	}
	if server, err = ln.Accept(); err != nil {
		log.Fatal(err)
	}
	return client, server
}

// A client and a server over a loopback connection.
func Example() {
	cert, roots := newCertificate("example.com")
	clientEnd, serverEnd := connPair()

	// The server answers one request, then closes.
	go func() {
		srv := tls13.Server(serverEnd, &tls13.Config{Certificates: []tls13.Certificate{cert}})
		defer srv.Close()
		buf := make([]byte, 64)
		n, err := srv.Read(buf) // runs the handshake first
		if err != nil {
			return
		}
		fmt.Fprintf(srv, "hello, %s", buf[:n])
	}()

	conn := tls13.Client(clientEnd, &tls13.Config{ServerName: "example.com", RootCAs: roots})
	defer conn.Close()
	if _, err := conn.Write([]byte("client")); err != nil {
		log.Fatal(err)
	}
	answer, err := io.ReadAll(conn) // until the server's close_notify
	if err != nil {
		log.Fatal(err)
	}
	st := conn.ConnectionState()
	fmt.Println(string(answer))
	fmt.Println("group:", st.Group.String())
	fmt.Println("server:", st.PeerCertificates[0].Subject.CommonName)
	// Output:
	// hello, client
	// group: X25519MLKEM768
	// server: example.com
}

// earlyServer serves one connection on a server that takes 0-RTT data: it
// answers early data in its first flight (0.5-RTT data) and a request sent
// after the handshake once the handshake is done. It returns the early data
// it read.
func earlyServer(raw net.Conn, cfg *tls13.Config) []byte {
	srv := tls13.Server(raw, cfg)
	defer srv.Close()
	if err := srv.HandshakeEarly(context.Background()); err != nil {
		return nil
	}
	buf := make([]byte, 1024)
	// Early data may be a replay, and no client certificate covers it: a
	// real server answers it only when the request is safe to run twice.
	n, _ := srv.ReadEarlyData(buf)
	early := buf[:n]
	if n == 0 { // no early data: the request comes after the handshake
		if n, _ = srv.Read(buf); n == 0 {
			return nil
		}
	}
	fmt.Fprintf(srv, "answer to %s", buf[:n])
	srv.Handshake()
	return early
}

// Resumption with 0-RTT: the first connection gets a ticket, the second
// sends its request as early data, which the server reads with
// ReadEarlyData before the handshake completes.
func ExampleConn_ReadEarlyData() {
	cert, roots := newCertificate("example.com")
	serverCfg := &tls13.Config{
		Certificates: []tls13.Certificate{cert},
		MaxEarlyData: 16384, // announced in the tickets
	}
	clientCfg := &tls13.Config{
		ServerName:         "example.com",
		RootCAs:            roots,
		ClientSessionCache: tls13.NewLRUClientSessionCache(8),
	}

	connect := func(early bool) {
		clientEnd, serverEnd := connPair()
		got := make(chan []byte, 1)
		go func() { got <- earlyServer(serverEnd, serverCfg) }()

		conn := tls13.Client(clientEnd, clientCfg)
		defer conn.Close()
		if early {
			conn.SetEarlyData([]byte("GET /"), true) // resent after the handshake if rejected
		} else if _, err := conn.Write([]byte("GET /")); err != nil {
			log.Fatal(err)
		}
		if err := conn.Handshake(); err != nil {
			log.Fatal(err)
		}
		// Reading to the end also takes in the server's ticket, which the
		// session cache keeps for the next connection.
		answer, err := io.ReadAll(conn)
		if err != nil {
			log.Fatal(err)
		}
		st := conn.ConnectionState()
		fmt.Printf("resumed=%v early data accepted=%v answer=%q server read early %q\n",
			st.DidResume, st.EarlyDataAccepted, answer, <-got)
	}
	connect(false)
	connect(true)
	// Output:
	// resumed=false early data accepted=false answer="answer to GET /" server read early ""
	// resumed=true early data accepted=true answer="answer to GET /" server read early "GET /"
}

// zdataKeys is a server's Z-data keys; a real server uses a zdata.Keyring.
type zdataKeys []*tls13.ZDataKey

func (keys zdataKeys) LookupZData(id uint32, hash [32]byte, now time.Time) *tls13.ZDataKey {
	for _, k := range keys {
		if k.ID == id && k.Hash == hash && !now.Before(k.NotBefore) && !now.After(k.NotAfter) {
			return k
		}
	}
	return nil
}

// A ZTLS handshake: the client has the server's Z-data (here made in the
// example; in practice found in DNS and checked by package zdata), so its
// very first ClientHello carries the request as early data and the server
// leaves out its Certificate.
func ExampleConn_SetZData() {
	cert, roots := newCertificate("example.com")

	// The server's semi-static Z-data key and the record naming it.
	priv, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		log.Fatal(err)
	}
	hash := sha256.Sum256([]byte("the record's signature input")) // zdata_hash
	now := time.Now()                                             // real time: a Z-data key for a real program's clock
	key := &tls13.ZDataKey{
		ID: 1, Hash: hash, Host: "example.com", Group: tls13.X25519, MaxEarlyData: 16384,
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour),
		ECDH: func(peer []byte) ([]byte, error) {
			pub, err := ecdh.X25519().NewPublicKey(peer)
			if err != nil {
				return nil, err
			}
			return priv.ECDH(pub)
		},
	}
	serverCfg := &tls13.Config{
		Certificates: []tls13.Certificate{cert},
		ZData:        zdataKeys{key},
		// The Z-data key was made just now for this server alone, so no
		// server took early data under it before this register began: it
		// may claim to have seen everything (the zero time). A real server
		// passes the time it started (or uses zdata.Dir.ServeAlone).
		StrikeRegister: tls13.NewMemoryStrikeRegister(1024, time.Time{}),
	}

	// What the client learnt from DNS: the record's fields and the leaf.
	offer := &tls13.ZDataOffer{
		ID: 1, Hash: hash, Group: tls13.X25519, Share: priv.PublicKey().Bytes(),
		MaxEarlyData: 16384, Leaf: cert.Leaf,
	}
	clientCfg := &tls13.Config{ServerName: "example.com", RootCAs: roots}
	// The leaf passes the client's certificate policy before anything is
	// encrypted to the Z-data key.
	if err := clientCfg.VerifyZDataOffer(offer); err != nil {
		log.Fatal(err)
	}

	clientEnd, serverEnd := connPair()
	got := make(chan []byte, 1)
	go func() { got <- earlyServer(serverEnd, serverCfg) }()

	conn := tls13.Client(clientEnd, clientCfg)
	defer conn.Close()
	conn.SetZData(offer)
	conn.SetEarlyData([]byte("GET /"), true)
	if err := conn.Handshake(); err != nil {
		log.Fatal(err)
	}
	answer, err := io.ReadAll(conn)
	if err != nil {
		log.Fatal(err)
	}
	st := conn.ConnectionState()
	fmt.Println("ztls:", st.ZTLS)
	fmt.Println("early data accepted:", st.EarlyDataAccepted)
	fmt.Println("certificate omitted:", st.CertificateOmitted)
	fmt.Println("answer in first flight:", st.AnswerInFirstFlight)
	fmt.Printf("server read early %q, client read %q\n", <-got, answer)
	// Output:
	// ztls: true
	// early data accepted: true
	// certificate omitted: true
	// answer in first flight: true
	// server read early "GET /", client read "answer to GET /"
}

// The sans-IO engine: the two sides' handshake bytes are passed by hand,
// as a transport such as TurboTLS's UDP path does, then each engine goes
// on as a Conn.
func ExampleEngine() {
	cert, roots := newCertificate("example.com")
	client := tls13.NewClientEngine(&tls13.Config{ServerName: "example.com", RootCAs: roots})
	server := tls13.NewServerEngine(&tls13.Config{Certificates: []tls13.Certificate{cert}})

	if err := client.Start(nil, nil, nil); err != nil { // queues the ClientHello
		log.Fatal(err)
	}
	flights := 0
	for !client.HandshakeComplete() || !server.HandshakeComplete() {
		if out := client.Output(); len(out) > 0 {
			flights++
			if err := server.Feed(out); err != nil {
				log.Fatal(err)
			}
		}
		if out := server.Output(); len(out) > 0 {
			flights++
			if err := client.Feed(out); err != nil {
				log.Fatal(err)
			}
		}
		if flights > 10 {
			log.Fatal("handshake does not finish")
		}
	}
	// ClientHello; ServerHello to the server's Finished; the client's
	// Finished; the server's session tickets.
	fmt.Println("flights:", flights)

	// Application data over a connection of the transport's choice.
	clientEnd, serverEnd := connPair()
	go func() {
		srv := server.Conn(serverEnd, false) // would first send output not yet taken
		defer srv.Close()
		io.Copy(srv, srv) // echo
	}()
	conn := client.Conn(clientEnd, false)
	fmt.Fprint(conn, "ping")
	buf := make([]byte, 4)
	if _, err := io.ReadFull(conn, buf); err != nil {
		log.Fatal(err)
	}
	conn.Close()
	fmt.Println(string(buf))
	// Output:
	// flights: 4
	// ping
}

// A server whose handshakes take their x25519 keys from a pool made ahead
// of need. The first handshake finds the pool empty and makes its key
// itself; the refill it starts runs beside it.
func ExampleKeySharePool() {
	cert, roots := newCertificate("example.com")
	pool := tls13.NewKeySharePool(16)
	srvCfg := &tls13.Config{Certificates: []tls13.Certificate{cert}, KeySharePool: pool}
	for range 2 {
		clientEnd, serverEnd := connPair()
		go func() {
			srv := tls13.Server(serverEnd, srvCfg)
			defer srv.Close()
			srv.Handshake()
		}()
		conn := tls13.Client(clientEnd, &tls13.Config{ServerName: "example.com", RootCAs: roots, Groups: []tls13.CurveID{tls13.X25519}})
		if err := conn.Handshake(); err != nil {
			log.Fatal(err)
		}
		conn.Close()
	}
	// Taken counts the keys found in the pool, GeneratedInline those made
	// because it was dry: together, one x25519 key per handshake.
	fmt.Println("keys:", pool.Taken()+pool.GeneratedInline())
	// Output:
	// keys: 2
}
