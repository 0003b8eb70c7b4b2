package main

// Bloom filter encryption through the real binaries on loopback
// (docs/ztls-spec.md, Section 7): zdata new --bfe-connections → dns serve →
// serve → connect, with and without BFE on the client, zdata show's fill,
// and an OpenSSL client doing plain TLS 1.3 with the BFE server.

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
)

func TestCLIBFE(t *testing.T) {
	dir := t.TempDir()
	s := newSite(t) // CA and port; the Z-data is made again with BFE below
	// rotate --bfe-connections gives an existing directory BFE keys.
	if out := run(t, "zdata", "rotate", s.zd, "--bfe-connections", "16"); !strings.Contains(out, `"v=ztls2"`) {
		t.Fatalf("zdata rotate --bfe-connections printed no v2 record:\n%s", out)
	}
	leaf := s.authority.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256", DNSNames: []string{s.host}})
	cert, key := leaf.WritePEM(t, dir)
	s.zd = filepath.Join(dir, "zd")
	out := run(t, "zdata", "new", "--host", s.host, "--port", strconv.Itoa(s.port), "--cert", cert, "--key", key,
		"--out", s.zd, "--bfe-connections", "64", "--bfe-fp-rate", "0.05")
	if !strings.Contains(out, `"v=ztls2"`) || !strings.Contains(out, `"bfe=`) || !strings.Contains(out, `"v=ztls1"`) {
		t.Fatalf("zdata new printed no v1 and v2 twins:\n%s", out)
	}
	if show := run(t, "zdata", "show", s.zd); !strings.Contains(show, "BFE m=") || !strings.Contains(show, "0 punctured") {
		t.Fatalf("zdata show before:\n%s", show)
	}

	zone := filepath.Join(dir, "ztls.test.zone")
	os.WriteFile(zone, []byte(testZone), 0o644)
	line := start(t, "serving udp on", "dns", "serve", "--zone", zone, "--zdata", s.zd, "--listen", "127.0.0.1:0")
	dnsAddr := logAttr(line, "addr")
	_, log := startLog(t, "ZTLS on", "serve", "--listen", "127.0.0.1:"+strconv.Itoa(s.port), "--zdata", s.zd,
		"--respond", "hello", "--early-window", "300ms")

	// A BFE client: early data under ZS || K_bfe, answered in the first flight.
	rep := s.connect(t, dnsAddr)
	wantZTLS(t, rep)
	if !rep.EarlyData.BFE {
		t.Fatalf("early data did not use the BFE key: %+v", rep.EarlyData)
	}
	log.waitFor(t, "BFE: fill")
	// The live key (listed first) is punctured; the next one is not.
	show := run(t, "zdata", "show", s.zd)
	if i := strings.Index(show, "BFE m="); i < 0 || strings.Contains(strings.SplitN(show[i:], "\n", 2)[0], ": 0 punctured") {
		t.Fatalf("zdata show after a BFE connection:\n%s", show)
	}

	// A client without BFE uses the v1 record: plain ZTLS, as before (the
	// v1 path keeps the strike register, which refuses early data for one
	// window after the start).
	time.Sleep(350 * time.Millisecond)
	rep = s.connect(t, dnsAddr, "--no-bfe")
	wantZTLS(t, rep)
	if rep.EarlyData.BFE {
		t.Fatal("--no-bfe client used BFE")
	}

	// Plain TLS 1.3 from our client and from OpenSSL.
	if rep := s.connect(t, dnsAddr, "--mode", "tls"); rep.Mode != "tls" || rep.EarlyData.Offered {
		t.Fatalf("--mode tls: %+v", rep)
	}
	if _, err := exec.LookPath("openssl"); err == nil {
		cmd := exec.Command("openssl", "s_client", "-connect", "127.0.0.1:"+strconv.Itoa(s.port), "-tls1_3",
			"-servername", s.host, "-CAfile", s.ca, "-verify_return_error", "-brief")
		cmd.Stdin = strings.NewReader("")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "TLSv1.3") {
			t.Fatalf("openssl s_client: %v\n%s", err, out)
		}
	}
}

// A BFE fleet through the binaries: two members (127.0.0.1 and 127.0.0.2,
// the same port), each with its own Z-data directory made from the same
// seed and certificate, so the same keys and BFE keys; punctures shared in
// Redis. For the v2 records the strike register is not consulted, so the
// refusals below are the BFE key's. A captured first flight reaches an
// application once: replayed to the other member and to the same one it is
// refused as punctured; the other member erased the slots it learnt of.
// With Redis down, early data is refused (fail closed).
func TestCLIFleetBFE(t *testing.T) { fleetBFE(t) }

// TestCLIFleetBFEAtRollover is TestCLIFleetBFE with the clock of its
// processes (and of its flights) in the last minutes of an hour, when the
// next period's twin is published, in the last minute and just after the
// rollover. In the last minute the test's client took the next period's
// twin, which no member takes before its not-before: its flights were
// refused (no live record), on a flight started after xx:59:00 also the
// fresh one that TestCLIFleetBFE expects member 1 to accept.
func TestCLIFleetBFEAtRollover(t *testing.T) {
	for _, at := range []string{"57:30", "59:30", "00:05"} {
		t.Run(at, func(t *testing.T) {
			t.Setenv(clock.EnvOffset, offsetReading(t, at))
			fleetBFE(t)
		})
	}
}

// fleetBFE is TestCLIFleetBFE on the clock of the processes it starts
// (procNow).
func fleetBFE(t *testing.T) {
	s := newSite(t)
	redis, stopRedis := startRedis(t)
	// A Redis whose memory has been complete for two hours (this one is
	// new, which would refuse the current epoch's early data as if it had
	// lost punctures): the markers the register keeps, one per hash tag,
	// naming the Redis process (run_id and master_replid).
	runID := ""
	for _, l := range strings.Split(redisCLI(t, redis, "INFO", "server")+redisCLI(t, redis, "INFO", "replication"), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "run_id:"); ok {
			runID = v + runID
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "master_replid:"); ok {
			runID += v
		}
	}
	since := procNow(t).Add(-2 * time.Hour).UnixMilli()
	for i := range 16 {
		redisCLI(t, redis, "SET", "ztls:strike:{s"+strconv.Itoa(i)+"}marker", "since "+strconv.FormatInt(since, 10)+" "+runID)
	}

	dir := t.TempDir()
	leaf := s.authority.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256", DNSNames: []string{s.host}})
	cert, key := leaf.WritePEM(t, dir)
	seed := filepath.Join(dir, "fleet.seed")
	writeFile(t, seed, "0123456789abcdef0123456789abcdef")
	os.Chmod(seed, 0o600)
	p := strconv.Itoa(s.port)
	var logs []*logLines
	var dirs []string
	for i, ip := range []string{"127.0.0.1", "127.0.0.2"} {
		zd := filepath.Join(dir, "zd"+strconv.Itoa(i))
		// k = 5 hashes (at 0.001): the fresh flight below must not be a
		// false positive. At 0.05 the key had k = 1 of m = 624 slots, so a
		// fresh ciphertext hit the one slot the replay punctured one time
		// in 624 (seen once, in a CI-like run).
		run(t, "zdata", "new", "--host", s.host, "--port", p, "--cert", cert, "--key", key, "--out", zd,
			"--seed-file", seed, "--bfe-connections", "32", "--bfe-fp-rate", "0.001")
		_, log := startLog(t, "ZTLS on", "serve", "--zdata", zd, "--respond", "hello", "-v",
			"--strike-register", "redis://"+redis, "--listen", ip+":"+p)
		logs, dirs = append(logs, log), append(dirs, zd)
	}
	s.zd = dirs[0]

	flight := ztlsFlight(t, s, []byte("GET /transfer?amount=100")) // the v2 record with bfe=: a BFE flight
	deliver(t, "127.0.0.1:"+p, flight)
	logs[0].waitFor(t, "ZTLS accepted with BFE")
	deliver(t, "127.0.0.2:"+p, flight)
	logs[1].waitFor(t, "rejected (BFE: bfe: ciphertext's positions are punctured")
	deliver(t, "127.0.0.1:"+p, flight)
	logs[0].waitFor(t, "rejected (BFE: bfe: ciphertext's positions are punctured")
	show := run(t, "zdata", "show", dirs[1])
	if i := strings.Index(show, "BFE m="); i < 0 || strings.Contains(strings.SplitN(show[i:], "\n", 2)[0], ": 0 punctured") {
		t.Fatalf("member 1 did not erase the slots member 0 punctured:\n%s", show)
	}

	// A fresh flight to member 1: accepted (the fleet holds one key).
	deliver(t, "127.0.0.2:"+p, ztlsFlight(t, s, []byte("GET /transfer?amount=100")))
	logs[1].waitFor(t, "ZTLS accepted with BFE")

	// Redis down: the BFE key's early data is refused, the connection served.
	stopRedis()
	deliver(t, "127.0.0.1:"+p, ztlsFlight(t, s, []byte("GET /transfer?amount=100")))
	logs[0].waitFor(t, "rejected (BFE: ")
}

// redisCLI runs one Redis command with redis-cli and returns its output.
func redisCLI(t *testing.T, addr string, args ...string) string {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	out, err := exec.Command("redis-cli", append([]string{"-h", host, "-p", port}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// --bfe-sizing picks k for the same false-positive rate, is kept in the
// directory's config, and survives a rotate that changes another BFE flag.
func TestCLIBFESizing(t *testing.T) {
	s := newSite(t)
	run(t, "zdata", "rotate", s.zd, "--bfe-connections", "16", "--bfe-sizing", "smallest-key")
	if show := run(t, "zdata", "show", s.zd); !strings.Contains(show, "BFE m=231 k=10:") {
		t.Fatalf("zdata show after --bfe-sizing smallest-key:\n%s", show)
	}
	run(t, "zdata", "rotate", s.zd, "--bfe-fp-rate", "0.01")
	cfg := string(readTestFile(t, filepath.Join(s.zd, "service.json")))
	for _, want := range []string{`"bfe_connections": 16`, `"bfe_false_positive_rate": 0.01`, `"bfe_sizing": "smallest-key"`} {
		if !strings.Contains(cfg, want) {
			t.Errorf("service.json lacks %s:\n%s", want, cfg)
		}
	}

	// The default is fewest-hashes, which is not written out.
	fresh := newSite(t)
	run(t, "zdata", "rotate", fresh.zd, "--bfe-connections", "16")
	if show := run(t, "zdata", "show", fresh.zd); !strings.Contains(show, "BFE m=279 k=5:") {
		t.Fatalf("zdata show with the default sizing:\n%s", show)
	}
	if cfg := string(readTestFile(t, filepath.Join(fresh.zd, "service.json"))); strings.Contains(cfg, "bfe_sizing") {
		t.Errorf("service.json names the default sizing:\n%s", cfg)
	}

	out, err := exec.Command(ztlsBinary(t), "zdata", "rotate", fresh.zd, "--bfe-sizing", "smallest").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--bfe-sizing") {
		t.Fatalf("--bfe-sizing smallest: %v\n%s", err, out)
	}
}

func readTestFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
