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
//	go srv.ServeUDP(udpConn)             // same port number as TCP, or any
//	for {
//		raw, _ := tcpListener.Accept()
//		go func() {
//			c, err := srv.Accept(raw)     // linked TurboTLS, or plain TLS
//			...                           // c.Conn is a *tls13.Conn
//		}()
//	}
//
// and advertises the UDP port in its HTTPS record (HTTPSRecord, key65280).
// The UDP side is a bounded table (Config: 2 s lifetime, per-source rate
// limit, global cap) that answers with at most one datagram per request
// datagram and at most three times the bytes a source sent.
//
// A client that found the advertisement dials:
//
//	res, err := turbo.Dial(ctx, tcpAddr, udpAddr, &turbo.ClientConfig{TLS: cfg})
//	// res.Conn is ready; res.Turbo or res.FallbackReason says how it went
//
// Package dial does this when Options.Turbo is set. ClientProxy and
// ServerProxy give unmodified TLS clients and servers the same saving
// (the paper's Section 4.3); `ztls turbo-proxy` runs them.
package turbo
