package dial_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/internal/testsupport/lab"
)

// connect runs one Connect to the world's server, sending "GET /" and
// reading the answer.
func connect(world *lab.World) (*dial.Result, string) {
	res, err := world.Resolver(resolver.UDP)
	if err != nil {
		log.Fatal(err)
	}
	defer res.Close()
	var answer bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := dial.Connect(ctx, world.HostPort(), dial.Options{
		Mode:         "auto",            // ZTLS when valid Z-data is in hand, else TLS 1.3
		TLS:          world.ClientTLS(), // trusts the lab's CA
		Resolver:     res,               // addresses and Z-data
		ZDataBudget:  time.Second,       // generous for a busy machine; 0 means 20 ms
		Request:      []byte("GET /"),
		ReplaySafe:   true, // resent after the handshake if the early data is rejected
		ReadResponse: 1 << 16,
		Out:          &answer,
		Memory:       dial.NewMemory(),
	})
	if err != nil {
		log.Fatal(err)
	}
	r.Conn.Close()
	return r, answer.String()
}

// A first contact with ZTLS. The example runs in a lab on loopback: a DNS
// authority publishing the server's address and Z-data, and a ztls server
// answering "hello". The report says how the connection went; its timings
// are in Report.Timing.
func ExampleConnect() {
	world, err := lab.Start(lab.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer world.Close()

	r, answer := connect(world)
	fmt.Println("answer:", answer)
	fmt.Println("mode:", r.Report.Mode)
	fmt.Printf("fallback reason: %q\n", r.Report.FallbackReason)
	fmt.Println("early data accepted:", r.Report.EarlyData.Accepted)
	fmt.Println("certificate from DNS:", r.Report.TLS.CertificateFromDNS)
	fmt.Println("answer in first flight:", r.Report.AnswerInFirstFlight)
	// Output:
	// answer: hello
	// mode: ztls
	// fallback reason: ""
	// early data accepted: true
	// certificate from DNS: true
	// answer in first flight: true
}

// A server that publishes no Z-data: the connection is plain TLS 1.3, the
// request goes after the handshake, and the report says why.
func ExampleConnect_fallback() {
	world, err := lab.Start(lab.Options{NoZData: true})
	if err != nil {
		log.Fatal(err)
	}
	defer world.Close()

	r, answer := connect(world)
	fmt.Println("answer:", answer)
	fmt.Println("mode:", r.Report.Mode)
	// The reason, then what was looked up (a name with the port in it).
	reason, _, _ := strings.Cut(r.Report.FallbackReason, ":")
	fmt.Println("fallback reason:", reason)
	fmt.Println("early data offered:", r.Report.EarlyData.Offered)
	// Output:
	// answer: hello
	// mode: tls
	// fallback reason: no Z-data
	// early data offered: false
}
