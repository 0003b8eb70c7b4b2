package authority

import (
	"context"
	"net"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// runDig runs BIND 9's dig against addr and returns what it printed.
func runDig(t *testing.T, addr string, args ...string) string {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	all := append([]string{"@" + host, "-p", port, "+norec", "+notcp", "+time=2", "+tries=2"}, args...)
	out, err := exec.CommandContext(ctx, "dig", all...).CombinedOutput()
	if err != nil {
		t.Fatalf("dig %s: %v\n%s", strings.Join(all, " "), err, out)
	}
	return string(out)
}

var (
	digCookie = regexp.MustCompile(`; COOKIE: ([0-9a-f]{48}) \(good\)`)
	digFlags  = regexp.MustCompile(`;; flags: ([a-z ]*);`)
	digCounts = regexp.MustCompile(`ANSWER: (\d+),`)
	digStatus = regexp.MustCompile(`status: ([A-Z]+),`)
)

// Interop with real BIND 9 dig: it learns the server cookie (and judges
// it good), presents it to get the large Z-data-sized answer over UDP in
// full, is truncated without it, gets one RRset for ANY (RFC 8482), and
// a malformed COOKIE option gets FORMERR.
func TestDigCookiesAndANY(t *testing.T) {
	if _, err := exec.LookPath("dig"); err != nil {
		t.Skip("dig (BIND 9, Debian package bind9-dnsutils) is not installed: apt-get install bind9-dnsutils")
	}
	s := testServer(t)
	s.AmplificationFloor = -1 // the factor alone: the 700-byte answer is over 10x the query
	a, _ := startServer(t, s)

	out := runDig(t, a.udp, "+cookie", "www.example.org", "ANY")
	cookie := digCookie.FindStringSubmatch(out)
	if cookie == nil {
		t.Fatalf("dig saw no good server cookie:\n%s", out)
	}
	if n := digCounts.FindStringSubmatch(out); n == nil || n[1] != "1" || !strings.Contains(out, "AAAA\t2001:db8::1") {
		t.Fatalf("ANY not answered with one RRset:\n%s", out)
	}

	// Without a valid cookie the 8 TXT records (~700 bytes) exceed 10x
	// the query: TC=1 (+ignore keeps dig from retrying over TCP).
	out = runDig(t, a.udp, "+nocookie", "+ignore", "+bufsize=1232", "big.example.org", "TXT")
	if f := digFlags.FindStringSubmatch(out); f == nil || !strings.Contains(f[1], "tc") {
		t.Fatalf("no cookie: want TC=1:\n%s", out)
	}
	out = runDig(t, a.udp, "+cookie="+cookie[1], "+ignore", "+bufsize=1232", "big.example.org", "TXT")
	if f := digFlags.FindStringSubmatch(out); f == nil || strings.Contains(f[1], "tc") {
		t.Fatalf("valid cookie: want no TC:\n%s", out)
	}
	if n := digCounts.FindStringSubmatch(out); n == nil || n[1] != "8" || digCookie.FindStringSubmatch(out) == nil {
		t.Fatalf("valid cookie: want 8 records and a good cookie back:\n%s", out)
	}
	if s.Stats().CookiesValid != 1 {
		t.Fatalf("the server did not see dig's cookie as valid: %+v", s.Stats())
	}

	for _, bad := range []string{"0102", "010203040506070809"} {
		out = runDig(t, a.udp, "+nocookie", "+ednsopt=10:"+bad, "www.example.org", "A")
		if st := digStatus.FindStringSubmatch(out); st == nil || st[1] != "FORMERR" {
			t.Fatalf("COOKIE of %d bytes: want FORMERR:\n%s", len(bad)/2, out)
		}
	}
}
