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
	// The second key, made at 1h01: the first sealed until its period
	// ended, at 1h00.
	seal(t0.Add(61 * time.Minute))
	if keys.Len() != 2 {
		t.Fatalf("%d keys after a period", keys.Len())
	}
	if _, err := keys.open(t0.Add(61*time.Minute), life, old); err != nil {
		t.Fatal("the previous key does not open its ticket:", err)
	}
	seal(t0.Add(60*time.Minute + life)) // exactly life after: still kept
	if keys.Len() != 2 {
		t.Fatalf("%d keys at the last moment a ticket of the first may live", keys.Len())
	}
	seal(t0.Add(60*time.Minute + life + time.Second))
	if keys.Len() != 1 {
		t.Fatalf("%d keys after the first key's tickets expired", keys.Len())
	}
	if _, err := keys.open(t0.Add(60*time.Minute+life+time.Second), life, old); err == nil {
		t.Fatal("a dropped key still opens its ticket")
	}
	// A clock set back makes a new key rather than seal with one "from
	// the future".
	seal(t0)
	if keys.Len() != 2 {
		t.Fatalf("%d keys after the clock went back", keys.Len())
	}
	if _, err := keys.open(t0, life, []byte("short")); err == nil {
		t.Fatal("a truncated ticket opened")
	}
}

// An idle server, one that seals no ticket after its key's period, must
// not keep that key past the documented limit (Period plus the ticket
// lifetime after the key was made): whoever reads the server's memory
// then would open every ticket the key sealed, recorded off the wire, and
// with their resumption secrets read the sessions resumed with psk_ke.
// Opening a ticket drops the key as sealing one does, so a client that
// offers the ticket after the limit gets a full handshake, and the ticket
// opens under no key the server still holds.
func TestTicketKeysIdleServerDropsExpiredKey(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	t0 := clock.Now()
	var serverNow atomic.Int64
	serverNow.Store(t0.UnixNano())
	keys := NewTicketKeys(time.Hour, nil)
	scfg := serverConfig(p)
	scfg.TicketKeys = keys
	scfg.PSKModes = []PSKMode{PSKModeKE, PSKModeDHEKE}
	scfg.Time = func() time.Time { return time.Unix(0, serverNow.Load()) }
	life := scfg.ticketLifetime() // the default, 24 hours
	limit := t0.Add(time.Hour + life)

	// The ticket's holder offers it whatever its age (its clock stays
	// at t0), as a resolver with a slow clock, or the attacker, would.
	connect := func(sess *ClientSession) (bool, *ClientSession) {
		t.Helper()
		ccfg := clientConfig(p)
		ccfg.PSKModes = []PSKMode{PSKModeKE, PSKModeDHEKE}
		ccfg.Time = func() time.Time { return t0 }
		ccfg.ClientSessionCache = NewLRUClientSessionCache(1)
		if sess != nil {
			ccfg.ClientSessionCache.Put("localhost", sess)
		}
		c, s, cerr, serr := pair(t, ccfg, scfg)
		if cerr != nil || serr != nil {
			t.Fatalf("client %v, server %v", cerr, serr)
		}
		go echo(s)
		roundTrip(t, c, "idle")
		return c.ConnectionState().DidResume, c.Session()
	}
	opens := func(at time.Time, ticket []byte) error {
		_, err := keys.open(at, life, ticket)
		return err
	}

	_, first := connect(nil)
	if first == nil {
		t.Fatal("no ticket issued")
	}
	if ok, _ := connect(first); !ok {
		t.Fatal("the ticket does not resume at once")
	}
	// The server stays idle. At the limit the key may still be held:
	// the last ticket it could seal lives until then.
	if err := opens(limit, first.Ticket); err != nil {
		t.Fatal("the key was dropped before the documented limit:", err)
	}
	// A second later it must be gone, though nothing was sealed since.
	serverNow.Store(limit.Add(time.Second).UnixNano())
	if ok, _ := connect(first); ok {
		t.Fatal("a ticket resumed past its key's life")
	}
	if keys.Len() != 1 {
		t.Errorf("%d keys held past the first key's life, want 1 (the one made for the new ticket)", keys.Len())
	}
	if err := opens(limit.Add(time.Second), first.Ticket); err == nil {
		t.Fatal("a key past its life still opens its ticket on an idle server")
	}
}
