package connlimit

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"
)

func listen(t *testing.T, lim Limits) *Listener {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := New(inner, lim)
	t.Cleanup(func() { l.Close() })
	return l
}

func dialFrom(t *testing.T, l *Listener, src string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A source over its share is closed at accept; another source is not;
// closing a held connection makes room again.
func TestPerSource(t *testing.T) {
	l := listen(t, Limits{PerSource: 2})
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	dialFrom(t, l, "127.0.0.1")
	dialFrom(t, l, "127.0.0.1")
	a3 := dialFrom(t, l, "127.0.0.1")
	dialFrom(t, l, "127.0.0.2")
	held := []net.Conn{<-accepted, <-accepted, <-accepted}
	// The third from 127.0.0.1 was closed by the listener.
	a3.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := a3.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("third connection from one source: %v, want EOF", err)
	}
	if st := l.Stats(); st.RefusedSource != 1 || st.Open != 3 {
		t.Fatalf("stats %+v", st)
	}
	held[0].Close()
	held[0].Close() // a second Close releases nothing more
	dialFrom(t, l, "127.0.0.1")
	select {
	case <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("no room after a close")
	}
	if st := l.Stats(); st.Open != 3 || st.PeakOpen != 3 {
		t.Fatalf("stats %+v", st)
	}
}

// At Max, Accept waits for a close; Close of the listener ends the wait.
func TestMaxWaitsAndClose(t *testing.T) {
	l := listen(t, Limits{Max: 1})
	dialFrom(t, l, "127.0.0.1")
	first, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	dialFrom(t, l, "127.0.0.1")
	got := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			c.Close()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("Accept returned at Max: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	first.Close()
	if err := <-got; err != nil {
		t.Fatalf("after a close: %v", err)
	}
	dialFrom(t, l, "127.0.0.1")
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, err := l.Accept(); got <- err }()
	l.Close()
	if err := <-got; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v", err)
	}
	c.Close()
}

// Point 15 of the security review: one IPv6 client has a /64 (or a /56)
// of addresses, each under PerSource, so the per-address share alone lets
// it fill Max. Its network (/56) is capped as a whole; another network
// still gets in; a close makes room in the network again. The Listener
// counts connections by their netip source, so IPv6 is tested on admit
// and done directly (loopback has one IPv6 address).
func TestPerNetworkIPv6(t *testing.T) {
	l := New(nil, Limits{PerSource: 2, PerNetwork: 4})
	// 2001:db8:0:1::/64 and 2001:db8:0:2::/64 are both in 2001:db8::/56.
	var held []netip.Addr
	for i := 0; i < 8; i++ {
		a := netip.MustParseAddr(fmt.Sprintf("2001:db8:0:%d::%d", 1+i%2, 1+i))
		if refused := l.admit(a); refused != nil {
			if i < 4 {
				t.Fatalf("address %d of the /56 refused under the network's share", i)
			}
			refused.Add(1)
			continue
		}
		if i >= 4 {
			t.Fatalf("address %s admitted over the network's share of 4", a)
		}
		held = append(held, a)
	}
	if st := l.Stats(); st.RefusedNetwork != 4 || st.RefusedSource != 0 {
		t.Fatalf("stats %+v", st)
	}
	// Another /56 (2001:db8:0:100::/56) and an IPv4 client are not
	// affected.
	for _, a := range []string{"2001:db8:0:100::1", "2001:db8:0:100::1", "192.0.2.1"} {
		if refused := l.admit(netip.MustParseAddr(a)); refused != nil {
			t.Fatalf("%s refused: the crowded network's cap applied to it", a)
		}
	}
	// A third from one address is over PerSource, whatever its network.
	if l.admit(netip.MustParseAddr("2001:db8:0:100::1")) != &l.refSrc {
		t.Fatal("a third connection from one address was not refused by PerSource")
	}
	// A close makes room in the crowded network again.
	l.done(held[0])
	if refused := l.admit(netip.MustParseAddr("2001:db8:0:ff::9")); refused != nil {
		t.Fatal("no room in the network after a close")
	}
	if refused := l.admit(netip.MustParseAddr("2001:db8:0:ff::a")); refused != &l.refNet {
		t.Fatal("the network went over its share after a close")
	}
}

// Over loopback: addresses of 127.0.0.0/24 share one network's cap;
// 127.0.1.1 (another /24) still gets in.
func TestPerNetworkIPv4(t *testing.T) {
	l := listen(t, Limits{PerSource: 2, PerNetwork: 3})
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	// Two from 127.0.0.1, one from 127.0.0.2: the /24's share of 3.
	dialFrom(t, l, "127.0.0.1")
	dialFrom(t, l, "127.0.0.1")
	dialFrom(t, l, "127.0.0.2")
	for range 3 {
		<-accepted
	}
	over := dialFrom(t, l, "127.0.0.3") // under PerSource, over PerNetwork
	dialFrom(t, l, "127.0.1.1")
	select {
	case c := <-accepted:
		if c.RemoteAddr().(*net.TCPAddr).IP.String() != "127.0.1.1" {
			t.Fatalf("accepted %v, want the other network's client", c.RemoteAddr())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the other network's client was not accepted")
	}
	over.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := over.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("a connection over the network's share: %v, want EOF", err)
	}
	if st := l.Stats(); st.RefusedNetwork != 1 || st.RefusedSource != 0 || st.Open != 4 {
		t.Fatalf("stats %+v", st)
	}
}
