// Package turbo implements TurboTLS (Aguilar-Melchor et al., 2023) over
// package tls13: the client's first flight and the server's first flight
// travel over UDP while TCP's three-way handshake runs, and the
// connection continues on TCP. With ZTLS's early data in the client
// flight, the answer to the first request arrives in the server's UDP
// flight: one round trip after DNS. The bytes are in docs/turbotls-spec.md.
//
// A server keeps a UDP socket next to its TCP listener:
//
//	srv := turbo.NewTLSServer(tlsConfig, answerEarly, turbo.Config{})
//	defer srv.Close()
//	// UDP on udpConn (same port number as TCP, or any), TCP on ln
//	go srv.ListenAndServe(ln, udpConn, func(c *turbo.ServerConn) {
//		... // linked TurboTLS, or plain TLS: c.Conn is a *tls13.Conn
//	})
//
// and advertises the UDP port in its HTTPS record (HTTPSRecord, key65280).
// The UDP side is a bounded table (Config: 2 s lifetime, per-source rate
// limit, global cap) that answers with at most one datagram per request
// datagram and at most three times the bytes a source sent.
//
// A client that found the advertisement dials:
//
//	res, err := turbo.Dial(ctx, tcpAddr, udpAddr, &turbo.ClientConfig{TLS: cfg})
//	// res.Conn is ready; res.Turbo, or res.Miss, says how it went
//
// Dial falls back to TLS over the TCP connection by itself when the
// server's flight does not finish the handshake over UDP. A caller with
// a fallback rule of its own makes the Hello, sends it, and decides on
// the Outcome that Hello.Dial returns; TCP's handshake runs while the
// flights cross either way:
//
//	hello, err := turbo.NewHello(udpAddr, clientConfig)
//	o, err := hello.Dial(ctx, tcpAddr)
//	switch {
//	case o.Conn != nil:   // the server's flight came over UDP: the handshake is done
//	case o.CanContinue(): // o.Miss says why not; the same ClientHello may go on TCP
//		c, err := o.ContinueOnTCP() // then c.HandshakeContext
//	default:              // the flight came and failed, or carried early data
//		c := tls13.Client(o.TCP, cfg) // a new handshake on the unused TCP connection
//	}
//
// Package dial does the latter when Options.Turbo is set: its fallback
// rule (a server that aborted on ztls is retried without it) is in its
// own hands. The Example and Hello.Dial's example run both on loopback.
// ClientProxy and ServerProxy give unmodified TLS clients and servers
// the same saving (the paper's Section 4.3); `ztls turbo-proxy` runs
// them.
package turbo
