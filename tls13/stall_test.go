package tls13

import (
	"io"
	"net"
	"sync"
	"testing"

	"github.com/ztls-project/ztls/tls13/internal/record"
)

// stallConn passes writes through until armed, then only budget more
// bytes: the rest is dropped, as if the peer stopped sending mid-record.
type stallConn struct {
	net.Conn
	mu     sync.Mutex
	armed  bool
	budget int
}

func (c *stallConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	n := len(p)
	if c.armed {
		n = min(n, c.budget)
		c.budget -= n
	}
	c.mu.Unlock()
	if n > 0 {
		if _, err := c.Conn.Write(p[:n]); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// roomConn records the room each Read is given (cap(p): what the buffer
// behind it holds free) and announces each call before it blocks.
type roomConn struct {
	net.Conn
	reads chan int
}

func (c *roomConn) Read(p []byte) (int, error) {
	select {
	case c.reads <- cap(p):
	default:
	}
	return c.Conn.Read(p)
}

// TestStalledRecordHoldsNoBulkBuffer: a peer that sends a burst and then
// stops halfway through a record leaves the reader waiting with room for
// that record's rest, not with the 64 KB a fast sender's reads get. Before,
// each such connection held bulkReadSize (plus the half record) for as
// long as the peer kept it open.
func TestStalledRecordHoldsNoBulkBuffer(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	cRaw, sRaw := net.Pipe()
	defer cRaw.Close()
	defer sRaw.Close()
	sc := &stallConn{Conn: cRaw}
	rc := &roomConn{Conn: sRaw, reads: make(chan int, 1)}
	ccfg := clientConfig(p)
	ccfg.CipherSuites = []CipherSuite{TLS_AES_128_GCM_SHA256}
	scfg := serverConfig(p)
	scfg.SessionTicketsDisabled = true // net.Pipe: nobody would read them
	cli, srv := Client(sc, ccfg), Server(rc, scfg)
	herr := make(chan error, 1)
	go func() { herr <- srv.Handshake() }()
	if err := cli.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-herr; err != nil {
		t.Fatal(err)
	}

	// Four full records' worth of data; all of the first three and half
	// of the fourth reach the server.
	const recLen = record.HeaderLen + 16384 + 1 + 16 // AES-128-GCM, inner type byte
	sc.mu.Lock()
	sc.armed, sc.budget = true, 3*recLen+recLen/2
	sc.mu.Unlock()
	go func() {
		if _, err := cli.Write(make([]byte, 4*16384)); err != nil {
			t.Error(err)
		}
	}()
	if _, err := io.ReadFull(srv, make([]byte, 3*16384)); err != nil {
		t.Fatal(err)
	}
	for len(rc.reads) > 0 {
		<-rc.reads
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = srv.Read(make([]byte, 1)) // blocks on the missing half
	}()
	room := <-rc.reads
	if limit := recLen; room > limit {
		t.Errorf("the reader waits for the rest of a record with %d bytes of room, want at most %d", room, limit)
	}
	sRaw.Close()
	<-done
}
