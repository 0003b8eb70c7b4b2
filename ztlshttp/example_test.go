package ztlshttp_test

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/url"
	"time"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/internal/testsupport/lab"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/zdata"
	"github.com/ztls-project/ztls/ztlshttp"
)

// An HTTP client gets ZTLS from NewTransport: its first GET to a server
// that publishes Z-data goes with the first ClientHello and the answer
// comes in the server's first flight. The server is a Proxy in front of a
// backend. The example runs in a lab on loopback: a DNS authority
// publishing the server's address and Z-data, and a ztls server.
func ExampleNewTransport() {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from the backend (Early-Data: %q)", r.Header.Get("Early-Data"))
	}))
	defer backend.Close()
	u, _ := url.Parse(backend.URL)
	proxy := &ztlshttp.Proxy{Backend: u}

	world, err := lab.Start(lab.Options{
		Handler:      func(c *tls13.Conn) { proxy.ServeConn(c) },
		ZDataOptions: zdata.Options{ALPN: "http/1.1"}, // the transport's protocol
	})
	if err != nil {
		log.Fatal(err)
	}
	defer world.Close()
	world.ServerTLS.NextProtos = []string{"http/1.1"}
	res, err := world.Resolver(resolver.UDP)
	if err != nil {
		log.Fatal(err)
	}
	defer res.Close()

	tr := ztlshttp.NewTransport(dial.Options{
		TLS:         world.ClientTLS(), // trusts the lab's CA
		Resolver:    res,               // finds the address and the Z-data
		ZDataBudget: time.Second,       // generous for a busy machine; 0 means 20 ms
	})
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}

	// The connection's report, through httptrace.
	var conn net.Conn
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) { conn = info.Conn }}
	req, _ := http.NewRequest("GET", "https://"+world.HostPort()+"/", nil)
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	resp, err := client.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.Status, string(body))
	if rc, ok := conn.(interface{ Report() *dial.Report }); ok {
		r := rc.Report()
		fmt.Println("mode:", r.Mode)
		fmt.Println("early data accepted:", r.EarlyData.Accepted)
		fmt.Println("answer in first flight:", r.AnswerInFirstFlight)
	}
	// Output:
	// 200 OK hello from the backend (Early-Data: "1")
	// mode: ztls
	// early data accepted: true
	// answer in first flight: true
}

// EarlySafe tells which first requests may go as early data without the
// user opting in: only a whole request that is safe to replay.
func ExampleEarlySafe() {
	for _, req := range []string{
		"GET /index.html HTTP/1.1\r\nHost: www.example.com\r\n\r\n",
		"POST /order HTTP/1.1\r\nHost: www.example.com\r\nContent-Length: 0\r\n\r\n",
		"GET /",
	} {
		ok, _ := ztlshttp.EarlySafe([]byte(req))
		fmt.Println(ok)
	}
	// Output:
	// true
	// false
	// true
}
