package main

import (
	"context"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/testbed/hosts"
)

// runDemoBinary runs `ztls demo args…` and returns stdout and stderr.
func runDemoBinary(t *testing.T, args ...string) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, ztlsBinary(t), append([]string{"demo"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ztls demo %s: %v\nstderr: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), stderr.String()
}

// TestDemoLoopback: the fallback negotiates ZTLS for real and says that the
// saved round trip is invisible on loopback.
func TestDemoLoopback(t *testing.T) {
	out, errOut := runDemoBinary(t, "--loopback", "--runs", "3")
	if !strings.Contains(errOut, "loopback") {
		t.Errorf("stderr does not explain the loopback run: %q", errOut)
	}
	if !strings.Contains(out, "invisible") {
		t.Errorf("output does not say the round trip is invisible on loopback:\n%s", out)
	}
	m := regexp.MustCompile(`(?m)^ztls\s+(\d+)\s.*\s(\d+)/(\d+)\s+(\d+)/(\d+)\s*$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no ztls row in:\n%s", out)
	}
	if m[1] != "3" || m[2] != m[3] || m[4] != m[5] {
		t.Errorf("ztls row %q: want 3 visits, all with early data accepted and the answer in the first flight", m[0])
	}
}

func TestDemoBadFlags(t *testing.T) {
	for _, args := range [][]string{{"--runs", "0"}, {"--rtt", "0"}, {"--scenario", "nowhere"}, {"--protocols", "tls,carrier-pigeon"}} {
		cmd := exec.Command(ztlsBinary(t), append([]string{"demo"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "demo:") {
			t.Errorf("demo %v: err %v, output %q; want a demo: error", args, err, out)
		}
	}
}

// TestDemoTestbed runs the demo on the emulated network (skips without
// namespaces): the table has tls and ztls, and ztls saves about one RTT.
func TestDemoTestbed(t *testing.T) {
	if err := hosts.Available(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	out, _ := runDemoBinary(t, "--rtt", "40", "--runs", "3", "--protocols", "tls,ztls")
	m := regexp.MustCompile(`(?m)^ztls .*\s([+-]\d+\.\d+)\s*$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no ztls row with RTTs saved in:\n%s", out)
	}
	saved, _ := strconv.ParseFloat(m[1], 64)
	if saved < 0.8 || saved > 1.2 {
		t.Errorf("ztls saved %.2f RTT, want about 1:\n%s", saved, out)
	}
	if !strings.Contains(out, "Where the time went") {
		t.Errorf("no time breakdown:\n%s", out)
	}
}
