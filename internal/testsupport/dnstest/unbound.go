package dnstest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// UnboundOptions configures StartUnbound. The zero value starts a caching
// recursive resolver that knows no zones except the built-in local ones.
type UnboundOptions struct {
	// StubZones maps a zone name to the "ip:port" of a server that is
	// authoritative for it; Unbound sends its queries for the zone there.
	StubZones map[string]string
	// TLSCertFile and TLSKeyFile (PEM), when both set, make Unbound also
	// serve DNS over TLS on a free port (Unbound.TLSAddr).
	TLSCertFile, TLSKeyFile string
	// Extra lines for the server: clause, e.g. "prefetch: yes".
	Extra []string
}

// Unbound is a running unbound process on the loopback address, started
// by StartUnbound and stopped when the test ends.
type Unbound struct {
	// Addr is "127.0.0.1:port", served over UDP and TCP.
	Addr string
	// TLSAddr is the DNS over TLS address, empty unless asked for.
	TLSAddr string
	// Dir holds unbound.conf and the pid file.
	Dir string

	cmd  *exec.Cmd
	logs *syncLog
}

// Logs returns what unbound has written to stderr so far.
func (u *Unbound) Logs() string { return u.logs.String() }

// StartUnbound writes a configuration in a temporary directory (no
// daemon, no chroot, no user switch, loopback only, queries to localhost
// allowed so that stub zones can point at test servers), starts unbound,
// and waits until it answers. The test is skipped if unbound is not
// installed. t.Cleanup stops the process.
func StartUnbound(t testing.TB, opts UnboundOptions) *Unbound {
	t.Helper()
	bin, err := exec.LookPath("unbound")
	if err != nil {
		bin = "/usr/sbin/unbound"
		if _, err := os.Stat(bin); err != nil {
			t.Skip("dnstest: unbound is not installed (apt-get install unbound, or make deps)")
		}
	}
	withTLS := opts.TLSCertFile != "" && opts.TLSKeyFile != ""
	var lastErr error
	// A free port can be taken between choosing it and unbound binding it;
	// try a few times.
	for attempt := 0; attempt < 3; attempt++ {
		u, err := startUnbound(t, bin, opts, withTLS)
		if err == nil {
			return u
		}
		lastErr = err
	}
	t.Fatalf("dnstest: %v", lastErr)
	return nil
}

func startUnbound(t testing.TB, bin string, opts UnboundOptions, withTLS bool) (*Unbound, error) {
	dir := t.TempDir()
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	u := &Unbound{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Dir: dir, logs: &syncLog{}}
	tlsPort := 0
	if withTLS {
		if tlsPort, err = freePort(); err != nil {
			return nil, err
		}
		u.TLSAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(tlsPort))
	}
	conf := filepath.Join(dir, "unbound.conf")
	if err := os.WriteFile(conf, []byte(unboundConfig(dir, port, tlsPort, opts)), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-d", "-c", conf)
	cmd.Dir = dir
	cmd.Stdout = u.logs
	cmd.Stderr = u.logs
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting unbound: %w", err)
	}
	u.cmd = cmd
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stop := func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	}
	if err := waitUnbound(u, exited); err != nil {
		stop()
		return nil, fmt.Errorf("%w\nunbound.conf:\n%s\nlog:\n%s", err, readUnboundFile(conf), u.Logs())
	}
	t.Cleanup(stop)
	return u, nil
}

// unboundConfig renders unbound.conf for a loopback-only test instance.
func unboundConfig(dir string, port, tlsPort int, opts UnboundOptions) string {
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	line("server:")
	line("  verbosity: 1")
	line("  interface: 127.0.0.1@%d", port)
	line("  port: %d", port)
	if tlsPort != 0 {
		line("  interface: 127.0.0.1@%d", tlsPort)
		line("  tls-port: %d", tlsPort)
		line("  tls-service-pem: %q", opts.TLSCertFile)
		line("  tls-service-key: %q", opts.TLSKeyFile)
	}
	line("  interface-automatic: no")
	line("  do-daemonize: no")
	line(`  username: ""`)
	line(`  chroot: ""`)
	line("  directory: %q", dir)
	line("  pidfile: %q", filepath.Join(dir, "unbound.pid"))
	line("  use-syslog: no")
	line(`  logfile: ""`)
	line("  num-threads: 1")
	line("  so-reuseport: no")
	line("  do-ip6: no")
	line("  access-control: 127.0.0.0/8 allow")
	line("  do-not-query-localhost: no")
	// No trust anchor in a test: iterate without the validator.
	line(`  module-config: "iterator"`)
	line("  qname-minimisation: no")
	line("  edns-tcp-keepalive: yes")
	line("  incoming-num-tcp: 64")
	stubs := make(map[string]string, len(opts.StubZones))
	zones := make([]string, 0, len(opts.StubZones))
	for z, addr := range opts.StubZones {
		stubs[dns.Fqdn(z)] = addr
		zones = append(zones, dns.Fqdn(z))
	}
	sort.Strings(zones)
	for _, z := range zones {
		// RFC 6761 names such as test. are local zones by default.
		line("  local-zone: %q nodefault", dns.Fqdn(lastLabel(z)))
		line("  domain-insecure: %q", z)
	}
	for _, x := range opts.Extra {
		line("  %s", x)
	}
	line("remote-control:")
	line("  control-enable: no")
	for _, z := range zones {
		host, p, err := net.SplitHostPort(stubs[z])
		if err != nil {
			host, p = stubs[z], "53"
		}
		line("stub-zone:")
		line("  name: %q", z)
		line("  stub-addr: %s@%s", host, p)
	}
	return b.String()
}

func lastLabel(name string) string {
	labels := dns.SplitDomainName(name)
	if len(labels) == 0 {
		return "."
	}
	return labels[len(labels)-1]
}

// waitUnbound polls until unbound answers "localhost. A" from its built-in
// local zone, and accepts TCP on its TLS port.
func waitUnbound(u *Unbound, exited <-chan struct{}) error {
	c := &dns.Client{Net: "udp", Timeout: 200 * time.Millisecond}
	q := new(dns.Msg)
	q.SetQuestion("localhost.", dns.TypeA)
	deadline := time.Now().Add(15 * time.Second) // real time: a deadline
	for time.Now().Before(deadline) {            // real time: a deadline
		select {
		case <-exited:
			return fmt.Errorf("unbound exited during start-up")
		default:
		}
		if r, _, err := c.Exchange(q, u.Addr); err == nil && r.Rcode == dns.RcodeSuccess {
			if u.TLSAddr == "" {
				return nil
			}
			if conn, err := net.DialTimeout("tcp", u.TLSAddr, 200*time.Millisecond); err == nil {
				conn.Close()
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("unbound did not answer on %s within 15s", u.Addr)
}

func readUnboundFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}
