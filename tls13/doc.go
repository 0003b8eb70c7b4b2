// Package tls13 is a TLS 1.3 client and server (RFC 8446) with 0-RTT in
// both roles and ZTLS: early data on a first contact, keyed by a share the
// server publishes in DNS (docs/ztls-spec.md). It speaks TLS 1.3 only; a
// peer limited to TLS 1.2 gets a protocol_version alert.
//
// # Connections
//
// The API is shaped like crypto/tls. Client and Server wrap a net.Conn;
// Dial and Listen (or NewListener around a listener of your own) do the
// socket too. The handshake runs on the first Read or Write, or when
// Handshake is called:
//
//	conn, err := tls13.Dial("tcp", "example.com:443", &tls13.Config{})
//	if err != nil {
//		return err
//	}
//	defer conn.Close()
//	conn.Write([]byte("GET / HTTP/1.0\r\nHost: example.com\r\n\r\n"))
//
// A Config is shared by many connections and must not change once in use.
// A client verifies the server's chain against RootCAs (nil: the system
// roots) and its name against ServerName, which Client requires (Dial takes
// it from the address when empty). InsecureSkipVerify turns both checks off;
// it is for tests only. A server needs Certificates: chains with their
// private keys, from LoadX509KeyPair, X509KeyPair or your own DER and
// crypto.Signer; ClientAuth and ClientCAs ask for client certificates.
// ConnectionState tells what was negotiated and Trace when each step
// happened.
//
// # Resumption and 0-RTT
//
// A client with a ClientSessionCache (NewLRUClientSessionCache) keeps the
// server's tickets and resumes with them; Conn.Session and Conn.SetSession
// move one by hand. A server announces early data in its tickets when
// MaxEarlyData is set, and a client sends it with SetEarlyData before the
// handshake:
//
//	conn := tls13.Client(raw, cfg)        // cfg.ClientSessionCache holds a ticket
//	conn.SetEarlyData(request, true)      // resend after the handshake if rejected
//	err := conn.Handshake()
//	accepted := conn.ConnectionState().EarlyDataAccepted
//
// A server reads it before the handshake completes with HandshakeEarly and
// ReadEarlyData (io.EOF once it ended), and what it writes then leaves with
// its first flight (0.5-RTT data). Early data is unauthenticated and
// replayable: no client certificate covers it, and anyone who recorded it
// can send it again. The StrikeRegister accepts each early ClientHello once
// within its freshness window (EarlyDataWindow) and refuses those it cannot
// vouch for, such as ones older than its memory after a restart; servers
// sharing tickets or Z-data keys must share one register. Only answer
// early what is safe to run twice (RFC 8470); anything else waits for
// Handshake.
//
// # ZTLS
//
// A client holding verified Z-data for the server (package zdata's Select
// and Record.Offer make the ZDataOffer; package dial does the whole
// connection) calls SetZData before the handshake: early data set with
// SetEarlyData then goes under the Z-data key with the very first
// ClientHello, and the server may leave out its Certificate, which the
// client already has from DNS. Config.VerifyZDataOffer runs the client's
// certificate policy on the offer's leaf ahead of time; a handshake does it
// itself when it was not done. A server answers ZTLS when Config.ZData
// holds its keys (a zdata.Keyring). A server without them ignores the offer,
// and one that declines it rejects the early data; either way the
// handshake goes on as plain TLS 1.3
// (ConnectionState.ZTLS, ZTLSRejectReason and ZTLSSkipped say what
// happened). ZTLS early data is as replayable as 0-RTT data and goes
// through the same StrikeRegister, except under a Z-data record with a
// Bloom filter encryption key (docs/ztls-spec.md, Section 7): the offer's
// BFE key makes the client send a ciphertext in the ztls_bfe extension,
// the early secret needs both ZS and the key in it, and the server's
// ZDataKey.Decapsulate, which punctures the key, refuses any second use.
//
// # Other transports
//
// Under Conn is a sans-IO core, exposed as Engine: Feed takes the peer's
// bytes, Output returns the records to send, and nothing in it blocks or
// owns a socket or a goroutine. (Conn lends a client's engine a goroutine
// to check the server's chain beside its signature; Engine.CheckConcurrently
// does the same for another transport.) NewClientEngine and NewServerEngine give one to a transport that
// is not one byte stream from the start: TurboTLS (package turbo) carries
// the first flights over UDP, then hands the engine to the TCP connection
// with Engine.Conn.
//
// # Debugging
//
// Config.KeyLogWriter receives every secret in the NSS key log format, for
// Wireshark. The package never reads SSLKEYLOGFILE itself; the ztls
// command opens that file and sets KeyLogWriter when the variable is set.
package tls13
