package tls13

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// The server's ticket and cookie keys come from Config.Rand, once per
// Config and only when first needed: a fixed Rand gives fixed keys.
func TestTicketAndCookieKeysComeFromRand(t *testing.T) {
	stream := make([]byte, 64)
	for i := range stream {
		stream[i] = byte(i)
	}
	cfg := &Config{Rand: bytes.NewReader(stream)}
	cookie, err := cfg.helloRetryCookieKey()
	if err != nil || !bytes.Equal(cookie, stream[:32]) {
		t.Fatalf("cookie key %x, %v; want the first 32 bytes of Rand", cookie, err)
	}
	ticket, err := cfg.sessionTicketKey()
	if err != nil || !bytes.Equal(ticket, stream[32:]) {
		t.Fatalf("ticket key %x, %v; want the next 32 bytes of Rand", ticket, err)
	}
	again, err := cfg.sessionTicketKey()
	if err != nil || !bytes.Equal(again, ticket) {
		t.Fatalf("ticket key drawn again: %x, %v", again, err)
	}

	// Config.TicketKey wins; a failed draw is an error, retried next time.
	r := &flakyReader{fail: true}
	cfg = &Config{Rand: r, TicketKey: [32]byte{7}}
	if k, err := cfg.sessionTicketKey(); err != nil || k[0] != 7 {
		t.Fatalf("TicketKey not used: %x, %v", k, err)
	}
	if _, err := cfg.helloRetryCookieKey(); err == nil {
		t.Fatal("a failing Rand made a cookie key")
	}
	r.fail = false
	if k, err := cfg.helloRetryCookieKey(); err != nil || len(k) != 32 {
		t.Fatalf("cookie key after Rand recovered: %x, %v", k, err)
	}
}

type flakyReader struct{ fail bool }

func (r *flakyReader) Read(p []byte) (int, error) {
	if r.fail {
		return 0, errors.New("no entropy")
	}
	return io.ReadFull(bytes.NewReader(bytes.Repeat([]byte{1}, len(p))), p)
}
