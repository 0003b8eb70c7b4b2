package tls13

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"
)

// A ticket sealed before a rotation still resumes after it; one whose key
// has been dropped (every ticket it sealed expired) does not.
func TestTicketKeysRotation(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	t0 := clock.Now()
	var serverNow atomic.Int64
	serverNow.Store(t0.UnixNano())
	keys := NewTicketKeys(time.Hour, nil)
	scfg := serverConfig(p)
	scfg.TicketKeys = keys
	scfg.TicketLifetime = 2 * time.Hour
	scfg.Time = func() time.Time { return time.Unix(0, serverNow.Load()) }

	resume := func(sess *ClientSession) (bool, *ClientSession) {
		t.Helper()
		ccfg := clientConfig(p)
		// The client's clock follows the server's: the ticket's age is
		// what the server expects.
		ccfg.Time = scfg.Time
		ccfg.ClientSessionCache = NewLRUClientSessionCache(1)
		if sess != nil {
			ccfg.ClientSessionCache.Put("localhost", sess)
		}
		c, s, cerr, serr := pair(t, ccfg, scfg)
		if cerr != nil || serr != nil {
			t.Fatalf("client %v, server %v", cerr, serr)
		}
		go echo(s)
		roundTrip(t, c, "ticket")
		return c.ConnectionState().DidResume, c.Session()
	}

	_, first := resume(nil)
	if first == nil || keys.Len() != 1 {
		t.Fatalf("no ticket, or %d keys after the first handshake", keys.Len())
	}
	// 90 minutes on: the first key no longer seals but still opens.
	serverNow.Store(t0.Add(90 * time.Minute).UnixNano())
	ok, second := resume(first)
	if !ok {
		t.Fatal("a ticket sealed before the rotation did not resume")
	}
	if keys.Len() != 2 {
		t.Fatalf("%d keys after a rotation, want 2", keys.Len())
	}
	serverNow.Store(t0.Add(140 * time.Minute).UnixNano())
	ok, third := resume(second)
	if !ok || keys.Len() != 2 {
		t.Fatalf("resumed %v with %d keys inside the second key's period", ok, keys.Len())
	}
	// At 3h40 every ticket of the first key (sealed until 1h30, living
	// 2h) has expired: it is dropped, and the third ticket, sealed by
	// the second key, still resumes.
	serverNow.Store(t0.Add(220 * time.Minute).UnixNano())
	if ok, _ := resume(third); !ok {
		t.Fatal("a ticket of the previous key did not resume")
	}
	if keys.Len() != 2 {
		t.Fatalf("%d keys held at 3h40, want 2 (the second and a new third)", keys.Len())
	}
}

// The unit rules: keys are made per period and dropped exactly when the
// last ticket they sealed has expired; a dropped key opens nothing.
func TestTicketKeysDrop(t *testing.T) {
	keys := NewTicketKeys(time.Hour, nil)
	t0 := time.Unix(1_800_000_000, 0)
	life := 30 * time.Minute
	seal := func(at time.Time) []byte {
		t.Helper()
		aead, err := keys.sealing(at, life, nil)
		if err != nil {
			t.Fatal(err)
		}
		nonce := make([]byte, ticketNonceLen)
		return aead.Seal(nonce, nonce, []byte("ticket"), nil)
	}
	old := seal(t0)
	seal(t0.Add(59 * time.Minute))
	if keys.Len() != 1 {
		t.Fatalf("%d keys within one period", keys.Len())
	}
	seal(t0.Add(61 * time.Minute)) // the second key: the first sealed until here
	if keys.Len() != 2 {
		t.Fatalf("%d keys after a period", keys.Len())
	}
	if _, err := keys.open(old); err != nil {
		t.Fatal("the previous key does not open its ticket:", err)
	}
	seal(t0.Add(61*time.Minute + life)) // exactly life after: still kept
	if keys.Len() != 2 {
		t.Fatalf("%d keys at the last moment a ticket of the first may live", keys.Len())
	}
	seal(t0.Add(61*time.Minute + life + time.Second))
	if keys.Len() != 1 {
		t.Fatalf("%d keys after the first key's tickets expired", keys.Len())
	}
	if _, err := keys.open(old); err == nil {
		t.Fatal("a dropped key still opens its ticket")
	}
	// A clock set back makes a new key rather than seal with one "from
	// the future".
	seal(t0)
	if keys.Len() != 2 {
		t.Fatalf("%d keys after the clock went back", keys.Len())
	}
	if _, err := keys.open([]byte("short")); err == nil {
		t.Fatal("a truncated ticket opened")
	}
}
