package tls13

// Rows for the sections the first table left out: signature algorithms,
// certificate authorities, OID filters, post-handshake authentication
// and supported groups (RFC 8446, Sections 4.2.3 to 4.2.7), the
// transcript (Section 4.4.1), post-handshake messages (Section 4.6), the
// key schedule (Section 7), 0-RTT anti-replay (Section 8) and the protocol
// invariants (Section 9.3). Where a row checks a derivation, the hostile
// peer makes it with code of its own (crypto/hkdf, crypto/hmac, the
// AEADs, the signature algorithms), not the engine's, so the engine is
// compared with the RFC and not with itself.

import (
	"bufio"
	"bytes"
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/tls13/internal/record"
	"github.com/ztls-project/ztls/tls13/internal/wire"
)

const (
	sec4221 = "RFC 8446, Section 4.2.11.2"
	sec424  = "RFC 8446, Section 4.2.4"
	sec425  = "RFC 8446, Section 4.2.5"
	sec426  = "RFC 8446, Section 4.2.6"
	sec427  = "RFC 8446, Section 4.2.7"
	sec441  = "RFC 8446, Section 4.4.1"
	sec46   = "RFC 8446, Section 4.6"
	sec462  = "RFC 8446, Section 4.6.2"
	sec71   = "RFC 8446, Section 7.1"
	sec72   = "RFC 8446, Section 7.2"
	sec73   = "RFC 8446, Section 7.3"
	sec75   = "RFC 8446, Section 7.5"
	sec8    = "RFC 8446, Section 8"
	sec82   = "RFC 8446, Section 8.2"
	sec83   = "RFC 8446, Section 8.3"
	sec93   = "RFC 8446, Section 9.3"
)

// The hostile peer's own key schedule (RFC 8446, Section 7.1).

// suiteHash is the hash of a TLS 1.3 cipher suite (RFC 8446, Appendix B.4).
func suiteHash(id uint16) crypto.Hash {
	if id == 0x1302 {
		return crypto.SHA384
	}
	return crypto.SHA256
}

// expandLabel is HKDF-Expand-Label (RFC 8446, Section 7.1).
func expandLabel(t testing.TB, h crypto.Hash, secret []byte, label string, context []byte, n int) []byte {
	t.Helper()
	info := binary.BigEndian.AppendUint16(nil, uint16(n))
	info = append(info, byte(len("tls13 ")+len(label)))
	info = append(info, "tls13 "+label...)
	info = append(info, byte(len(context)))
	info = append(info, context...)
	out, err := hkdf.Expand(h.New, secret, string(info), n)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// deriveSecret is Derive-Secret with the transcript hash th.
func deriveSecret(t testing.TB, h crypto.Hash, secret []byte, label string, th []byte) []byte {
	return expandLabel(t, h, secret, label, th, h.Size())
}

func hkdfExtract(t testing.TB, h crypto.Hash, salt, ikm []byte) []byte {
	t.Helper()
	out, err := hkdf.Extract(h.New, ikm, salt)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// hashMsgs is Transcript-Hash of whole handshake messages.
func hashMsgs(h crypto.Hash, msgs ...[]byte) []byte {
	d := h.New()
	for _, m := range msgs {
		d.Write(m)
	}
	return d.Sum(nil)
}

// finishedMAC is a Finished's verify_data, or a PSK binder, for base key
// base and transcript hash th (RFC 8446, Section 4.4.4).
func finishedMAC(t testing.TB, h crypto.Hash, base, th []byte) []byte {
	m := hmac.New(h.New, expandLabel(t, h, base, "finished", nil, h.Size()))
	m.Write(th)
	return m.Sum(nil)
}

// messageHash is the synthetic message that replaces ClientHello1 in the
// transcript after a HelloRetryRequest (RFC 8446, Section 4.4.1).
func messageHash(h crypto.Hash, ch1 []byte) []byte {
	return hsMsg(wire.TypeMessageHash, hashMsgs(h, ch1))
}

// named returns the secret of one key log label (its last line).
func (k *keyLog) named(label string) []byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []byte
	sc := bufio.NewScanner(bytes.NewReader(k.buf.Bytes()))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == label {
			out, _ = hex.DecodeString(f[2])
		}
	}
	return out
}

// independentAEAD makes a record protection key from a traffic secret
// (RFC 8446, Section 7.3) with the peer's own code.
func independentAEAD(t testing.TB, suiteID uint16, secret []byte) (cipher.AEAD, []byte) {
	t.Helper()
	h := suiteHash(suiteID)
	keyLen := 32
	if suiteID == 0x1301 {
		keyLen = 16
	}
	key, iv := expandLabel(t, h, secret, "key", nil, keyLen), expandLabel(t, h, secret, "iv", nil, 12)
	var a cipher.AEAD
	var err error
	if suiteID == 0x1303 {
		a, err = chacha20poly1305.New(key)
	} else {
		var b cipher.Block
		if b, err = aes.NewCipher(key); err == nil {
			a, err = cipher.NewGCM(b)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return a, iv
}

// openedRecord is one record of a stream opened by openIndependently.
type openedRecord struct {
	ct    record.ContentType
	epoch int // -1: unprotected
	data  []byte
}

// openIndependently opens a side's whole output with keys derived by the
// peer's own code from the traffic secrets that side logged (in order),
// then their "traffic upd" successors (Section 7.2), each record with the
// nonce of Section 5.3. A protected record that opens under neither the
// current key nor the next is an error: the keys or nonces are wrong.
func openIndependently(t testing.TB, suiteID uint16, secrets [][]byte, stream []byte) ([]openedRecord, error) {
	h := suiteHash(suiteID)
	secret := func(i int) []byte {
		if i < len(secrets) {
			return secrets[i]
		}
		s := secrets[len(secrets)-1]
		for range i - len(secrets) + 1 {
			s = expandLabel(t, h, s, "traffic upd", nil, h.Size())
		}
		return s
	}
	var out []openedRecord
	epoch, seq := -1, uint64(0)
	var aead cipher.AEAD
	var iv []byte
	for len(stream) > 0 {
		if len(stream) < 5 {
			return out, fmt.Errorf("a partial record header")
		}
		n := int(stream[3])<<8 | int(stream[4])
		if len(stream) < 5+n {
			return out, fmt.Errorf("a partial record")
		}
		hdr, body := stream[:5], stream[5:5+n]
		stream = stream[5+n:]
		if record.ContentType(hdr[0]) != record.TypeApplicationData {
			out = append(out, openedRecord{ct: record.ContentType(hdr[0]), epoch: -1, data: body})
			continue
		}
		var plain []byte
		for try := 0; try < 2 && plain == nil; try++ {
			if aead == nil || try == 1 {
				epoch, seq = epoch+1, 0
				aead, iv = independentAEAD(t, suiteID, secret(epoch))
			}
			nonce := bytes.Clone(iv)
			for i := range 8 {
				nonce[4+i] ^= byte(seq >> (56 - 8*i))
			}
			if p, err := aead.Open(nil, nonce, body, hdr); err == nil {
				plain = p
			}
		}
		if plain == nil {
			return out, fmt.Errorf("record %d does not open under epoch %d or the next, with keys from the logged secrets", len(out), epoch-1)
		}
		seq++
		i := len(plain) - 1
		for i >= 0 && plain[i] == 0 {
			i--
		}
		if i < 0 {
			return out, fmt.Errorf("record %d has no content type", len(out))
		}
		out = append(out, openedRecord{ct: record.ContentType(plain[i]), epoch: epoch, data: plain[:i]})
	}
	return out, nil
}

// signCertificateVerify signs a CertificateVerify's content (RFC 8446,
// Section 4.4.3) with the peer's own code.
func signCertificateVerify(t testing.TB, key crypto.PrivateKey, scheme uint16, server bool, th []byte) []byte {
	t.Helper()
	ctx := "TLS 1.3, client CertificateVerify"
	if server {
		ctx = "TLS 1.3, server CertificateVerify"
	}
	content := append(append(bytes.Repeat([]byte{0x20}, 64), ctx...), 0)
	content = append(content, th...)
	var h crypto.Hash
	switch scheme {
	case 0x0403, 0x0804:
		h = crypto.SHA256
	case 0x0503, 0x0805:
		h = crypto.SHA384
	case 0x0603, 0x0806:
		h = crypto.SHA512
	}
	var sig []byte
	var err error
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		sig, err = ecdsa.SignASN1(rand.Reader, k, hashMsgs(h, content))
	case *rsa.PrivateKey:
		sig, err = rsa.SignPSS(rand.Reader, k, h, hashMsgs(h, content), &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
	case ed25519.PrivateKey:
		sig = ed25519.Sign(k, content)
	default:
		t.Fatalf("no signer for %T", key)
	}
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

// Messages of the conversation.

// sutMessages are the handshake messages the engine under test sent.
func (c *conv) sutMessages() []*rec {
	var out []*rec
	for _, r := range c.sutRecords() {
		if r.ct == record.TypeHandshake {
			out = append(out, r)
		}
	}
	return out
}

// deliveredMessages are the handshake messages the peer delivered.
func (c *conv) deliveredMessages() []*rec {
	var out []*rec
	for _, r := range c.delivered {
		if r.ct == record.TypeHandshake && r.raw == nil {
			out = append(out, r)
		}
	}
	return out
}

// transcript returns the handshake's messages in transcript order (a
// handshake without HelloRetryRequest): the ClientHello, the server's
// flight up to its Finished, then the client's to its Finished.
func (c *conv) transcript() [][]byte {
	cm, sm := c.sutMessages(), c.deliveredMessages()
	if !c.sutClient {
		cm, sm = sm, cm
	}
	upTo := func(recs []*rec, from int) [][]byte {
		var out [][]byte
		for _, r := range recs[from:] {
			out = append(out, r.data)
			if r.isMsg(wire.TypeFinished) {
				break
			}
		}
		return out
	}
	out := [][]byte{cm[0].data}
	out = append(out, upTo(sm, 0)...)
	return append(out, upTo(cm, 1)...)
}

func msgIndex(msgs [][]byte, typ uint8) int {
	for i, m := range msgs {
		if len(m) > 0 && m[0] == typ {
			return i
		}
	}
	return -1
}

// resealServerFlight makes the server's rewritten flight recs (ServerHello
// to Finished, no HelloRetryRequest) well formed again for the client
// under test: CertificateVerify re-signed with the server's key and
// Finished re-MACed with its handshake secret, over the transcript the
// client will hash. The peer server, whose own transcript differs, is
// out of the conversation afterwards.
func (c *conv) resealServerFlight(recs []*rec) {
	h := suiteHash(c.peer.suite.ID)
	msgs := [][]byte{c.sutMessages()[0].data}
	for _, r := range recs {
		if r.ct != record.TypeHandshake {
			continue
		}
		switch r.data[0] {
		case wire.TypeCertificateVerify:
			cv, err := wire.ParseCertificateVerify(r.data)
			if err != nil {
				c.t.Fatal(err)
			}
			key := c.peer.cfg.Certificates[0].PrivateKey
			cv.Signature = signCertificateVerify(c.t, key, cv.Scheme, true, hashMsgs(h, msgs...))
			r.data = c.marshal(&wire.CertificateVerify{Scheme: cv.Scheme, Signature: cv.Signature})
		case wire.TypeFinished:
			base := c.peerLog.named("SERVER_HANDSHAKE_TRAFFIC_SECRET")
			r.data = hsMsg(wire.TypeFinished, finishedMAC(c.t, h, base, hashMsgs(h, msgs...)))
		}
		msgs = append(msgs, r.data)
	}
}

// rewriteSealed rewrites the server's flight with f, reseals it and
// delivers it to the client under test.
func rewriteSealed(f func(c *conv, recs []*rec)) func(c *conv) {
	return func(c *conv) {
		recs := c.peerRecs()
		f(c, recs)
		c.resealServerFlight(recs)
		c.deliver(recs...)
	}
}

// parsed returns the message of type typ in recs, parsed by parse.
func parsed[T any](c *conv, recs []*rec, typ uint8, parse func([]byte) (T, error)) (T, *rec) {
	c.t.Helper()
	r := c.must(recs, typ)
	m, err := parse(r.data)
	if err != nil {
		c.t.Fatal(err)
	}
	return m, r
}

// sutWrite makes the engine under test send application data.
func (c *conv) sutWrite(p []byte) {
	c.t.Helper()
	if _, err := c.sut.writeApp(p); err != nil {
		c.t.Fatal(err)
	}
	c.sutOut = append(c.sutOut, c.sut.takeOutput()...)
}

// sutSecrets are the traffic secrets the engine under test wrote with.
func (c *conv) sutSecrets() [][]byte {
	if c.sutClient {
		return c.sutLog.secrets("CLIENT_")
	}
	return c.sutLog.secrets("SERVER_")
}

// withPKI gives both sides certificates of keyType, the server asking
// for the client's.
func withPKI(keyType string) func(o *convOpts) {
	return func(o *convOpts) {
		p := getPKI(o.t, keyType)
		o.scfg.Certificates = []Certificate{p.server}
		o.ccfg.Certificates = []Certificate{p.client}
		o.ccfg.RootCAs = p.pool()
		o.scfg.ClientAuth = RequestClientCert
	}
}

// sutConfig is the configuration of the engine under test.
func (o *convOpts) sutConfig() *Config {
	if o.sutClient {
		return o.ccfg
	}
	return o.scfg
}

// otherCA is a second CA, of another name than getPKI's (all of whose
// CAs share one), with a server and a client certificate.
var (
	otherCAOnce sync.Once
	otherCA     *testpki.CA
	otherServer Certificate
	otherClient Certificate
)

func otherCAPKI(t testing.TB) (*testpki.CA, Certificate, Certificate) {
	otherCAOnce.Do(func() {
		otherCA = testpki.NewCA(t, "ecdsa-p384")
		srv := otherCA.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256"})
		cli := otherCA.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256", Client: true, DNSNames: []string{"client.test"}})
		otherServer = Certificate{Chain: srv.Chain, PrivateKey: srv.Key, Leaf: srv.Cert}
		otherClient = Certificate{Chain: cli.Chain, PrivateKey: cli.Key, Leaf: cli.Cert}
	})
	return otherCA, otherServer, otherClient
}

// sentLeaf is the first certificate of the Certificate the engine under
// test sent.
func (c *conv) sentLeaf() []byte {
	for _, r := range c.sutMessages() {
		if r.isMsg(wire.TypeCertificate) {
			cm, err := wire.ParseCertificate(r.data)
			if err != nil || len(cm.Entries) == 0 {
				return nil
			}
			return cm.Entries[0].Data
		}
	}
	return nil
}

// rewriteCVScheme sets the scheme of the peer's CertificateVerify,
// leaving its signature as it is.
func rewriteCVScheme(scheme uint16) func(c *conv) {
	return peerFlight(func(c *conv, recs []*rec) []*rec {
		r := c.must(recs, wire.TypeCertificateVerify)
		r.data = bytes.Clone(r.data)
		r.data[4], r.data[5] = byte(scheme>>8), byte(scheme)
		return recs
	})
}

// truncatedHello is a ClientHello without its binders (RFC 8446, Section
// 4.2.11.2), and the offset where they start.
func truncatedHello(c *conv, raw []byte) ([]byte, int) {
	ch, err := wire.ParseClientHello(raw)
	if err != nil || len(ch.PSKBinders) == 0 {
		c.t.Fatalf("no resuming ClientHello: %v", err)
	}
	n := 2
	for _, b := range ch.PSKBinders {
		n += 1 + len(b)
	}
	return raw[:len(raw)-n], len(raw) - n
}

// binderKey is the binder key of a resumption PSK (Section 7.1).
func (c *conv) binderKey(label string) ([]byte, crypto.Hash) {
	h := suiteHash(uint16(c.sess.Suite))
	early := hkdfExtract(c.t, h, make([]byte, h.Size()), c.sess.PSK)
	return deriveSecret(c.t, h, early, label, hashMsgs(h)), h
}

// replaceBinder delivers the peer's resuming ClientHello with its one
// binder set to what binder computes from the original bytes, after
// checking that the peer's own code gives the client's binder.
func replaceBinder(binder func(c *conv, raw []byte) []byte) func(c *conv) {
	return rewriteCH0(func(c *conv, raw []byte) []byte {
		trunc, at := truncatedHello(c, raw)
		key, h := c.binderKey("res binder")
		if want := finishedMAC(c.t, h, key, hashMsgs(h, trunc)); !bytes.Equal(raw[at+3:], want) {
			c.t.Fatalf("the peer's own binder computation disagrees with the client's binder")
		}
		out := bytes.Clone(raw)
		copy(out[at+3:], binder(c, raw))
		return out
	})
}

// ticketsSent are the NewSessionTickets the server under test sent.
func (c *conv) ticketsSent() []*wire.NewSessionTicket {
	var out []*wire.NewSessionTicket
	for _, r := range c.sutMessages() {
		if r.isMsg(wire.TypeNewSessionTicket) {
			nst, err := wire.ParseNewSessionTicket(r.data)
			if err != nil {
				c.t.Fatal(err)
			}
			out = append(out, nst)
		}
	}
	return out
}

// resumedWithoutEarly is the outcome of a resumption whose 0-RTT data
// the server under test refused, the handshake going on in 1-RTT.
var resumedWithoutEarly = behaves("handshake completes, resumed, 0-RTT rejected", func(c *conv) error {
	if err := resumed.check(c); err != nil {
		return err
	}
	if c.sut.info.EarlyDataAccepted {
		return fmt.Errorf("0-RTT accepted")
	}
	return nil
})

// clientHelloHook makes the peer client build its ClientHello with f, so
// the transcript stays its own and the handshake can complete.
func clientHelloHook(f func(ch *wire.ClientHello)) func(o *convOpts) {
	return func(o *convOpts) { o.ccfg.testHookClientHello = f }
}

func completes(c *conv) { c.completeHandshake() }

// sectionRows are the rows of Sections 4.2.3 to 4.2.7, 4.4.1, 4.6, 7, 8
// and 9.3.
func sectionRows(add func(conformanceRow)) {
	signatureAlgorithmRows(add)
	certificateAuthorityRows(add)
	postHandshakeAuthAndGroupRows(add)
	transcriptRows(add)
	keyScheduleRows(add)
	postHandshakeRows(add)
	antiReplayRows(add)
	invariantRows(add)
}

// signatureAlgorithmRows: RFC 8446, Section 4.2.3 (and 4.4.2.2 for the
// chain).
func signatureAlgorithmRows(add func(conformanceRow)) {
	pkcs1Listed := func(o *convOpts) {
		withPKI("rsa2048")(o)
		o.sutConfig().SignatureSchemes = []SignatureScheme{PSSWithSHA256, PKCS1WithSHA256}
	}
	add(conformanceRow{id: "sigalgs/pkcs1-in-certificate-verify", kind: kindMustNot, section: sec423, roles: bothRoles, setup: pkcs1Listed,
		rule: "RSASSA-PKCS1-v1_5 schemes are for certificates only, never a CertificateVerify: rsa_pkcs1_sha256 there is an illegal_parameter even from a receiver that listed it",
		run:  rewriteCVScheme(0x0401), want: sends(AlertIllegalParameter)})
	add(conformanceRow{id: "sigalgs/ecdsa-curve-mismatch", kind: kindMust, section: sec423, roles: bothRoles, setup: withClientCert,
		rule: "a certificate's key MUST suit the scheme it signs with: ecdsa_secp384r1_sha384 from a P-256 key is an illegal_parameter",
		run:  rewriteCVScheme(0x0503), want: sends(AlertIllegalParameter)})
	add(conformanceRow{id: "sigalgs/pss-scheme-for-rsae-key", kind: kindMust, section: sec423, roles: bothRoles, setup: withPKI("rsa2048"),
		rule: "rsa_pss_pss_* needs a key with the RSASSA-PSS OID: rsa_pss_pss_sha256 from an rsaEncryption key is an illegal_parameter",
		run:  rewriteCVScheme(0x0809), want: sends(AlertIllegalParameter)})
	add(conformanceRow{id: "sigalgs/server-signs-offered", kind: kindMust, section: sec423, roles: asServer,
		setup: func(o *convOpts) {
			withPKI("rsa2048")(o)
			o.scfg.ClientAuth = NoClientCert
			clientHelloHook(func(ch *wire.ClientHello) { ch.SignatureAlgorithms = []uint16{0x0805} })(o)
		},
		rule: "the server signs with a scheme of the client's signature_algorithms: offered only rsa_pss_rsae_sha384, it signs with it",
		run:  completes,
		want: behaves("handshake completes, signed with rsa_pss_rsae_sha384", func(c *conv) error {
			if err := handshakeCompletes.check(c); err != nil {
				return err
			}
			if got := c.peer.info.SignatureScheme; got != 0x0805 {
				return fmt.Errorf("the server signed with %s", got)
			}
			return nil
		})})
	add(conformanceRow{id: "sigalgs/nothing-deprecated-offered", kind: kindMustNot, section: sec423, roles: bothRoles, setup: withClientCert,
		rule: "MD5, SHA-224 and DSA MUST NOT be offered (and ztls offers no SHA-1 either): none in signature_algorithms or signature_algorithms_cert of the ClientHello or CertificateRequest",
		run: func(c *conv) {
			if !c.sutClient {
				c.relay() // the ClientHello; the server's flight has its CertificateRequest
			}
		},
		want: behaves("none offered", func(c *conv) error {
			var lists [][]uint16
			for _, r := range c.sutMessages() {
				switch {
				case r.isMsg(wire.TypeClientHello):
					ch, err := wire.ParseClientHello(r.data)
					if err != nil {
						return err
					}
					lists = append(lists, ch.SignatureAlgorithms, ch.SignatureAlgorithmsCert)
				case r.isMsg(wire.TypeCertificateRequest):
					cr, err := wire.ParseCertificateRequest(r.data)
					if err != nil {
						return err
					}
					lists = append(lists, cr.SignatureAlgorithms, cr.SignatureAlgorithmsCert)
				}
			}
			if len(lists) == 0 {
				return fmt.Errorf("no ClientHello or CertificateRequest sent")
			}
			for _, l := range lists {
				for _, s := range l {
					// TLS 1.2 pairs: hash 1 MD5, 2 SHA-1, 3 SHA-224; signature 2 DSA.
					if s < 0x0700 && (s>>8 <= 3 || s&0xff == 2) {
						return fmt.Errorf("offers %#04x", s)
					}
				}
			}
			return nil
		})})
	add(conformanceRow{id: "sigalgs/chain-outside-signature-algorithms-cert", kind: kindShould, section: sec4422, roles: asServer,
		setup: clientHelloHook(func(ch *wire.ClientHello) { ch.SignatureAlgorithmsCert = []uint16{0x0807} }),
		rule:  "a server whose only chain is signed with a scheme outside the client's signature_algorithms_cert (ed25519 only) SHOULD send it all the same",
		run:   func(c *conv) { c.relay() },
		want: behaves("no error; its Certificate sent", func(c *conv) error {
			if c.err != nil {
				return c.err
			}
			if c.sentLeaf() == nil {
				return fmt.Errorf("no Certificate sent")
			}
			return nil
		})})
}

// certificateAuthorityRows: RFC 8446, Section 4.2.4, and the OID filters
// of Section 4.2.5.
func certificateAuthorityRows(add func(conformanceRow)) {
	add(conformanceRow{id: "ca/guides-server-certificate", kind: kindShould, section: sec424, roles: asServer,
		setup: func(o *convOpts) {
			ca, srv, _ := otherCAPKI(o.t)
			o.scfg.Certificates = append(o.scfg.Certificates, srv)
			o.ccfg.RootCAs = o.ccfg.RootCAs.Clone()
			o.ccfg.RootCAs.AddCert(ca.Cert)
			clientHelloHook(func(ch *wire.ClientHello) { ch.CertificateAuthorities = [][]byte{ca.Cert.RawSubject} })(o)
		},
		rule: "certificate_authorities in the ClientHello SHOULD guide the server's choice: of two certificates for the name, it sends the one under the CA named",
		run:  completes,
		want: behaves("handshake completes with the certificate under the CA named", func(c *conv) error {
			if err := handshakeCompletes.check(c); err != nil {
				return err
			}
			if _, srv, _ := otherCAPKI(c.t); !bytes.Equal(c.sentLeaf(), srv.Chain[0]) {
				return fmt.Errorf("the server sent the other certificate")
			}
			return nil
		})})
	add(conformanceRow{id: "ca/guides-client-certificate", kind: kindShould, section: sec424, roles: asClient,
		setup: func(o *convOpts) {
			_, _, cli := otherCAPKI(o.t)
			withClientCert(o)
			o.ccfg.Certificates = append(o.ccfg.Certificates, cli)
		},
		rule: "certificate_authorities in the CertificateRequest SHOULD guide the client's choice: of two certificates, it sends the one under the CA named",
		run: rewriteSealed(func(c *conv, recs []*rec) {
			ca, _, _ := otherCAPKI(c.t)
			cr, r := parsed(c, recs, wire.TypeCertificateRequest, wire.ParseCertificateRequest)
			cr.Order, cr.CertificateAuthorities = nil, [][]byte{ca.Cert.RawSubject}
			r.data = c.marshal(cr)
		}),
		want: behaves("handshake completes with the certificate under the CA named", func(c *conv) error {
			if err := handshakeCompletes.check(c); err != nil {
				return err
			}
			if _, _, cli := otherCAPKI(c.t); !bytes.Equal(c.sentLeaf(), cli.Chain[0]) {
				return fmt.Errorf("the client sent the other certificate")
			}
			return nil
		})})
	add(conformanceRow{id: "ca/unknown-authority", kind: kindPermitted, section: sec424, roles: asServer,
		setup: clientHelloHook(func(ch *wire.ClientHello) {
			ch.CertificateAuthorities = [][]byte{{0x30, 0x0e, 0x31, 0x0c, 0x30, 0x0a, 0x06, 0x03, 0x55, 0x04, 0x03, 0x0c, 0x03, 'f', 'o', 'o'}}
		}),
		rule: "certificate_authorities only guides: a server with no certificate under the CAs named sends the one it has",
		run:  completes, want: handshakeCompletes})
	add(conformanceRow{id: "ca/malformed", kind: kindMust, section: sec424, roles: bothRoles, setup: withClientCert,
		rule: "certificate_authorities with an empty list (authorities<3..2^16-1>) breaks the syntax: decode_error",
		run: func(c *conv) {
			bad := wire.Extension{Type: wire.ExtCertificateAuthorities, Data: []byte{0, 0}}
			if c.sutClient {
				rewriteCR(func(cr *wire.CertificateRequest) { cr.Extra = append(cr.Extra, bad) })(c)
			} else {
				rewriteCH(func(ch *wire.ClientHello) { ch.Extra = append(ch.Extra, bad) })(c)
			}
		}, want: sends(AlertDecodeError)})

	// OID filters (Section 4.2.5).
	add(conformanceRow{id: "oid/unknown-oid-ignored", kind: kindMust, section: sec425, roles: asClient, setup: withClientCert,
		rule: "a client MUST ignore the certificate extension OIDs of oid_filters it does not recognize: it answers with its certificate",
		run: rewriteSealed(func(c *conv, recs []*rec) {
			cr, r := parsed(c, recs, wire.TypeCertificateRequest, wire.ParseCertificateRequest)
			oid := []byte{0x06, 0x04, 0x2a, 0x03, 0x04, 0x05} // 1.2.3.4.5
			filter := append(append([]byte{byte(len(oid))}, oid...), 0, 2, 0x05, 0x00)
			cr.Order = nil
			cr.Extra = append(cr.Extra, wire.Extension{Type: 48, Data: append([]byte{0, byte(len(filter))}, filter...)})
			r.data = c.marshal(cr)
		}),
		want: behaves("handshake completes, its certificate sent", func(c *conv) error {
			if err := handshakeCompletes.check(c); err != nil {
				return err
			}
			if c.sentLeaf() == nil {
				return fmt.Errorf("no certificate sent")
			}
			return nil
		})})
	add(conformanceRow{id: "oid/only-in-certificate-request", kind: kindMust, section: sec425, roles: asClient,
		rule: "oid_filters MUST only be sent in the CertificateRequest: in EncryptedExtensions it answers nothing the client sent, an unsupported_extension",
		run: rewriteEE(func(ee *wire.EncryptedExtensions) {
			ee.Extra = append(ee.Extra, wire.Extension{Type: 48, Data: []byte{0, 0}})
		}),
		want: sends(AlertUnsupportedExtension)})
}

// postHandshakeAuthAndGroupRows: RFC 8446, Sections 4.2.6 (with 4.6.2)
// and 4.2.7.
func postHandshakeAuthAndGroupRows(add func(conformanceRow)) {
	cr := &wire.CertificateRequest{RequestContext: []byte{7}, SignatureAlgorithms: []uint16{0x0403}}
	crMsg, err := cr.Marshal()
	if err != nil {
		panic(err)
	}
	add(conformanceRow{id: "pha/request-without-extension", kind: kindMust, section: sec462, roles: asClient,
		rule: "the client offers no post_handshake_auth (Section 4.2.6); a CertificateRequest after the handshake is then an unexpected_message",
		run: func(c *conv) {
			ch, err := wire.ParseClientHello(c.sutMessages()[0].data)
			if err != nil || ch.PostHandshakeAuth {
				c.t.Fatalf("the client offers post_handshake_auth: %v", err)
			}
			afterHandshake(sealed(record.TypeHandshake, crMsg))(c)
		}, want: sends(AlertUnexpectedMessage)})
	add(conformanceRow{id: "pha/extension-from-server", kind: kindMustNot, section: sec426, roles: asClient,
		rule: "servers MUST NOT send post_handshake_auth: in EncryptedExtensions it is an illegal_parameter (Section 4.2)",
		run: rewriteEE(func(ee *wire.EncryptedExtensions) {
			ee.Extra = append(ee.Extra, wire.Extension{Type: wire.ExtPostHandshakeAuth})
		}),
		want: sends(AlertIllegalParameter)})
	add(conformanceRow{id: "pha/server-does-not-request", kind: kindPermitted, section: sec426, roles: asServer,
		setup: clientHelloHook(func(ch *wire.ClientHello) { ch.PostHandshakeAuth = true }),
		rule:  "a server MAY ask a client that offers post_handshake_auth for a certificate after the handshake; ztls never does",
		run:   func(c *conv) { c.handshake() },
		want: behaves("handshake completes, no CertificateRequest after it", func(c *conv) error {
			if err := handshakeCompletes.check(c); err != nil {
				return err
			}
			for _, r := range c.sutMessages() {
				if r.isMsg(wire.TypeCertificateRequest) {
					return fmt.Errorf("the server sent a CertificateRequest")
				}
			}
			return nil
		})})

	// Supported groups (Section 4.2.7).
	add(conformanceRow{id: "groups/server-preference-sent", kind: kindShould, section: sec427, roles: asServer,
		setup: func(o *convOpts) {
			o.scfg.Groups = []CurveID{P256, X25519}
			o.ccfg.Groups, o.ccfg.KeyShareGroups = []CurveID{X25519, P256}, []CurveID{X25519}
		},
		rule: "a server that takes a share for a group other than the one it prefers SHOULD send supported_groups with all its groups",
		run:  completes,
		want: behaves("handshake completes on x25519; EncryptedExtensions lists secp256r1, x25519", func(c *conv) error {
			if err := handshakeCompletes.check(c); err != nil {
				return err
			}
			if c.sut.info.Group != X25519 || slices.Contains(c.sut.events, EventHelloRetryRequest) {
				return fmt.Errorf("group %v (HelloRetryRequest: %v)", c.sut.info.Group, slices.Contains(c.sut.events, EventHelloRetryRequest))
			}
			ee, _ := parsed(c, c.sutMessages(), wire.TypeEncryptedExtensions, wire.ParseEncryptedExtensions)
			if !slices.Equal(ee.SupportedGroups, []uint16{uint16(P256), uint16(X25519)}) {
				return fmt.Errorf("supported_groups %v", ee.SupportedGroups)
			}
			return nil
		})})
	add(conformanceRow{id: "groups/server-preference-not-acted-on", kind: kindMustNot, section: sec427, roles: asClient,
		rule: "clients MUST NOT act upon the server's supported_groups before the handshake completes: it completes on the group negotiated",
		run: rewriteSealed(func(c *conv, recs []*rec) {
			ee, r := parsed(c, recs, wire.TypeEncryptedExtensions, wire.ParseEncryptedExtensions)
			ee.Order, ee.SupportedGroups = nil, []uint16{uint16(P384)}
			r.data = c.marshal(ee)
		}),
		want: behaves("handshake completes on the ServerHello's group", func(c *conv) error {
			if err := handshakeCompletes.check(c); err != nil {
				return err
			}
			sh, _ := parsed(c, c.deliveredMessages(), wire.TypeServerHello, wire.ParseServerHello)
			if c.sut.info.Group != CurveID(sh.KeyShare.Group) {
				return fmt.Errorf("group %v, the ServerHello's %v", c.sut.info.Group, CurveID(sh.KeyShare.Group))
			}
			return nil
		})})
}

// transcriptRows: RFC 8446, Section 4.4.1 (and the binder's transcript,
// Section 4.2.11.2).
func transcriptRows(add func(conformanceRow)) {
	// badServerFinished delivers the server's flight with its Finished
	// MACed over the transcript wrong gives, after checking that right
	// gives the peer's real Finished.
	badServerFinished := func(right, wrong func(c *conv, flight [][]byte) [][]byte) func(c *conv) {
		return func(c *conv) {
			recs := c.peerRecs()
			var flight [][]byte
			for _, r := range recs {
				if r.ct == record.TypeHandshake && !r.isMsg(wire.TypeFinished) {
					flight = append(flight, r.data)
				}
			}
			h := suiteHash(c.peer.suite.ID)
			base := c.peerLog.named("SERVER_HANDSHAKE_TRAFFIC_SECRET")
			fin := c.must(recs, wire.TypeFinished)
			if got := hsMsg(wire.TypeFinished, finishedMAC(c.t, h, base, hashMsgs(h, right(c, flight)...))); !bytes.Equal(got, fin.data) {
				c.t.Fatal("the peer's own transcript gives another Finished than the server's")
			}
			fin.data = hsMsg(wire.TypeFinished, finishedMAC(c.t, h, base, hashMsgs(h, wrong(c, flight)...)))
			c.deliver(recs...)
		}
	}
	add(conformanceRow{id: "transcript/message-hash-after-retry", kind: kindMust, section: sec441, roles: asClient, setup: hrrSetup,
		rule: "after a HelloRetryRequest the transcript starts with message_hash(Hash(ClientHello1)): a Finished over ClientHello1 itself is a decrypt_error",
		run: func(c *conv) {
			c.relay() // the HelloRetryRequest; the second ClientHello goes to the peer
			h := suiteHash(c.peer.suite.ID)
			sent, hrr := c.sutMessages(), c.deliveredMessages()[0].data
			ch1, ch2 := sent[0].data, sent[1].data
			badServerFinished(
				func(c *conv, f [][]byte) [][]byte { return append([][]byte{messageHash(h, ch1), hrr, ch2}, f...) },
				func(c *conv, f [][]byte) [][]byte { return append([][]byte{ch1, hrr, ch2}, f...) })(c)
		}, want: sends(AlertDecryptError)})
	add(conformanceRow{id: "transcript/every-message", kind: kindMust, section: sec441, roles: asClient,
		rule: "the transcript holds every handshake message: a Finished over one without EncryptedExtensions is a decrypt_error",
		run: badServerFinished(
			func(c *conv, f [][]byte) [][]byte { return append([][]byte{c.sutMessages()[0].data}, f...) },
			func(c *conv, f [][]byte) [][]byte {
				out := [][]byte{c.sutMessages()[0].data}
				for _, m := range f {
					if m[0] != wire.TypeEncryptedExtensions {
						out = append(out, m)
					}
				}
				return out
			}), want: sends(AlertDecryptError)})
	add(conformanceRow{id: "transcript/client-authentication", kind: kindMust, section: sec441, roles: asServer, setup: withClientCert,
		rule: "the client's Finished covers its Certificate and CertificateVerify: one over a transcript without them is a decrypt_error",
		run: rewriteClientSecondFlight(func(c *conv, recs []*rec) []*rec {
			h := suiteHash(c.sut.suite.ID)
			msgs := [][]byte{c.deliveredMessages()[0].data}
			for _, r := range c.sutMessages() {
				msgs = append(msgs, r.data)
			}
			base := c.peerLog.named("CLIENT_HANDSHAKE_TRAFFIC_SECRET")
			fin := c.must(recs, wire.TypeFinished)
			full := append(append([][]byte{}, msgs...), c.must(recs, wire.TypeCertificate).data, c.must(recs, wire.TypeCertificateVerify).data)
			if got := hsMsg(wire.TypeFinished, finishedMAC(c.t, h, base, hashMsgs(h, full...))); !bytes.Equal(got, fin.data) {
				c.t.Fatal("the peer's own transcript gives another Finished than the client's")
			}
			fin.data = hsMsg(wire.TypeFinished, finishedMAC(c.t, h, base, hashMsgs(h, msgs...)))
			return recs
		}), want: sends(AlertDecryptError)})
	add(conformanceRow{id: "transcript/own-finished", kind: kindMust, section: sec441, roles: bothRoles, setup: withClientCert,
		rule: "the engine's Finished is HMAC(finished_key, Transcript-Hash) over every message up to it, as the peer computes both with its own code",
		run:  func(c *conv) { c.handshake() },
		want: behaves("the Finished sent equals the peer's computation", func(c *conv) error {
			if err := handshakeCompletes.check(c); err != nil {
				return err
			}
			msgs := c.transcript()
			label, fin := "SERVER_HANDSHAKE_TRAFFIC_SECRET", msgIndex(msgs, wire.TypeFinished)
			if c.sutClient {
				label = "CLIENT_HANDSHAKE_TRAFFIC_SECRET"
				fin = len(msgs) - 1
			}
			h := suiteHash(c.sut.suite.ID)
			want := hsMsg(wire.TypeFinished, finishedMAC(c.t, h, c.sutLog.named(label), hashMsgs(h, msgs[:fin]...)))
			if !bytes.Equal(msgs[fin], want) {
				return fmt.Errorf("the Finished sent differs from HMAC over the transcript")
			}
			return nil
		})})
	add(conformanceRow{id: "transcript/binder-over-truncated-hello", kind: kindMust, section: sec4221, roles: asServer,
		setup: func(o *convOpts) { o.resume = true },
		rule:  "a PSK binder covers the ClientHello up to its binders list (Truncate): one over the whole ClientHello is a decrypt_error",
		run: replaceBinder(func(c *conv, raw []byte) []byte {
			key, h := c.binderKey("res binder")
			return finishedMAC(c.t, h, key, hashMsgs(h, raw))
		}), want: sends(AlertDecryptError)})
}

// keyScheduleRows: RFC 8446, Section 7.
func keyScheduleRows(add func(conformanceRow)) {
	pskKE := func(o *convOpts) {
		o.resume = true
		o.ccfg.PSKModes, o.scfg.PSKModes = []PSKMode{PSKModeKE}, []PSKMode{PSKModeKE}
	}
	add(conformanceRow{id: "keyschedule/psk-ke-secrets", kind: kindMust, section: sec71, roles: bothRoles, setup: pskKE,
		rule: "the key schedule from a PSK with no (EC)DHE (psk_ke: the 0-value in its place): binder, handshake and application traffic secrets and exporter secret as the peer derives them",
		run:  completes,
		want: behaves("every secret logged equals the peer's derivation", func(c *conv) error {
			if err := resumed.check(c); err != nil {
				return err
			}
			if c.sut.info.Group != 0 {
				return fmt.Errorf("resumed with %v: not psk_ke", c.sut.info.Group)
			}
			msgs := c.transcript()
			h := suiteHash(uint16(c.sess.Suite))
			zero := make([]byte, h.Size())
			early := hkdfExtract(c.t, h, zero, c.sess.PSK)
			hs := hkdfExtract(c.t, h, deriveSecret(c.t, h, early, "derived", hashMsgs(h)), zero)
			ms := hkdfExtract(c.t, h, deriveSecret(c.t, h, hs, "derived", hashMsgs(h)), zero)
			sfin := msgIndex(msgs, wire.TypeFinished)
			thSH, thFin := hashMsgs(h, msgs[:2]...), hashMsgs(h, msgs[:sfin+1]...)
			for label, want := range map[string][]byte{
				"CLIENT_HANDSHAKE_TRAFFIC_SECRET": deriveSecret(c.t, h, hs, "c hs traffic", thSH),
				"SERVER_HANDSHAKE_TRAFFIC_SECRET": deriveSecret(c.t, h, hs, "s hs traffic", thSH),
				"CLIENT_TRAFFIC_SECRET_0":         deriveSecret(c.t, h, ms, "c ap traffic", thFin),
				"SERVER_TRAFFIC_SECRET_0":         deriveSecret(c.t, h, ms, "s ap traffic", thFin),
				"EXPORTER_SECRET":                 deriveSecret(c.t, h, ms, "exp master", thFin),
			} {
				if got := c.sutLog.named(label); !bytes.Equal(got, want) {
					return fmt.Errorf("%s differs from the peer's derivation", label)
				}
			}
			trunc, at := truncatedHello(c, msgs[0])
			key, _ := c.binderKey("res binder")
			if !bytes.Equal(msgs[0][at+3:], finishedMAC(c.t, h, key, hashMsgs(h, trunc))) {
				return fmt.Errorf("the binder differs from the peer's derivation")
			}
			return nil
		})})
	add(conformanceRow{id: "keyschedule/binder-key-label", kind: kindMust, section: sec71, roles: asServer,
		setup: func(o *convOpts) { o.resume = true },
		rule:  "a resumption PSK's binder key is Derive-Secret(early, \"res binder\"): a binder made with \"ext binder\" (external PSKs) is a decrypt_error",
		run: replaceBinder(func(c *conv, raw []byte) []byte {
			trunc, _ := truncatedHello(c, raw)
			key, h := c.binderKey("ext binder")
			return finishedMAC(c.t, h, key, hashMsgs(h, trunc))
		}), want: sends(AlertDecryptError)})
	add(conformanceRow{id: "keyschedule/traffic-keys", kind: kindMust, section: sec73, roles: bothRoles, setup: withClientCert,
		rule: "each record opens with [sender]_write_key and _iv = HKDF-Expand-Label(secret, \"key\"/\"iv\") and the nonce of Section 5.3, made by the peer's own code from the secrets logged",
		run: func(c *conv) {
			if c.handshake() == nil {
				c.sutWrite([]byte("data"))
			}
		},
		want: behaves("every record opens; the last is the data", func(c *conv) error {
			if c.err != nil {
				return c.err
			}
			recs, err := openIndependently(c.t, c.sut.suite.ID, c.sutSecrets(), c.sutOut)
			if err != nil {
				return err
			}
			if last := recs[len(recs)-1]; last.ct != record.TypeApplicationData || string(last.data) != "data" || last.epoch != 1 {
				return fmt.Errorf("last record: type %d, epoch %d, %q", last.ct, last.epoch, last.data)
			}
			return nil
		})})
	add(conformanceRow{id: "keyschedule/key-update", kind: kindMust, section: sec72, roles: bothRoles,
		rule: "after its KeyUpdate the engine writes under application_traffic_secret_N+1 = HKDF-Expand-Label(secret_N, \"traffic upd\", \"\", Hash.length)",
		run: func(c *conv) {
			if c.handshake() != nil {
				return
			}
			if err := c.sut.sendKeyUpdate(false); err != nil {
				c.t.Fatal(err)
			}
			c.sutWrite([]byte("after"))
		},
		want: behaves("the data opens under the next secret", func(c *conv) error {
			if c.err != nil {
				return c.err
			}
			recs, err := openIndependently(c.t, c.sut.suite.ID, c.sutSecrets(), c.sutOut)
			if err != nil {
				return err
			}
			last := recs[len(recs)-1]
			if string(last.data) != "after" || last.epoch != 2 {
				return fmt.Errorf("last record %q at epoch %d, want \"after\" under the updated secret (2)", last.data, last.epoch)
			}
			return nil
		})})
	add(conformanceRow{id: "keyschedule/exporter", kind: kindMust, section: sec75, roles: bothRoles,
		rule: "TLS-Exporter(label, context, length) = HKDF-Expand-Label(Derive-Secret(exporter_master_secret, label, \"\"), \"exporter\", Hash(context), length)",
		run:  func(c *conv) { c.handshake() },
		want: behaves("ExportKeyingMaterial equals the peer's derivation, and the peer's", func(c *conv) error {
			if c.err != nil {
				return c.err
			}
			h := suiteHash(c.sut.suite.ID)
			label, ctx := "EXPERIMENTAL ztls conformance", []byte("context")
			derived := deriveSecret(c.t, h, c.sutLog.named("EXPORTER_SECRET"), label, hashMsgs(h))
			want := expandLabel(c.t, h, derived, "exporter", hashMsgs(h, ctx), 42)
			got, err := c.sutConn().ExportKeyingMaterial(label, ctx, 42)
			if err != nil {
				return err
			}
			peer, err := (&Conn{e: c.peer}).ExportKeyingMaterial(label, ctx, 42)
			if err != nil || !bytes.Equal(got, want) || !bytes.Equal(peer, want) {
				return fmt.Errorf("exporter differs from the peer's derivation (%v)", err)
			}
			return nil
		})})
}

// postHandshakeRows: RFC 8446, Section 4.6.
func postHandshakeRows(add func(conformanceRow)) {
	add(conformanceRow{id: "nst/lifetime-over-a-week", kind: kindMustNot, section: sec461, roles: asClient,
		rule: "clients MUST NOT cache a ticket for longer than 7 days, whatever its ticket_lifetime (8 days here)",
		run:  rewriteTicket(func(nst *wire.NewSessionTicket) { nst.Lifetime = 8 * 24 * 3600 }),
		want: behaves("session kept for 7 days", func(c *conv) error {
			s := c.sut.lastSession()
			if c.err != nil || s == nil || s.Lifetime != 7*24*time.Hour {
				return fmt.Errorf("error %v, session %+v", c.err, s)
			}
			return nil
		})})
	add(conformanceRow{id: "nst/lifetime-zero", kind: kindShould, section: sec461, roles: asClient,
		rule: "a ticket_lifetime of zero says the ticket should be discarded at once: no session kept",
		run:  rewriteTicket(func(nst *wire.NewSessionTicket) { nst.Lifetime = 0 }),
		want: behaves("no error, no session kept", func(c *conv) error {
			if c.err != nil || c.sut.lastSession() != nil {
				return fmt.Errorf("error %v, session kept: %v", c.err, c.sut.lastSession() != nil)
			}
			return nil
		})})
	add(conformanceRow{id: "nst/server-lifetime", kind: kindMustNot, section: sec461, roles: asServer,
		setup: func(o *convOpts) { o.scfg.TicketLifetime = 30 * 24 * time.Hour },
		rule:  "servers MUST NOT use a ticket_lifetime over 604800 seconds, even when Config.TicketLifetime asks for 30 days",
		run:   func(c *conv) { c.handshake() },
		want: behaves("ticket_lifetime at most 604800", func(c *conv) error {
			ts := c.ticketsSent()
			if c.err != nil || len(ts) == 0 || ts[0].Lifetime > 604800 {
				return fmt.Errorf("error %v, %d tickets", c.err, len(ts))
			}
			return nil
		})})
	add(conformanceRow{id: "nst/fresh-age-add", kind: kindMust, section: sec461, roles: asServer,
		rule: "the server MUST generate a fresh ticket_age_add for each ticket, and ticket_nonce is unique on the connection: three tickets, three of each",
		run: func(c *conv) {
			if c.handshake() != nil {
				return
			}
			st := c.sut.st.(*serverConnected)
			for range 2 {
				if err := st.sendSessionTicket(c.sut); err != nil {
					c.t.Fatal(err)
				}
			}
			c.sutOut = append(c.sutOut, c.sut.takeOutput()...)
		},
		want: behaves("distinct ticket_age_add and ticket_nonce", func(c *conv) error {
			ts := c.ticketsSent()
			if len(ts) != 3 {
				return fmt.Errorf("%d tickets", len(ts))
			}
			ages, nonces := map[uint32]bool{}, map[string]bool{}
			for _, t := range ts {
				ages[t.AgeAdd], nonces[string(t.Nonce)] = true, true
			}
			if len(ages) != 3 || len(nonces) != 3 {
				return fmt.Errorf("%d distinct ticket_age_add, %d distinct nonces in 3 tickets", len(ages), len(nonces))
			}
			return nil
		})})
	add(conformanceRow{id: "nst/empty-ticket", kind: kindMust, section: sec461, roles: asClient,
		rule: "a NewSessionTicket with an empty ticket (ticket<1..2^16-1>) breaks the syntax: decode_error",
		run:  afterHandshake(sealed(record.TypeHandshake, hsMsg(wire.TypeNewSessionTicket, []byte{0, 0, 0, 60, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0}))),
		want: sends(AlertDecodeError)})
	add(conformanceRow{id: "posthandshake/unexpected-message", kind: kindMust, section: sec46, roles: bothRoles,
		rule: "after the handshake only NewSessionTicket (to a client) and KeyUpdate come: an EncryptedExtensions to a client, a Finished to a server, is an unexpected_message",
		run: func(c *conv) {
			msg := hsMsg(wire.TypeFinished, make([]byte, 32))
			if c.sutClient {
				msg = hsMsg(wire.TypeEncryptedExtensions, []byte{0, 0})
			}
			afterHandshake(sealed(record.TypeHandshake, msg))(c)
		}, want: sends(AlertUnexpectedMessage)})
	add(conformanceRow{id: "keyupdate/not-requested-no-answer", kind: kindPermitted, section: sec463, roles: bothRoles,
		rule: "only update_requested asks for an answer: after an update_not_requested the engine's next data goes without a KeyUpdate",
		run: func(c *conv) {
			afterHandshake(sealed(record.TypeHandshake, hsMsg(wire.TypeKeyUpdate, []byte{0})))(c)
			if c.err != nil {
				return
			}
			from := len(c.sutOut)
			c.sutWrite([]byte("x"))
			if n := c.sentRecords(from); n != 1 {
				c.err = fmt.Errorf("%d records for one write, want the data alone", n)
			}
		}, want: behaves("the data alone", func(c *conv) error { return c.err })})
}

// antiReplayRows: RFC 8446, Section 8.
func antiReplayRows(add func(conformanceRow)) {
	add(conformanceRow{id: "replay/same-flight-twice", kind: kindMust, section: sec8, roles: asServer,
		setup: func(o *convOpts) {
			withEarlyData(o)
			o.scfg.StrikeRegister = NewMemoryStrikeRegister(100, time.Time{})
		},
		rule: "a server MUST accept 0-RTT for one 0-RTT handshake at most once: the same first flight sent again to a server on the same Config and register has its 0-RTT rejected (PSK taken, 1-RTT goes on)",
		run: func(c *conv) {
			var flight []byte
			for _, r := range c.peerRecs() {
				flight = c.toSUT.write(c.t, flight, r)
			}
			c.deliverBytes(flight)
			if !c.sut.info.EarlyDataAccepted {
				c.t.Fatal("the first flight's 0-RTT was not accepted")
			}
			c.sut.cfg.KeyLogWriter = nil // the copy's secrets stay out of the engine's log
			again := newEngine(c.sut.cfg, false)
			again.startServer()
			err := again.feed(flight)
			out := again.takeOutput()
			var d record.Deframer
			d.Write(out)
			typ, first, ok, _ := d.Next()
			switch {
			case err != nil:
				c.err = fmt.Errorf("the replayed flight failed: %v", err)
			case again.info.EarlyDataAccepted || !again.info.DidResume:
				c.err = fmt.Errorf("replayed flight: 0-RTT accepted %v, resumed %v", again.info.EarlyDataAccepted, again.info.DidResume)
			case !ok || typ != record.TypeHandshake || first[0] != wire.TypeServerHello:
				c.err = fmt.Errorf("the replayed flight got no ServerHello")
			}
		}, want: behaves("the copy: 0-RTT rejected, the handshake goes on", func(c *conv) error { return c.err })})
	add(conformanceRow{id: "replay/outside-window", kind: kindShould, section: sec83, roles: asServer,
		setup: func(o *convOpts) {
			withEarlyData(o)
			o.tamperSess = func(s *ClientSession) { s.ReceivedAt = s.ReceivedAt.Add(-time.Hour) }
		},
		rule: "a ClientHello whose ticket age (an hour here) puts its expected arrival outside the freshness window SHOULD have its 0-RTT rejected, the handshake going on in 1-RTT",
		run:  completes, want: resumedWithoutEarly})
	add(conformanceRow{id: "replay/fresh-start", kind: kindShould, section: sec82, roles: asServer, setup: withEarlyData,
		rule: "a freshly started server SHOULD reject 0-RTT while its recording window overlaps its start: a register begun after the ticket refuses the flight",
		run: func(c *conv) {
			c.sut.cfg.StrikeRegister = NewMemoryStrikeRegister(100, c.sut.cfg.now())
			c.completeHandshake()
		}, want: resumedWithoutEarly})
}

// invariantRows: RFC 8446, Section 9.3.
func invariantRows(add func(conformanceRow)) {
	ignores := func(id, what string, f func(ch *wire.ClientHello)) {
		add(conformanceRow{id: "invariant/" + id, kind: kindMust, section: sec93, roles: asServer,
			setup: clientHelloHook(f),
			rule:  "a server MUST ignore unrecognized " + what + " in a ClientHello",
			run:   completes, want: handshakeCompletes})
	}
	ignores("unknown-cipher-suites", "cipher suites (GREASE 0x0a0a, 0x1399, TLS 1.2's 0xc02f first)", func(ch *wire.ClientHello) {
		ch.CipherSuites = append([]uint16{0x0a0a, 0x1399, 0xc02f}, ch.CipherSuites...)
	})
	ignores("unknown-extensions", "extensions (GREASE 0x1a1a, 0x7777 with data)", func(ch *wire.ClientHello) {
		ch.Extra = append(ch.Extra, wire.Extension{Type: 0x1a1a}, wire.Extension{Type: 0x7777, Data: []byte("future")})
	})
	ignores("unknown-groups", "groups (GREASE 0x2a2a with a key share, 0x4444)", func(ch *wire.ClientHello) {
		ch.SupportedGroups = append([]uint16{0x2a2a, 0x4444}, ch.SupportedGroups...)
		ch.KeyShares = append([]wire.KeyShare{{Group: 0x2a2a, Data: []byte{0}}}, ch.KeyShares...)
	})
	ignores("unknown-versions", "versions in supported_versions (GREASE 0x3a3a, 0x7f1c)", func(ch *wire.ClientHello) {
		ch.SupportedVersions = []uint16{0x3a3a, 0x7f1c, 0x0304}
	})
	ignores("unknown-signature-schemes", "signature schemes (GREASE 0x4a4a, ed448, private use 0xfe00)", func(ch *wire.ClientHello) {
		ch.SignatureAlgorithms = append([]uint16{0x4a4a, 0x0808, 0xfe00}, ch.SignatureAlgorithms...)
	})
	add(conformanceRow{id: "invariant/unknown-psk-modes", kind: kindMust, section: sec93, roles: asServer,
		setup: func(o *convOpts) {
			o.resume = true
			clientHelloHook(func(ch *wire.ClientHello) { ch.PSKModes = append([]uint8{0x9a}, ch.PSKModes...) })(o)
		},
		rule: "a server MUST ignore unrecognized PSK key exchange modes (0x9a) and resume with the known one",
		run:  completes, want: resumed})
	add(conformanceRow{id: "invariant/certificate-request-unknown-extension", kind: kindMust, section: sec93, roles: asClient, setup: withClientCert,
		rule: "a client MUST ignore unrecognized extensions in a CertificateRequest",
		run: rewriteSealed(func(c *conv, recs []*rec) {
			cr, r := parsed(c, recs, wire.TypeCertificateRequest, wire.ParseCertificateRequest)
			cr.Order, cr.Extra = nil, append(cr.Extra, wire.Extension{Type: 0x7777, Data: []byte("future")})
			r.data = c.marshal(cr)
		}), want: handshakeCompletes})
	add(conformanceRow{id: "invariant/ticket-unknown-extension", kind: kindMust, section: sec93, roles: asClient,
		rule: "a client MUST ignore unrecognized extensions in a NewSessionTicket: the session is kept",
		run: rewriteTicket(func(nst *wire.NewSessionTicket) {
			nst.Extra = append(nst.Extra, wire.Extension{Type: 0x7777, Data: []byte("future")})
		}),
		want: behaves("no error, session kept", func(c *conv) error {
			if c.err != nil || c.sut.lastSession() == nil {
				return fmt.Errorf("error %v, session kept: %v", c.err, c.sut.lastSession() != nil)
			}
			return nil
		})})
	add(conformanceRow{id: "invariant/client-supports-advertised", kind: kindMust, section: sec93, roles: asClient,
		rule: "a client MUST support every parameter its ClientHello advertises: a server selecting each group, suite and CertificateVerify scheme in turn completes the handshake (rsa_pss_pss_*: no test key with the RSASSA-PSS OID here; package sig's tests verify them)",
		run: func(c *conv) {
			ch, err := wire.ParseClientHello(c.sutMessages()[0].data)
			if err != nil {
				c.t.Fatal(err)
			}
			try := func(what string, setup func(o *convOpts), check func(s *conv) error) {
				s := newConv(c.t, asClient, setup)
				s.completeHandshake()
				err := handshakeCompletes.check(s)
				if err == nil && check != nil {
					err = check(s)
				}
				if err != nil && c.err == nil {
					c.err = fmt.Errorf("%s: %v", what, err)
				}
			}
			for _, g := range ch.SupportedGroups {
				try(CurveID(g).String(), func(o *convOpts) { o.scfg.Groups = []CurveID{CurveID(g)} }, func(s *conv) error {
					if s.sut.info.Group != CurveID(g) {
						return fmt.Errorf("negotiated %v", s.sut.info.Group)
					}
					return nil
				})
			}
			for _, cs := range ch.CipherSuites {
				try(CipherSuite(cs).String(), func(o *convOpts) { o.scfg.CipherSuites = []CipherSuite{CipherSuite(cs)} }, nil)
			}
			keyFor := map[uint16]string{0x0403: "ecdsa-p256", 0x0503: "ecdsa-p384", 0x0603: "ecdsa-p521", 0x0807: "ed25519",
				0x0804: "rsa2048", 0x0805: "rsa2048", 0x0806: "rsa2048"}
			for _, scheme := range ch.SignatureAlgorithms {
				kt, ok := keyFor[scheme]
				if !ok {
					if scheme < 0x0809 || scheme > 0x080b {
						c.err = fmt.Errorf("the client offers %s, which this row cannot test", SignatureScheme(scheme).String())
					}
					continue
				}
				try(SignatureScheme(scheme).String(), func(o *convOpts) {
					p := getPKI(o.t, kt)
					o.scfg.Certificates, o.scfg.SignatureSchemes, o.ccfg.RootCAs = []Certificate{p.server}, []SignatureScheme{SignatureScheme(scheme)}, p.pool()
				}, func(s *conv) error {
					if s.sut.info.SignatureScheme != SignatureScheme(scheme) {
						return fmt.Errorf("server signed with %v", s.sut.info.SignatureScheme)
					}
					return nil
				})
			}
		}, want: behaves("every one completes", func(c *conv) error { return c.err })})
}
