package bench

import (
	"crypto/tls"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestPQContendersLoopback drives the post-quantum contenders and their
// DoT twins end to end on loopback through the real workers: the server
// publishes classical and v3 records, the client takes the v3 one
// (early data post-quantum, an X25519MLKEM768 handshake), over the
// resolver's DoT listener for the -dot ones (a visit's lookups on the
// connection opened before it), and with prefetch.
func TestPQContendersLoopback(t *testing.T) {
	w := newLoopbackWorld(t)
	for _, name := range []string{"ztls-pq", "ztls-dot", "ztls-pq-dot", "ztls-pq-prefetch",
		"ztls-turbo-pq", "ztls-turbo-dot", "ztls-turbo-pq-dot", "ztls-turbo-pq-prefetch"} {
		for _, scen := range []string{"local-warm", "stub"} {
			t.Run(name+"/"+scen, func(t *testing.T) {
				c, cl := w.start(t, name, true)
				cl.Scenario = Scenarios[scen]
				cl.TurboWait = 5 * time.Second // the protocol, not its timing (TestTurboContendersLoopback)
				accepts := w.dot.accepts.Load()
				for i := 0; i < 3; i++ {
					s, err := w.visit(t, c, cl)
					if err != nil {
						t.Fatalf("visit %d: %v", i, err)
					}
					if !s.Early || s.FirstByte <= 0 || s.DNS > s.FirstByte {
						t.Fatalf("visit %d: sample %+v, want early data accepted", i, s)
					}
				}
				got := w.dot.accepts.Load() - accepts
				switch {
				case strings.Contains(name, "-dot") && scen == "local-warm" && got != 1:
					t.Errorf("the resolver accepted %d DoT connections for 3 visits, want 1 (kept open)", got)
				case !strings.Contains(name, "-dot") && got != 0:
					t.Errorf("the resolver accepted %d DoT connections from a UDP contender", got)
				}
			})
		}
	}
}

// TestSmallScenarioPQECH runs the post-quantum, DoT and ECH contenders
// on the emulated WAN (20 ms RTT, local-warm, a few visits each): the
// resolver host serves DoT, every visit counts (the contenders refuse a
// visit without post-quantum early data, without the kept-open DoT
// connection or without ECH accepted), and neither post-quantum Z-data
// over DoT nor ECH adds a round trip (medians within 0.3 RTT of their
// twins').
func TestSmallScenarioPQECH(t *testing.T) {
	const rtt = 20 * time.Millisecond
	rep := runSmallScenario(t, 120*time.Second, Config{
		RTTs:      []time.Duration{rtt},
		Runs:      4,
		Protocols: []string{"ztls", "ztls-dot", "ztls-pq-dot", "ztls-ech"},
		Scenarios: []string{"local-warm"},
		Realtime:  true,
	})
	by := map[string]Result{}
	for _, r := range rep.Results {
		by[r.Protocol] = r
		if r.Runs < 3 || r.Early != r.Runs {
			t.Fatalf("%s: %d of 4 visits counted, %d with early data accepted", r.Protocol, r.Runs, r.Early)
		}
	}
	for _, p := range [][2]string{{"ztls-pq-dot", "ztls-dot"}, {"ztls-ech", "ztls"}} {
		d := (by[p[0]].FirstByte.Median - by[p[1]].FirstByte.Median) / float64(rtt/time.Millisecond)
		t.Logf("%s − %s: %.3f RTT", p[0], p[1], d)
		if d < -0.3 || d > 0.3 {
			t.Errorf("%s's first response %.2f RTT from %s's, want within 0.3", p[0], d, p[1])
		}
	}
}

// TestDoTKeptOpenPastManyQueries: the resolver's DoT listener keeps one
// connection for as many queries as a long run asks on it (miekg/dns's
// default closed it after 128, in the middle of a run's 19th visit).
func TestDoTKeptOpenPastManyQueries(t *testing.T) {
	w := newLoopbackWorld(t)
	st := &workerState{}
	v := visit{Addr: "www.ztls.test:443", DoT: w.dot.addr.String(), CAFile: w.p.caFile}
	for i := 0; i < 300; i++ {
		if r := st.openDoT(v); r.Err != "" {
			t.Fatalf("question %d: %s", i, r.Err)
		}
	}
	st.dot.Close()
	if n := w.dot.accepts.Load(); n != 1 {
		t.Fatalf("the resolver accepted %d DoT connections for 300 questions, want 1", n)
	}
}

// TestDoTAnswersPipelinedQueriesConcurrently: the resolver's DoT
// listener answers the queries of one connection in parallel, out of
// order (RFC 7766, Section 6.2.1.1): a query whose answer waits for a
// later one's is answered after it. Served one at a time, as
// miekg/dns's server does, it would never be (a cold lookup's six
// pipelined questions would each wait for the authority in turn).
func TestDoTAnswersPipelinedQueriesConcurrently(t *testing.T) {
	p, err := makePKI(t.TempDir(), ServerName, "")
	if err != nil {
		t.Fatal(err)
	}
	fastServed := make(chan struct{})
	h := dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		if q.Question[0].Name == "slow.test." {
			select {
			case <-fastServed:
			case <-time.After(20 * time.Second):
			}
		}
		m := new(dns.Msg)
		m.SetReply(q)
		w.WriteMsg(m)
		if q.Question[0].Name == "fast.test." {
			close(fastServed)
		}
	})
	s, err := startDoT(nil, netip.MustParseAddrPort("127.0.0.1:0"), h, p.ca)
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	c, err := tls.Dial("tcp", s.addr.String(), &tls.Config{RootCAs: p.pool, ServerName: ResolverName})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second)) // real time: a socket timeout, kept by the kernel; only bounds a hang, at any minute of the hour
	dc := &dns.Conn{Conn: c}
	for _, name := range []string{"slow.test.", "fast.test."} {
		q := new(dns.Msg)
		q.SetQuestion(name, dns.TypeA)
		if err := dc.WriteMsg(q); err != nil {
			t.Fatal(err)
		}
	}
	var order []string
	for range 2 {
		m, err := dc.ReadMsg()
		if err != nil {
			t.Fatalf("after %v: %v", order, err)
		}
		order = append(order, m.Question[0].Name)
	}
	if order[0] != "fast.test." {
		t.Fatalf("answers in the order %v: the queries were served one after the other", order)
	}
}
