// Package ztlshttp carries HTTP over ztls: a terminating reverse proxy
// that answers requests received as early data in its first flight, and a
// net/http dialer so Go clients get ZTLS by changing one line.
//
// # Client
//
// NewTransport is an http.RoundTripper whose connections are opened by
// package dial: with ZTLS when the server publishes Z-data, else TLS 1.3.
// With no resolver in the options it fetches the Z-data through
// DefaultResolver (the server in the ZTLS_RESOLVER environment variable,
// else /etc/resolv.conf's), so one line does ZTLS:
//
//	client := &http.Client{Transport: ztlshttp.NewTransport(dial.Options{})}
//	resp, err := client.Get("https://www.example.com/")
//
// Its connections offer HTTP/2 and HTTP/1.1 (ALPN h2 and http/1.1) in one
// ClientHello and speak the one the server selects, so first contact
// costs one connection. resp.TLS is filled as crypto/tls would, and ReportOf(resp)
// returns the connection report (ztls or TLS 1.3, the fallback reason,
// whether the early data was accepted, timings). The connection is opened
// when the request is written, so one complete GET, HEAD or OPTIONS request
// (over HTTP/2: the preface, SETTINGS and that request's HEADERS) goes as
// early data and its response can come in the server's first flight; any
// other request waits for the handshake. The early request is in the
// protocol the Z-data names (its early ALPN; without one, HTTP/1.1 in a
// ClientHello without ALPN); when the server selects the other protocol,
// the request is written in that one after the handshake, on the same
// connection, so the server receives it once. DialTLSContext is the
// HTTP/1.1 dialer for an http.Transport of your own.
//
// # Server
//
// A Proxy forwards the requests of each tls13.Conn to a backend, over
// HTTP/1.1 or HTTP/2 (as the connection negotiated):
//
//	ln, err := tls13.Listen("tcp", ":443", cfg) // cfg.ZData: the Z-data keys
//	for {
//		c, err := ln.Accept()
//		if err != nil {
//			return err
//		}
//		go proxy.ServeConn(c.(*tls13.Conn))
//	}
//
// The Z-data's early ALPN (zdata.Options.ALPN) must be the protocol the
// server then negotiates, or the server refuses the early data; the
// server selects it for a ztls ClientHello that offers it when it speaks
// it (tls13.Config.NextProtos).
//
// # Early data
//
// Early data is replayable, so both sides follow RFC 8470: the proxy
// marks forwarded early requests with "Early-Data: 1" and, when the
// backend answers 425 (Too Early), waits for the handshake to complete and
// sends the request again (with its body); the client sends early only a
// whole idempotent request, and the proxy forwards as early only a request
// the early data holds whole (over HTTP/2: all of its frames).
// EarlySafe is that test for clients of your
// own (it also lets a one-line "GET /path" through).
package ztlshttp
