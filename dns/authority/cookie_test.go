package authority

import (
	"encoding/hex"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func secretOf(t testing.TB, s string) *cookieSecret {
	var k cookieSecret
	copy(k[:], mustHex(t, s))
	return &k
}

// The reference vector of the SipHash paper (Appendix A): key 00..0f,
// message 00..0e.
func TestSipHash24(t *testing.T) {
	var k cookieSecret
	msg := make([]byte, 15)
	for i := range k {
		k[i] = byte(i)
	}
	for i := range msg {
		msg[i] = byte(i)
	}
	if got := sipHash24(&k, msg); got != 0xa129ca6149be45e5 {
		t.Fatalf("SipHash-2-4 = %#x, want 0xa129ca6149be45e5", got)
	}
}

// RFC 9018, Appendix A: the server cookies of the examples, made and
// checked byte for byte.
func TestRFC9018Vectors(t *testing.T) {
	const secret = "e5e973e5a6b2a43f48e7dc849e37bfcf"
	for _, tc := range []struct {
		name, client, ip string
		now              uint32
		want             string
	}{
		{"A.1 a new server cookie", "2464c4abcf10c957", "198.51.100.100", 1559731985, "010000005cf79f111f8130c3eee29480"},
		{"A.2 renewed", "2464c4abcf10c957", "198.51.100.100", 1559734385, "010000005cf7a871d4a564a1442aca77"},
		{"A.3 another client", "fc93fc62807ddb86", "203.0.113.203", 1559734700, "010000005cf7a9acf73a7810aca2381e"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var client [8]byte
			copy(client[:], mustHex(t, tc.client))
			ip := netip.MustParseAddr(tc.ip)
			got := secretOf(t, secret).serverCookie(client, ip, tc.now)
			if hex.EncodeToString(got[:]) != tc.want {
				t.Fatalf("server cookie %x, want %s", got, tc.want)
			}
			if !secretOf(t, secret).valid(client, got[:], ip, tc.now+10) {
				t.Fatal("own cookie not valid")
			}
		})
	}
	// A.3: a cookie with reserved bytes set by another implementation is
	// hashed as presented. A.4: an IPv6 client, cookie of the old secret.
	for _, tc := range []struct {
		name, secret, ip, cookie string
		now                      uint32
		valid                    bool
	}{
		{"A.3 reserved bytes", secret, "203.0.113.203", "fc93fc62807ddb8601abcdef5cf78f71a314227b6679ebf5", 0x5cf78f71 + 10, true},
		{"A.3 from another address", secret, "203.0.113.204", "fc93fc62807ddb8601abcdef5cf78f71a314227b6679ebf5", 0x5cf78f71 + 10, false},
		{"A.4 IPv6, old secret", "dd3bdf9344b678b185a6f5cb60fca715", "2001:db8:220:1:59de:d0f4:8769:82b8", "22681ab97d52c298010000005cf7c57926556bd0934c72f8", 1559741817, true},
		{"A.4 IPv6, new secret", "445536bcd2513298075a5d379663c962", "2001:db8:220:1:59de:d0f4:8769:82b8", "22681ab97d52c298010000005cf7c57926556bd0934c72f8", 1559741817, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseCookie(mustHex(t, tc.cookie))
			if err != nil {
				t.Fatal(err)
			}
			if got := secretOf(t, tc.secret).valid(c.client, c.server, netip.MustParseAddr(tc.ip), tc.now); got != tc.valid {
				t.Fatalf("valid = %v, want %v", got, tc.valid)
			}
		})
	}
}

// RFC 7873, Section 5.2.2: 8 bytes, or 16 to 40; anything else is FORMERR.
// No truncated prefix of a longer valid cookie between 9 and 15 parses.
func TestParseCookie(t *testing.T) {
	for n := range 48 {
		c, err := parseCookie(make([]byte, n))
		wantOK := n == 8 || n >= 16 && n <= 40
		if (err == nil) != wantOK {
			t.Errorf("%d bytes: err %v, want ok %v", n, err, wantOK)
		}
		if err == nil && len(c.server) != n-8 {
			t.Errorf("%d bytes: server cookie of %d", n, len(c.server))
		}
		if err != nil && !strings.HasPrefix(err.Error(), "authority: ") {
			t.Errorf("error without the package prefix: %v", err)
		}
	}
}

// RFC 9018, Section 4.3: an hour old at most, five minutes ahead at most,
// in serial arithmetic across the wrap of the 32-bit timestamp.
func TestCookieAge(t *testing.T) {
	k := secretOf(t, "000102030405060708090a0b0c0d0e0f")
	ip := netip.MustParseAddr("192.0.2.1")
	client := [8]byte{1, 2, 3, 4, 5, 6, 7, 8}
	for _, tc := range []struct {
		name     string
		made, at uint32
		valid    bool
	}{
		{"now", 1000, 1000, true},
		{"an hour old", 1000, 4600, true},
		{"an hour and a second old", 1000, 4601, false},
		{"five minutes ahead", 1300, 1000, true},
		{"five minutes and a second ahead", 1301, 1000, false},
		{"an hour old across the wrap", 0xffffff00, 3600 - 0x100, true},
	} {
		sc := k.serverCookie(client, ip, tc.made)
		if got := k.valid(client, sc[:], ip, tc.at); got != tc.valid {
			t.Errorf("%s: valid = %v", tc.name, got)
		}
	}
}

// cookieServer is a test server with a fixed secret and a settable
// clock; configure sets its other fields (before the secret starts it).
func cookieServer(t testing.TB, now *time.Time, configure ...func(*Server)) *Server {
	s := testServer(t)
	s.Time = func() time.Time { return *now }
	for _, c := range configure {
		c(s)
	}
	s.SetCookieSecret(*secretOf(t, "e5e973e5a6b2a43f48e7dc849e37bfcf"))
	return s
}

// exchangeFrom runs q through the datagram path as from ip and returns
// the answer (nil when none was sent) and its size.
func exchangeFrom(t testing.TB, s *Server, ip string, q *dns.Msg) (*dns.Msg, int) {
	t.Helper()
	out := &sliceOutlet{remote: netip.MustParseAddr(ip)}
	raw := packQuery(t, q)
	s.serveMsg(t.Context(), raw, &responder{srv: s, t: TransportUDP, out: out})
	if len(out.sent) == 0 {
		return nil, 0
	}
	return unpackOne(t, TransportUDP, out.sent)
}

func cookieOf(m *dns.Msg) string {
	if opt := m.IsEdns0(); opt != nil {
		for _, o := range opt.Option {
			if c, ok := o.(*dns.EDNS0_COOKIE); ok {
				return c.Cookie
			}
		}
	}
	return ""
}

func withCookie(m *dns.Msg, hexCookie string) *dns.Msg {
	if m.IsEdns0() == nil {
		m.SetEdns0(1232, false)
	}
	opt := m.IsEdns0()
	opt.Option = append(opt.Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: hexCookie})
	return m
}

// The cookie exchange of RFC 7873, Section 5.2, through the server.
func TestCookieExchange(t *testing.T) {
	now := time.Unix(1559731985, 0)
	s := cookieServer(t, &now)
	const client = "2464c4abcf10c957"

	// Only a client cookie: answered, with the RFC 9018 A.1 cookie.
	m, _ := exchangeFrom(t, s, "198.51.100.100", withCookie(query("www.example.org.", dns.TypeA), client))
	if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 2 {
		t.Fatalf("answer %v", m)
	}
	if got := cookieOf(m); got != "2464c4abcf10c957010000005cf79f111f8130c3eee29480" {
		t.Fatalf("cookie %q", got)
	}
	full := cookieOf(m)

	// Presented back: valid; the answer carries a fresh cookie.
	now = now.Add(40 * time.Minute)
	m, _ = exchangeFrom(t, s, "198.51.100.100", withCookie(query("www.example.org.", dns.TypeA), full))
	if got := cookieOf(m); got != "2464c4abcf10c957010000005cf7a871d4a564a1442aca77" {
		t.Fatalf("renewed cookie %q", got)
	}
	if st := s.Stats(); st.CookiesValid != 1 || st.CookiesIssued != 1 {
		t.Fatalf("stats %+v", st)
	}
	// From another address, or too old, the same cookie is not valid
	// and a new one is issued.
	exchangeFrom(t, s, "198.51.100.101", withCookie(query("www.example.org.", dns.TypeA), full))
	now = now.Add(time.Hour)
	m, _ = exchangeFrom(t, s, "198.51.100.100", withCookie(query("www.example.org.", dns.TypeA), full))
	if st := s.Stats(); st.CookiesValid != 1 || st.CookiesIssued != 3 || len(cookieOf(m)) != 48 {
		t.Fatalf("stats %+v, cookie %q", st, cookieOf(m))
	}

	// Rotation: a cookie of the previous secret is still valid, not one
	// of the secret before that.
	m, _ = exchangeFrom(t, s, "198.51.100.100", withCookie(query("www.example.org.", dns.TypeA), client))
	fresh := cookieOf(m)
	s.RotateCookieSecret()
	exchangeFrom(t, s, "198.51.100.100", withCookie(query("www.example.org.", dns.TypeA), fresh))
	if s.Stats().CookiesValid != 2 {
		t.Fatal("a cookie of the previous secret is not valid after one rotation")
	}
	s.RotateCookieSecret()
	exchangeFrom(t, s, "198.51.100.100", withCookie(query("www.example.org.", dns.TypeA), fresh))
	if s.Stats().CookiesValid != 2 {
		t.Fatal("a cookie two secrets old is still valid")
	}
}

// RFC 7873, Section 5.2.2: a malformed COOKIE option gets FORMERR, on
// every transport, with no cookie in the answer.
func TestMalformedCookieFormErr(t *testing.T) {
	now := time.Unix(1559731985, 0)
	s := cookieServer(t, &now)
	for _, c := range []string{"", "01", "01020304050607", "010203040506070809", "0102030405060708090a0b0c0d0e0f", strings.Repeat("ab", 41)} {
		m, _ := exchangeFrom(t, s, "192.0.2.1", withCookie(query("www.example.org.", dns.TypeA), c))
		if m == nil || m.Rcode != dns.RcodeFormatError || len(m.Answer) != 0 || cookieOf(m) != "" {
			t.Errorf("cookie of %d bytes: %v", len(c)/2, m)
		}
		for _, tr := range []Transport{TransportTCP, TransportTLS} {
			out := &sliceOutlet{remote: netip.MustParseAddr("192.0.2.1")}
			s.serveMsg(t.Context(), packQuery(t, withCookie(query("www.example.org.", dns.TypeA), c)), &responder{srv: s, t: tr, out: out})
			if m, _ := unpackOne(t, tr, out.sent); m.Rcode != dns.RcodeFormatError {
				t.Errorf("%v, cookie of %d bytes: rcode %s", tr, len(c)/2, dns.RcodeToString[m.Rcode])
			}
		}
	}
	if got := s.Stats().CookiesMalformed; got != 18 {
		t.Errorf("CookiesMalformed = %d, want 18", got)
	}
	// With cookies off the option is ignored.
	s.DisableCookies = true
	if m, _ := exchangeFrom(t, s, "192.0.2.1", withCookie(query("www.example.org.", dns.TypeA), "01")); m.Rcode != dns.RcodeSuccess || cookieOf(m) != "" {
		t.Errorf("cookies off: %v", m)
	}
}
