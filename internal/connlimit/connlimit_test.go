package connlimit

import (
	"errors"
	"io"
	"net"
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
