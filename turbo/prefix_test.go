package turbo

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"
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
		id, _ := NewConnID()
		ds, err := Fragment(TypeRequest, id, testHello(300))
		if err != nil {
			t.Fatal(err)
		}
		s.handle(nil, from, ds[0])
		return id
	}
	open()
	for deadline := time.Now().Add(10 * time.Second); s.Stats().FlightErrors != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
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
