package tls13

// The conformance table: one row per rule, labelled with its kind (MUST,
// MUST NOT, SHOULD, permitted choice, limit); conformance_sections_test.go
// holds the rows of Sections 4.2.3 to 4.2.7, 4.4.1, 4.6, 7, 8 and 9.3. See
// conformance_test.go for the hostile peer and docs/conformance.md for
// the generated overview.

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"golang.org/x/crypto/cryptobyte"

	"github.com/ztls-project/ztls/tls13/internal/record"
	"github.com/ztls-project/ztls/tls13/internal/suite"
	"github.com/ztls-project/ztls/tls13/internal/wire"
)

const (
	sec5    = "RFC 8446, Section 5"
	sec51   = "RFC 8446, Section 5.1"
	sec52   = "RFC 8446, Section 5.2"
	sec54   = "RFC 8446, Section 5.4"
	sec6    = "RFC 8446, Section 6"
	sec61   = "RFC 8446, Section 6.1"
	sec62   = "RFC 8446, Section 6.2"
	secD4   = "RFC 8446, Appendix D.4"
	secD    = "RFC 8446, Appendix D"
	secD5   = "RFC 8446, Appendix D.5"
	sec4    = "RFC 8446, Section 4"
	sec411  = "RFC 8446, Section 4.1.1"
	sec412  = "RFC 8446, Section 4.1.2"
	sec413  = "RFC 8446, Section 4.1.3"
	sec414  = "RFC 8446, Section 4.1.4"
	sec42   = "RFC 8446, Section 4.2"
	sec421  = "RFC 8446, Section 4.2.1"
	sec423  = "RFC 8446, Section 4.2.3"
	sec428  = "RFC 8446, Section 4.2.8"
	sec429  = "RFC 8446, Section 4.2.9"
	sec4210 = "RFC 8446, Section 4.2.10"
	sec4211 = "RFC 8446, Section 4.2.11"
	sec432  = "RFC 8446, Section 4.3.2"
	sec442  = "RFC 8446, Section 4.4.2"
	sec4422 = "RFC 8446, Section 4.4.2.2"
	sec4424 = "RFC 8446, Section 4.4.2.4"
	sec443  = "RFC 8446, Section 4.4.3"
	sec444  = "RFC 8446, Section 4.4.4"
	sec45   = "RFC 8446, Section 4.5"
	secA2   = "RFC 8446, Appendix A.2"
	sec461  = "RFC 8446, Section 4.6.1"
	sec463  = "RFC 8446, Section 4.6.3"
	sec92   = "RFC 8446, Section 9.2"
	rfc8449 = "RFC 8449, Section 4"
	rfc7301 = "RFC 7301, Section 3.2"
	// Errata of RFC 8446 (https://www.rfc-editor.org/errata/rfc8446) a
	// row's rule comes from.
	sec42e6820  = "RFC 8446, Section 4.2 (Erratum 6820)"
	sec461e7250 = "RFC 8446, Section 4.6.1 (Erratum 7250)"
	bounds      = "RFC 8446, Section 5 (bound as OpenSSL/BoringSSL)"
)

// first delivers one made-up record as the first thing the engine under
// test reads in the clear: a server before any ClientHello, a client
// after its ClientHello, before the ServerHello.
func first(x ...*rec) func(c *conv) {
	return func(c *conv) {
		if c.sutClient {
			c.peerRecs() // the server's flight is dropped
		}
		c.deliver(x...)
	}
}

// toProtected advances the conversation to where the engine under test
// reads protected handshake records and returns the peer's handshake
// epoch and its protected handshake messages not yet delivered.
func (c *conv) toProtected() (int, []*rec) {
	if c.sutClient {
		recs := c.peerRecs()
		i := 0
		for i < len(recs) && recs[i].epoch < 0 {
			i++
		}
		c.deliver(recs[:i]...)
		return recs[i].epoch, recs[i:]
	}
	c.relay() // ClientHello; the engine answers with its flight
	var out []*rec
	for _, r := range c.peerRecs() {
		if r.epoch >= 0 {
			out = append(out, r)
		}
	}
	return out[0].epoch, out
}

// protected delivers made-up records under the peer's handshake key.
func protected(x ...*rec) func(c *conv) {
	return func(c *conv) {
		ep, _ := c.toProtected()
		for _, r := range x {
			r.epoch = ep
		}
		c.deliver(x...)
	}
}

// afterHandshake completes the handshake, then delivers made-up records
// under the peer's application key.
func afterHandshake(x ...*rec) func(c *conv) {
	return func(c *conv) {
		if err := c.handshake(); err != nil {
			return
		}
		ep := c.epoch()
		for _, r := range x {
			if r.epoch == 0 {
				r.epoch = ep
			}
		}
		c.deliver(x...)
	}
}

func plain(ct record.ContentType, data []byte) *rec  { return &rec{ct: ct, epoch: -1, data: data} }
func sealed(ct record.ContentType, data []byte) *rec { return &rec{ct: ct, data: data} }

func repeat(n int, mk func() *rec) []*rec {
	out := make([]*rec, n)
	for i := range out {
		out[i] = mk()
	}
	return out
}

// rewriteFlight delivers the peer's next flight after f rewrote it. For a
// server under test that flight is the ClientHello, for a client the
// server's first flight.
func rewriteFlight(f func(c *conv, recs []*rec) []*rec) func(c *conv) {
	return func(c *conv) { c.deliver(f(c, c.peerRecs())...) }
}

// rewriteClientSecondFlight delivers the ClientHello, then the client's
// second flight (Certificate, CertificateVerify, Finished) after f.
func rewriteClientSecondFlight(f func(c *conv, recs []*rec) []*rec) func(c *conv) {
	return func(c *conv) {
		c.relay()
		var hs []*rec
		for _, r := range c.peerRecs() {
			if r.epoch >= 0 {
				hs = append(hs, r)
			}
		}
		c.deliver(f(c, hs)...)
	}
}

// rewriteMsg re-encodes the handshake message of type typ after f.
func rewriteSH(f func(sh *wire.ServerHello)) func(c *conv) {
	return rewriteFlight(func(c *conv, recs []*rec) []*rec {
		r := c.must(recs, wire.TypeServerHello)
		sh, err := wire.ParseServerHello(r.data)
		if err != nil {
			c.t.Fatal(err)
		}
		sh.Order = nil
		f(sh)
		r.data = c.marshal(sh)
		return recs
	})
}

func rewriteCH(f func(ch *wire.ClientHello)) func(c *conv) {
	return rewriteFlight(func(c *conv, recs []*rec) []*rec {
		r := c.must(recs, wire.TypeClientHello)
		r.data = c.rewriteClientHello(r.data, f)
		return recs
	})
}

func (c *conv) rewriteClientHello(raw []byte, f func(ch *wire.ClientHello)) []byte {
	ch, err := wire.ParseClientHello(raw)
	if err != nil {
		c.t.Fatal(err)
	}
	ch.Order = nil
	f(ch)
	return c.marshal(ch)
}

func rewriteEE(f func(ee *wire.EncryptedExtensions)) func(c *conv) {
	return rewriteFlight(func(c *conv, recs []*rec) []*rec {
		r := c.must(recs, wire.TypeEncryptedExtensions)
		ee, err := wire.ParseEncryptedExtensions(r.data)
		if err != nil {
			c.t.Fatal(err)
		}
		ee.Order = nil
		f(ee)
		r.data = c.marshal(ee)
		return recs
	})
}

// rewritePeerCertificate rewrites the peer's Certificate (the server's,
// or the client's when the server under test asks for one).
func rewritePeerCertificate(f func(cm *wire.Certificate)) func(c *conv) {
	g := func(c *conv, recs []*rec) []*rec {
		r := c.must(recs, wire.TypeCertificate)
		cm, err := wire.ParseCertificate(r.data)
		if err != nil {
			c.t.Fatal(err)
		}
		f(cm)
		r.data = c.marshal(cm)
		return recs
	}
	return func(c *conv) {
		if c.sutClient {
			rewriteFlight(g)(c)
		} else {
			rewriteClientSecondFlight(g)(c)
		}
	}
}

// peerFlight rewrites whichever flight of the peer carries handshake
// messages of typ: the server's first flight, or the client's second.
func peerFlight(f func(c *conv, recs []*rec) []*rec) func(c *conv) {
	return func(c *conv) {
		if c.sutClient {
			rewriteFlight(f)(c)
		} else {
			rewriteClientSecondFlight(f)(c)
		}
	}
}

func withClientCert(o *convOpts) {
	p := getPKI(o.t, "ecdsa-p256")
	o.scfg.ClientAuth = RequestClientCert
	o.ccfg.Certificates = []Certificate{p.client}
}

// hrrSetup makes the server ask for P-256 while the client shares X25519 only.
func hrrSetup(o *convOpts) {
	o.scfg.Groups = []CurveID{P256}
	o.ccfg.Groups = []CurveID{X25519, P256}
	o.ccfg.KeyShareGroups = []CurveID{X25519}
}

// secondClientHello answers the server's HelloRetryRequest with the peer
// client's second ClientHello after f.
func secondClientHello(f func(ch *wire.ClientHello)) func(c *conv) {
	return func(c *conv) {
		c.relay() // ClientHello; HelloRetryRequest back to the peer
		recs := c.peerRecs()
		r := c.must(recs, wire.TypeClientHello)
		r.data = c.rewriteClientHello(r.data, f)
		c.deliver(recs...)
	}
}

// handshakeCompletes is the outcome of rows whose conversation is legal.
var handshakeCompletes = behaves("handshake completes", func(c *conv) error {
	if c.err != nil {
		return c.err
	}
	if !c.sut.done {
		return fmt.Errorf("handshake did not complete")
	}
	return nil
})

// completeHandshake relays what is left of the handshake.
func (c *conv) completeHandshake() {
	for i := 0; i < 4 && c.err == nil && !(c.sut.done && c.peer.done); i++ {
		c.relay()
	}
}

// fragment splits every handshake message into records of n bytes.
func fragment(recs []*rec, n int) []*rec {
	var out []*rec
	for _, r := range recs {
		if r.ct != record.TypeHandshake {
			out = append(out, r)
			continue
		}
		for d := r.data; len(d) > 0; {
			k := min(n, len(d))
			out = append(out, &rec{ct: r.ct, epoch: r.epoch, data: d[:k]})
			d = d[k:]
		}
	}
	return out
}

// noKeyUsageCert is a certificate from the test CA whose Key Usage
// allows only keyEncipherment.
var (
	noKeyUsageOnce sync.Once
	noKeyUsage     Certificate
)

func noKeyUsageCert(t testing.TB) Certificate {
	noKeyUsageOnce.Do(func() {
		p := getPKI(t, "ecdsa-p256")
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(4242),
			Subject:      pkix.Name{CommonName: "no digitalSignature"},
			DNSNames:     []string{"localhost"},
			NotBefore:    clock.Now().Add(-time.Hour),
			NotAfter:     clock.Now().Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageKeyEncipherment,
			ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca.Cert, key.Public(), p.ca.Key)
		if err != nil {
			panic(err)
		}
		noKeyUsage = Certificate{Chain: [][]byte{der}, PrivateKey: key}
	})
	return noKeyUsage
}

// neverFresh is a strike register that has seen every ClientHello, so a
// server rejects 0-RTT.
type neverFresh struct{}

func (neverFresh) CheckAndInsert([]byte, time.Time, time.Time, time.Time) (bool, error) {
	return false, nil
}

// sentRecords counts the records the engine under test sent from offset on.
func (c *conv) sentRecords(from int) int {
	var d record.Deframer
	d.Write(c.sutOut[from:])
	n := 0
	for {
		_, _, ok, err := d.Next()
		if err != nil || !ok {
			return n
		}
		n++
	}
}

func conformanceTable() []conformanceRow {
	var rows []conformanceRow
	add := func(r conformanceRow) { rows = append(rows, r) }

	// Record layer (Section 5).
	for _, ct := range []record.ContentType{0, 10, 24} {
		add(conformanceRow{
			id: fmt.Sprintf("record/unknown-content-type-%d", ct), kind: kindMust, section: sec5, roles: bothRoles,
			rule: fmt.Sprintf("a record of unknown content type (%d) is an unexpected_message", ct),
			run:  first(plain(ct, []byte{1, 2, 3})), want: sends(AlertUnexpectedMessage),
		})
	}
	add(conformanceRow{id: "record/empty-handshake", kind: kindMustNot, section: sec51, roles: bothRoles,
		rule: "MUST NOT send zero-length handshake fragments",
		run:  first(plain(record.TypeHandshake, nil)), want: chooses(AlertUnexpectedMessage)})
	add(conformanceRow{id: "record/empty-handshake-protected", kind: kindMustNot, section: sec51, roles: bothRoles,
		rule: "MUST NOT send zero-length handshake fragments, even with padding",
		run:  protected(&rec{ct: record.TypeHandshake, pad: 8}), want: chooses(AlertUnexpectedMessage)})
	add(conformanceRow{id: "record/empty-plaintext-appdata", kind: kindMustNot, section: sec51, roles: bothRoles,
		rule: "an empty unprotected application_data record during the handshake is unexpected",
		run:  first(plain(record.TypeApplicationData, nil)), want: sends(AlertUnexpectedMessage)})
	add(conformanceRow{id: "record/empty-plaintext-appdata-0x0301", kind: kindMust, section: secD, roles: bothRoles,
		rule: "an empty application_data record of legacy_record_version 0x0301 before any key (17 03 01 00 00) is an unexpected_message: a TLSPlaintext's version is ignored",
		run:  first(&rec{raw: []byte{23, 3, 1, 0, 0}}), want: sends(AlertUnexpectedMessage)})
	add(conformanceRow{id: "record/plaintext-appdata", kind: kindMust, section: sec5, roles: bothRoles,
		rule: "application data before keys is unexpected",
		run:  first(plain(record.TypeApplicationData, []byte("GET /"))), want: sends(AlertUnexpectedMessage)})
	add(conformanceRow{id: "record/handshake-spans-key-change", kind: kindMust, section: sec51, roles: asClient,
		rule: "messages before a key change MUST align with a record boundary",
		run: rewriteFlight(func(c *conv, recs []*rec) []*rec {
			sh := c.must(recs, wire.TypeServerHello)
			ee := c.must(recs, wire.TypeEncryptedExtensions)
			return []*rec{plain(record.TypeHandshake, append(bytes.Clone(sh.data), ee.data...))}
		}), want: sends(AlertUnexpectedMessage)})
	add(conformanceRow{id: "record/keyupdate-spans-key-change", kind: kindMust, section: sec51, roles: bothRoles,
		rule: "a KeyUpdate MUST end its record",
		run:  afterHandshake(sealed(record.TypeHandshake, append(hsMsg(wire.TypeKeyUpdate, []byte{0}), hsMsg(wire.TypeKeyUpdate, []byte{0})...))),
		want: sends(AlertUnexpectedMessage)})
	add(conformanceRow{id: "record/fragmented-handshake", kind: kindPermitted, section: sec51, roles: bothRoles,
		rule: "handshake messages may be fragmented over records (7-byte records)",
		run: func(c *conv) {
			for i := 0; i < 4 && c.err == nil && !(c.sut.done && c.peer.done); i++ {
				c.deliver(fragment(c.peerRecs(), 7)...)
			}
		}, want: handshakeCompletes})
	add(conformanceRow{id: "record/coalesced-handshake", kind: kindPermitted, section: sec51, roles: asClient,
		rule: "several handshake messages may share one record",
		run: func(c *conv) {
			ep, rest := c.toProtected()
			var all []byte
			for _, r := range rest {
				all = append(all, r.data...)
			}
			c.deliver(&rec{ct: record.TypeHandshake, epoch: ep, data: all})
			c.completeHandshake()
		}, want: handshakeCompletes})
	add(conformanceRow{id: "record/interleaved-ccs", kind: kindMustNot, section: sec51, roles: bothRoles,
		rule: "MUST NOT interleave other records between the fragments of a handshake message",
		run: peerFlight(func(c *conv, recs []*rec) []*rec {
			i := find(recs, wire.TypeFinished)
			if c.sutClient {
				i = find(recs, wire.TypeServerHello)
			}
			r := recs[i]
			h := len(r.data) / 2
			a := &rec{ct: r.ct, epoch: r.epoch, data: r.data[:h]}
			b := &rec{ct: r.ct, epoch: r.epoch, data: r.data[h:]}
			out := append([]*rec(nil), recs[:i]...)
			return append(out, a, plain(record.TypeChangeCipherSpec, []byte{1}), b)
		}), want: chooses(AlertUnexpectedMessage)})
	add(conformanceRow{id: "record/interleaved-appdata", kind: kindMustNot, section: sec51, roles: asClient,
		rule: "MUST NOT interleave application data with a fragmented handshake message",
		run: func(c *conv) {
			ep, rest := c.toProtected()
			r := rest[0]
			h := len(r.data) / 2
			c.deliver(&rec{ct: r.ct, epoch: ep, data: r.data[:h]}, &rec{ct: record.TypeApplicationData, epoch: ep, data: []byte("x")})
		}, want: chooses(AlertUnexpectedMessage)})
	add(conformanceRow{id: "record/plaintext-overflow", kind: kindMust, section: sec51, roles: bothRoles,
		rule: "an unprotected record over 2^14 bytes is a record_overflow",
		run:  first(plain(record.TypeHandshake, make([]byte, 16385))), want: sends(AlertRecordOverflow)})
	add(conformanceRow{id: "record/ciphertext-overflow", kind: kindMust, section: sec52, roles: bothRoles,
		rule: "a TLSCiphertext over 2^14+256 bytes is a record_overflow",
		run:  protected(&rec{raw: append([]byte{23, 3, 3, 0x41, 0x01}, make([]byte, 0x4101)...)}), want: sends(AlertRecordOverflow)})
	add(conformanceRow{id: "record/inner-plaintext-overflow", kind: kindMust, section: sec52, roles: bothRoles,
		rule: "a TLSInnerPlaintext over 2^14+1 bytes is a record_overflow",
		run:  protected(&rec{ct: record.TypeHandshake, data: make([]byte, 16385)}), want: sends(AlertRecordOverflow)})
	add(conformanceRow{id: "record/bad-mac", kind: kindMust, section: sec52, roles: bothRoles,
		rule: "a record that fails deprotection is a bad_record_mac",
		run: func(c *conv) {
			_, rest := c.toProtected()
			rest[0].flip = true
			c.deliver(rest...)
		}, want: sends(AlertBadRecordMAC)})
	add(conformanceRow{id: "record/padding", kind: kindPermitted, section: sec54, roles: bothRoles,
		rule: "padding (zero bytes after the content type) is removed",
		run: func(c *conv) {
			_, rest := c.toProtected()
			for _, r := range rest {
				r.pad = 1000
			}
			c.deliver(rest...)
			c.completeHandshake()
		}, want: handshakeCompletes})
	add(conformanceRow{id: "record/all-zero-plaintext", kind: kindMust, section: sec54, roles: bothRoles,
		rule: "a protected record with no non-zero octet is an unexpected_message",
		run:  protected(&rec{inner: make([]byte, 32)}), want: sends(AlertUnexpectedMessage)})
	add(conformanceRow{id: "record/protected-unknown-type", kind: kindMust, section: sec5, roles: bothRoles,
		rule: "a protected record of unknown inner content type is an unexpected_message",
		run:  protected(&rec{inner: []byte{1, 2, 3, 99}}), want: sends(AlertUnexpectedMessage)})
	add(conformanceRow{id: "record/size-limit", kind: kindMust, section: rfc8449, roles: bothRoles,
		rule: "a record larger than the advertised record_size_limit is a record_overflow",
		setup: func(o *convOpts) {
			o.ccfg.RecordSizeLimit, o.scfg.RecordSizeLimit = 256, 256
		},
		run: func(c *conv) {
			_, rest := c.toProtected()
			rest[0].pad = 600
			c.deliver(rest...)
		}, want: sends(AlertRecordOverflow)})
	add(conformanceRow{id: "record/size-limit-below-64-ch", kind: kindMust, section: rfc8449, roles: asServer,
		rule: "a record_size_limit below 64 is an illegal_parameter",
		run:  rewriteCH(func(ch *wire.ClientHello) { ch.RecordSizeLimit = 63 }), want: sends(AlertIllegalParameter)})
	add(conformanceRow{id: "record/size-limit-below-64-ee", kind: kindMust, section: rfc8449, roles: asClient,
		rule: "a record_size_limit below 64 is an illegal_parameter",
		run: rewriteEE(func(ee *wire.EncryptedExtensions) {
			ee.RecordSizeLimit = 0
			ee.Extra = append(ee.Extra, wire.Extension{Type: wire.ExtRecordSizeLimit, Data: []byte{0, 63}})
		}), want: sends(AlertIllegalParameter)})

	hostilePeerRows(add)

	// change_cipher_spec (Section 5, Appendix D.4).
	add(conformanceRow{id: "ccs/dropped", kind: kindMust, section: secD4, roles: bothRoles,
		rule: "a change_cipher_spec of one 0x01 byte before the peer's Finished is dropped",
		run: peerFlight(func(c *conv, recs []*rec) []*rec {
			return insertBefore(recs, wire.TypeFinished, plain(record.TypeChangeCipherSpec, []byte{1}))
		}), want: behaves("no error", func(c *conv) error { return c.err })})
	add(conformanceRow{id: "ccs/before-clienthello", kind: kindMust, section: sec5, roles: asServer,
		rule: "a change_cipher_spec before the first ClientHello is an unexpected_message",
		run:  first(plain(record.TypeChangeCipherSpec, []byte{1})), want: sends(AlertUnexpectedMessage)})
	add(conformanceRow{id: "ccs/bad-value", kind: kindMust, section: sec5, roles: asClient,
		rule: "a change_cipher_spec other than the single byte 0x01 is an unexpected_message",
		run:  first(plain(record.TypeChangeCipherSpec, []byte{2})), want: sends(AlertUnexpectedMessage)})
	add(conformanceRow{id: "ccs/two-bytes", kind: kindMust, section: sec5, roles: asClient,
		rule: "a change_cipher_spec other than the single byte 0x01 is an unexpected_message",
		run:  first(plain(record.TypeChangeCipherSpec, []byte{1, 1})), want: sends(AlertUnexpectedMessage)})
	add(conformanceRow{id: "ccs/protected", kind: kindMust, section: sec5, roles: bothRoles,
		rule: "a protected change_cipher_spec is an unexpected_message",
		run:  protected(sealed(record.TypeChangeCipherSpec, []byte{1})), want: sends(AlertUnexpectedMessage)})
	add(conformanceRow{id: "ccs/after-handshake", kind: kindMust, section: sec5, roles: bothRoles,
		rule: "a change_cipher_spec after the handshake is an unexpected_message",
		run:  afterHandshake(&rec{ct: record.TypeChangeCipherSpec, epoch: -1, data: []byte{1}, raw: []byte{20, 3, 3, 0, 1, 1}}), want: sends(AlertUnexpectedMessage)})
	add(conformanceRow{id: "ccs/flood", kind: kindLimit, section: bounds, roles: bothRoles,
		rule: fmt.Sprintf("more than %d change_cipher_spec records in a row are refused", maxEmptyRecords),
		run: peerFlight(func(c *conv, recs []*rec) []*rec {
			return insertBefore(recs, wire.TypeFinished, repeat(maxEmptyRecords+1, func() *rec { return plain(record.TypeChangeCipherSpec, []byte{1}) })...)
		}), want: chooses(AlertUnexpectedMessage)})
	add(conformanceRow{id: "record/empty-appdata-flood", kind: kindLimit, section: bounds, roles: bothRoles,
		rule: fmt.Sprintf("more than %d empty application data records in a row are refused", maxEmptyRecords),
		run:  afterHandshake(repeat(maxEmptyRecords+1, func() *rec { return sealed(record.TypeApplicationData, nil) })...), want: chooses(AlertUnexpectedMessage)})
	add(conformanceRow{id: "record/empty-appdata-allowed", kind: kindPermitted, section: sec51, roles: bothRoles,
		rule: "zero-length application data fragments MAY be sent",
		run:  afterHandshake(sealed(record.TypeApplicationData, nil), sealed(record.TypeApplicationData, nil), sealed(record.TypeApplicationData, []byte("x"))),
		want: behaves("no error; the data is read", func(c *conv) error {
			if c.err != nil {
				return c.err
			}
			if c.sut.appBuffered() != 1 {
				return fmt.Errorf("%d bytes buffered, want 1", c.sut.appBuffered())
			}
			return nil
		})})

	// Alerts (Sections 5.1, 6).
	add(conformanceRow{id: "alert/empty", kind: kindMust, section: sec6, roles: bothRoles,
		rule: "an alert record with an empty body is an unexpected_message (no zero-length alert fragments, Section 5.1)",
		run:  first(plain(record.TypeAlert, nil)), want: chooses(AlertUnexpectedMessage)})
	add(conformanceRow{id: "alert/empty-protected", kind: kindMust, section: sec6, roles: bothRoles,
		rule: "an alert record with an empty body is an unexpected_message",
		run:  protected(sealed(record.TypeAlert, nil)), want: chooses(AlertUnexpectedMessage)})
	add(conformanceRow{id: "alert/fragment", kind: kindMustNot, section: sec51, roles: bothRoles,
		rule: "alerts MUST NOT be fragmented: a one-byte alert is a decode_error",
		run:  first(plain(record.TypeAlert, []byte{2})), want: sends(AlertDecodeError)})
	add(conformanceRow{id: "alert/too-long", kind: kindMust, section: sec6, roles: bothRoles,
		rule: "an alert record of three bytes is a decode_error",
		run:  first(plain(record.TypeAlert, []byte{2, 40, 0})), want: sends(AlertDecodeError)})
	fatalReceived := func(a Alert) outcome {
		return behaves("fails with the peer's "+a.String()+", sends no alert back", func(c *conv) error {
			ae, ok := c.err.(*AlertError)
			if !ok || ae.Alert != a {
				return fmt.Errorf("error %v, want the peer's %s", c.err, a)
			}
			if al := c.sutAlerts(); len(al) > 0 {
				return fmt.Errorf("answered with alerts %v", al)
			}
			return nil
		})
	}
	add(conformanceRow{id: "alert/fatal-received", kind: kindMust, section: sec62, roles: bothRoles,
		rule: "on a fatal alert the connection MUST close, with no alert in answer",
		run:  first(plain(record.TypeAlert, []byte{2, byte(AlertHandshakeFailure)})), want: fatalReceived(AlertHandshakeFailure)})
	add(conformanceRow{id: "alert/unknown-is-fatal", kind: kindMust, section: sec6, roles: bothRoles,
		rule: "an unknown alert type MUST be treated as an error alert",
		run:  first(plain(record.TypeAlert, []byte{1, 200})), want: fatalReceived(200)})
	add(conformanceRow{id: "alert/warning-level-ignored", kind: kindMust, section: sec6, roles: bothRoles,
		rule: "alerts other than close_notify and user_canceled are fatal whatever their level",
		run:  protected(sealed(record.TypeAlert, []byte{1, byte(AlertHandshakeFailure)})), want: fatalReceived(AlertHandshakeFailure)})
	add(conformanceRow{id: "alert/close-notify", kind: kindMust, section: sec61, roles: bothRoles,
		rule: "data after close_notify MUST be ignored",
		run:  first(plain(record.TypeAlert, []byte{1, 0}), plain(0, []byte("junk"))),
		want: behaves("closed, the junk after close_notify ignored", func(c *conv) error {
			if c.err != nil || !c.sut.peerClosed {
				return fmt.Errorf("err %v, peerClosed %v", c.err, c.sut.peerClosed)
			}
			return nil
		})})
	add(conformanceRow{id: "alert/user-canceled", kind: kindPermitted, section: sec61, roles: bothRoles,
		rule: "user_canceled is a warning: the handshake goes on",
		run: peerFlight(func(c *conv, recs []*rec) []*rec {
			ep := recs[len(recs)-1].epoch
			return insertBefore(recs, wire.TypeFinished, &rec{ct: record.TypeAlert, epoch: ep, data: []byte{1, 90}})
		}), want: behaves("no error", func(c *conv) error { return c.err })})
	add(conformanceRow{id: "alert/warning-flood", kind: kindLimit, section: bounds, roles: bothRoles,
		rule: fmt.Sprintf("more than %d warning alerts in a row are refused", maxWarningAlerts),
		run:  protected(repeat(maxWarningAlerts+1, func() *rec { return sealed(record.TypeAlert, []byte{1, 90}) })...), want: chooses(AlertUnexpectedMessage)})
	add(conformanceRow{id: "alert/plaintext-after-handshake", kind: kindMust, section: sec6, roles: bothRoles,
		rule: "alerts after the handshake are protected: an unprotected one is unexpected",
		run:  afterHandshake(&rec{raw: []byte{21, 3, 3, 0, 2, 2, 40}}), want: chooses(AlertUnexpectedMessage)})

	alertRuleRows(add)

	// Handshake messages at each state (Section 4).
	add(conformanceRow{id: "hs/unknown-type", kind: kindMust, section: sec4, roles: bothRoles,
		rule: "a handshake message of unknown type is an unexpected_message",
		run:  first(plain(record.TypeHandshake, hsMsg(99, nil))), want: sends(AlertUnexpectedMessage)})
	add(conformanceRow{id: "hs/wrong-first-message", kind: kindMust, section: sec4, roles: bothRoles,
		rule: "a Finished as the first message is an unexpected_message",
		run:  first(plain(record.TypeHandshake, hsMsg(wire.TypeFinished, make([]byte, 32)))), want: sends(AlertUnexpectedMessage)})
	type skipRow struct {
		id   string
		drop uint8
	}
	for _, s := range []skipRow{{"hs/missing-encrypted-extensions", wire.TypeEncryptedExtensions}, {"hs/missing-certificate", wire.TypeCertificate}, {"hs/missing-certificate-verify", wire.TypeCertificateVerify}} {
		add(conformanceRow{id: s.id, kind: kindMust, section: sec4, roles: asClient,
			rule: "messages MUST be sent in the order of Section 4: a missing one is an unexpected_message",
			run:  rewriteFlight(func(c *conv, recs []*rec) []*rec { return without(recs, s.drop) }), want: sends(AlertUnexpectedMessage)})
	}
	add(conformanceRow{id: "hs/duplicate-encrypted-extensions", kind: kindMust, section: sec4, roles: asClient,
		rule: "a repeated message is an unexpected_message",
		run: rewriteFlight(func(c *conv, recs []*rec) []*rec {
			return insertBefore(recs, wire.TypeCertificate, c.must(recs, wire.TypeEncryptedExtensions))
		}), want: sends(AlertUnexpectedMessage)})
	add(conformanceRow{id: "hs/duplicate-client-hello", kind: kindMust, section: sec4, roles: asServer,
		rule: "a second ClientHello without a HelloRetryRequest is an unexpected_message",
		run: rewriteFlight(func(c *conv, recs []*rec) []*rec {
			ch := c.must(recs, wire.TypeClientHello)
			return []*rec{ch, plain(record.TypeHandshake, ch.data)}
		}), want: sends(AlertUnexpectedMessage)})
	add(conformanceRow{id: "hs/ticket-during-handshake", kind: kindMust, section: sec461, roles: asClient,
		rule: "NewSessionTicket only after the server has the client's Finished",
		run: rewriteFlight(func(c *conv, recs []*rec) []*rec {
			nst := c.marshal(&wire.NewSessionTicket{Lifetime: 60, Nonce: []byte{1}, Ticket: []byte{1}})
			ep := recs[len(recs)-1].epoch
			return insertBefore(recs, wire.TypeFinished, &rec{ct: record.TypeHandshake, epoch: ep, data: nst})
		}), want: sends(AlertUnexpectedMessage)})
	add(conformanceRow{id: "hs/ticket-from-client", kind: kindMustNot, section: sec461, roles: asServer,
		rule: "a client MUST NOT send NewSessionTicket",
		run:  afterHandshake(sealed(record.TypeHandshake, hsMsg(wire.TypeNewSessionTicket, []byte{0, 0, 0, 60, 0, 0, 0, 0, 1, 1, 0, 1, 1, 0, 0}))),
		want: sends(AlertUnexpectedMessage)})
	add(conformanceRow{id: "hs/keyupdate-during-handshake", kind: kindMust, section: sec463, roles: bothRoles,
		rule: "a KeyUpdate before Finished is an unexpected_message",
		run:  protected(sealed(record.TypeHandshake, hsMsg(wire.TypeKeyUpdate, []byte{0}))), want: sends(AlertUnexpectedMessage)})
	add(conformanceRow{id: "hs/end-of-early-data-unexpected", kind: kindMust, section: sec45, roles: asServer,
		rule: "EndOfEarlyData without accepted 0-RTT is an unexpected_message",
		run:  protected(sealed(record.TypeHandshake, hsMsg(wire.TypeEndOfEarlyData, nil))), want: sends(AlertUnexpectedMessage)})
	add(conformanceRow{id: "hs/unrequested-client-certificate", kind: kindMust, section: sec4, roles: asServer,
		rule: "a client Certificate the server did not ask for is an unexpected_message",
		run:  protected(sealed(record.TypeHandshake, hsMsg(wire.TypeCertificate, []byte{0, 0, 0, 0}))), want: sends(AlertUnexpectedMessage)})
	add(conformanceRow{id: "hs/client-hello-after-handshake", kind: kindMust, section: sec412, roles: bothRoles,
		rule: "no renegotiation: a ClientHello after the handshake is an unexpected_message",
		run:  afterHandshake(sealed(record.TypeHandshake, hsMsg(wire.TypeClientHello, make([]byte, 40)))), want: sends(AlertUnexpectedMessage)})

	serverStateRows(add)

	// Finished (Section 4.4.4).
	add(conformanceRow{id: "finished/wrong-length", kind: kindMust, section: sec444, roles: bothRoles,
		rule: "verify_data is Hash.length bytes: any other length is a decode_error",
		run: peerFlight(func(c *conv, recs []*rec) []*rec {
			c.must(recs, wire.TypeFinished).data = hsMsg(wire.TypeFinished, make([]byte, 31))
			return recs
		}), want: sends(AlertDecodeError)})
	add(conformanceRow{id: "finished/wrong-mac", kind: kindMust, section: sec444, roles: bothRoles,
		rule: "a Finished that does not verify is a decrypt_error",
		run: peerFlight(func(c *conv, recs []*rec) []*rec {
			c.must(recs, wire.TypeFinished).data[10] ^= 1
			return recs
		}), want: sends(AlertDecryptError)})

	// Hellos (Sections 4.1, 4.2, Appendix D.5).
	add(conformanceRow{id: "hello/client-legacy-version-ssl3", kind: kindMust, section: secD5, roles: asServer,
		rule: "a ClientHello with legacy_version 0x0300 or less is a protocol_version",
		run:  rewriteCH(func(ch *wire.ClientHello) { ch.LegacyVersion = 0x0300 }), want: sends(AlertProtocolVersion)})
	for _, v := range []uint16{0x0000, 0x0200} {
		add(conformanceRow{id: fmt.Sprintf("hello/client-legacy-version-%#04x", v), kind: kindMustNot, section: secD5, roles: asServer,
			rule: fmt.Sprintf("a ClientHello with legacy_version %#04x (below SSL 3.0) is a protocol_version", v),
			run: rewriteFlight(func(c *conv, recs []*rec) []*rec {
				ch := c.must(recs, wire.TypeClientHello)
				ch.data[4], ch.data[5] = byte(v>>8), byte(v) // the raw field: 0x0000 has no struct value
				return recs
			}), want: chooses(AlertProtocolVersion)})
	}
	add(conformanceRow{id: "hello/server-legacy-version-ssl3", kind: kindMust, section: secD5, roles: asClient,
		rule: "a ServerHello with legacy_version 0x0300 is a protocol_version",
		run: rewriteFlight(func(c *conv, recs []*rec) []*rec {
			sh := c.must(recs, wire.TypeServerHello)
			sh.data[4], sh.data[5] = 3, 0
			return recs
		}), want: sends(AlertProtocolVersion)})
	add(conformanceRow{id: "hello/no-tls13", kind: kindMust, section: sec421, roles: asServer,
		rule: "a ClientHello without TLS 1.3 in supported_versions is a protocol_version (TLS 1.3 only)",
		run:  rewriteCH(func(ch *wire.ClientHello) { ch.SupportedVersions = []uint16{0x0303} }), want: sends(AlertProtocolVersion)})
	add(conformanceRow{id: "hello/selected-version", kind: kindMust, section: sec421, roles: asClient,
		rule: "a ServerHello selecting a version the client did not offer is an illegal_parameter",
		run:  rewriteSH(func(sh *wire.ServerHello) { sh.SupportedVersion = 0x0305 }), want: sends(AlertIllegalParameter)})
	add(conformanceRow{id: "hello/compression", kind: kindMust, section: sec412, roles: asServer,
		rule: "legacy_compression_methods other than [0] is an illegal_parameter",
		run:  rewriteCH(func(ch *wire.ClientHello) { ch.CompressionMethods = []byte{1, 0} }), want: sends(AlertIllegalParameter)})
	add(conformanceRow{id: "hello/duplicate-extension-ch", kind: kindMustNot, section: sec42, roles: asServer,
		rule: "two extensions of one type in a message are an illegal_parameter",
		run: rewriteCH(func(ch *wire.ClientHello) {
			ch.Extra = append(ch.Extra, wire.Extension{Type: wire.ExtSupportedGroups, Data: []byte{0, 2, 0, 0x1d}})
		}), want: sends(AlertIllegalParameter)})
	add(conformanceRow{id: "hello/duplicate-extension-sh", kind: kindMustNot, section: sec42, roles: asClient,
		rule: "two extensions of one type in a message are an illegal_parameter",
		run: rewriteSH(func(sh *wire.ServerHello) {
			sh.Extra = append(sh.Extra, wire.Extension{Type: wire.ExtSupportedVersions, Data: []byte{3, 4}})
		}), want: sends(AlertIllegalParameter)})
	add(conformanceRow{id: "hello/forbidden-extension-sh", kind: kindMust, section: sec42e6820, roles: asClient,
		rule: "an extension in a message it is not defined for is an illegal_parameter",
		run: rewriteSH(func(sh *wire.ServerHello) {
			sh.Extra = append(sh.Extra, wire.Extension{Type: wire.ExtSupportedGroups, Data: []byte{0, 2, 0, 0x1d}})
		}), want: sends(AlertIllegalParameter)})
	add(conformanceRow{id: "hello/unknown-extension-sh", kind: kindMustNot, section: sec42, roles: asClient,
		rule: "an extension the client did not send, in the ServerHello, is an unsupported_extension",
		run: rewriteSH(func(sh *wire.ServerHello) {
			sh.Extra = append(sh.Extra, wire.Extension{Type: 0x7777})
		}), want: sends(AlertUnsupportedExtension)})
	add(conformanceRow{id: "hello/unoffered-suite", kind: kindMust, section: sec413, roles: asClient,
		rule: "a cipher suite the client did not offer is an illegal_parameter",
		run:  rewriteSH(func(sh *wire.ServerHello) { sh.CipherSuite = 0x1305 }), want: sends(AlertIllegalParameter)})
	add(conformanceRow{id: "hello/session-id-echo", kind: kindMust, section: sec413, roles: asClient,
		rule: "a legacy_session_id_echo that differs from the client's is an illegal_parameter",
		run:  rewriteSH(func(sh *wire.ServerHello) { sh.SessionID = []byte{1, 2, 3} }), want: sends(AlertIllegalParameter)})
	add(conformanceRow{id: "hello/unoffered-group", kind: kindMust, section: sec428, roles: asClient,
		rule: "a key_share for a group the client did not send a share for is an illegal_parameter",
		run:  rewriteSH(func(sh *wire.ServerHello) { sh.KeyShare.Group = uint16(P256) }), want: sends(AlertIllegalParameter)})
	add(conformanceRow{id: "hello/duplicate-key-share", kind: kindMustNot, section: sec428, roles: asServer,
		rule: "two key shares for one group are an illegal_parameter",
		run: rewriteCH(func(ch *wire.ClientHello) {
			ch.KeyShares = append(ch.KeyShares, ch.KeyShares[len(ch.KeyShares)-1])
		}), want: sends(AlertIllegalParameter)})
	add(conformanceRow{id: "hello/key-share-unsupported-group", kind: kindMustNot, section: sec428, roles: asServer,
		rule: "a key share for a group not in supported_groups is an illegal_parameter",
		run: rewriteCH(func(ch *wire.ClientHello) {
			ch.SupportedGroups = []uint16{uint16(P256)}
		}), want: sends(AlertIllegalParameter)})
	add(conformanceRow{id: "hello/no-key-share", kind: kindMust, section: sec92, roles: asServer,
		rule: "a ClientHello without key_share (and no PSK) is a missing_extension",
		run: rewriteCH(func(ch *wire.ClientHello) {
			ch.KeyShares, ch.HasKeyShare = nil, false
		}), want: sends(AlertMissingExtension)})
	add(conformanceRow{id: "hello/no-signature-algorithms", kind: kindMust, section: sec423, roles: asServer,
		rule: "a ClientHello without signature_algorithms (certificate authentication) is a missing_extension",
		run:  rewriteCH(func(ch *wire.ClientHello) { ch.SignatureAlgorithms = nil }), want: sends(AlertMissingExtension)})

	// EncryptedExtensions and unrequested extensions (Section 4.2).
	add(conformanceRow{id: "ee/unknown-extension", kind: kindMustNot, section: sec42, roles: asClient,
		rule: "an extension the client did not request is an unsupported_extension",
		run:  rewriteEE(func(ee *wire.EncryptedExtensions) { ee.Extra = append(ee.Extra, wire.Extension{Type: 0x7777}) }), want: sends(AlertUnsupportedExtension)})
	add(conformanceRow{id: "ee/server-name-without-sni", kind: kindMustNot, section: sec42, roles: asClient,
		rule:  "a server_name acknowledgement when the client sent no SNI is an unsupported_extension",
		setup: func(o *convOpts) { o.ccfg.ServerName = "127.0.0.1" },
		run:   rewriteEE(func(ee *wire.EncryptedExtensions) { ee.ServerName = true }), want: sends(AlertUnsupportedExtension)})
	add(conformanceRow{id: "ee/alpn-not-offered", kind: kindMustNot, section: sec42, roles: asClient,
		rule: "an ALPN selection when the client offered no ALPN is an unsupported_extension",
		run:  rewriteEE(func(ee *wire.EncryptedExtensions) { ee.ALPN = "h2" }), want: sends(AlertUnsupportedExtension)})
	add(conformanceRow{id: "ee/duplicate-extension", kind: kindMustNot, section: sec42, roles: asClient,
		rule:  "two extensions of one type in a message are an illegal_parameter",
		setup: func(o *convOpts) { o.ccfg.NextProtos, o.scfg.NextProtos = []string{"h2"}, []string{"h2"} },
		run: rewriteEE(func(ee *wire.EncryptedExtensions) {
			ee.Extra = append(ee.Extra, wire.Extension{Type: wire.ExtALPN, Data: []byte{0, 3, 2, 'h', '2'}})
		}), want: sends(AlertIllegalParameter)})
	add(conformanceRow{id: "ee/forbidden-extension", kind: kindMust, section: sec42e6820, roles: asClient,
		rule: "an extension in a message it is not defined for is an illegal_parameter",
		run: rewriteEE(func(ee *wire.EncryptedExtensions) {
			ee.Extra = append(ee.Extra, wire.Extension{Type: wire.ExtKeyShare, Data: []byte{0, 0x1d, 0, 1, 1}})
		}), want: sends(AlertIllegalParameter)})

	// Certificates (Section 4.4.2).
	certRoles := func(o *convOpts) { withClientCert(o) }
	add(conformanceRow{id: "cert/unrequested-ocsp", kind: kindMust, section: sec442, roles: bothRoles, setup: certRoles,
		rule: "Certificate extensions MUST correspond to ones requested: an OCSP staple is an unsupported_extension",
		run:  rewritePeerCertificate(func(cm *wire.Certificate) { cm.Entries[0].OCSPStaple = []byte{1} }), want: sends(AlertUnsupportedExtension)})
	add(conformanceRow{id: "cert/unrequested-sct", kind: kindMust, section: sec442, roles: bothRoles, setup: certRoles,
		rule: "Certificate extensions MUST correspond to ones requested: SCTs are an unsupported_extension",
		run:  rewritePeerCertificate(func(cm *wire.Certificate) { cm.Entries[0].SCTs = [][]byte{{1}} }), want: sends(AlertUnsupportedExtension)})
	add(conformanceRow{id: "cert/unrequested-unknown", kind: kindMust, section: sec442, roles: bothRoles, setup: certRoles,
		rule: "Certificate extensions MUST correspond to ones requested: an unknown one (trust anchors) is an unsupported_extension",
		run: rewritePeerCertificate(func(cm *wire.Certificate) {
			cm.Entries[0].Extra = []wire.Extension{{Type: 0xfe0b, Data: []byte{0}}}
		}), want: sends(AlertUnsupportedExtension)})
	add(conformanceRow{id: "cert/empty-server-certificate", kind: kindMust, section: sec4424, roles: asClient,
		rule: "a server Certificate with no certificates is a decode_error",
		run:  rewritePeerCertificate(func(cm *wire.Certificate) { cm.Entries = nil }), want: sends(AlertDecodeError)})
	add(conformanceRow{id: "cert/required", kind: kindPermitted, section: sec4424, roles: asServer,
		rule: "a server that requires a client certificate aborts with certificate_required on an empty one",
		setup: func(o *convOpts) {
			withClientCert(o)
			o.scfg.ClientAuth = RequireAnyClientCert
		},
		run: rewritePeerCertificate(func(cm *wire.Certificate) { cm.Entries = nil }), want: sends(AlertCertificateRequired)})
	add(conformanceRow{id: "cert/key-usage", kind: kindMust, section: sec4422, roles: bothRoles,
		rule: "the leaf MUST allow signing (digitalSignature when Key Usage is present), even with chain verification off",
		setup: func(o *convOpts) {
			o.ccfg.InsecureSkipVerify = true // chain verification off on both sides
			o.scfg.ClientAuth = RequestClientCert
			if o.sutClient {
				o.scfg.Certificates = []Certificate{noKeyUsageCert(o.t)}
			} else {
				o.ccfg.Certificates = []Certificate{noKeyUsageCert(o.t)}
			}
		},
		run: func(c *conv) { c.completeHandshake() }, want: chooses(AlertBadCertificate)})
	add(conformanceRow{id: "cert/request-context", kind: kindMust, section: sec432, roles: asClient, setup: certRoles,
		rule: "a CertificateRequest in the handshake has an empty context: else illegal_parameter",
		run: rewriteFlight(func(c *conv, recs []*rec) []*rec {
			r := c.must(recs, wire.TypeCertificateRequest)
			cr, err := wire.ParseCertificateRequest(r.data)
			if err != nil {
				c.t.Fatal(err)
			}
			cr.RequestContext, cr.Order = []byte{1}, nil
			r.data = c.marshal(cr)
			return recs
		}), want: sends(AlertIllegalParameter)})
	add(conformanceRow{id: "cv/unoffered-scheme", kind: kindMust, section: sec443, roles: bothRoles, setup: certRoles,
		rule: "a CertificateVerify with a scheme the receiver did not offer is an illegal_parameter",
		run: peerFlight(func(c *conv, recs []*rec) []*rec {
			r := c.must(recs, wire.TypeCertificateVerify)
			r.data[4], r.data[5] = 0x02, 0x01 // rsa_pkcs1_sha1
			return recs
		}), want: sends(AlertIllegalParameter)})
	add(conformanceRow{id: "cv/bad-signature", kind: kindMust, section: sec443, roles: bothRoles, setup: certRoles,
		rule: "a CertificateVerify that does not verify is a decrypt_error",
		run: peerFlight(func(c *conv, recs []*rec) []*rec {
			r := c.must(recs, wire.TypeCertificateVerify)
			r.data[len(r.data)-5] ^= 1
			return recs
		}), want: sends(AlertDecryptError)})
	add(conformanceRow{id: "cv/server-reports-client-scheme", kind: kindPermitted, section: sec443, roles: asServer,
		rule: "what to report is the implementation's: ConnectionState().SignatureScheme is the peer's CertificateVerify scheme (the server's reports the client's)",
		setup: func(o *convOpts) {
			withClientCert(o)
			o.ccfg.Certificates = []Certificate{getPKI(o.t, "ed25519").client}
		},
		run: func(c *conv) { c.completeHandshake() },
		want: behaves("server reports ed25519", func(c *conv) error {
			if c.err != nil {
				return c.err
			}
			if got := c.sut.info.SignatureScheme; got != 0x0807 {
				return fmt.Errorf("SignatureScheme %s, want the client's ed25519", got.String())
			}
			return nil
		})})
	add(conformanceRow{id: "cv/client-follows-config", kind: kindPermitted, section: sec443, roles: asClient,
		rule: "the client signs with a scheme the server's CertificateRequest offers (Section 4.4.3 MUST); which one is its choice: its first Config.SignatureSchemes entry the server accepts",
		setup: func(o *convOpts) {
			withClientCert(o)
			o.ccfg.Certificates = []Certificate{getPKI(o.t, "rsa2048").client}
			o.ccfg.SignatureSchemes = []SignatureScheme{0x0806, 0x0804, 0x0403}
		},
		run: func(c *conv) { c.completeHandshake() },
		want: behaves("client signs with rsa_pss_rsae_sha512", func(c *conv) error {
			if c.err != nil {
				return c.err
			}
			if got := c.peer.info.SignatureScheme; got != 0x0806 {
				return fmt.Errorf("client signed with %s, want rsa_pss_rsae_sha512", got.String())
			}
			return nil
		})})

	// HelloRetryRequest (Sections 4.1.2, 4.1.4).
	add(conformanceRow{id: "hrr/round-trip", kind: kindMust, section: sec414, roles: bothRoles, setup: hrrSetup,
		rule: "a HelloRetryRequest and the second ClientHello complete the handshake",
		run:  func(c *conv) { c.completeHandshake() }, want: handshakeCompletes})
	rewriteHRR := func(f func(sh *wire.ServerHello)) func(c *conv) {
		return rewriteFlight(func(c *conv, recs []*rec) []*rec {
			r := c.must(recs, wire.TypeServerHello)
			sh, err := wire.ParseServerHello(r.data)
			if err != nil || !sh.IsHelloRetryRequest() {
				c.t.Fatalf("no HelloRetryRequest: %v", err)
			}
			sh.Order = nil
			f(sh)
			r.data = c.marshal(sh)
			return recs
		})
	}
	add(conformanceRow{id: "hrr/group-already-shared", kind: kindMust, section: sec414, roles: asClient, setup: hrrSetup,
		rule: "a HelloRetryRequest for a group the client already sent a share for is an illegal_parameter",
		run:  rewriteHRR(func(sh *wire.ServerHello) { sh.SelectedGroup = uint16(X25519) }), want: sends(AlertIllegalParameter)})
	add(conformanceRow{id: "hrr/group-not-offered", kind: kindMust, section: sec414, roles: asClient, setup: hrrSetup,
		rule: "a HelloRetryRequest for a group not in supported_groups is an illegal_parameter",
		run:  rewriteHRR(func(sh *wire.ServerHello) { sh.SelectedGroup = 0x0018 }), want: sends(AlertIllegalParameter)})
	add(conformanceRow{id: "hrr/no-change", kind: kindMust, section: sec414, roles: asClient, setup: hrrSetup,
		rule: "a HelloRetryRequest that would not change the ClientHello is an illegal_parameter",
		run:  rewriteHRR(func(sh *wire.ServerHello) { sh.SelectedGroup, sh.Cookie = 0, nil }), want: sends(AlertIllegalParameter)})
	add(conformanceRow{id: "hrr/second-hrr", kind: kindMust, section: sec414, roles: asClient, setup: hrrSetup,
		rule: "a second HelloRetryRequest is an unexpected_message",
		run: rewriteFlight(func(c *conv, recs []*rec) []*rec {
			r := c.must(recs, wire.TypeServerHello)
			return []*rec{r, plain(record.TypeHandshake, r.data)}
		}), want: sends(AlertUnexpectedMessage)})
	add(conformanceRow{id: "hrr/suite-changed", kind: kindMust, section: sec414, roles: asClient, setup: hrrSetup,
		rule: "a ServerHello whose cipher suite differs from the HelloRetryRequest's is an illegal_parameter",
		run: func(c *conv) {
			c.relay() // HelloRetryRequest; the second ClientHello goes to the peer
			rewriteSH(func(sh *wire.ServerHello) { sh.CipherSuite = uint16(TLS_AES_256_GCM_SHA384) })(c)
		}, want: sends(AlertIllegalParameter)})
	add(conformanceRow{id: "hrr/changed-extension", kind: kindMust, section: sec412, roles: asServer, setup: hrrSetup,
		rule: "the second ClientHello changes only what Section 4.1.2 allows: a new record_size_limit is an illegal_parameter",
		run:  secondClientHello(func(ch *wire.ClientHello) { ch.RecordSizeLimit = 1000 }), want: chooses(AlertIllegalParameter)})
	add(conformanceRow{id: "hrr/changed-random", kind: kindMust, section: sec412, roles: asServer, setup: hrrSetup,
		rule: "the second ClientHello keeps the same random",
		run:  secondClientHello(func(ch *wire.ClientHello) { ch.Random[0] ^= 1 }), want: chooses(AlertIllegalParameter)})
	add(conformanceRow{id: "hrr/dropped-extension", kind: kindMust, section: sec412, roles: asServer, setup: hrrSetup,
		rule: "the second ClientHello keeps the extensions of the first (dropping signature_algorithms_cert)",
		run:  secondClientHello(func(ch *wire.ClientHello) { ch.SignatureAlgorithmsCert = nil }), want: chooses(AlertIllegalParameter)})
	add(conformanceRow{id: "hrr/no-cookie", kind: kindMust, section: sec412, roles: asServer, setup: hrrSetup,
		rule: "the second ClientHello echoes the HelloRetryRequest's cookie",
		run:  secondClientHello(func(ch *wire.ClientHello) { ch.Cookie = nil }), want: chooses(AlertIllegalParameter)})
	add(conformanceRow{id: "hrr/early-data", kind: kindMustNot, section: sec4210, roles: asServer, setup: hrrSetup,
		rule: "a second ClientHello MUST NOT offer early_data",
		run:  secondClientHello(func(ch *wire.ClientHello) { ch.EarlyData = true }), want: chooses(AlertIllegalParameter)})
	add(conformanceRow{id: "hrr/wrong-share", kind: kindMust, section: sec414, roles: asServer, setup: hrrSetup,
		rule: "the second ClientHello's key_share is the group the server selected",
		run: secondClientHello(func(ch *wire.ClientHello) {
			ch.KeyShares = []wire.KeyShare{{Group: uint16(X25519), Data: bytes.Repeat([]byte{9}, 32)}}
		}), want: chooses(AlertIllegalParameter)})

	// PSK and tickets (Sections 4.2.9, 4.2.11, 4.6.1).
	resume := func(o *convOpts) { o.resume = true }
	add(conformanceRow{id: "psk/resumption", kind: kindPermitted, section: sec4211, roles: bothRoles, setup: resume,
		rule: "a ticket from an earlier handshake resumes the session",
		run:  func(c *conv) { c.completeHandshake() },
		want: behaves("handshake completes, resumed", func(c *conv) error {
			if err := handshakeCompletes.check(c); err != nil {
				return err
			}
			if !c.sut.info.DidResume {
				return fmt.Errorf("not resumed")
			}
			return nil
		})})
	add(conformanceRow{id: "psk/bad-binder", kind: kindMust, section: sec4211, roles: asServer, setup: resume,
		rule: "a PSK binder that does not verify is a decrypt_error",
		run: rewriteFlight(func(c *conv, recs []*rec) []*rec {
			r := c.must(recs, wire.TypeClientHello)
			r.data[len(r.data)-1] ^= 1
			return recs
		}), want: sends(AlertDecryptError)})
	add(conformanceRow{id: "psk/not-last", kind: kindMust, section: sec4211, roles: asServer, setup: resume,
		rule: "pre_shared_key MUST be the last extension: else illegal_parameter",
		run: rewriteCH(func(ch *wire.ClientHello) {
			ch.Extra = append(ch.Extra, wire.Extension{Type: 0x7777})
			m, _ := ch.Marshal()
			p, _ := wire.ParseClientHello(m)
			var order []uint16
			for _, t := range p.Order {
				if t != 0x7777 {
					order = append(order, t)
				}
			}
			ch.Order = append(order, 0x7777) // after pre_shared_key
		}), want: sends(AlertIllegalParameter)})
	add(conformanceRow{id: "psk/no-modes", kind: kindMust, section: sec429, roles: asServer, setup: resume,
		rule: "pre_shared_key without psk_key_exchange_modes is a missing_extension",
		run:  rewriteCH(func(ch *wire.ClientHello) { ch.PSKModes = nil }), want: sends(AlertMissingExtension)})
	add(conformanceRow{id: "psk/no-ticket-without-modes", kind: kindShould, section: sec429, roles: asServer,
		rule:  "no NewSessionTicket for a client that offered no psk_key_exchange_modes",
		setup: func(o *convOpts) { o.ccfg.SessionTicketsDisabled = true }, // the client sends no modes
		run:   func(c *conv) { c.completeHandshake() },
		want: behaves("handshake completes, no ticket sent", func(c *conv) error {
			if err := handshakeCompletes.check(c); err != nil {
				return err
			}
			if st, ok := c.sut.st.(*serverConnected); !ok || st.ticketsSent != 0 {
				return fmt.Errorf("server in %T sent tickets", c.sut.st)
			}
			return nil
		})})

	// 0-RTT (Section 4.2.10).
	add(conformanceRow{id: "early/accepted-over-limit", kind: kindShould, section: sec4210, roles: asServer,
		rule: "an accepting server aborts when early data exceeds max_early_data_size",
		setup: func(o *convOpts) {
			o.scfg.MaxEarlyData = 1000
			o.early = bytes.Repeat([]byte("x"), 5000)
			o.tamperSess = func(s *ClientSession) { s.MaxEarlyData = 100000 }
		},
		run: func(c *conv) { c.relay() }, want: sends(AlertUnexpectedMessage)})
	add(conformanceRow{id: "early/rejected-skip-bounded", kind: kindLimit, section: sec4210, roles: asServer,
		rule: "a rejecting server skips early data only up to max_early_data_size, then aborts",
		setup: func(o *convOpts) {
			o.scfg.MaxEarlyData = 1000
			o.early = bytes.Repeat([]byte("x"), 5000)
			o.tamperSess = func(s *ClientSession) { s.MaxEarlyData = 100000 }
		},
		run: func(c *conv) {
			c.sut.cfg.StrikeRegister = neverFresh{}
			c.relay()
		}, want: sends(AlertBadRecordMAC)})
	add(conformanceRow{id: "early/rejected-skipped", kind: kindMust, section: sec4210, roles: asServer,
		rule: "a rejecting server skips early data within max_early_data_size and completes the handshake",
		setup: func(o *convOpts) {
			o.scfg.MaxEarlyData = 1000
			o.early = bytes.Repeat([]byte("x"), 900)
		},
		run: func(c *conv) {
			c.sut.cfg.StrikeRegister = neverFresh{}
			c.completeHandshake()
		}, want: handshakeCompletes})

	pskEarlyRetryRows(add)

	// KeyUpdate (Section 4.6.3).
	add(conformanceRow{id: "keyupdate/bad-request", kind: kindMust, section: sec463, roles: bothRoles,
		rule: "request_update other than 0 or 1 is an illegal_parameter",
		run:  afterHandshake(sealed(record.TypeHandshake, hsMsg(wire.TypeKeyUpdate, []byte{2}))), want: sends(AlertIllegalParameter)})
	add(conformanceRow{id: "keyupdate/one-reply", kind: kindMust, section: sec463, roles: bothRoles,
		rule: "several update_requested that arrive in separate reads (one TCP segment each) before the receiver sends data get one KeyUpdate, sent before its next application data",
		run:  keyUpdateRequestsOverTCP(5),
		want: behaves("one KeyUpdate, then the data", func(c *conv) error { return c.err })})
	add(conformanceRow{id: "keyupdate/flood", kind: kindLimit, section: bounds, roles: bothRoles,
		rule: fmt.Sprintf("more than %d KeyUpdates without application data are refused", maxKeyUpdatesWithoutData),
		run: func(c *conv) {
			if c.handshake() != nil {
				return
			}
			ep := c.epoch()
			var x []*rec
			for i := range maxKeyUpdatesWithoutData + 1 {
				x = append(x, &rec{ct: record.TypeHandshake, epoch: ep + i, data: hsMsg(wire.TypeKeyUpdate, []byte{0})})
			}
			c.deliver(x...)
		}, want: chooses(AlertUnexpectedMessage)})
	add(conformanceRow{id: "keyupdate/old-key", kind: kindMust, section: sec463, roles: bothRoles,
		rule: "after a KeyUpdate, records under the old key fail (bad_record_mac)",
		run: func(c *conv) {
			if c.handshake() != nil {
				return
			}
			ep := c.epoch()
			c.deliver(&rec{ct: record.TypeHandshake, epoch: ep, data: hsMsg(wire.TypeKeyUpdate, []byte{0})},
				&rec{ct: record.TypeApplicationData, epoch: ep, data: []byte("old")})
		}, want: sends(AlertBadRecordMAC)})

	sectionRows(add)
	return rows
}

// Raw message surgery, for rows that lie about lengths: offsets into a
// whole ClientHello or ServerHello message, header included.

func get16(b []byte, off int) int { return int(b[off])<<8 | int(b[off+1]) }

func put16(b []byte, off, n int) { b[off], b[off+1] = byte(n>>8), byte(n) }

// setBodyLen rewrites a handshake message's uint24 length.
func setBodyLen(msg []byte, n int) { msg[1], msg[2], msg[3] = byte(n>>16), byte(n>>8), byte(n) }

// helloExtensions returns the offsets of a hello's extensions block (its
// uint16 length) and of the header of its last extension.
func helloExtensions(msg []byte) (block, last int) {
	off := 4 + 2 + 32
	off += 1 + int(msg[off]) // legacy_session_id
	if msg[0] == wire.TypeClientHello {
		off += 2 + get16(msg, off) // cipher_suites
		off += 1 + int(msg[off])   // legacy_compression_methods
	} else {
		off += 2 + 1 // cipher_suite, legacy_compression_method
	}
	for p := off + 2; p < len(msg); p += 4 + get16(msg, p+2) {
		last = p
	}
	return off, last
}

// replaceLastExtension returns msg with the data of its last extension
// replaced, every length around it fixed.
func replaceLastExtension(msg, data []byte) []byte {
	block, last := helloExtensions(msg)
	out := append(bytes.Clone(msg[:last+4]), data...)
	put16(out, last+2, len(data))
	put16(out, block, len(out)-block-2)
	setBodyLen(out, len(out)-4)
	return out
}

// peerHello rewrites the raw hello the peer sends first: the ClientHello
// to a server under test, the ServerHello to a client.
func peerHello(f func(msg []byte) []byte) func(c *conv) {
	return rewriteFlight(func(c *conv, recs []*rec) []*rec {
		typ := wire.TypeServerHello
		if !c.sutClient {
			typ = wire.TypeClientHello
		}
		r := c.must(recs, typ)
		r.data = f(bytes.Clone(r.data))
		return recs
	})
}

// swapMsgs exchanges the first handshake messages of types a and b.
func swapMsgs(a, b uint8) func(c *conv, recs []*rec) []*rec {
	return func(c *conv, recs []*rec) []*rec {
		i, j := find(recs, a), find(recs, b)
		if i < 0 || j < 0 {
			c.t.Fatalf("the peer's flight lacks message %d or %d", a, b)
		}
		recs[i], recs[j] = recs[j], recs[i]
		return recs
	}
}

// truncated delivers the peer's next flight (a server's first, a
// client's second) cut by cut, then ends the transport.
func truncated(cut func(c *conv, recs []*rec) []byte) func(c *conv) {
	return func(c *conv) {
		if !c.sutClient {
			c.relay() // the ClientHello; the client's second flight is cut
		}
		c.deliverBytes(cut(c, c.peerRecs()))
		c.closed = c.eof()
	}
}

// closedDuringHandshake is the outcome of a transport that ends in the
// middle of the handshake: the partial input is not acted on, the
// handshake does not complete and the application hears of the close.
var closedDuringHandshake = behaves("handshake not complete; Handshake reports ErrClosedDuringHandshake", func(c *conv) error {
	switch {
	case c.err != nil:
		return fmt.Errorf("the engine failed (%v) on a truncated but well-formed stream", c.err)
	case c.sut.done:
		return fmt.Errorf("the handshake completed")
	case !errors.Is(c.closed, ErrClosedDuringHandshake):
		return fmt.Errorf("Handshake returned %v at EOF, want ErrClosedDuringHandshake", c.closed)
	}
	return nil
})

// sutRecords returns the records the engine under test sent, opened.
func (c *conv) sutRecords() []*rec {
	prefix := "CLIENT_"
	if !c.sutClient {
		prefix = "SERVER_"
	}
	return newRecordReader(c.sutLog, prefix, func() *suite.Suite { return c.sut.suite }).read(c.t, c.sutOut)
}

// hostilePeerRows are the hostile peer's conversations that reorder,
// truncate, lie about lengths and vary legacy_record_version.
func hostilePeerRows(add func(conformanceRow)) {
	certRoles := func(o *convOpts) { withClientCert(o) }

	// Reordered messages (Section 4: each message in its order).
	add(conformanceRow{id: "order/certificate-verify-before-certificate", kind: kindMust, section: sec4, roles: bothRoles, setup: certRoles,
		rule: "CertificateVerify before Certificate (swapped) is an unexpected_message",
		run:  peerFlight(swapMsgs(wire.TypeCertificate, wire.TypeCertificateVerify)), want: sends(AlertUnexpectedMessage)})
	add(conformanceRow{id: "order/finished-before-certificate-verify", kind: kindMust, section: sec4, roles: bothRoles, setup: certRoles,
		rule: "Finished before CertificateVerify (swapped) is an unexpected_message",
		run:  peerFlight(swapMsgs(wire.TypeCertificateVerify, wire.TypeFinished)), want: sends(AlertUnexpectedMessage)})
	add(conformanceRow{id: "order/certificate-before-encrypted-extensions", kind: kindMust, section: sec4, roles: asClient,
		rule: "Certificate before EncryptedExtensions (swapped) is an unexpected_message",
		run:  rewriteFlight(swapMsgs(wire.TypeEncryptedExtensions, wire.TypeCertificate)), want: sends(AlertUnexpectedMessage)})
	add(conformanceRow{id: "order/certificate-request-after-certificate", kind: kindMust, section: sec4, roles: asClient, setup: certRoles,
		rule: "CertificateRequest after Certificate (swapped) is an unexpected_message",
		run:  rewriteFlight(swapMsgs(wire.TypeCertificateRequest, wire.TypeCertificate)), want: sends(AlertUnexpectedMessage)})

	// Truncation: the transport ends inside a record or a message.
	add(conformanceRow{id: "truncate/partial-record-eof", kind: kindPermitted, section: sec51, roles: bothRoles,
		rule: "a flight cut inside its last record, then EOF: the partial record is not processed, the handshake fails",
		run: truncated(func(c *conv, recs []*rec) []byte {
			var b []byte
			for _, r := range recs {
				b = c.toSUT.write(c.t, b, r)
			}
			return b[:len(b)-5]
		}), want: closedDuringHandshake})
	add(conformanceRow{id: "truncate/partial-message-eof", kind: kindPermitted, section: sec51, roles: bothRoles,
		rule: "a flight whose last record holds half the Finished, then EOF: the handshake fails",
		run: truncated(func(c *conv, recs []*rec) []byte {
			fin := c.must(recs, wire.TypeFinished)
			fin.data = fin.data[:len(fin.data)/2]
			var b []byte
			for _, r := range recs {
				b = c.toSUT.write(c.t, b, r)
			}
			return b
		}), want: closedDuringHandshake})
	add(conformanceRow{id: "truncate/no-close-notify", kind: kindPermitted, section: sec61, roles: bothRoles,
		rule: "application data then EOF without close_notify: the data is read, then the end is reported as truncation",
		run: func(c *conv) {
			afterHandshake(sealed(record.TypeApplicationData, []byte("hello")))(c)
			if c.sut.appBuffered() != 5 {
				c.t.Fatalf("%d bytes buffered before EOF, want 5", c.sut.appBuffered())
			}
			c.closed = c.eof()
		},
		want: behaves("Read returns the data, then io.ErrUnexpectedEOF", func(c *conv) error {
			if c.err != nil || c.closed != io.ErrUnexpectedEOF {
				return fmt.Errorf("engine error %v; at EOF Read returned %v, want io.ErrUnexpectedEOF", c.err, c.closed)
			}
			return nil
		})})
	add(conformanceRow{id: "truncate/partial-appdata-record", kind: kindPermitted, section: sec61, roles: bothRoles,
		rule: "half an application data record then EOF: nothing is delivered, the end is reported as truncation",
		run: func(c *conv) {
			if c.handshake() != nil {
				return
			}
			b := c.toSUT.write(c.t, nil, &rec{ct: record.TypeApplicationData, epoch: c.epoch(), data: []byte("hello")})
			c.deliverBytes(b[:len(b)/2])
			c.closed = c.eof()
		},
		want: behaves("nothing read; Read returns io.ErrUnexpectedEOF", func(c *conv) error {
			if c.err != nil || c.closed != io.ErrUnexpectedEOF || c.sut.appBuffered() != 0 {
				return fmt.Errorf("engine error %v, %d bytes delivered; at EOF Read returned %v, want io.ErrUnexpectedEOF", c.err, c.sut.appBuffered(), c.closed)
			}
			return nil
		})})

	// A message cut at a key change (Section 5.1: handshake messages MUST
	// NOT span key changes; the record that ends before one ends there).
	add(conformanceRow{id: "record/partial-message-after-hello", kind: kindMust, section: sec51, roles: bothRoles,
		rule: "the first bytes of the next message in the hello's record (cut at the key change) are an unexpected_message",
		run: rewriteFlight(func(c *conv, recs []*rec) []*rec {
			if !c.sutClient { // the ClientHello, then the start of a Finished
				ch := c.must(recs, wire.TypeClientHello)
				return []*rec{plain(record.TypeHandshake, append(bytes.Clone(ch.data), hsMsg(wire.TypeFinished, make([]byte, 32))[:6]...))}
			}
			sh := c.must(recs, wire.TypeServerHello)
			ee := c.must(recs, wire.TypeEncryptedExtensions)
			return []*rec{plain(record.TypeHandshake, append(bytes.Clone(sh.data), ee.data[:6]...))}
		}), want: sends(AlertUnexpectedMessage)})
	add(conformanceRow{id: "record/partial-message-after-finished", kind: kindMust, section: sec51, roles: bothRoles,
		rule: "the first bytes of a next message in the Finished's record (cut at the key change) are an unexpected_message",
		run: peerFlight(func(c *conv, recs []*rec) []*rec {
			fin := c.must(recs, wire.TypeFinished)
			fin.data = append(bytes.Clone(fin.data), hsMsg(wire.TypeKeyUpdate, []byte{0})[:3]...)
			return recs
		}), want: sends(AlertUnexpectedMessage)})
	add(conformanceRow{id: "record/partial-message-after-keyupdate", kind: kindMust, section: sec51, roles: bothRoles,
		rule: "half a KeyUpdate after a whole one in one record (cut at the key change) is an unexpected_message",
		run:  afterHandshake(sealed(record.TypeHandshake, append(hsMsg(wire.TypeKeyUpdate, []byte{0}), hsMsg(wire.TypeKeyUpdate, []byte{0})[:2]...))),
		want: sends(AlertUnexpectedMessage)})

	// Lengths that lie (Section 4: uint24 length; Section 4.2:
	// extension_data<0..2^16-1>): decode_error (Section 6).
	add(conformanceRow{id: "length/handshake-header-longer", kind: kindMust, section: sec4, roles: bothRoles, setup: certRoles,
		rule: "a Certificate whose header claims one byte more (taking the next message's first) is a decode_error",
		run: peerFlight(func(c *conv, recs []*rec) []*rec {
			r := c.must(recs, wire.TypeCertificate)
			r.data = bytes.Clone(r.data)
			setBodyLen(r.data, len(r.data)-4+1)
			return recs
		}), want: sends(AlertDecodeError)})
	add(conformanceRow{id: "length/handshake-header-shorter", kind: kindMust, section: sec4, roles: bothRoles, setup: certRoles,
		rule: "a Certificate whose header claims one byte less than its body is a decode_error",
		run: peerFlight(func(c *conv, recs []*rec) []*rec {
			r := c.must(recs, wire.TypeCertificate)
			r.data = bytes.Clone(r.data)
			setBodyLen(r.data, len(r.data)-4-1)
			return recs
		}), want: sends(AlertDecodeError)})
	add(conformanceRow{id: "length/extension-past-block", kind: kindMust, section: sec42, roles: bothRoles,
		rule: "a hello whose last extension's length runs past the extensions block is a decode_error",
		run: peerHello(func(msg []byte) []byte {
			_, last := helloExtensions(msg)
			put16(msg, last+2, get16(msg, last+2)+1)
			return msg
		}), want: sends(AlertDecodeError)})
	add(conformanceRow{id: "length/extensions-block-past-message", kind: kindMust, section: sec42, roles: bothRoles,
		rule: "a hello whose extensions block runs past the message is a decode_error",
		run: peerHello(func(msg []byte) []byte {
			block, _ := helloExtensions(msg)
			put16(msg, block, get16(msg, block)+1)
			return msg
		}), want: sends(AlertDecodeError)})
	add(conformanceRow{id: "length/extensions-block-short", kind: kindMust, section: sec42, roles: bothRoles,
		rule: "a hello whose extensions block ends before its last extension (trailing bytes) is a decode_error",
		run: peerHello(func(msg []byte) []byte {
			block, last := helloExtensions(msg)
			put16(msg, block, last-block-2)
			return msg
		}), want: sends(AlertDecodeError)})
	add(conformanceRow{id: "length/hello-trailing-byte", kind: kindMust, section: sec4, roles: bothRoles,
		rule: "a hello with a byte after its extensions (header counting it) is a decode_error",
		run: peerHello(func(msg []byte) []byte {
			msg = append(msg, 0)
			setBodyLen(msg, len(msg)-4)
			return msg
		}), want: sends(AlertDecodeError)})
	add(conformanceRow{id: "length/certificate-verify-trailing-byte", kind: kindMust, section: sec4, roles: bothRoles, setup: certRoles,
		rule: "a CertificateVerify with a byte after its signature is a decode_error",
		run: peerFlight(func(c *conv, recs []*rec) []*rec {
			r := c.must(recs, wire.TypeCertificateVerify)
			r.data = append(bytes.Clone(r.data), 0)
			setBodyLen(r.data, len(r.data)-4)
			return recs
		}), want: sends(AlertDecodeError)})
	add(conformanceRow{id: "length/keyupdate-trailing-byte", kind: kindMust, section: sec4, roles: bothRoles,
		rule: "a KeyUpdate of two bytes is a decode_error",
		run:  afterHandshake(sealed(record.TypeHandshake, hsMsg(wire.TypeKeyUpdate, []byte{0, 0}))), want: sends(AlertDecodeError)})

	// legacy_record_version (Section 5.1: "MUST be ignored for all
	// purposes"; Appendix D: TLSPlaintext's MUST be ignored, TLSCiphertext's
	// is in the additional data and MAY be validated).
	plainVersion := func(v uint16) func(c *conv) {
		return func(c *conv) {
			recs := c.peerRecs()
			for _, r := range recs {
				if r.epoch < 0 {
					r.ver, r.verSet = v, true
				}
			}
			c.deliver(recs...)
			c.completeHandshake()
		}
	}
	add(conformanceRow{id: "record/legacy-version-initial-client-hello-0x0301", kind: kindMust, section: sec51, roles: asServer,
		rule: "an initial ClientHello in a record of legacy_record_version 0x0301 is accepted",
		run:  plainVersion(0x0301), want: handshakeCompletes})
	for _, v := range []uint16{0x0000, 0x0300, 0x0302, 0xffff} {
		add(conformanceRow{id: fmt.Sprintf("record/legacy-version-ignored-%#04x", v), kind: kindMust, section: sec51, roles: bothRoles,
			rule: fmt.Sprintf("unprotected records with legacy_record_version %#04x are accepted (the field is ignored)", v),
			run:  plainVersion(v), want: handshakeCompletes})
	}
	add(conformanceRow{id: "record/legacy-version-second-client-hello-0x0301", kind: kindMust, section: sec51, roles: asServer, setup: hrrSetup,
		rule: "a second ClientHello in a record of 0x0301 (a sender MUST NOT; the receiver ignores the field) is accepted",
		run: func(c *conv) {
			c.relay() // ClientHello; HelloRetryRequest back
			recs := c.peerRecs()
			c.must(recs, wire.TypeClientHello).ver = 0x0301
			c.deliver(recs...)
			c.completeHandshake()
		}, want: handshakeCompletes})
	add(conformanceRow{id: "record/legacy-version-ciphertext", kind: kindPermitted, section: secD, roles: bothRoles,
		rule: "a protected record of legacy_record_version 0x0301 (in its additional data too) is a decode_error (validated, as Appendix D allows)",
		run:  afterHandshake(&rec{ct: record.TypeApplicationData, data: []byte("x"), ver: 0x0301}), want: chooses(AlertDecodeError)})
	add(conformanceRow{id: "record/legacy-version-ciphertext-aad", kind: kindPermitted, section: sec52, roles: bothRoles,
		rule: "a protected record whose header says 0x0301 but whose additional data says 0x0303 is refused (decode_error): the additional data is the header",
		run:  afterHandshake(&rec{ct: record.TypeApplicationData, data: []byte("x"), ver: 0x0301, aadVer: 0x0303}), want: chooses(AlertDecodeError)})
}

// lastSent checks the engine under test's last record: an alert of that
// level and description, protected or not.
func (c *conv) lastSent(level byte, a Alert, protected bool) error {
	recs := c.sutRecords()
	if len(recs) == 0 {
		return fmt.Errorf("nothing sent")
	}
	last := recs[len(recs)-1]
	if last.ct != record.TypeAlert || !bytes.Equal(last.data, []byte{level, byte(a)}) {
		return fmt.Errorf("last record is type %d % x, want alert %d/%s", last.ct, last.data, level, a)
	}
	if protected != (last.epoch >= 0) {
		return fmt.Errorf("the %s alert is protected: %v, want %v", a, last.epoch >= 0, protected)
	}
	return nil
}

// alertRuleRows cover the alerts of Section 6 that other rows do not:
// negotiation failures, certificate chain failures, ALPN, and closure.
func alertRuleRows(add func(conformanceRow)) {
	serverGets := func(c *conv) { c.relay() } // the ClientHello
	add(conformanceRow{id: "alert/no-common-suite", kind: kindMust, section: sec411, roles: asServer,
		rule: "no cipher suite in common: the server MUST abort with handshake_failure or insufficient_security",
		setup: func(o *convOpts) {
			o.ccfg.CipherSuites = []CipherSuite{TLS_AES_256_GCM_SHA384}
			o.scfg.CipherSuites = []CipherSuite{TLS_AES_128_GCM_SHA256}
		},
		run: serverGets, want: sends(AlertHandshakeFailure)})
	add(conformanceRow{id: "alert/no-common-group", kind: kindMust, section: sec411, roles: asServer,
		rule: "no group in common (so no HelloRetryRequest can help): the server MUST abort with handshake_failure or insufficient_security",
		setup: func(o *convOpts) {
			o.ccfg.Groups, o.ccfg.KeyShareGroups = []CurveID{X25519}, []CurveID{X25519}
			o.scfg.Groups = []CurveID{P256}
		},
		run: serverGets, want: sends(AlertHandshakeFailure)})
	// Groups left out by choice (README: x448 and RFC 7919's FFDHE): a
	// client that offers only those shares no group with the server.
	for _, g := range []struct {
		id, names string
		groups    []uint16
		share     int
	}{{"group/ffdhe-only", "ffdhe2048 and ffdhe3072", []uint16{0x0100, 0x0101}, 256}, {"group/x448-only", "x448", []uint16{0x001e}, 56}} {
		add(conformanceRow{id: g.id, kind: kindMust, section: sec411, roles: asServer,
			rule: fmt.Sprintf("a ClientHello offering only %s (left out by choice) shares no parameters with the server, which MUST abort with handshake_failure or insufficient_security", g.names),
			run: rewriteCH(func(ch *wire.ClientHello) {
				ch.SupportedGroups = g.groups
				ch.KeyShares = []wire.KeyShare{{Group: g.groups[0], Data: bytes.Repeat([]byte{7}, g.share)}}
			}), want: sends(AlertHandshakeFailure)})
	}
	add(conformanceRow{id: "alert/no-common-signature-scheme", kind: kindMust, section: sec411, roles: asServer,
		rule:  "no signature scheme in common with the server's certificate (the client offers ed25519 only) is a handshake_failure",
		setup: func(o *convOpts) { o.ccfg.SignatureSchemes = []SignatureScheme{0x0807} },
		run:   serverGets, want: sends(AlertHandshakeFailure)})
	add(conformanceRow{id: "alert/no-application-protocol", kind: kindMust, section: rfc7301, roles: asServer,
		rule: "a server with ALPN that supports none of the client's protocols sends no_application_protocol",
		setup: func(o *convOpts) {
			o.ccfg.NextProtos = []string{"http/1.1"}
			o.scfg.NextProtos = []string{"h2"}
		},
		run: serverGets, want: sends(AlertNoApplicationProto)})
	add(conformanceRow{id: "alert/unknown-ca", kind: kindShould, section: sec62, roles: bothRoles,
		rule: "a valid chain whose CA is not a trust anchor is an unknown_ca",
		setup: func(o *convOpts) {
			other := getPKI(o.t, "ed25519") // its own CA, unknown to the other PKI's pool
			if o.sutClient {
				o.scfg.Certificates = []Certificate{other.server}
				return
			}
			o.scfg.ClientAuth, o.scfg.ClientCAs = RequireAndVerifyClientCert, getPKI(o.t, "ecdsa-p256").pool()
			o.ccfg.Certificates = []Certificate{other.client}
		},
		run: func(c *conv) { c.completeHandshake() }, want: sends(AlertUnknownCA)})
	add(conformanceRow{id: "alert/certificate-expired", kind: kindShould, section: sec62, roles: bothRoles,
		rule: "a peer certificate past its notAfter is a certificate_expired",
		setup: func(o *convOpts) {
			withClientCert(o)
			later := func() time.Time { return clock.Now().Add(48 * time.Hour) } // test leaves live 24 h
			if o.sutClient {
				o.ccfg.Time = later
			} else {
				o.scfg.Time = later
			}
		},
		run: func(c *conv) { c.completeHandshake() }, want: sends(AlertCertificateExpired)})

	// Closure (Section 6.1).
	add(conformanceRow{id: "close/close-notify-on-close", kind: kindMust, section: sec61, roles: bothRoles,
		rule: "Close sends close_notify (level warning) before closing the write side, under the application key",
		run: func(c *conv) {
			if c.handshake() == nil {
				c.sutConn().Close()
			}
		},
		want: behaves("the last record is a protected close_notify", func(c *conv) error {
			return c.lastSent(1, AlertCloseNotify, true)
		})})
	add(conformanceRow{id: "close/close-notify-mid-handshake", kind: kindMust, section: sec61, roles: bothRoles,
		rule: "Close during the handshake sends close_notify too (the client's in the clear before any key)",
		run: func(c *conv) {
			if !c.sutClient {
				c.relay() // the server has sent its flight and writes under its application key
			}
			c.sutConn().Close()
		},
		want: behaves("the last record is close_notify", func(c *conv) error {
			return c.lastSent(1, AlertCloseNotify, !c.sutClient)
		})})
	add(conformanceRow{id: "close/no-close-notify-after-error", kind: kindMust, section: sec61, roles: bothRoles,
		rule: "no close_notify after an error alert was sent",
		run: func(c *conv) {
			first(plain(0, []byte{1}))(c)
			c.sutConn().Close()
		},
		want: behaves("the fatal alert is the last record", func(c *conv) error {
			return c.lastSent(2, AlertUnexpectedMessage, false)
		})})
	add(conformanceRow{id: "close/close-notify-then-eof", kind: kindShould, section: sec61, roles: bothRoles,
		rule: "close_notify then the end of the transport is a clean end of data",
		run: func(c *conv) {
			afterHandshake(sealed(record.TypeAlert, []byte{1, 0}))(c)
			c.closed = c.eof()
		},
		want: behaves("Read returns io.EOF", func(c *conv) error {
			if c.err != nil || c.closed != io.EOF {
				return fmt.Errorf("engine error %v; Read at the end returned %v, want io.EOF", c.err, c.closed)
			}
			return nil
		})})
}

// withEarlyData makes the peer client resume with 0-RTT data that the
// server under test accepts.
func withEarlyData(o *convOpts) {
	o.scfg.MaxEarlyData = 1000
	o.early = []byte("early data")
}

// afterAcceptedEarlyData delivers the ClientHello and its 0-RTT data and
// returns the client's second flight (EndOfEarlyData under the early key,
// then Finished under the handshake key) undelivered.
func (c *conv) afterAcceptedEarlyData() (eoed, fin *rec) {
	c.relay()
	if !c.sut.info.EarlyDataAccepted {
		c.t.Fatal("the server under test did not accept 0-RTT")
	}
	recs := c.peerRecs()
	return c.must(recs, wire.TypeEndOfEarlyData), c.must(recs, wire.TypeFinished)
}

// serverStateRows send the server under test, in the states of RFC 8446,
// Appendix A.2 that wait for the client, a message it is not waiting for.
func serverStateRows(add func(conformanceRow)) {
	add(conformanceRow{id: "state/server-wait-cert", kind: kindMust, section: secA2, roles: asServer, setup: withClientCert,
		rule: "WAIT_CERT: a client Finished without the Certificate the server requested (Section 4.4.2) is an unexpected_message",
		run: rewriteClientSecondFlight(func(c *conv, recs []*rec) []*rec {
			return without(without(recs, wire.TypeCertificate), wire.TypeCertificateVerify)
		}), want: sends(AlertUnexpectedMessage)})
	add(conformanceRow{id: "state/server-wait-cv", kind: kindMust, section: secA2, roles: asServer, setup: withClientCert,
		rule: "WAIT_CV: after a non-empty client Certificate, a Finished without CertificateVerify (Section 4.4.3) is an unexpected_message",
		run: rewriteClientSecondFlight(func(c *conv, recs []*rec) []*rec {
			return without(recs, wire.TypeCertificateVerify)
		}), want: sends(AlertUnexpectedMessage)})
	add(conformanceRow{id: "state/server-wait-eoed-finished", kind: kindMust, section: secA2, roles: asServer, setup: withEarlyData,
		rule: "WAIT_EOED: a Finished under the early key where EndOfEarlyData (Section 4.5) is due is an unexpected_message",
		run: func(c *conv) {
			eoed, fin := c.afterAcceptedEarlyData()
			fin.epoch = eoed.epoch
			c.deliver(fin)
		}, want: sends(AlertUnexpectedMessage)})
	add(conformanceRow{id: "state/server-wait-eoed-skipped", kind: kindMust, section: secA2, roles: asServer, setup: withEarlyData,
		rule: "WAIT_EOED: the client's Finished under the handshake key without EndOfEarlyData does not open under the early key: bad_record_mac",
		run: func(c *conv) {
			_, fin := c.afterAcceptedEarlyData()
			c.deliver(fin)
		}, want: sends(AlertBadRecordMAC)})
	add(conformanceRow{id: "state/server-wait-eoed-appdata", kind: kindMust, section: secA2, roles: asServer, setup: withEarlyData,
		rule: "WAIT_EOED: application data under the handshake key where EndOfEarlyData is due is a bad_record_mac",
		run: func(c *conv) {
			_, fin := c.afterAcceptedEarlyData()
			c.deliver(&rec{ct: record.TypeApplicationData, epoch: fin.epoch, data: []byte("x")})
		}, want: sends(AlertBadRecordMAC)})
	add(conformanceRow{id: "record/end-of-early-data-spans-key-change", kind: kindMust, section: sec51, roles: asServer, setup: withEarlyData,
		rule: "the first bytes of Finished in EndOfEarlyData's record (cut at the key change) are an unexpected_message",
		run: func(c *conv) {
			eoed, fin := c.afterAcceptedEarlyData()
			eoed.data = append(bytes.Clone(eoed.data), fin.data[:5]...)
			c.deliver(eoed)
		}, want: sends(AlertUnexpectedMessage)})
}

// offeredPSKs encodes OfferedPsks (RFC 8446, Section 4.2.11) as it is,
// even with a binder count or length the syntax forbids.
func offeredPSKs(ids []wire.PSKIdentity, binders [][]byte) []byte {
	var b cryptobyte.Builder
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
		for _, id := range ids {
			b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(id.Identity) })
			b.AddUint32(id.ObfuscatedTicketAge)
		}
	})
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
		for _, bd := range binders {
			b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(bd) })
		}
	})
	return b.BytesOrPanic()
}

// rewriteBinders delivers the peer's resuming ClientHello with its
// pre_shared_key rewritten to the identities and binders f returns.
func rewriteBinders(f func(ids []wire.PSKIdentity, binders [][]byte) ([]wire.PSKIdentity, [][]byte)) func(c *conv) {
	return rewriteCH0(func(c *conv, raw []byte) []byte {
		ch, err := wire.ParseClientHello(raw)
		if err != nil || len(ch.PSKIdentities) == 0 {
			c.t.Fatalf("no resuming ClientHello: %v", err)
		}
		return replaceLastExtension(raw, offeredPSKs(f(ch.PSKIdentities, ch.PSKBinders)))
	})
}

// rewriteCH0 rewrites the raw first ClientHello.
func rewriteCH0(f func(c *conv, raw []byte) []byte) func(c *conv) {
	return rewriteFlight(func(c *conv, recs []*rec) []*rec {
		r := c.must(recs, wire.TypeClientHello)
		r.data = f(c, r.data)
		return recs
	})
}

// rewriteCR rewrites the server's CertificateRequest.
func rewriteCR(f func(cr *wire.CertificateRequest)) func(c *conv) {
	return rewriteFlight(func(c *conv, recs []*rec) []*rec {
		r := c.must(recs, wire.TypeCertificateRequest)
		cr, err := wire.ParseCertificateRequest(r.data)
		if err != nil {
			c.t.Fatal(err)
		}
		cr.Order = nil
		f(cr)
		r.data = c.marshal(cr)
		return recs
	})
}

// rewriteTicket completes the handshake and delivers the server's
// NewSessionTicket after f.
func rewriteTicket(f func(nst *wire.NewSessionTicket)) func(c *conv) {
	return func(c *conv) {
		c.completeHandshake()
		recs := c.peerRecs()
		r := c.must(recs, wire.TypeNewSessionTicket)
		nst, err := wire.ParseNewSessionTicket(r.data)
		if err != nil {
			c.t.Fatal(err)
		}
		f(nst)
		r.data = c.marshal(nst)
		c.deliver(recs...)
	}
}

// resumed is the outcome of a legal resumption.
var resumed = behaves("handshake completes, resumed", func(c *conv) error {
	if err := handshakeCompletes.check(c); err != nil {
		return err
	}
	if !c.sut.info.DidResume {
		return fmt.Errorf("not resumed")
	}
	return nil
})

// pskEarlyRetryRows are the rules of 0-RTT on the client, of PSK binders
// and identities, of what a second ClientHello may change, and of the
// extensions each message may carry (Section 4.2's table).
func pskEarlyRetryRows(add func(conformanceRow)) {
	resume := func(o *convOpts) { o.resume = true }
	clientEarly := func(o *convOpts) {
		o.scfg.MaxEarlyData = 1000
		o.early = []byte("early data")
	}

	// 0-RTT on the client (Section 4.2.10).
	add(conformanceRow{id: "early/not-offered", kind: kindMustNot, section: sec42, roles: asClient,
		rule: "early_data in EncryptedExtensions when the client offered none is an unsupported_extension",
		run:  rewriteEE(func(ee *wire.EncryptedExtensions) { ee.EarlyData = true }), want: sends(AlertUnsupportedExtension)})
	add(conformanceRow{id: "early/selected-identity-nonzero", kind: kindMust, section: sec4210, roles: asClient, setup: clientEarly,
		rule: "a server answering 0-RTT MUST select identity 0: selected_identity 1 is an illegal_parameter",
		run: rewriteSH(func(sh *wire.ServerHello) {
			if !sh.HasPSK {
				panic("the server did not resume")
			}
			sh.PSKIdentity = 1
		}), want: sends(AlertIllegalParameter)})

	// PSK identities and binders (Section 4.2.11).
	add(conformanceRow{id: "psk/selected-identity-out-of-range", kind: kindMust, section: sec4211, roles: asClient, setup: resume,
		rule: "a selected_identity beyond the identities offered is an illegal_parameter",
		run:  rewriteSH(func(sh *wire.ServerHello) { sh.PSKIdentity = 5 }), want: sends(AlertIllegalParameter)})
	add(conformanceRow{id: "psk/binder-count-mismatch", kind: kindMust, section: sec4211, roles: asServer, setup: resume,
		rule: "one binder per identity: two binders for one identity are an illegal_parameter (inconsistent fields, Section 6.2)",
		run: rewriteBinders(func(ids []wire.PSKIdentity, bs [][]byte) ([]wire.PSKIdentity, [][]byte) {
			return ids, [][]byte{bs[0], bs[0]}
		}), want: sends(AlertIllegalParameter)})
	add(conformanceRow{id: "psk/binder-too-short", kind: kindMust, section: sec4211, roles: asServer, setup: resume,
		rule: "a binder of 31 bytes (PskBinderEntry<32..255>) is a decode_error",
		run: rewriteBinders(func(ids []wire.PSKIdentity, bs [][]byte) ([]wire.PSKIdentity, [][]byte) {
			return ids, [][]byte{bs[0][:31]}
		}), want: sends(AlertDecodeError)})
	add(conformanceRow{id: "psk/binder-wrong-length", kind: kindMust, section: sec4211, roles: asServer, setup: resume,
		rule: "a 48-byte binder for a SHA-256 PSK does not validate: decrypt_error (Section 6.2)",
		run:  rewriteCH(func(ch *wire.ClientHello) { ch.PSKBinders = [][]byte{make([]byte, 48)} }), want: sends(AlertDecryptError)})

	// What a second ClientHello may change (Section 4.1.2).
	add(conformanceRow{id: "hrr/psk-updated", kind: kindPermitted, section: sec412, roles: asServer,
		setup: func(o *convOpts) { hrrSetup(o); o.resume = true },
		rule:  "a second ClientHello with pre_shared_key updated (age, binder over the HelloRetryRequest transcript) resumes",
		run: func(c *conv) {
			first := c.peerRecs()
			c.deliver(first...) // HelloRetryRequest back to the peer
			second := c.peerRecs()
			ch1, _ := wire.ParseClientHello(c.must(first, wire.TypeClientHello).data)
			ch2, _ := wire.ParseClientHello(c.must(second, wire.TypeClientHello).data)
			if ch1 == nil || ch2 == nil || len(ch2.PSKBinders) != 1 || bytes.Equal(ch1.PSKBinders[0], ch2.PSKBinders[0]) {
				c.t.Fatal("the second ClientHello does not carry an updated pre_shared_key")
			}
			c.deliver(second...)
			c.completeHandshake()
		}, want: resumed})
	add(conformanceRow{id: "hrr/padding-changed", kind: kindPermitted, section: sec412, roles: asServer,
		setup: func(o *convOpts) {
			hrrSetup(o)
			o.ccfg.testHookClientHello = func(ch *wire.ClientHello) {
				ch.Extra = append(ch.Extra, wire.Extension{Type: wire.ExtPadding, Data: make([]byte, 50)})
			}
		},
		rule: "a second ClientHello whose padding changed (50 to 200 bytes) is accepted",
		run: func(c *conv) {
			// The peer builds its second ClientHello from this one.
			ch := c.peer.st.(*clientExpectServerHello).p.hello
			for i, x := range ch.Extra {
				if x.Type == wire.ExtPadding {
					ch.Extra[i].Data = make([]byte, 200)
				}
			}
			c.relay() // HelloRetryRequest back to the peer
			second := c.peerRecs()
			ch2, err := wire.ParseClientHello(c.must(second, wire.TypeClientHello).data)
			if err != nil || len(ch2.Extra) != 1 || ch2.Extra[0].Type != wire.ExtPadding || len(ch2.Extra[0].Data) != 200 {
				c.t.Fatalf("the second ClientHello does not carry 200 bytes of padding: %v", err)
			}
			c.deliver(second...)
			c.completeHandshake()
		}, want: handshakeCompletes})

	// Extensions a message may not carry twice or at all (Section 4.2;
	// Erratum 6820 makes a prohibited one an illegal_parameter, as Section
	// 4.2 has it, not the unsupported_extension Section 6.2 said).
	add(conformanceRow{id: "hrr/duplicate-extension", kind: kindMustNot, section: sec42, roles: asClient, setup: hrrSetup,
		rule: "a HelloRetryRequest with two cookie extensions is an illegal_parameter",
		run: rewriteSH(func(sh *wire.ServerHello) {
			sh.Extra = append(sh.Extra, wire.Extension{Type: wire.ExtCookie, Data: []byte{0, 1, 1}})
		}), want: sends(AlertIllegalParameter)})
	add(conformanceRow{id: "hrr/forbidden-extension", kind: kindMust, section: sec42e6820, roles: asClient, setup: hrrSetup,
		rule: "a HelloRetryRequest with pre_shared_key (ServerHello only) is an illegal_parameter",
		run: rewriteSH(func(sh *wire.ServerHello) {
			sh.Extra = append(sh.Extra, wire.Extension{Type: wire.ExtPreSharedKey, Data: []byte{0, 0}})
		}), want: sends(AlertIllegalParameter)})
	add(conformanceRow{id: "cr/duplicate-extension", kind: kindMustNot, section: sec42, roles: asClient, setup: withClientCert,
		rule: "a CertificateRequest with two signature_algorithms is an illegal_parameter",
		run: rewriteCR(func(cr *wire.CertificateRequest) {
			cr.Extra = append(cr.Extra, wire.Extension{Type: wire.ExtSignatureAlgorithms, Data: []byte{0, 2, 4, 3}})
		}), want: sends(AlertIllegalParameter)})
	add(conformanceRow{id: "cr/forbidden-extension", kind: kindMust, section: sec42e6820, roles: asClient, setup: withClientCert,
		rule: "a CertificateRequest with key_share is an illegal_parameter",
		run: rewriteCR(func(cr *wire.CertificateRequest) {
			cr.Extra = append(cr.Extra, wire.Extension{Type: wire.ExtKeyShare, Data: []byte{0, 0x1d, 0, 1, 1}})
		}), want: sends(AlertIllegalParameter)})
	add(conformanceRow{id: "nst/duplicate-extension", kind: kindMustNot, section: sec42, roles: asClient,
		rule: "a NewSessionTicket with two early_data extensions is an illegal_parameter",
		run: rewriteTicket(func(nst *wire.NewSessionTicket) {
			nst.HasEarlyData = true
			nst.Extra = append(nst.Extra, wire.Extension{Type: wire.ExtEarlyData, Data: []byte{0, 0, 0, 1}})
		}), want: sends(AlertIllegalParameter)})
	add(conformanceRow{id: "nst/forbidden-extension", kind: kindMust, section: sec42e6820, roles: asClient,
		rule: "a NewSessionTicket with key_share is an illegal_parameter",
		run: rewriteTicket(func(nst *wire.NewSessionTicket) {
			nst.Extra = append(nst.Extra, wire.Extension{Type: wire.ExtKeyShare, Data: []byte{0, 0x1d, 0, 1, 1}})
		}), want: sends(AlertIllegalParameter)})
	add(conformanceRow{id: "cert/duplicate-extension", kind: kindMustNot, section: sec42, roles: bothRoles, setup: withClientCert,
		rule: "a CertificateEntry with two signed_certificate_timestamp extensions is an illegal_parameter",
		run: rewritePeerCertificate(func(cm *wire.Certificate) {
			sct := wire.Extension{Type: wire.ExtSCT, Data: []byte{0, 3, 0, 1, 1}}
			cm.Entries[0].Extra = append(cm.Entries[0].Extra, sct, sct)
		}), want: sends(AlertIllegalParameter)})
	add(conformanceRow{id: "cert/forbidden-extension", kind: kindMust, section: sec42e6820, roles: bothRoles, setup: withClientCert,
		rule: "a CertificateEntry with key_share is an illegal_parameter",
		run: rewritePeerCertificate(func(cm *wire.Certificate) {
			cm.Entries[0].Extra = append(cm.Entries[0].Extra, wire.Extension{Type: wire.ExtKeyShare, Data: []byte{0, 0x1d, 0, 1, 1}})
		}), want: sends(AlertIllegalParameter)})

	// Tickets (Section 4.6.1).
	add(conformanceRow{id: "nst/ignored-without-resumption", kind: kindMust, section: sec461e7250, roles: asClient,
		rule:  "a client that does not resume (tickets disabled) MUST ignore a NewSessionTicket",
		setup: func(o *convOpts) { o.ccfg.SessionTicketsDisabled = true },
		run:   afterHandshake(sealed(record.TypeHandshake, hsMsg(wire.TypeNewSessionTicket, []byte{0, 0, 0, 60, 0, 0, 0, 0, 1, 1, 0, 1, 1, 0, 0}))),
		want: behaves("no error, no session kept", func(c *conv) error {
			if c.err != nil || c.sut.lastSession() != nil {
				return fmt.Errorf("error %v, session kept: %v", c.err, c.sut.lastSession() != nil)
			}
			return nil
		})})
}
