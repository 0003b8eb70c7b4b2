package main

// Rotation takes over (issue 25, item 6): of the processes on one Z-data
// directory, the one holding DIR/rotate.lock rotates; when it stops,
// cleanly or killed (its lock file left behind), a survivor takes the
// rotation over on its periodic tick and makes the next period's key in
// time, where before it only ever reloaded and ZTLS lapsed within two
// periods.
//
// The processes' clocks are placed in the period the test runs in (the
// nearest one whose minute 45 is at most 30 minutes away), whatever the
// real minute is: the directory's lead time is 10 minutes, the stopped
// rotating process runs at minute 45 (before its lead time: it made only
// the current key) and the survivor at minute 55 (inside it), so the next
// period's key can only come from the survivor.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/zdata"
)

func TestCLIRotationTakeOver(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rotator string // the process that holds the lock and is stopped: "dns serve" or "serve"
		sig     syscall.Signal
		bfe     bool // the directory has BFE: the survivor generates its keys from then on
	}{
		{"dns-serve-stopped", "dns serve", syscall.SIGTERM, true},
		{"dns-serve-killed", "dns serve", syscall.SIGKILL, false},
		{"serve-killed", "serve", syscall.SIGKILL, false},
	} {
		t.Run(tc.name, func(t *testing.T) { testRotationTakeOver(t, tc.rotator, tc.sig, tc.bfe) })
	}
}

func testRotationTakeOver(t *testing.T, rotator string, sig syscall.Signal, withBFE bool) {
	s := newSite(t)
	d, err := zdata.LoadDir(s.zd)
	if err != nil {
		t.Fatal(err)
	}
	d.Config.LeadTime = "10m"
	if err := d.Save(); err != nil {
		t.Fatal(err)
	}
	emptyKeys(t, s.zd) // the rotating process makes them at its clock

	period := clock.Now().Add(-15 * time.Minute).Truncate(time.Hour)
	next := period.Add(time.Hour)
	before := clockOffsetFor(t, period.Add(45*time.Minute))
	inLead := clockOffsetFor(t, period.Add(55*time.Minute))

	ahead := filepath.Join(s.zd, zdata.KeysDir, fmt.Sprintf("bfe-%d.bfe", next.Add(time.Hour).Unix()))
	if withBFE {
		// BFE keys for this period and the two after it, less the last:
		// only a process that rotates makes it again.
		runAt(t, before, "zdata", "rotate", s.zd, "--bfe-connections", "16", "--bfe-fp-rate", "0.05")
		if err := os.Remove(ahead); err != nil {
			t.Fatal(err)
		}
	}

	zone := filepath.Join(s.dir, "ztls.test.zone")
	writeFile(t, zone, testZone)
	dnsArgs := []string{"dns", "serve", "--zone", zone, "--zdata", s.zd, "--listen", "127.0.0.1:0"}
	serveArgs := []string{"serve", "--listen", "127.0.0.1:" + strconv.Itoa(s.port), "--zdata", s.zd, "--respond", "hello"}
	var rot, sur *exec.Cmd
	var rotLog, surLog *procLog
	if rotator == "dns serve" {
		rot, rotLog = startAt(t, before, "serving udp on", dnsArgs...)
		rotLog.waitFor(t, "rotates=true")
		sur, surLog = startAt(t, inLead, "ZTLS on", serveArgs...)
		surLog.waitFor(t, "another process rotates the Z-data")
	} else {
		rot, rotLog = startAt(t, before, "ZTLS on", serveArgs...)
		sur, surLog = startAt(t, inLead, "serving udp on", dnsArgs...)
		surLog.waitFor(t, "rotates=false")
	}
	defer stopCmd(sur)
	if got := keyStarts(t, s.zd); len(got) != 1 || !got[0].Equal(period) {
		t.Fatalf("keys before the rotating process stops start at %v, want only %v", got, period)
	}
	time.Sleep(time.Second) // a tick or two of the survivor, which must not rotate while the lock is held
	if rotLog.has("took over") || surLog.has("took over") || surLog.has("added key") {
		t.Fatal("a process took the rotation over while its holder ran")
	}

	rot.Process.Signal(sig)
	waitOrKill(rot)
	if sig == syscall.SIGTERM && !rot.ProcessState.Exited() {
		t.Fatalf("%s did not stop on SIGTERM: %v", rotator, rot.ProcessState)
	}
	if _, err := os.Stat(filepath.Join(s.zd, zdata.RotationLockFile)); err != nil {
		t.Fatalf("the lock file of the stopped process: %v", err)
	}

	// The survivor retries the lock at its periodic tick (every 10 s).
	took := waitLog(t, surLog, "took over the rotation", 40*time.Second)
	if logAttr(took, "dir") != s.zd {
		t.Fatalf("the take-over does not name the directory: %s", took)
	}
	deadline := clock.Now().Add(10 * time.Second)
	for got := keyStarts(t, s.zd); len(got) != 2 || !got[1].Equal(next); got = keyStarts(t, s.zd) {
		if clock.Now().After(deadline) {
			t.Fatalf("after the take-over the keys start at %v, want %v and %v", got, period, next)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// What the survivor serves has the new key.
	var shown struct {
		Keys []struct {
			NotBefore time.Time       `json:"not_before"`
			State     string          `json:"state"`
			BFE       json.RawMessage `json:"bfe"`
		} `json:"keys"`
	}
	if err := json.Unmarshal([]byte(runAt(t, inLead, "zdata", "show", s.zd, "--json")), &shown); err != nil {
		t.Fatal(err)
	}
	if n := len(shown.Keys); n != 2 || !shown.Keys[1].NotBefore.Equal(next) || shown.Keys[1].State != "next" {
		t.Fatalf("zdata show after the take-over: %+v", shown.Keys)
	}
	if rotator == "dns serve" {
		added := waitLog(t, surLog, "Z-data: added key", 10*time.Second)
		if logAttr(added, "not_before") != next.UTC().Format(time.RFC3339) {
			t.Fatalf("the survivor added another key than the next period's: %s", added)
		}
	} else {
		waitLog(t, surLog, "Z-data: added keys", 10*time.Second)
		nd, err := zdata.LoadDir(s.zd)
		if err != nil {
			t.Fatal(err)
		}
		keys := nd.Keyring.All()
		txt := keys[len(keys)-1].Record.TXT()
		sigPart := txt[len(txt)-1] // unique to the record: its signature's last string
		addr := logAttr(surLog.waitFor(t, "serving udp on"), "addr")
		name := "_ztls._" + strconv.Itoa(s.port) + "._tcp." + s.host
		if got := runAt(t, inLead, "lookup", name, "--resolver", addr, "--type", "TXT", "+short"); !strings.Contains(got, sigPart) {
			t.Fatalf("dns serve does not serve the next period's record after the take-over:\n%s", got)
		}
	}
	if withBFE {
		if len(shown.Keys[1].BFE) == 0 || string(shown.Keys[1].BFE) == "null" {
			t.Fatal("the next period's key has no BFE key attached")
		}
		gen := waitLog(t, surLog, "BFE: key generated", 60*time.Second)
		if logAttr(gen, "file") != filepath.Base(ahead) {
			t.Fatalf("the survivor generated another BFE key than %s: %s", filepath.Base(ahead), gen)
		}
		if _, err := os.Stat(ahead); err != nil {
			t.Fatalf("the BFE key ahead: %v", err)
		}
	}
}

// clockOffsetFor is the ZTLS_CLOCK_OFFSET that makes a process started
// now read at on its clock: this process's offset (make test CLOCK_AT=…)
// plus how far at is from its clock.
func clockOffsetFor(t *testing.T, at time.Time) string {
	t.Helper()
	off, err := clock.Offset()
	if err != nil {
		t.Fatal(err)
	}
	return (off + at.Sub(clock.Now())).Round(time.Millisecond).String()
}

// startAt starts a long-lived ztls command with its clock shifted by
// offset and waits for a line containing ready; the process is killed
// when the test ends.
func startAt(t *testing.T, offset, ready string, args ...string) (*exec.Cmd, *procLog) {
	t.Helper()
	cmd := exec.Command(ztlsBinary(t), args...)
	cmd.Env = append(os.Environ(), clock.EnvOffset+"="+offset)
	return cmd, startCmdLog(t, cmd, ready)
}

// runAt is run with the clock shifted by offset.
func runAt(t *testing.T, offset string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, ztlsBinary(t), args...)
	cmd.Env = append(os.Environ(), clock.EnvOffset+"="+offset)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ztls %s: %v\nstderr: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// waitLog waits up to within for a line of l containing s.
func waitLog(t *testing.T, l *procLog, s string, within time.Duration) string {
	t.Helper()
	for deadline := clock.Now().Add(within); clock.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		l.mu.Lock()
		for _, line := range l.all {
			if strings.Contains(line, s) {
				l.mu.Unlock()
				return line
			}
		}
		l.mu.Unlock()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	t.Fatalf("no line with %q within %v in:\n%s", s, within, strings.Join(l.all, "\n"))
	return ""
}

// keyStarts lists the not-before of each key on disk in dir, oldest first.
func keyStarts(t *testing.T, dir string) []time.Time {
	t.Helper()
	d, err := zdata.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []time.Time
	for _, k := range d.Keyring.All() {
		out = append(out, k.Record.NotBefore)
	}
	return out
}
