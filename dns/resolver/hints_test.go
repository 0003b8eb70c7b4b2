package resolver

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// A DNS-over-TLS server whose certificate fails verification is asked
// once: a certificate error is not transient, so the lookup fails at
// once with it (issue 27: it waited out the 5 s budget, reconnecting
// after each backoff, and then said only that time ran out), naming the
// server. Another server is still asked.
func TestTLSCertificateErrorIsNotRetried(t *testing.T) {
	answer := func(s *session, q *dns.Msg, _ []byte) {
		s.send(t, reply(t, q, q.Question[0].Name+" 60 IN A 192.0.2.1"))
	}
	untrusted := startStreamServer(t, newTestPKI(t), answer)

	r, err := New(Config{Servers: []string{untrusted.Addr}, Transport: TLS, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = r.Lookup(context.Background(), "www.example.com", dns.TypeA)
	var ce *tls.CertificateVerificationError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), untrusted.Addr) {
		t.Fatalf("lookup: %v; want the certificate error, naming %s", err, untrusted.Addr)
	}
	if n := untrusted.conns.Load(); n != 1 {
		t.Errorf("the server with the untrusted certificate was connected to %d times, want 1", n)
	}

	// With a second server that is trusted, the lookup gets its answer.
	pki := newTestPKI(t)
	trusted := startStreamServer(t, pki, answer)
	r2, err := New(Config{Servers: []string{untrusted.Addr, trusted.Addr}, Transport: TLS, Timeout: time.Minute,
		TLSConfig: &tls.Config{RootCAs: pki.Pool}})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	a, err := r2.Lookup(context.Background(), "www.example.com", dns.TypeA)
	if err != nil || firstA(a) != "192.0.2.1" {
		t.Fatalf("lookup with a trusted second server: %v, %v", firstA(a), err)
	}
}

// A server that never answers is named in the error.
func TestNoReplyNamesTheServer(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close() // reads nothing: every query goes unanswered
	r, err := New(Config{Servers: []string{pc.LocalAddr().String()}, Transport: UDP, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = r.Lookup(context.Background(), "www.example.com", dns.TypeA)
	want := "no reply from " + pc.LocalAddr().String() + " within 200ms"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("lookup: %v; want it to say %q", err, want)
	}
}
