package dial

import (
	"crypto/x509"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/internal/testsupport/lab"
)

// The Z-data budget bounds the wait for the DNS answers, not for their
// checks: a verifier slower than the budget (here the application's
// VerifyPeerCertificate hook, as an OCSP query would be) still gets ZTLS,
// since a TLS 1.3 handshake would run the same check on the same
// certificate; answers that come after the budget do not.
func TestZDataBudgetBoundsTheAnswersNotTheChecks(t *testing.T) {
	w := startWorld(t, lab.Options{})
	// Long enough that loopback DNS answers arrive within it on a loaded
	// machine; the slow parts below take five budgets.
	const budget = 100 * time.Millisecond

	slowCheck := func(o *Options) {
		o.ZDataBudget = budget
		o.TLS.VerifyPeerCertificate = func([][]byte, [][]*x509.Certificate) error {
			time.Sleep(5 * budget)
			return nil
		}
	}
	r, err := connect(t, w, slowCheck)
	if err != nil {
		t.Fatal(err)
	}
	if r.Report.Mode != "ztls" {
		t.Fatalf("a check slower than the budget: mode %s (%s), want ztls", r.Report.Mode, r.Report.FallbackReason)
	}
	at := map[string]float64{}
	for _, s := range r.Report.Trace {
		at[s.Step] = s.AtMS
	}
	if _, ok := at["zdata_answered"]; !ok || at["zdata_verified"] < at["zdata_answered"] {
		t.Fatalf("trace: %+v", r.Report.Trace)
	}

	// The same world through a DNS server that holds back the TXT
	// answers for five budgets: TLS 1.3, for the budget.
	slowDNS := delayingDNS(t, w.DNSAddr, dns.TypeTXT, 5*budget)
	r, err = connect(t, w, func(o *Options) {
		o.ZDataBudget = budget
		res, err := resolver.New(resolver.Config{Servers: []string{slowDNS}, Transport: resolver.UDP, Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { res.Close() })
		o.Resolver = res
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Report.Mode != "tls" || !strings.Contains(r.Report.FallbackReason, ReasonBudget) {
		t.Fatalf("late answers: mode %s (%s), want tls for the budget", r.Report.Mode, r.Report.FallbackReason)
	}
}

// delayingDNS relays UDP DNS to upstream, holding answers of qtype for
// delay; it returns its address.
func delayingDNS(t *testing.T, upstream string, qtype uint16, delay time.Duration) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { pc.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 65535)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			q := append([]byte(nil), buf[:n]...)
			wg.Add(1)
			go func() {
				defer wg.Done()
				up, err := net.Dial("udp", upstream)
				if err != nil {
					return
				}
				defer up.Close()
				up.SetDeadline(time.Now().Add(5 * time.Second))
				if _, err := up.Write(q); err != nil {
					return
				}
				ans := make([]byte, 65535)
				k, err := up.Read(ans)
				if err != nil {
					return
				}
				var m dns.Msg
				if m.Unpack(q) == nil && len(m.Question) == 1 && m.Question[0].Qtype == qtype {
					time.Sleep(delay)
				}
				pc.WriteTo(ans[:k], from)
			}()
		}
	}()
	return pc.LocalAddr().String()
}
