package hosts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ztls-project/ztls/testbed/netem"
	"golang.org/x/sys/unix"
)

// Prefix starts the name of every namespace this package creates.
const Prefix = "ztlsN-"

const netnsDir = "/run/netns"

var seq atomic.Int64

// Options describe the network to build.
type Options struct {
	// Hosts names the hosts, at least one; names are short words such as
	// "client" or "server". Host i gets address 10.77.0.(i+1).
	Hosts []string
	// Relay tunes the link emulator.
	Relay netem.Options
	// Calibrate measures the path's own latency (TUN wake-ups, the relay's
	// writes, the receiving application's wake-up) with pings over a 5 ms
	// link when the network starts, and has the relay take it off every
	// delay so that measured round trips match configured ones. Needs two
	// hosts; costs about 0.3 s.
	Calibrate bool
	// TCPCongestion is every host's TCP congestion control
	// (net.ipv4.tcp_congestion_control, e.g. "cubic", Linux's default, or
	// "bbr"); empty keeps what a new namespace inherits from the machine,
	// which this machine's administrator may have changed. It matters for
	// latency, not only for bulk transfers: BBR paces even a connection's
	// first few kilobytes (at about 2.9 initial windows per RTT), so a
	// 4 kB DNS answer leaves a BBR sender over most of a millisecond on a
	// 6 ms path, where cubic sends the whole initial window at once.
	//
	// The kernel lets a namespace other than the machine's own make only an
	// "allowed" algorithm its default (net.ipv4.tcp_allowed_congestion_control),
	// so New adds TCPCongestion to the machine's allowed list when it is
	// missing, and leaves it there: that list only says which algorithms
	// unprivileged sockets may choose for themselves.
	TCPCongestion string
}

// Network is a set of hosts joined by the relay. Its methods are safe for
// concurrent use; Close it to delete everything it made.
type Network struct {
	hosts  []*Host
	byName map[string]*Host
	relay  *netem.Relay
	mu     sync.Mutex
	closed bool
	comp   time.Duration
}

// Host is one network namespace with a TUN device.
type Host struct {
	// Name is the logical name given in Options.Hosts.
	Name string
	// NS is the network namespace's name (as ip netns lists it).
	NS string
	// Addr is the host's IPv4 address.
	Addr netip.Addr

	index  int
	nsFile *os.File
}

// Available reports why namespaces cannot be created here, or nil.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("hosts: network namespaces need root")
	}
	f, err := os.OpenFile("/dev/net/tun", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("hosts: no TUN device: %w", err)
	}
	f.Close()
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("hosts: ip(8) from iproute2 is not installed")
	}
	return nil
}

// New creates the namespaces, their TUN devices and the relay. All links
// start without delay. On error everything made so far is removed.
func New(opt Options) (*Network, error) {
	if len(opt.Hosts) == 0 || len(opt.Hosts) > 200 {
		return nil, fmt.Errorf("hosts: need 1 to 200 hosts, got %d", len(opt.Hosts))
	}
	if err := Available(); err != nil {
		return nil, err
	}
	CleanStale()
	if err := allowCongestionControl(opt.TCPCongestion); err != nil {
		return nil, err
	}
	n := &Network{byName: map[string]*Host{}}
	id := seq.Add(1)
	var ports []netem.Port
	defer func() {
		for _, p := range ports {
			p.File.Close()
		}
	}()
	for i, name := range opt.Hosts {
		if name == "" || len(name) > 20 || strings.ContainsAny(name, "/ \t\n") {
			n.Close()
			return nil, fmt.Errorf("hosts: bad host name %q", name)
		}
		if n.byName[name] != nil {
			n.Close()
			return nil, fmt.Errorf("hosts: host %q given twice", name)
		}
		h := &Host{
			Name:  name,
			NS:    fmt.Sprintf("%s%d-%d-%s", Prefix, os.Getpid(), id, name),
			Addr:  netip.AddrFrom4([4]byte{10, 77, 0, byte(i + 1)}),
			index: i,
		}
		tun, err := h.create(opt.TCPCongestion)
		if h.nsFile != nil || err == nil {
			n.hosts = append(n.hosts, h)
			n.byName[name] = h
		}
		if err != nil {
			n.Close()
			return nil, err
		}
		ports = append(ports, netem.Port{File: tun, Addr: h.Addr})
	}
	r, err := netem.StartRelay(ports, opt.Relay)
	if err != nil {
		n.Close()
		return nil, err
	}
	n.relay = r
	if opt.Calibrate && len(n.hosts) >= 2 {
		if err := n.calibrate(); err != nil {
			n.Close()
			return nil, err
		}
	}
	return n, nil
}

// TCPCongestion returns the TCP congestion control the hosts run (the
// first host's, read from its namespace), or "" if it cannot be read.
func (n *Network) TCPCongestion() string {
	if len(n.hosts) == 0 {
		return ""
	}
	var b []byte
	if err := n.hosts[0].Do(func() (err error) {
		b, err = os.ReadFile("/proc/sys/net/ipv4/tcp_congestion_control")
		return err
	}); err != nil {
		return ""
	}
	return string(bytes.TrimSpace(b))
}

// allowCongestionControl adds cc to the machine's allowed congestion
// controls if it is not there (see Options.TCPCongestion).
func allowCongestionControl(cc string) error {
	if cc == "" {
		return nil
	}
	const allowed = "/proc/sys/net/ipv4/tcp_allowed_congestion_control"
	b, err := os.ReadFile(allowed)
	if err != nil {
		return fmt.Errorf("hosts: %w", err)
	}
	list := strings.Fields(string(b))
	if slices.Contains(list, cc) {
		return nil
	}
	if err := os.WriteFile(allowed, []byte(strings.Join(append(list, cc), " ")), 0); err != nil {
		avail, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_available_congestion_control")
		return fmt.Errorf("hosts: TCP congestion control %q cannot be used (%v); this kernel has: %s (modprobe tcp_%s may add it)", cc, err, bytes.TrimSpace(avail), cc)
	}
	return nil
}

// calibrate measures the extra latency of a round trip through the relay
// and compensates half of it on each hop.
func (n *Network) calibrate() error {
	const probe = 5 * time.Millisecond
	a, b := n.hosts[0], n.hosts[1]
	if err := n.SetRTT(a, b, probe, 0); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := Ping(ctx, a, b, 31)
	if err != nil {
		return err
	}
	comp := min(max((Median(p)-probe)/2, 0), 500*time.Microsecond)
	if err := n.relay.SetCompensation(comp); err != nil {
		return err
	}
	n.comp = comp
	return n.SetRTT(a, b, 0, 0)
}

// Compensation returns the per-hop latency the relay takes off every delay
// (zero unless Options.Calibrate).
func (n *Network) Compensation() time.Duration { return n.comp }

// create makes the namespace and its TUN device and configures them, with
// the TCP congestion control cc unless cc is empty.
func (h *Host) create(cc string) (*os.File, error) {
	if out, err := exec.Command("ip", "netns", "add", h.NS).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("hosts: ip netns add %s: %v: %s", h.NS, err, bytes.TrimSpace(out))
	}
	f, err := os.Open(filepath.Join(netnsDir, h.NS))
	if err != nil {
		exec.Command("ip", "netns", "del", h.NS).Run()
		return nil, fmt.Errorf("hosts: %w", err)
	}
	h.nsFile = f
	var tun *os.File
	err = h.Do(func() error {
		// No IPv6 on the TUN: it would chatter router solicitations. Fresh
		// TCP metrics per connection keep runs independent, and large socket
		// buffers let bulk transfers fill long links.
		settings := [][2]string{
			{"net/ipv6/conf/all/disable_ipv6", "1"},
			{"net/ipv6/conf/default/disable_ipv6", "1"},
			{"net/ipv4/tcp_no_metrics_save", "1"},
			{"net/ipv4/tcp_rmem", "4096 131072 33554432"},
			{"net/ipv4/tcp_wmem", "4096 65536 33554432"},
		}
		if cc != "" {
			settings = append(settings, [2]string{"net/ipv4/tcp_congestion_control", cc})
		}
		for _, kv := range settings {
			if err := os.WriteFile("/proc/sys/"+kv[0], []byte(kv[1]), 0); err != nil {
				return fmt.Errorf("hosts: sysctl %s: %w", kv[0], err)
			}
		}
		var err error
		tun, err = netem.OpenTUN("tun0")
		return err
	})
	if err != nil {
		return nil, err
	}
	script := fmt.Sprintf("link set lo up\naddr add %s/24 dev tun0\nlink set tun0 mtu 1500 txqueuelen 10000 up\n", h.Addr)
	cmd := exec.Command("ip", "-n", h.NS, "-batch", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		tun.Close()
		return nil, fmt.Errorf("hosts: configuring %s: %v: %s", h.NS, err, bytes.TrimSpace(out))
	}
	return tun, nil
}

// Host returns the host called name, or nil.
func (n *Network) Host(name string) *Host { return n.byName[name] }

// Hosts returns the hosts in the order given to New.
func (n *Network) Hosts() []*Host { return append([]*Host(nil), n.hosts...) }

// Relay returns the link emulator, for its statistics.
func (n *Network) Relay() *netem.Relay { return n.relay }

// SetLink configures the direction from host a to host b.
func (n *Network) SetLink(a, b *Host, l netem.Link) error {
	if a == nil || b == nil || a == b {
		return errors.New("hosts: SetLink needs two different hosts")
	}
	return n.relay.SetLink(a.index, b.index, l)
}

// SetRTT gives the path between a and b a round-trip time of rtt (half of
// it each way) and the loss probability loss (0 to 1) in each direction.
func (n *Network) SetRTT(a, b *Host, rtt time.Duration, loss float64) error {
	l := netem.Link{Delay: rtt / 2, Loss: loss}
	if err := n.SetLink(a, b, l); err != nil {
		return err
	}
	l.Delay = rtt - rtt/2
	return n.SetLink(b, a, l)
}

// Close stops every process still running in the namespaces, stops the
// relay and deletes the namespaces. It is idempotent.
func (n *Network) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	if n.relay != nil {
		n.relay.Close()
	}
	var errs []error
	for _, h := range n.hosts {
		if err := deleteNS(h.NS); err != nil {
			errs = append(errs, err)
		}
		if h.nsFile != nil {
			h.nsFile.Close()
		}
	}
	return errors.Join(errs...)
}

// deleteNS kills what still runs inside a namespace and deletes it.
func deleteNS(ns string) error {
	if out, err := exec.Command("ip", "netns", "pids", ns).Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 && pid != os.Getpid() {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
		return fmt.Errorf("hosts: ip netns del %s: %v: %s", ns, err, bytes.TrimSpace(out))
	}
	return nil
}

// CleanStale deletes namespaces left behind by processes of this package
// that died without closing their network.
func CleanStale() {
	ents, err := os.ReadDir(netnsDir)
	if err != nil {
		return
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), Prefix)
		if !ok {
			continue
		}
		pidStr, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			deleteNS(e.Name())
		}
	}
}

// Do runs fn on an OS thread that is inside the host's network namespace.
// Sockets fn creates belong to the namespace for their whole life, whatever
// goroutine uses them later.
func (h *Host) Do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("hosts: %w", err)
			return
		}
		defer orig.Close()
		if err := unix.Setns(int(h.nsFile.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("hosts: entering %s: %w", h.NS, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			// The thread stays locked and is discarded when this goroutine ends.
			errc <- fmt.Errorf("hosts: leaving %s: %w", h.NS, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// Listen is net.Listen inside the host's namespace.
func (h *Host) Listen(network, address string) (net.Listener, error) {
	var ln net.Listener
	err := h.Do(func() (err error) {
		ln, err = net.Listen(network, address)
		return err
	})
	return ln, err
}

// ListenPacket is net.ListenPacket inside the host's namespace.
func (h *Host) ListenPacket(network, address string) (net.PacketConn, error) {
	var pc net.PacketConn
	err := h.Do(func() (err error) {
		pc, err = net.ListenPacket(network, address)
		return err
	})
	return pc, err
}

// DialContext dials from inside the host's namespace. Give addresses as IP
// literals: name lookups would use the machine's resolver configuration.
func (h *Host) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	var c net.Conn
	err := h.Do(func() (err error) {
		var d net.Dialer
		c, err = d.DialContext(ctx, network, address)
		return err
	})
	return c, err
}

// Command returns a command that runs name inside the host's namespace (via
// ip netns exec). The caller starts and stops it; Network.Close kills what
// is left.
func (h *Host) Command(ctx context.Context, name string, arg ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.NS, name}, arg...)...)
}
