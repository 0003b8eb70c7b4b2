package main

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestCLIZTLSCodepointClash: a --ztls-codepoint that is another
// extension's (0xff5b is ztls_bfe's) is refused when the flag is read,
// with both extensions named: serve exits at start instead of serving and
// failing every connection with internal_error (issue 34), and connect
// refuses it before it dials.
func TestCLIZTLSCodepointClash(t *testing.T) {
	p := newUXPKI(t)
	for _, args := range [][]string{
		{"serve", "--listen", "127.0.0.1:0", "--cert", p.cert, "--key", p.key, "--ztls-codepoint", "0xff5b"},
		{"connect", "127.0.0.1:1", "--mode", "tls", "--data", "x", "--ztls-codepoint", "0xff5b"},
		{"serve", "--listen", "127.0.0.1:0", "--cert", p.cert, "--key", p.key, "--ztls-codepoint", "51"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		cmd := exec.CommandContext(ctx, ztlsBinary(t), args...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		timedOut := ctx.Err() != nil
		cancel()
		var ee *exec.ExitError
		if timedOut || !errors.As(err, &ee) || ee.ExitCode() == 0 {
			t.Errorf("ztls %s: still running after 10 s or exited 0 (%v); want a refusal at start\nstderr: %s", strings.Join(args, " "), err, stderr.String())
			continue
		}
		want := []string{"--ztls-codepoint " + args[len(args)-1], "the ztls extension"}
		if args[len(args)-1] == "0xff5b" {
			want = append(want, "ztls_bfe")
		} else {
			want = append(want, "key_share")
		}
		for _, w := range want {
			if !strings.Contains(stderr.String(), w) {
				t.Errorf("ztls %s: stderr does not say %q:\n%s", strings.Join(args, " "), w, stderr.String())
			}
		}
	}
}
