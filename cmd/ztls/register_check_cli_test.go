package main

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
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
