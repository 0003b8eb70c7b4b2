package main

import (
	"context"
	"os/exec"
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
