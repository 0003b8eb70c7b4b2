package tls13

import (
	"crypto/aes"
	"crypto/cipher"
	cryptorand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// TicketKeys is a server's rotating set of session-ticket keys. A new key
// seals the tickets issued during each Period; an older key only opens
// tickets, and is dropped once every ticket it sealed has expired (Period
// plus the Config's ticket lifetime after it was made, by the Config's
// clock). Keys are dropped whenever a ticket is sealed or opened, so a
// dropped key opens nothing, even on a server that has stopped issuing
// tickets; one that sees no handshake at all still holds its last key in
// memory until its next handshake drops it. Whoever steals the
// server's memory can therefore open the tickets of at most that span, and
// so learn their resumption secrets, rather than of the process's whole
// life as with one fixed TicketKey. A connection resumed with psk_ke
// (Config.PSKModes) depends on nothing else: its traffic is readable with
// the ticket key that sealed its ticket.
//
// One TicketKeys may be shared by many Configs (a SIGHUP reload's clone,
// the servers of a fleet in one process). Servers in different processes
// cannot share one; tickets they issue resume only at the server that
// issued them. Go gives no way to wipe
// the expanded AES key inside a cipher.AEAD, so a dropped key is left to
// the garbage collector.
type TicketKeys struct {
	period time.Duration
	rand   io.Reader

	mu   sync.Mutex
	keys []ticketKey // newest first
}

type ticketKey struct {
	aead    cipher.AEAD
	created time.Time
}

// NewTicketKeys returns a set that makes a new sealing key every period
// (at least a minute; 0 means one hour). rand nil means the Config's
// Rand (crypto/rand by default).
func NewTicketKeys(period time.Duration, rand io.Reader) *TicketKeys {
	if period <= 0 {
		period = time.Hour
	}
	return &TicketKeys{period: max(period, time.Minute), rand: rand}
}

// Len is the number of keys held (sealing and opening).
func (k *TicketKeys) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.keys)
}

// sealing returns the AEAD new tickets are sealed with at now, making a
// new key when the newest is a period old (or newer than now: a clock set
// back) and dropping keys no unexpired ticket needs.
func (k *TicketKeys) sealing(now time.Time, lifetime time.Duration, fallback io.Reader) (cipher.AEAD, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.dropLocked(now, lifetime)
	if len(k.keys) > 0 {
		if age := now.Sub(k.keys[0].created); age >= 0 && age < k.period {
			return k.keys[0].aead, nil
		}
	}
	rand := k.rand
	if rand == nil {
		rand = fallback
	}
	if rand == nil {
		rand = cryptorand.Reader
	}
	var key [32]byte
	defer clear(key[:])
	if _, err := io.ReadFull(rand, key[:]); err != nil {
		return nil, fmt.Errorf("tls13: making a ticket key: %w", err)
	}
	block, err := aes.NewCipher(key[:])
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	k.keys = append([]ticketKey{{aead, now}}, k.keys...)
	return aead, nil
}

// dropLocked forgets the keys whose last ticket has expired at now.
func (k *TicketKeys) dropLocked(now time.Time, lifetime time.Duration) {
	keep := k.keys[:0]
	for i, key := range k.keys {
		// A key seals for one period, or until the next one is made if
		// that is sooner (a clock set back), and its tickets live
		// lifetime after that. The newest key is no exception: on an
		// idle server it has sealed nothing since its period ended.
		sealedUntil := key.created.Add(k.period)
		if i > 0 && k.keys[i-1].created.Before(sealedUntil) {
			sealedUntil = k.keys[i-1].created
		}
		if now.Sub(sealedUntil) <= lifetime {
			keep = append(keep, key)
		}
	}
	clear(k.keys[len(keep):])
	k.keys = keep
}

// open decrypts a ticket with whichever held key sealed it, first
// dropping, as sealing does, the keys whose tickets have all expired at
// now: a server that seals nothing must not keep opening old tickets.
func (k *TicketKeys) open(now time.Time, lifetime time.Duration, ticket []byte) ([]byte, error) {
	k.mu.Lock()
	k.dropLocked(now, lifetime)
	aeads := make([]cipher.AEAD, len(k.keys))
	for i, key := range k.keys {
		aeads[i] = key.aead
	}
	k.mu.Unlock()
	for _, aead := range aeads {
		if len(ticket) < ticketNonceLen+aead.Overhead() {
			return nil, errors.New("tls13: ticket too short")
		}
		if plain, err := aead.Open(nil, ticket[:ticketNonceLen], ticket[ticketNonceLen:], nil); err == nil {
			return plain, nil
		}
	}
	return nil, errors.New("tls13: ticket not ours (or its key has been dropped)")
}
