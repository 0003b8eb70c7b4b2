package turbo_test

import (
	"context"
	"net"
	"net/netip"
	"testing"

	"github.com/ztls-project/ztls/turbo"
	"github.com/ztls-project/ztls/turbo/internal/wire"
)

// tableServer is a bare Server answering every flight with one datagram.
func tableServer(t *testing.T, cfg turbo.Config) (*turbo.Server, net.Addr) {
	t.Helper()
	cfg.Flight = func(_ context.Context, _ netip.AddrPort, f []byte) ([]byte, any, error) {
		return []byte("flight"), "state", nil
	}
	srv := turbo.NewServer(cfg)
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.ServeUDP(pc); close(done) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return srv, pc.LocalAddr()
}

// source is a UDP socket on a loopback address standing for one client.
func source(t *testing.T, ip string) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(ip), 0)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func send(t *testing.T, c *net.UDPConn, to net.Addr, b []byte) {
	t.Helper()
	if _, err := c.WriteTo(b, to); err != nil {
		t.Fatal(err)
	}
}

// opening is the padded first datagram of a small ClientHello flight.
func opening(id turbo.ConnID) []byte {
	d, _ := wire.Fragment(wire.TypeRequest, id, fakeHello(100))
	return d[0]
}

// TestTableOpensOnlyForPaddedClientHello: from 64 sources of one /24 and
// 16 other /24s, requests that are short (21 bytes), unpadded, a middle
// fragment, padded non-TLS bytes or a ClientHello's first fragment
// without the padding make no entry at all; a padded ClientHello does.
func TestTableOpensOnlyForPaddedClientHello(t *testing.T) {
	srv, addr := tableServer(t, turbo.Config{MaxEntries: 16})
	hello := fakeHello(3000)
	small := fakeHello(300)
	// Five of each, under fresh ids.
	bad := func() [][]byte {
		var bad [][]byte
		for i := 0; i < 5; i++ {
			bad = append(bad, badRequests(t, hello, small)...)
		}
		return bad
	}
	var socks []*net.UDPConn
	for i := 0; i < 64; i++ {
		socks = append(socks, source(t, netip.AddrFrom4([4]byte{127, 0, 3, byte(1 + i)}).String()))
	}
	for i := 0; i < 16; i++ {
		socks = append(socks, source(t, netip.AddrFrom4([4]byte{127, 1, byte(i), 1}).String()))
	}
	sent := 0
	for _, c := range socks {
		for _, b := range bad() {
			send(t, c, addr, b)
			sent++
		}
		// One source at a time, so that the socket buffer drops none.
		waitFor(t, func() bool { return srv.Stats().DatagramsIn == int64(sent) })
	}
	if st := srv.Stats(); st.Entries != 0 || st.PeakEntries != 0 || st.Unqualified != int64(sent) || st.DatagramsOut != 0 {
		t.Fatalf("%d datagrams that may not open an entry: %+v", sent, st)
	}
	id, _ := wire.NewConnID()
	send(t, socks[0], addr, opening(id))
	waitFor(t, func() bool { return srv.Stats().DatagramsOut == 1 })
	if st := srv.Stats(); st.Entries != 1 {
		t.Fatalf("a padded ClientHello made no entry: %+v", st)
	}
}

// badRequests are one of each request that may not open an entry, each
// under a fresh id.
func badRequests(t *testing.T, hello, small []byte) [][]byte {
	var bad [][]byte
	{
		mk := func(d wire.Datagram, pad int) []byte {
			id, _ := wire.NewConnID()
			d.Type, d.ID = wire.TypeRequest, id
			b, err := wire.AppendDatagram(nil, d, pad)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		junk := make([]byte, 200)
		junk[0] = 0x17
		bad = append(bad,
			mk(wire.Datagram{FlightLength: 3000}, 0),                           // 21 bytes
			mk(wire.Datagram{FlightLength: 3000}, wire.MaxDatagram),            // padded, no flight bytes
			mk(wire.Datagram{FlightLength: 3000, Fragment: hello[:900]}, 0),    // unpadded first fragment
			mk(wire.Datagram{FlightLength: len(small), Fragment: small}, 0),    // a whole ClientHello, unpadded
			mk(wire.Datagram{FlightLength: len(small), Fragment: small}, 1000), // padded short of 1200
			mk(wire.Datagram{FlightLength: 3000, Offset: wire.MaxFragment, Fragment: hello[wire.MaxFragment : 2*wire.MaxFragment]}, wire.MaxDatagram),
			mk(wire.Datagram{FlightLength: len(junk), Fragment: junk}, wire.MaxDatagram),
		)
	}
	return bad
}

// TestTableEvictsIncompleteFirst: a table full of flights that never
// complete (first fragments of long flights) and finished flights takes
// a new client's flight in place of the oldest incomplete entry; the
// finished ones stay and link.
func TestTableEvictsIncompleteFirst(t *testing.T) {
	srv, addr := tableServer(t, turbo.Config{MaxEntries: 8})
	long := fakeHello(3 * wire.MaxFragment)
	first, _ := wire.Fragment(wire.TypeRequest, turbo.ConnID{}, long)
	var readyIDs []turbo.ConnID
	for i := 0; i < 4; i++ { // four finished flights, one per prefix
		c := source(t, netip.AddrFrom4([4]byte{127, 2, byte(i), 1}).String())
		id, _ := wire.NewConnID()
		readyIDs = append(readyIDs, id)
		send(t, c, addr, opening(id))
		waitFor(t, func() bool { return srv.Stats().DatagramsOut == int64(i+1) })
	}
	flooder := source(t, "127.3.0.1")
	for i := 0; i < 40; i++ { // within the source's burst
		b := append([]byte(nil), first[0]...)
		id, _ := wire.NewConnID()
		copy(b[1:], id[:])
		send(t, flooder, addr, b)
	}
	waitFor(t, func() bool { return srv.Stats().DatagramsIn == 44 })
	st := srv.Stats()
	if st.Entries != 8 || st.Evicted != 36 || st.Full != 0 {
		t.Fatalf("incomplete entries did not evict each other first: %+v", st)
	}
	newcomer := source(t, "127.4.0.1")
	id, _ := wire.NewConnID()
	send(t, newcomer, addr, opening(id))
	waitFor(t, func() bool { return srv.Stats().DatagramsOut == 5 })
	for i, rid := range readyIDs {
		if _, ok := srv.Link(rid, netip.AddrFrom4([4]byte{127, 2, byte(i), 1})); !ok {
			t.Fatalf("finished flight %d was evicted", i)
		}
	}
	if _, ok := srv.Link(id, netip.MustParseAddr("127.4.0.1")); !ok {
		t.Fatal("the newcomer's flight is not in the table")
	}
}

// TestTablePrefixShare: 8 addresses of one /24 fill a table of 8 with
// finished flights (allowed: it had room). A client from another /24
// then takes the place of that prefix's oldest flight; a ninth address of
// the full prefix is refused; and a table full of prefixes within their
// share refuses everyone.
func TestTablePrefixShare(t *testing.T) {
	srv, addr := tableServer(t, turbo.Config{MaxEntries: 8, PrefixEntries: 2})
	var ids []turbo.ConnID
	for i := 0; i < 8; i++ {
		c := source(t, netip.AddrFrom4([4]byte{127, 5, 0, byte(1 + i)}).String())
		id, _ := wire.NewConnID()
		ids = append(ids, id)
		send(t, c, addr, opening(id))
		waitFor(t, func() bool { return srv.Stats().DatagramsOut == int64(i+1) })
	}
	other := source(t, "127.6.0.1")
	oid, _ := wire.NewConnID()
	send(t, other, addr, opening(oid))
	waitFor(t, func() bool { return srv.Stats().DatagramsOut == 9 })
	same := source(t, "127.5.0.99")
	sid, _ := wire.NewConnID()
	send(t, same, addr, opening(sid))
	waitFor(t, func() bool { return srv.Stats().DatagramsIn == 10 })
	st := srv.Stats()
	if st.Entries != 8 || st.Evicted != 1 || st.Full != 1 || st.DatagramsOut != 9 {
		t.Fatalf("prefix share not applied: %+v", st)
	}
	if _, ok := srv.Link(ids[0], netip.MustParseAddr("127.5.0.1")); ok {
		t.Fatal("the over-share prefix kept its oldest flight")
	}
	if _, ok := srv.Link(ids[1], netip.MustParseAddr("127.5.0.2")); !ok {
		t.Fatal("evicted more than the oldest flight")
	}
	if _, ok := srv.Link(oid, netip.MustParseAddr("127.6.0.1")); !ok {
		t.Fatal("the other prefix's flight is not in the table")
	}
}
