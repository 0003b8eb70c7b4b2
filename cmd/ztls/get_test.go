package main

import (
	"bytes"
	"net/url"
	"strings"
	"testing"
)

// responseSplit finds the header's end however dial's writes cut the
// response, passes interim responses' headers on, and drops a failed
// response whole under --fail.
func TestResponseSplit(t *testing.T) {
	const interim = "HTTP/1.1 100 Continue\r\n\r\n"
	const ok = "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n"
	const notFound = "HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\n"
	for _, tc := range []struct {
		name, resp string
		fail       bool
		head, body string
		status     int
	}{
		{"200", ok + "body", false, ok, "body", 200},
		{"100 then 200", interim + ok + "body", false, interim + ok, "body", 200},
		{"404", notFound + "gone", false, notFound, "gone", 404},
		{"404 --fail", notFound + "gone", true, "", "", 404},
		{"200 --fail", ok + "body", true, ok, "body", 200},
		{"not HTTP", "hello", true, "", "hello", 0},
	} {
		for _, size := range []int{1, 3, 1 << 10} {
			var head, body bytes.Buffer
			s := &responseSplit{head: &head, body: &body, fail: tc.fail}
			for r := tc.resp; r != ""; {
				n := min(size, len(r))
				s.Write([]byte(r[:n]))
				r = r[n:]
			}
			if head.String() != tc.head || body.String() != tc.body || s.Status() != tc.status {
				t.Errorf("%s in writes of %d: head %q, body %q, status %d", tc.name, size, head.String(), body.String(), s.Status())
			}
		}
	}
}

// The request get writes: the defaults less what -H replaces or leaves
// out, -H's headers, the body framed by Content-Length.
func TestGetRequestHTTP11(t *testing.T) {
	u, _ := url.Parse("https://www.ztls.test:8443/p?q=1")
	for _, tc := range []struct {
		flags getFlags
		want  string
	}{
		{getFlags{}, "GET /p?q=1 HTTP/1.1\r\nHost: www.ztls.test:8443\r\nUser-Agent: ztls\r\nConnection: close\r\n\r\n"},
		{getFlags{head: true, headers: []string{"User-Agent: x", "Connection:"}}, "HEAD /p?q=1 HTTP/1.1\r\nHost: www.ztls.test:8443\r\nUser-Agent: x\r\n\r\n"},
		{getFlags{data: []string{"a=1", "b=2"}}, "POST /p?q=1 HTTP/1.1\r\nHost: www.ztls.test:8443\r\nUser-Agent: ztls\r\nConnection: close\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 7\r\n\r\na=1&b=2"},
		{getFlags{method: "DELETE"}, "DELETE /p?q=1 HTTP/1.1\r\nHost: www.ztls.test:8443\r\nUser-Agent: ztls\r\nConnection: close\r\n\r\n"},
	} {
		r, err := tc.flags.build()
		if err != nil {
			t.Fatal(err)
		}
		if got := string(r.http11(u)); got != tc.want {
			t.Errorf("%+v:\n got %q\nwant %q", tc.flags, got, tc.want)
		}
	}
	if _, err := (&getFlags{headers: []string{"Content-Length: 3"}}).build(); err == nil || !strings.Contains(err.Error(), "frames the body") {
		t.Errorf("-H Content-Length: %v", err)
	}
}

// A request line alone becomes the request it stands for; anything else
// is sent as given.
func TestCompleteRequest(t *testing.T) {
	f := &connectFlags{}
	for in, want := range map[string]string{
		"GET /":                  "GET / HTTP/1.1\r\nHost: www.ztls.test:8443\r\nUser-Agent: ztls\r\nConnection: close\r\n\r\n",
		"HEAD /x HTTP/1.0\n":     "HEAD /x HTTP/1.0\r\nHost: www.ztls.test:8443\r\nUser-Agent: ztls\r\nConnection: close\r\n\r\n",
		"POST /f":                "POST /f HTTP/1.1\r\nHost: www.ztls.test:8443\r\nUser-Agent: ztls\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
		"GET / HTTP/1.1\r\n\r\n": "GET / HTTP/1.1\r\n\r\n",
		"GET key":                "GET key",
		"ping":                   "ping",
	} {
		if got := string(f.completeRequest([]byte(in), "www.ztls.test:8443")); got != want {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
	if got := hostHeader("127.0.0.1:443", "www.ztls.test"); got != "www.ztls.test" {
		t.Errorf("hostHeader with --servername on 443: %q", got)
	}
	if got := hostHeader("[::1]:443", ""); got != "[::1]" {
		t.Errorf("hostHeader of an IPv6 address on 443: %q", got)
	}
}
