package dnstest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// BindZone is one zone BIND serves as primary.
type BindZone struct {
	// Origin is the zone's apex, e.g. "example.test.".
	Origin string
	// Text is the zone file's content (RFC 1035 master format).
	Text string
	// AllowUpdate accepts RFC 2136 UPDATEs: signed with BindOptions.Key
	// when one is given, otherwise from 127.0.0.1 unsigned.
	AllowUpdate bool
}

// BindKey is a TSIG key declared in named.conf.
type BindKey struct {
	// Name is the key name, e.g. "ztls-update.".
	Name string
	// Algorithm is a BIND algorithm name; "" means hmac-sha256.
	Algorithm string
	// Secret is the base64 secret.
	Secret string
}

// BindOptions configures StartBind.
type BindOptions struct {
	Zones []BindZone
	// Key, if set, is declared and guards updates to AllowUpdate zones.
	Key *BindKey
	// Threads is named's -n (worker threads); 0 means 1.
	Threads int
	// Forward makes named a caching resolver for 127.0.0.1 (recursion
	// on) that sends the queries for each zone named here to the
	// "ip:port" given (a forward-only zone): a resolver in front of a
	// test's authority. Zones may then be empty.
	Forward map[string]string
}

// Bind is a running named, started by StartBind and stopped when the test
// ends.
type Bind struct {
	// Addr is "127.0.0.1:port", served over UDP and TCP.
	Addr string
	// Dir holds named.conf, the zone files and their journals.
	Dir string

	logs *syncLog
}

// Logs returns what named has written to stderr so far.
func (b *Bind) Logs() string { return b.logs.String() }

// BindPath returns the named binary, or "" if it is not installed.
func BindPath() string { return sbinPath("named") }

// sbinPath finds a daemon on the PATH or, as Debian installs them off a
// non-root user's PATH, in /usr/sbin; "" if it is in neither.
func sbinPath(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if p := "/usr/sbin/" + name; fileExists(p) {
		return p
	}
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// StartBind writes named.conf and the zone files in a temporary directory
// (IPv4 loopback only, recursion off, no rndc control channel, a free
// port), starts named in the foreground and waits until every zone answers
// its SOA. The test is skipped if named is not installed. t.Cleanup stops
// the process.
func StartBind(t testing.TB, opts BindOptions) *Bind {
	t.Helper()
	bin := BindPath()
	if bin == "" {
		t.Skip("dnstest: named is not installed (apt-get install bind9, or make deps)")
	}
	if len(opts.Zones) == 0 && len(opts.Forward) == 0 {
		t.Fatal("dnstest: StartBind needs at least one zone or forward zone")
	}
	return onFreePort(t, func() (*Bind, error) { return startBind(t, bin, opts) })
}

// onFreePort runs start, which binds a free port it chose, up to three
// times: the port can be taken between choosing it and the daemon
// binding it.
func onFreePort[T any](t testing.TB, start func() (T, error)) T {
	t.Helper()
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		v, err := start()
		if err == nil {
			return v
		}
		lastErr = err
	}
	t.Fatalf("dnstest: %v", lastErr)
	var zero T
	return zero
}

// writeZones writes zones as zone0.db, zone1.db, … in dir.
func writeZones(dir string, zones []BindZone) error {
	for i, z := range zones {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("zone%d.db", i)), []byte(z.Text), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func startBind(t testing.TB, bin string, opts BindOptions) (*Bind, error) {
	dir := t.TempDir()
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	b := &Bind{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Dir: dir, logs: &syncLog{}}
	if err := writeZones(dir, opts.Zones); err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "named.conf")
	if err := os.WriteFile(conf, []byte(BindConfig(dir, port, opts)), 0o644); err != nil {
		return nil, err
	}
	threads := opts.Threads
	if threads <= 0 {
		threads = 1
	}
	// -g: foreground, log to stderr; -4: IPv4 only. Running as the test's
	// user (no -u): the files are in its temporary directory.
	cmd := exec.Command(bin, "-g", "-4", "-n", strconv.Itoa(threads), "-c", conf)
	cmd.Dir = dir
	cmd.Stdout = b.logs
	cmd.Stderr = b.logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting named: %w", err)
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
	if err := waitBind(b, opts.Zones, exited); err != nil {
		stop()
		return nil, fmt.Errorf("%w\nnamed.conf:\n%s\nlog:\n%s", err, BindConfig(dir, port, opts), b.Logs())
	}
	t.Cleanup(stop)
	return b, nil
}

// BindConfig renders named.conf for a loopback-only primary; zone i's
// file is zone<i>.db in dir.
func BindConfig(dir string, port int, opts BindOptions) string {
	var c strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&c, format+"\n", args...) }
	line("options {")
	line("  directory %q;", dir)
	line("  pid-file %q;", filepath.Join(dir, "named.pid"))
	line("  session-keyfile %q;", filepath.Join(dir, "session.key"))
	line("  managed-keys-directory %q;", dir)
	line("  listen-on port %d { 127.0.0.1; };", port)
	line("  listen-on-v6 { none; };")
	if len(opts.Forward) == 0 {
		line("  recursion no;")
	} else {
		line("  recursion yes;")
		line("  allow-recursion { 127.0.0.1; };")
		line("  qname-minimization off;")
	}
	line("  dnssec-validation no;")
	line("  notify no;")
	line("  allow-query { any; };")
	line("  allow-transfer { none; };")
	line("};")
	line("controls { };")
	update := "127.0.0.1;"
	if k := opts.Key; k != nil {
		alg := strings.TrimSuffix(k.Algorithm, ".")
		if alg == "" {
			alg = "hmac-sha256"
		}
		line("key %q {", strings.TrimSuffix(k.Name, "."))
		line("  algorithm %s;", alg)
		line("  secret %q;", k.Secret)
		line("};")
		update = fmt.Sprintf("key %q;", strings.TrimSuffix(k.Name, "."))
	}
	fwd := make([]string, 0, len(opts.Forward))
	for z := range opts.Forward {
		fwd = append(fwd, z)
	}
	slices.Sort(fwd)
	for _, z := range fwd {
		host, port, err := net.SplitHostPort(opts.Forward[z])
		if err != nil {
			host, port = opts.Forward[z], "53"
		}
		line("zone %q {", dns.Fqdn(z))
		line("  type forward;")
		line("  forward only;")
		line("  forwarders { %s port %s; };", host, port)
		line("};")
	}
	for i, z := range opts.Zones {
		line("zone %q {", strings.TrimSuffix(dns.Fqdn(z.Origin), ".")+".")
		line("  type primary;")
		line("  file %q;", fmt.Sprintf("zone%d.db", i))
		if z.AllowUpdate {
			line("  allow-update { %s };", update)
		} else {
			line("  allow-update { none; };")
		}
		line("};")
	}
	return c.String()
}

// waitBind polls until every zone's SOA is answered authoritatively, or,
// for a resolver without zones, until it answers version.bind.
func waitBind(b *Bind, zones []BindZone, exited <-chan struct{}) error {
	c := &dns.Client{Net: "udp", Timeout: 200 * time.Millisecond}
	deadline := time.Now().Add(20 * time.Second) // real time: a deadline
	if len(zones) == 0 {
		q := new(dns.Msg)
		q.SetQuestion("version.bind.", dns.TypeTXT)
		q.Question[0].Qclass = dns.ClassCHAOS
		for {
			select {
			case <-exited:
				return fmt.Errorf("named exited during start-up")
			default:
			}
			if _, _, err := c.Exchange(q, b.Addr); err == nil {
				return nil
			}
			if time.Now().After(deadline) { // real time: a deadline
				return fmt.Errorf("named did not answer on %s within 20s", b.Addr)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, z := range zones {
		q := new(dns.Msg)
		q.SetQuestion(dns.Fqdn(z.Origin), dns.TypeSOA)
		for {
			select {
			case <-exited:
				return fmt.Errorf("named exited during start-up")
			default:
			}
			if r, _, err := c.Exchange(q, b.Addr); err == nil && r.Rcode == dns.RcodeSuccess && r.Authoritative {
				break
			}
			if time.Now().After(deadline) { // real time: a deadline
				return fmt.Errorf("named did not serve %s on %s within 20s", z.Origin, b.Addr)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// freePort returns a loopback port free for both TCP and UDP at the
// time of the call (BIND 9 and Unbound take both).
func freePort() (int, error) {
	for range 20 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		pc, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		ln.Close()
		if err == nil {
			pc.Close()
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free port found")
}

// syncLog is a buffer safe for a process's writes and the test's reads.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
