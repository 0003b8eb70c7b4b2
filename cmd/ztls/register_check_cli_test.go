package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/internal/testsupport/testproc"
)

// 'ztls register check' reports what a server would find in the
// register's Redis, and its exit status says whether early data made now
// would be taken; the password (from the environment here) never shows.
func TestCLIRegisterCheck(t *testing.T) {
	redis, _ := startRedis(t, "--requirepass", strikePassword)
	check := func(env ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, ztlsBinary(t), "register", "check", "redis://"+redis)
		cmd.Env = append(cmd.Environ(), env...)
		out, err := cmd.CombinedOutput()
		noPassword(t, string(out))
		return string(out), err
	}
	// A Redis no server has used: no tag's memory is known yet.
	out, err := check(envRedisPassword + "=" + strikePassword)
	if err == nil || !strings.Contains(out, "mode: single") || !strings.Contains(out, "maxmemory-policy: noeviction") ||
		!strings.Contains(out, "latency: ") || !strings.Contains(out, "unknown for 16 of 16 tags") {
		t.Fatalf("fresh Redis: %v\n%s", err, out)
	}
	out, err = check(envRedisPassword + "=wrong-" + passwordMark)
	if err == nil || !strings.Contains(out, "AUTH refused") {
		t.Fatalf("wrong password: %v\n%s", err, out)
	}
}

// 'serve --metrics' with a shared register exports its round trips to
// Redis, their time and their errors: a first flight checked in Redis
// counts round trips; with Redis gone, the next one counts an error.
func TestCLIStrikeRegisterMetrics(t *testing.T) {
	redis, stopRedis := startRedis(t)
	s := newSite(t)
	addr := "127.0.0.1:" + strconv.Itoa(s.port)
	ready, _, cmd := startProc(t, "metrics on", "serve", "--listen", addr, "--zdata", s.zd, "--respond", "hello",
		"--strike-register", "redis://"+redis, "--metrics", "127.0.0.1:0")
	defer stopCmd(cmd)
	url := strings.TrimSpace(ready[strings.Index(ready, "http://"):])
	deliver(t, addr, ztlsFlight(t, s, []byte("GET /transfer?amount=100")))
	var m map[string]float64
	waitMetric := func(name string, min float64) {
		t.Helper()
		for i := 0; i < 100; i++ {
			if m = scrape(t, url); m[name] >= min {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("%s = %v, want at least %v", name, m[name], min)
	}
	waitMetric("ztls_strike_register_round_trips_total", 1)
	if m["ztls_strike_register_round_trip_seconds_total"] <= 0 || m["ztls_strike_register_redis_errors_total"] != 0 {
		t.Fatalf("after one flight: %v", m)
	}
	stopRedis()
	deliver(t, addr, ztlsFlight(t, s, []byte("GET /transfer?amount=100")))
	waitMetric("ztls_strike_register_redis_errors_total", 1)
}

// TestDeployFleetSentinelExample: deploy/fleet-sentinel's configuration,
// as written, on loopback. Its redis.conf and sentinel.conf run three
// Redis servers (a primary and two replicas) and three Sentinels, with
// only the addresses, ports, file paths and passwords replaced (every
// replacement must find its text, so the test follows the files); the
// systemd drop-in's --strike-register URL and flags, with the same
// replacements, are what 'ztls register check' and 'ztls serve' are
// given, before and after a Sentinel failover. This checks the files'
// syntax, the ACL users' rights (the replicas' user replicates, the
// Sentinels' user monitors and fails over, the register's user runs the
// scripts), mutual TLS with IP-address certificates, and the drop-in's
// command line; not real hosts, systemd or its credentials (%d is a
// directory the test makes).
func TestDeployFleetSentinelExample(t *testing.T) {
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skip(bin + " not installed (make deps installs redis-server and redis-tools)")
		}
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "fleet-sentinel", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	redisConf, sentinelConf, dropIn := read("redis.conf"), read("sentinel.conf"), read("ztls-serve.service.d/strike-register.conf")

	dir := t.TempDir()
	ca := testpki.NewCA(t, "ecdsa-p256")
	caFile := ca.WritePEM(t, dir)
	// Each host's certificate names its IP address (the Sentinels name
	// the primary by address); it is its client certificate too.
	hostCert, hostKey := ca.Issue(t, testpki.LeafOpts{Client: true, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}}).WritePEM(t, dir)
	memberCert, memberKey := ca.Issue(t, testpki.LeafOpts{Client: true}).WritePEM(t, dir)
	var redisPorts, sentinelPorts [3]int
	for i := range 3 {
		redisPorts[i], sentinelPorts[i] = freePort(t), freePort(t)
	}
	replace := func(text string, pairs ...string) string {
		t.Helper()
		for i := 0; i < len(pairs); i += 2 {
			if !strings.Contains(text, pairs[i]) {
				t.Fatalf("the example no longer holds %q", pairs[i])
			}
			text = strings.ReplaceAll(text, pairs[i], pairs[i+1])
		}
		return text
	}
	local := func(conf string, host int, port int) string {
		conf = replace(conf, "bind 10.0.0.1", "bind 127.0.0.1", "10.0.0.1 6380", "127.0.0.1 "+strconv.Itoa(redisPorts[0]),
			"/etc/redis/tls/redis.pem", hostCert, "/etc/redis/tls/redis.key", hostKey, "/etc/redis/tls/redis-ca.pem", caFile,
			"CHANGE-ME-sentinel", "sentinel-"+passwordMark)
		conf = regexp.MustCompile(`(?m)^tls-port \d+$`).ReplaceAllString(conf, "tls-port "+strconv.Itoa(port))
		d := filepath.Join(dir, "host"+strconv.Itoa(host)+"-"+strconv.Itoa(port))
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		return conf + "\ndir " + d + "\n"
	}
	for host := range 3 {
		conf := replace(local(redisConf, host, redisPorts[host]), "CHANGE-ME-ztls", strikePassword, "CHANGE-ME-replica", "replica-"+passwordMark)
		if host > 0 {
			conf = replace(conf, "# replicaof", "replicaof")
		}
		startConf(t, dir, "redis"+strconv.Itoa(host)+".conf", conf)
	}
	cli := func(port int, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		all := append([]string{"--tls", "--cacert", caFile, "--cert", memberCert, "--key", memberKey,
			"-h", "127.0.0.1", "-p", strconv.Itoa(port)}, args...)
		out, _ := exec.CommandContext(ctx, "redis-cli", all...).CombinedOutput()
		return string(out)
	}
	waitUntil(t, "the replicas to sync over TLS with the replica user", func() bool {
		info := cli(redisPorts[0], "--user", "ztls", "--pass", strikePassword, "--no-auth-warning", "INFO", "replication")
		return strings.Contains(info, "connected_slaves:2") && strings.Count(info, "state=online") == 2
	})
	for host := range 3 {
		startConf(t, dir, "sentinel"+strconv.Itoa(host)+".conf", local(sentinelConf, host, sentinelPorts[host]), "--sentinel")
	}
	waitUntil(t, "the Sentinels to find each other and the replicas", func() bool {
		for _, p := range sentinelPorts {
			if !strings.HasPrefix(cli(p, "SENTINEL", "CKQUORUM", "ztls"), "OK 3 usable Sentinels") ||
				!strings.Contains(cli(p, "SENTINEL", "MASTER", "ztls"), "num-slaves\n2\n") {
				return false
			}
		}
		return true
	})

	// The drop-in's ExecStart, its continuation lines joined.
	var args []string
	for _, line := range strings.Split(strings.ReplaceAll(dropIn, "\\\n", " "), "\n") {
		if rest, ok := strings.CutPrefix(line, "ExecStart=/usr/local/bin/ztls "); ok {
			args = strings.Fields(rest)
		}
	}
	if len(args) == 0 || args[0] != "serve" || !strings.Contains(dropIn, "LoadCredential=redis.pw:") {
		t.Fatalf("no 'ztls serve' ExecStart or no redis.pw credential in the drop-in:\n%s", dropIn)
	}
	creds := filepath.Join(dir, "credentials")
	if err := os.Mkdir(creds, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(creds, "redis.pw"), []byte(strikePassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := newSite(t)
	pairs := []string{"%d/", creds + "/", "/etc/ztls/redis-ca.pem", caFile,
		"/etc/ztls/redis-client.pem", memberCert, "/etc/ztls/redis-client.key", memberKey,
		"/var/lib/ztls/zd", s.zd, "[::]:443", "127.0.0.1:" + strconv.Itoa(s.port), "127.0.0.1:9180", "127.0.0.1:0"}
	for i, p := range sentinelPorts {
		pairs = append(pairs, "10.0.0."+strconv.Itoa(i+1)+":26380", "127.0.0.1:"+strconv.Itoa(p))
	}
	serveArgs := strings.Fields(replace(strings.Join(args, " "), pairs...))
	var checkArgs []string
	for i := 0; i+1 < len(serveArgs); i++ {
		if strings.HasPrefix(serveArgs[i], "--strike-register") {
			checkArgs = append(checkArgs, serveArgs[i], serveArgs[i+1])
		}
	}
	if len(checkArgs) != 10 || checkArgs[0] != "--strike-register" {
		t.Fatalf("the drop-in's --strike-register flags: %q", checkArgs)
	}

	// What the drop-in tells the operator to run first.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, ztlsBinary(t), append([]string{"register", "check", checkArgs[1]}, checkArgs[2:]...)...).CombinedOutput()
	noPassword(t, string(out))
	if !strings.Contains(string(out), "mode: sentinel") || !strings.Contains(string(out), "maxmemory-policy: noeviction") ||
		!strings.Contains(string(out), "unknown for 16 of 16 tags") || !strings.Contains(string(out), "all on the Sentinels' ztls, lost") {
		t.Fatalf("ztls register check on the example (a new Redis: exits non-zero): %v\n%s", err, out)
	}
	t.Logf("ztls register check on the example:\n%s", out)
	// The members' command line: serve starts, and its first flight
	// goes through the Sentinels to the primary over mutual TLS, as the
	// ztls ACL user (round trips counted, no error).
	ready, _, cmd := startProc(t, "metrics on", serveArgs...)
	defer stopCmd(cmd)
	url := strings.TrimSpace(ready[strings.Index(ready, "http://"):])
	deliver(t, "127.0.0.1:"+strconv.Itoa(s.port), ztlsFlight(t, s, []byte("GET /")))
	var m map[string]float64
	waitUntil(t, "a round trip to the register", func() bool {
		m = scrape(t, url)
		return m["ztls_strike_register_round_trips_total"] >= 1
	})
	if m["ztls_strike_register_redis_errors_total"] != 0 {
		t.Fatalf("the register's round trips failed: %v", m)
	}

	// A failover, done by the Sentinels as their ACL user (SLAVEOF,
	// CONFIG REWRITE, CLIENT KILL... on the servers): another server
	// becomes the primary, the old one its replica, and the member's
	// register follows (a round trip more, on the new primary).
	if out := cli(sentinelPorts[0], "SENTINEL", "FAILOVER", "ztls"); !strings.HasPrefix(out, "OK") {
		t.Fatalf("SENTINEL FAILOVER: %s", out)
	}
	waitUntil(t, "the old primary to be a replica of the new one", func() bool {
		master := cli(sentinelPorts[1], "SENTINEL", "GET-MASTER-ADDR-BY-NAME", "ztls")
		info := cli(redisPorts[0], "--user", "ztls", "--pass", strikePassword, "--no-auth-warning", "INFO", "replication")
		return !strings.Contains(master, strconv.Itoa(redisPorts[0])) && strings.Contains(info, "role:slave") &&
			strings.Contains(info, "master_link_status:up")
	})
	before := m["ztls_strike_register_round_trips_total"]
	deliver(t, "127.0.0.1:"+strconv.Itoa(s.port), ztlsFlight(t, s, []byte("GET /")))
	waitUntil(t, "a round trip to the new primary", func() bool {
		m = scrape(t, url)
		return m["ztls_strike_register_round_trips_total"] > before
	})
}

// startConf writes conf to dir/name and runs redis-server on it (extra
// after the file: --sentinel), stopped when the test ends.
func startConf(t *testing.T, dir, name, conf string, extra ...string) {
	t.Helper()
	file := filepath.Join(dir, name)
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("redis-server", append([]string{file}, extra...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // gone with a killed test too
	var out testproc.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("%s:\n%s", name, out.String())
		}
	})
}

// waitUntil polls cond until it holds, failing the test after a minute.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := clock.Now().Add(time.Minute); !cond(); time.Sleep(100 * time.Millisecond) {
		if clock.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
	}
}
