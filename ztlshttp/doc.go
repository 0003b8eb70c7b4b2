// Package ztlshttp carries HTTP over ztls: a terminating reverse proxy
// that answers requests received as early data in its first flight, and a
// net/http dialer so Go clients get ZTLS by changing one line.
//
// # Client
//
// NewTransport is an http.Transport whose connections are opened by
// package dial: with ZTLS when the server publishes Z-data, else TLS 1.3.
// dial.Options says how (a resolver for the Z-data, the TLS
// configuration, the mode):
//
//	client := &http.Client{Transport: ztlshttp.NewTransport(dial.Options{Resolver: res})}
//	resp, err := client.Get("https://www.example.com/")
//
// DialTLSContext is the same dialer for an http.Transport of your own. The
// connection is opened when net/http writes its first request, so a GET,
// HEAD or OPTIONS request written whole in one piece goes as early data
// and its response can come in the server's first flight; any other
// request waits for the handshake. The connections it returns have a
// method Report() *dial.Report, the connection report (ztls or TLS 1.3,
// the fallback reason, whether the early data was accepted, timings),
// available once the request was written; httptrace's GotConn hands you
// the connection.
//
// # Server
//
// A Proxy forwards the HTTP/1.1 requests of each tls13.Conn to a backend:
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
// The transport offers the ALPN protocol "http/1.1" (unless the TLS
// configuration lists others); the Z-data's early ALPN
// (zdata.Options.ALPN) must be the protocol the server then negotiates, or
// the server refuses the early data.
//
// # Early data
//
// Early data is replayable, so both sides follow RFC 8470: the proxy
// marks forwarded early requests with "Early-Data: 1" and, when the
// backend answers 425 (Too Early), waits for the handshake to complete and
// sends the request again (with its body); the client sends early only a
// whole idempotent request, and the proxy forwards as early only a request
// the early data holds whole. EarlySafe is that test for clients of your
// own (it also lets a one-line "GET /path" through).
package ztlshttp
