package dnstest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// KnotOptions configures StartKnot: the zones Knot DNS serves as primary
// (BindZone's fields mean the same here) and the TSIG key that guards
// their updates.
type KnotOptions struct {
	Zones []BindZone
	// Key, if set, is declared and is the only one allowed to update the
	// AllowUpdate zones; without it they take unsigned updates from
	// 127.0.0.1.
	Key *BindKey
}

// Knot is a running knotd, started by StartKnot and stopped when the test
// ends.
type Knot struct {
	// Addr is "127.0.0.1:port", served over UDP and TCP.
	Addr string
	// Dir holds knot.conf, the zone files, the journal and the control
	// socket.
	Dir string

	logs *syncLog
}

// Logs returns what knotd has written so far.
func (k *Knot) Logs() string { return k.logs.String() }

// KnotPath returns the knotd binary, or "" if it is not installed.
func KnotPath() string { return sbinPath("knotd") }

// StartKnot writes knot.conf and the zone files in a temporary directory
// (IPv4 loopback only, a free port, the test's user, log to stderr),
// starts knotd in the foreground and waits until every zone answers its
// SOA. The test is skipped if knotd is not installed. t.Cleanup stops the
// process; it is killed if the test process dies first.
func StartKnot(t testing.TB, opts KnotOptions) *Knot {
	t.Helper()
	bin := KnotPath()
	if bin == "" {
		t.Skip("dnstest: knotd is not installed (apt-get install knot, or make deps)")
	}
	if len(opts.Zones) == 0 {
		t.Fatal("dnstest: StartKnot needs at least one zone")
	}
	return onFreePort(t, func() (*Knot, error) { return startKnot(t, bin, opts) })
}

func startKnot(t testing.TB, bin string, opts KnotOptions) (*Knot, error) {
	dir := t.TempDir()
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	k := &Knot{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Dir: dir, logs: &syncLog{}}
	if err := writeZones(dir, opts.Zones); err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "knot.conf")
	if err := os.WriteFile(conf, []byte(KnotConfig(dir, port, opts)), 0o644); err != nil {
		return nil, err
	}
	// knotd stays in the foreground without -d; -s keeps its control
	// socket in the temporary directory, not /run/knot.
	cmd := exec.Command(bin, "-c", conf, "-s", filepath.Join(dir, "knot.sock"))
	cmd.Dir = dir
	cmd.Stdout = k.logs
	cmd.Stderr = k.logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting knotd: %w", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stop := func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	}
	if err := waitBind(&Bind{Addr: k.Addr}, opts.Zones, exited); err != nil {
		stop()
		return nil, fmt.Errorf("knotd: %w\nknot.conf:\n%s\nlog:\n%s", err, KnotConfig(dir, port, opts), k.Logs())
	}
	t.Cleanup(stop)
	return k, nil
}

// KnotConfig renders knot.conf for a loopback-only primary; zone i's file
// is zone<i>.db in dir. Updates go to the journal and are not written back
// to the zone file (zonefile-sync: -1), which the test may compare with
// what it wrote.
func KnotConfig(dir string, port int, opts KnotOptions) string {
	var c strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&c, format+"\n", args...) }
	line("server:")
	line("    rundir: %q", dir)
	line("    listen: 127.0.0.1@%d", port)
	line("log:")
	line("  - target: stderr")
	line("    any: info")
	line("database:")
	line("    storage: %q", dir)
	acl := "127.0.0.1"
	if k := opts.Key; k != nil {
		alg := strings.TrimSuffix(k.Algorithm, ".")
		if alg == "" {
			alg = "hmac-sha256"
		}
		line("key:")
		line("  - id: %s", dns.Fqdn(k.Name))
		line("    algorithm: %s", alg)
		line("    secret: %s", k.Secret)
	}
	line("acl:")
	line("  - id: update")
	if opts.Key != nil {
		line("    key: %s", dns.Fqdn(opts.Key.Name))
	} else {
		line("    address: %s", acl)
	}
	line("    action: update")
	line("template:")
	line("  - id: default")
	line("    storage: %q", dir)
	line("    zonefile-sync: -1")
	line("    zonefile-load: whole")
	line("    journal-content: changes")
	line("    semantic-checks: off")
	line("zone:")
	for i, z := range opts.Zones {
		line("  - domain: %s", dns.Fqdn(z.Origin))
		line("    file: %q", fmt.Sprintf("zone%d.db", i))
		if z.AllowUpdate {
			line("    acl: update")
		}
	}
	return c.String()
}
