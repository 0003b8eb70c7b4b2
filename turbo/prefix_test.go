package turbo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/ztls-project/ztls/turbo/internal/wire"
)

// TestTableEvictsPrefixOwnLastEntry: in a full table, a newcomer whose
// prefix's only entry is the one evicted for it is still counted in the
// prefix's state that the table knows (not in an orphan, which would let
// the prefix escape its share).
func TestTableEvictsPrefixOwnLastEntry(t *testing.T) {
	s := NewServer(Config{MaxEntries: 1, Flight: func(context.Context, netip.AddrPort, []byte) ([]byte, any, error) {
		return nil, nil, errors.New("no")
	}})
	defer s.Close()
	from := netip.MustParseAddrPort("192.0.2.1:4433")
	open := func() ConnID {
		id, _ := wire.NewConnID()
		ds, err := wire.Fragment(wire.TypeRequest, id, testHello(300))
		if err != nil {
			t.Fatal(err)
		}
		s.handle(discardPC{}, from, ds[0])
		return id
	}
	open()
	for deadline := clock.Now().Add(10 * time.Second); s.Stats().FlightErrors != 1; time.Sleep(time.Millisecond) {
		if clock.Now().After(deadline) {
			t.Fatal("the flight did not fail")
		}
	}
	id := open()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stats.Evicted != 1 || len(s.entries) != 1 {
		t.Fatalf("stats %+v, %d entries; want the failed entry evicted", s.stats, len(s.entries))
	}
	p := s.prefixes[sourcePrefix(from.Addr())]
	if e := s.entries[id]; e == nil || p == nil || e.prefix != p || p.entries != 1 {
		t.Fatalf("the newcomer %+v is not counted in the table's prefix state %+v", e, p)
	}
}

// TestTablePrefixChurnsOnlyItself: in a full table, one prefix (an IPv6
// /56, many addresses) sends ten tables' worth of flights that never
// complete. Before the per-prefix eviction cap, its newcomers took the
// place of the oldest incomplete entry of any prefix, so a client of
// another prefix whose ClientHello spans two datagrams lost its entry
// between them and was denied TurboTLS. Now a prefix at its share evicts
// only its own entries: the other prefixes' incomplete flights survive
// the flood and complete, and a newcomer of a quiet prefix still gets in
// (in place of the flooding prefix's oldest). Driven datagram by datagram
// (no sockets, no timing).
func TestTablePrefixChurnsOnlyItself(t *testing.T) {
	const max = 32
	s := NewServer(Config{MaxEntries: max, PrefixEntries: 4, SourceRate: 1, SourceBurst: 1 << 20,
		Flight: func(context.Context, netip.AddrPort, []byte) ([]byte, any, error) { return []byte("flight"), nil, nil }})
	defer s.Close()
	send := func(from string, d []byte) {
		s.handle(discardPC{}, netip.MustParseAddrPort(from), d)
	}
	open := func(from string, size int) (ConnID, [][]byte) {
		id, _ := wire.NewConnID()
		ds, err := wire.Fragment(wire.TypeRequest, id, testHello(size))
		if err != nil {
			t.Fatal(err)
		}
		send(from, ds[0])
		return id, ds
	}
	// Three clients of other prefixes, each midway through a two-datagram
	// ClientHello (e.g. an X25519MLKEM768 key share).
	clients := []string{"198.51.100.7:5000", "203.0.113.9:5000", "[2001:db8:beef::1]:5000"}
	var ids []ConnID
	var rests [][]byte
	for _, c := range clients {
		id, ds := open(c, 1500)
		if len(ds) != 2 {
			t.Fatalf("a 1500-byte ClientHello in %d datagrams, want 2", len(ds))
		}
		ids, rests = append(ids, id), append(rests, ds[1])
	}
	// The flood: 64 addresses of 2001:db8:1::/56, in four /64s.
	for i := 0; i < 10*max; i++ {
		open(fmt.Sprintf("[2001:db8:1:%x::%x]:443", i%4, 1+i%64), 3*wire.MaxFragment)
	}
	st := s.Stats()
	if st.Entries != max || st.Evicted != int64(10*max-(max-len(clients))) {
		t.Fatalf("the flood did not fill and churn the table: %+v", st)
	}
	for i, c := range clients {
		s.mu.Lock()
		e := s.entries[ids[i]]
		s.mu.Unlock()
		if e == nil {
			t.Fatalf("the flooding prefix evicted %s's incomplete ClientHello", c)
		}
		send(c, rests[i]) // the second datagram completes the flight
	}
	s.mu.Lock()
	for i, c := range clients {
		if e := s.entries[ids[i]]; e == nil || !(e.working || e.ready) {
			s.mu.Unlock()
			t.Fatalf("%s's flight did not complete: %+v", c, e)
		}
	}
	flood := s.prefixes[netip.MustParsePrefix("2001:db8:1::/56")]
	if flood == nil || flood.entries != max-len(clients) {
		s.mu.Unlock()
		t.Fatalf("the flooding prefix holds %+v, want the rest of the table", flood)
	}
	s.mu.Unlock()
	// A quiet prefix's newcomer takes the flooding prefix's oldest place.
	id, _ := open("192.0.2.1:5000", 300)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.entries[id] == nil || flood.entries != max-len(clients)-1 {
		t.Fatalf("a quiet prefix's newcomer did not get in: %+v", s.stats)
	}
}

// A server closed before ServeUDP gets to register its PacketConn (the
// goroutine that serves it started late) closes it and returns, instead
// of reading from it forever: Close could not have closed it.
func TestServeUDPAfterClose(t *testing.T) {
	s := NewServer(Config{Flight: func(context.Context, netip.AddrPort, []byte) ([]byte, any, error) { return nil, nil, nil }})
	s.Close()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.ServeUDP(pc) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		pc.Close()
		t.Fatal("ServeUDP on a closed server kept reading")
	}
	if _, err := pc.WriteTo([]byte{0}, pc.LocalAddr()); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("the PacketConn is still open: %v", err)
	}
}

// discardPC is the socket of the tests that drive Server.handle directly:
// a flight that completes is "sent" into it and dropped (a nil one would
// crash the flight's goroutine).
type discardPC struct{ net.PacketConn }

func (discardPC) WriteTo(b []byte, _ net.Addr) (int, error) { return len(b), nil }
