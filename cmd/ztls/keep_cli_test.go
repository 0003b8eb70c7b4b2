package main

// `serve --zdata` keeps its Z-data current by itself (issue 16, point 3):
// a directory whose keys ran out gets a new one at start and the records
// are pushed to the primary; without rotation the server says "0 live
// Z-data keys" loudly.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ztls-project/ztls/internal/testsupport/dnstest"
)

// emptyKeys removes every key of a Z-data directory, as if it had not
// been rotated for hours.
func emptyKeys(t *testing.T, zd string) {
	t.Helper()
	keys, _ := filepath.Glob(filepath.Join(zd, "keys", "*"))
	if len(keys) == 0 {
		t.Fatalf("no keys in %s", zd)
	}
	for _, k := range keys {
		if err := os.Remove(k); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCLIServeWarnsWithoutLiveKeys(t *testing.T) {
	s := newSite(t)
	emptyKeys(t, s.zd)
	_, log, cmd := startProc(t, "0 live Z-data keys", "serve", "--listen", "127.0.0.1:"+strconv.Itoa(s.port), "--zdata", s.zd,
		"--respond", "hello", "--rotate=false")
	defer stopCmd(cmd)
	log.waitFor(t, "live_keys=0")
	// With rotation (the default) the same directory gets its key at start.
	stopCmd(cmd)
	_, log, cmd = startProc(t, "added key", "serve", "--listen", "127.0.0.1:"+strconv.Itoa(s.port), "--zdata", s.zd, "--respond", "hello")
	defer stopCmd(cmd)
	// One live key, or two within the freshness window after the hour,
	// when the ending key is still live (tls13.ZDataLive).
	if live := logAttr(log.waitFor(t, "ZTLS on"), "live_keys"); live != "1" && live != "2" {
		t.Fatalf("live_keys=%s after a start with rotation", live)
	}
}

func TestCLIServeRotatesAndPublishes(t *testing.T) {
	if dnstest.BindPath() == "" {
		t.Skip("BIND 9 (named) not installed: make deps installs it")
	}
	s := newSite(t)
	emptyKeys(t, s.zd)
	const secret = "c2VjcmV0LWtleS1mb3ItenRscy1wdWJsaXNoLXRlc3Rz"
	bind := dnstest.StartBind(t, dnstest.BindOptions{
		Zones: []dnstest.BindZone{{Origin: "ztls.test.", Text: testZone, AllowUpdate: true}},
		Key:   &dnstest.BindKey{Name: "ztls-key", Algorithm: "hmac-sha256", Secret: secret},
	})
	_, log, cmd := startProc(t, "published", "serve", "--listen", "127.0.0.1:"+strconv.Itoa(s.port), "--zdata", s.zd,
		"--respond", "hello", "--publish", bind.Addr, "--publish-zone", "ztls.test", "--tsig-name", "ztls-key", "--tsig-secret", secret)
	defer stopCmd(cmd)
	log.waitFor(t, "ZTLS on")
	var chk checkReport
	if err := json.Unmarshal([]byte(run(t, "zdata", "check", s.host, "--port", strconv.Itoa(s.port),
		"--resolver", bind.Addr, "--ca", s.ca, "--json")), &chk); err != nil {
		t.Fatal(err)
	}
	if !chk.Valid {
		t.Fatalf("zdata check after serve rotated and published: %+v", chk)
	}
	// The HTTPS record went with the TXT set, so the client takes the
	// Z-data from it (the default) and never asks TXT.
	rep := s.connect(t, bind.Addr)
	wantZTLS(t, rep)
	if rep.ZDataFrom != "https" {
		t.Fatalf("Z-data from %q, want the HTTPS record serve --publish pushed", rep.ZDataFrom)
	}
}

// serve --zdata on another port than the Z-data's says so at start.
func TestCLIServeWarnsOtherPort(t *testing.T) {
	s := newSite(t)
	other := freePort(t)
	_, _, cmd := startProc(t, "differs from the Z-data's port", "serve", "--listen", "127.0.0.1:"+strconv.Itoa(other), "--zdata", s.zd, "--respond", "hello")
	stopCmd(cmd)
}

// dns serve alone on a Z-data directory rotates it too: keys that ran
// out are replaced at start, and the records it serves are on disk for
// the server to load.
func TestCLIDNSServeRotatesAlone(t *testing.T) {
	s := newSite(t)
	emptyKeys(t, s.zd)
	zone := filepath.Join(s.dir, "ztls.test.zone")
	writeFile(t, zone, testZone)
	line, _, cmd := startProc(t, "serving udp on", "dns", "serve", "--zone", zone, "--zdata", s.zd, "--listen", "127.0.0.1:0")
	defer stopCmd(cmd)
	addr := logAttr(line, "addr")
	got := run(t, "lookup", "_ztls._"+strconv.Itoa(s.port)+"._tcp.www.ztls.test", "--resolver", addr, "--type", "TXT", "+short")
	if !strings.Contains(got, "v=ztls1") {
		t.Fatalf("no Z-data served: %q", got)
	}
	keys, _ := filepath.Glob(filepath.Join(s.zd, "keys", "*.json"))
	if len(keys) == 0 {
		t.Fatal("the rotated keys are not on disk")
	}
}
