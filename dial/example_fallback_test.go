package dial_test

import (
	"fmt"
	"log"
	"strings"
)

// A site that publishes no Z-data: the connection is plain TLS 1.3, the
// request goes after the handshake, and the report says why. startSite
// and Site are in ExampleConnect's file.
func ExampleConnect_fallback() {
	site, err := startSite(false)
	if err != nil {
		log.Fatal(err)
	}
	defer site.Close()

	r, answer, err := site.Connect("GET /")
	if err != nil {
		log.Fatal(err)
	}
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
