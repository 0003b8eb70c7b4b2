package main

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/ztls-project/ztls/tls13"
)

// serve --log-format json writes one JSON object per line with time,
// level and msg, and a TSIG secret given on the command line never
// reaches the log, even when publishing with it fails.
func TestCLIServeJSONLogsWithoutSecrets(t *testing.T) {
	s := newSite(t)
	const secret = "c2VjcmV0LW5ldmVyLWxvZ2dlZC10c2lnLWtleQ=="
	failed, log, cmd := startProc(t, `"msg":"Z-data: publishing failed`, "--log-format", "json", "serve", "--listen", "127.0.0.1:"+strconv.Itoa(s.port),
		"--zdata", s.zd, "--respond", "hello", "-v",
		"--publish", "127.0.0.1:1", "--publish-zone", "ztls.test", "--tsig-name", "k", "--tsig-secret", secret)
	defer stopCmd(cmd)
	ready := log.waitFor(t, `"msg":"ZTLS on"`)
	var rec map[string]any
	if err := json.Unmarshal([]byte(ready), &rec); err != nil {
		t.Fatalf("not a JSON log line: %q: %v", ready, err)
	}
	for _, k := range []string{"time", "level", "msg", "live_keys"} {
		if _, ok := rec[k]; !ok {
			t.Fatalf("log line without %q: %s", k, ready)
		}
	}
	// A connection (crypto/tls): one more line.
	roots, err := tls13.LoadCertPool(s.ca)
	if err != nil {
		t.Fatal(err)
	}
	c, err := tls.Dial("tcp", "127.0.0.1:"+strconv.Itoa(s.port), &tls.Config{ServerName: s.host, RootCAs: roots})
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("GET /"))
	io.ReadAll(c)
	c.Close()
	log.waitFor(t, `"msg":"connection"`)
	stopCmd(cmd)
	log.mu.Lock()
	defer log.mu.Unlock()
	for _, l := range append(log.lines, ready, failed) {
		if strings.Contains(l, secret) {
			t.Fatalf("the TSIG secret is in the log: %s", l)
		}
		if !json.Valid([]byte(l)) {
			t.Fatalf("not JSON: %q", l)
		}
	}
}

// logAttr returns the value of key in a text-format log line (key=value
// or key="quoted value"), or "".
func logAttr(line, key string) string {
	i := strings.Index(line, " "+key+"=")
	if i < 0 {
		return ""
	}
	v := line[i+len(key)+2:]
	if strings.HasPrefix(v, `"`) {
		if s, err := strconv.QuotedPrefix(v); err == nil {
			u, _ := strconv.Unquote(s)
			return u
		}
	}
	if j := strings.IndexByte(v, ' '); j >= 0 {
		v = v[:j]
	}
	return v
}
