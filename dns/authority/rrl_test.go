package authority

import (
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// The token bucket on a clock the test moves: the burst, drop and slip in
// turn, the debt a flood runs up, and recovery after Window of quiet.
func TestRRLBucket(t *testing.T) {
	l := newRRL(&RateLimit{ResponsesPerSecond: 5, Slip: 2, Window: 4 * time.Second})
	k := l.errorKey(netip.MustParseAddr("192.0.2.1"), dns.RcodeRefused)
	var now int64 = 1e9
	var got []rrlVerdict
	for range 9 {
		got = append(got, l.decide(k, now))
	}
	want := []rrlVerdict{rrlSend, rrlSend, rrlSend, rrlSend, rrlSend, rrlDrop, rrlSlip, rrlDrop, rrlSlip}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("verdicts %v, want %v", got, want)
		}
	}
	// A flood of 100 per second for 10 s: the debt stops at
	// -rate × window = -20, and nothing more is sent.
	for i := range 1000 {
		if v := l.decide(k, now+int64(i)*1e7); v == rrlSend {
			t.Fatalf("answer %d of the flood was sent", i)
		}
	}
	now += 10e9
	if b := l.table[k].balance; b != -20 {
		t.Fatalf("balance after the flood %v, want -20", b)
	}
	// 21/5 s of quiet brings the balance back to 1: one answer.
	if v := l.decide(k, now+4e9); v == rrlSend {
		t.Fatal("answered before the debt was paid")
	}
	if v := l.decide(k, now+4e9+4200e6+200e6); v != rrlSend {
		t.Fatalf("after the debt was paid: %v", v)
	}
	// Slip 0 never slips, slip 1 always does.
	for slip, want := range map[int]rrlVerdict{0: rrlDrop, 1: rrlSlip} {
		l := newRRL(&RateLimit{ResponsesPerSecond: 1, Slip: slip})
		l.decide(k, 0)
		for range 4 {
			if v := l.decide(k, 0); v != want {
				t.Fatalf("slip %d: %v", slip, v)
			}
		}
	}
	if newRRL(&RateLimit{}) != nil || newRRL(nil) == nil {
		t.Fatal("a zero rate must turn RRL off and nil mean the default")
	}
}

// Which answers share a count: a client network (/24, /56), and the
// same name and type, or the zone for NXDOMAIN.
func TestRRLKeys(t *testing.T) {
	l := newRRL(nil)
	zones := mustZones(t, mustZone(t, "example.org.", testZone))
	key := func(ip, name string, qtype uint16) rrlKey {
		return l.key(netip.MustParseAddr(ip), zones.Answer(query(name, qtype)))
	}
	same := []struct {
		name string
		a, b rrlKey
	}{
		{"one /24", key("192.0.2.1", "www.example.org.", dns.TypeA), key("192.0.2.200", "www.example.org.", dns.TypeA)},
		{"one /56", key("2001:db8:0:100::1", "www.example.org.", dns.TypeA), key("2001:db8:0:1ff::2", "www.example.org.", dns.TypeA)},
		{"IPv4-mapped", key("::ffff:192.0.2.1", "www.example.org.", dns.TypeA), key("192.0.2.9", "www.example.org.", dns.TypeA)},
		{"case", key("192.0.2.1", "WWW.example.org.", dns.TypeA), key("192.0.2.1", "www.example.org.", dns.TypeA)},
		{"random NXDOMAIN names share the zone's count", key("192.0.2.1", "x1.example.org.", dns.TypeA), key("192.0.2.1", "x2.example.org.", dns.TypeTXT)},
		{"referrals share the delegation's count", key("192.0.2.1", "a.sub.example.org.", dns.TypeA), key("192.0.2.1", "b.sub.example.org.", dns.TypeMX)},
	}
	for _, tc := range same {
		if tc.a != tc.b {
			t.Errorf("%s: different counts", tc.name)
		}
	}
	different := []struct {
		name string
		a, b rrlKey
	}{
		{"two /24s", key("192.0.2.1", "www.example.org.", dns.TypeA), key("192.0.3.1", "www.example.org.", dns.TypeA)},
		{"two /56s", key("2001:db8:0:100::1", "www.example.org.", dns.TypeA), key("2001:db8:0:200::1", "www.example.org.", dns.TypeA)},
		{"two types", key("192.0.2.1", "www.example.org.", dns.TypeA), key("192.0.2.1", "www.example.org.", dns.TypeAAAA)},
		{"two names", key("192.0.2.1", "www.example.org.", dns.TypeA), key("192.0.2.1", "ns1.example.org.", dns.TypeA)},
		{"answer and error", key("192.0.2.1", "www.example.org.", dns.TypeA), key("192.0.2.1", "www.example.net.", dns.TypeA)},
	}
	for _, tc := range different {
		if tc.a == tc.b {
			t.Errorf("%s: one count", tc.name)
		}
	}
}

// A full table sweeps the counts that recovered, and answers what still
// finds no room unlimited (and counted).
func TestRRLTableFull(t *testing.T) {
	l := newRRL(&RateLimit{ResponsesPerSecond: 1, TableSize: 2})
	ip := netip.MustParseAddr("192.0.2.1")
	l.decide(l.errorKey(ip, 1), 0)
	l.decide(l.errorKey(ip, 2), 0)
	// No room: an empty TC=1 reply, never an unlimited answer.
	if v := l.decide(l.errorKey(ip, 3), 0); v != rrlSlip || l.tableFulls != 1 {
		t.Fatalf("full table: %v, %d", v, l.tableFulls)
	}
	// Two seconds on, both counts have recovered and are swept.
	l.decide(l.errorKey(ip, 3), 2e9)
	if len(l.table) != 1 || l.tableFulls != 1 {
		t.Fatalf("after the sweep: %d counts, %d full", len(l.table), l.tableFulls)
	}
}

// The attack of point 12, through the datagram path on a frozen clock: a
// flood of big TXT and ANY queries "from" one /24 (a spoofed victim). With
// RRL the server sends fewer bytes than it receives, every slipped answer
// is an empty TC=1, and a client of the same network presenting a valid
// server cookie is answered in full throughout.
func TestUDPFloodUnderRRL(t *testing.T) {
	const floodN = 2000
	big := func() *dns.Msg { return ednsQuery("big.example.org.", dns.TypeTXT, 4096, false) }
	flood := func(s *Server) (in, out uint64) {
		for i := range floodN {
			victim := netip.AddrFrom4([4]byte{198, 51, 100, byte(i)}).String()
			q := big()
			if i%2 == 1 {
				q = ednsQuery("www.example.org.", dns.TypeANY, 4096, false)
			}
			exchangeFrom(t, s, victim, q)
		}
		st := s.Stats()
		return st.UDPBytesIn, st.UDPBytesOut
	}
	now := time.Unix(1700000000, 0)

	// Before: no RRL and no amplification cap.
	off := cookieServer(t, &now, func(s *Server) { s.RateLimit = &RateLimit{}; s.MaxUDPAmplification = -1 })
	in, out := flood(off)
	if ratio := float64(out) / float64(in); ratio < 5 {
		t.Fatalf("without RRL the flood amplified only %.1fx; the test measures nothing", ratio)
	}
	t.Logf("RRL off: %d bytes in, %d out (%.2fx)", in, out, float64(out)/float64(in))

	// After: the defaults.
	s := cookieServer(t, &now)
	in, out = flood(s)
	st := s.Stats()
	ratio := float64(out) / float64(in)
	t.Logf("RRL on: %d bytes in, %d out (%.2fx); %d dropped, %d slipped", in, out, ratio, st.RRLDropped, st.RRLSlipped)
	if ratio > 1 {
		t.Errorf("bytes out / bytes in = %.2f under RRL, want at most 1", ratio)
	}
	if st.RRLDropped == 0 || st.RRLSlipped == 0 || st.RRLSlipped > st.RRLDropped+1 {
		t.Errorf("dropped %d, slipped %d: want slip every second limited answer", st.RRLDropped, st.RRLSlipped)
	}
	// Slipped answers: TC=1 and no records.
	slips := 0
	for range 10 {
		m, _ := exchangeFrom(t, s, "198.51.100.77", big())
		if m == nil {
			continue
		}
		slips++
		if !m.Truncated || len(m.Answer)+len(m.Ns) != 0 || len(m.Question) != 1 {
			t.Fatalf("slipped answer %v", m)
		}
	}
	if slips == 0 {
		t.Fatal("no slipped answer in 10")
	}
	// A client of the victim's network learns a server cookie from a
	// slipped answer (it keeps the OPT record), and with it is answered
	// in full.
	var m *dns.Msg
	for range 10 {
		if m, _ = exchangeFrom(t, s, "198.51.100.5", withCookie(big(), "0102030405060708")); m != nil {
			break
		}
	}
	cookie := cookieOf(m)
	if !m.Truncated || len(cookie) != 48 {
		t.Fatalf("the slipped answer carries no server cookie: %v", m)
	}
	for range 50 {
		m, n := exchangeFrom(t, s, "198.51.100.5", withCookie(big(), cookie))
		if m == nil || m.Truncated || len(m.Answer) != 8 {
			t.Fatalf("cookie client during the flood: %v (%d bytes)", m, n)
		}
	}
	// ANY is minimal even for it.
	m, _ = exchangeFrom(t, s, "198.51.100.5", withCookie(ednsQuery("www.example.org.", dns.TypeANY, 4096, false), cookie))
	if len(m.Answer) != 1 || m.Answer[0].Header().Rrtype != dns.TypeAAAA {
		t.Fatalf("ANY answered with %v", m.Answer)
	}
	// Streams are never limited.
	for range 50 {
		out := &sliceOutlet{remote: netip.MustParseAddr("198.51.100.6")}
		s.serveMsg(t.Context(), packQuery(t, big()), &responder{srv: s, t: TransportTCP, out: out})
		if m, _ := unpackOne(t, TransportTCP, out.sent); len(m.Answer) != 8 {
			t.Fatal("TCP answer limited")
		}
	}
}

// The amplification cap: without a valid server cookie a UDP answer is at
// most MaxUDPAmplification times its query; with one, the client's buffer
// is the limit.
func TestAmplificationCap(t *testing.T) {
	now := time.Unix(1700000000, 0)
	q := ednsQuery("big.example.org.", dns.TypeTXT, 1232, false)
	qsize := len(packQuery(t, q))
	// By default the cap never cuts an answer that fits 1232 bytes: the
	// 700-byte answer (16 times the query) goes whole to a cookieless
	// client, as an HTTPS record with Z-data must (Unbound sends no
	// cookie).
	floored := cookieServer(t, &now, func(s *Server) { s.RateLimit = &RateLimit{} })
	if m, n := exchangeFrom(t, floored, "192.0.2.1", q); m.Truncated || len(m.Answer) != 8 || n <= DefaultMaxUDPAmplification*qsize {
		t.Fatalf("under the floor: %d bytes for a %d-byte query, TC %v", n, qsize, m.Truncated)
	}
	// Above the floor the cap bites: a server that answers up to 4096
	// bytes gives a cookieless client at most the floor.
	wide := cookieServer(t, &now, func(s *Server) { s.RateLimit, s.MaxUDPSize, s.AmplificationFloor = &RateLimit{}, 4096, 400 })
	if m, n := exchangeFrom(t, wide, "192.0.2.1", ednsQuery("big.example.org.", dns.TypeTXT, 4096, false)); !m.Truncated || n > max(400, DefaultMaxUDPAmplification*qsize) {
		t.Fatalf("over a 400-byte floor: %d bytes, TC %v", n, m.Truncated)
	}
	// The factor alone (no floor): what follows.
	s := cookieServer(t, &now, func(s *Server) { s.RateLimit, s.AmplificationFloor = &RateLimit{}, -1 })
	m, n := exchangeFrom(t, s, "192.0.2.1", q)
	if !m.Truncated || n > DefaultMaxUDPAmplification*qsize {
		t.Fatalf("no cookie: %d bytes for a %d-byte query, TC %v", n, qsize, m.Truncated)
	}
	// Only a client cookie: capped too, and the server cookie comes back.
	m, n = exchangeFrom(t, s, "192.0.2.1", withCookie(q.Copy(), "0102030405060708"))
	if !m.Truncated || n > DefaultMaxUDPAmplification*(qsize+12) || cookieOf(m) == "" {
		t.Fatalf("client cookie only: %d bytes, TC %v, cookie %q", n, m.Truncated, cookieOf(m))
	}
	m, n = exchangeFrom(t, s, "192.0.2.1", withCookie(q.Copy(), cookieOf(m)))
	if m.Truncated || len(m.Answer) != 8 {
		t.Fatalf("valid cookie: %d bytes, TC %v", n, m.Truncated)
	}
	// A small answer is not touched; a factor below 2 is 2, so the empty
	// TC=1 answer always fits.
	if m, _ := exchangeFrom(t, s, "192.0.2.1", query("www.example.org.", dns.TypeA)); m.Truncated || len(m.Answer) != 2 {
		t.Fatalf("small answer: %v", m)
	}
	one := cookieServer(t, &now, func(s *Server) { s.MaxUDPAmplification, s.AmplificationFloor = 1, -1; s.RateLimit = &RateLimit{} })
	if m, n := exchangeFrom(t, one, "192.0.2.1", q); m == nil || !m.Truncated || n > 2*qsize {
		t.Fatalf("factor 1: %v, %d bytes", m, n)
	}
	if got := s.Stats().AmplificationTruncated; got != 2 {
		t.Errorf("AmplificationTruncated = %d, want 2", got)
	}
}
