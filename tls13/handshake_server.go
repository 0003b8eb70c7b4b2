package tls13

// The server side of the TLS 1.3 handshake (RFC 8446, Section 2):
//
//	ClientHello                 --> (if no usable share: HelloRetryRequest, ClientHello again)
//	(0-RTT data)                --> read once the first flight is out
//	                            <-- ServerHello {EncryptedExtensions} {CertificateRequest}
//	                            <-- {Certificate} {CertificateVerify} {Finished} [0.5-RTT data]
//	{EndOfEarlyData}            --> (if 0-RTT was accepted)
//	{Certificate} {CertificateVerify} (if requested)
//	{Finished}                  -->
//	                            <-- [NewSessionTicket]
//
// The server decides everything (suite, group, PSK, 0-RTT) when the
// ClientHello arrives and sends its whole flight at once: see
// serverExpectClientHello.handle and serverHandshake.sendServerFlight,
// which read as the list of those steps. The ZTLS steps among them
// (considerZTLS, mayOmitCertificate) are in ztls.go, the client
// certificate policy (checkClientChain) in verify.go.

import (
	"bytes"
	"crypto"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/binary"
	"io"
	"slices"
	"time"

	"github.com/ztls-project/ztls/tls13/internal/kex"
	"github.com/ztls-project/ztls/tls13/internal/keyschedule"
	"github.com/ztls-project/ztls/tls13/internal/sig"
	"github.com/ztls-project/ztls/tls13/internal/suite"
	"github.com/ztls-project/ztls/tls13/internal/wire"
)

func (e *engine) startServer() {
	e.st = &serverExpectClientHello{}
}

func isInitialServerState(s state) bool {
	st, ok := s.(*serverExpectClientHello)
	return ok && st.hrr == nil
}

// serverHRR is what the server remembers after sending a HelloRetryRequest.
type serverHRR struct {
	transcript *keyschedule.Transcript
	suite      uint16
	group      uint16
	cookie     []byte
	sessionID  []byte
	sentCCS    bool
	first      *wire.ClientHello // the ClientHello the retry was sent for
	ech        *echServer        // ECH of the first ClientHello (ech_server.go)
}

type serverExpectClientHello struct{ hrr *serverHRR }

// serverHandshake is the server's handshake from one ClientHello to the
// end of its flight: the choices it makes for that ClientHello, then the
// secrets of the flight it sends.
type serverHandshake struct {
	e   *engine
	cfg *Config
	hrr *serverHRR // the HelloRetryRequest this ClientHello answers (nil: first)
	ch  *wire.ClientHello

	suite    *suite.Suite
	group    uint16 // 0: psk_ke
	share    []byte // client's share for group
	hrrGroup uint16 // the group a HelloRetryRequest would ask for (0: none)
	psk      []byte
	pskIndex int
	pskMode  PSKMode
	ticket   *sessionTicket
	// A resumed ticket's client chain, re-checked (resumeClientChain).
	clientCerts  []*x509.Certificate
	clientChains [][]*x509.Certificate
	// ZTLS: the accepted Z-data key and the early secret it gives.
	zkey         *ZDataKey
	zfound       *ZDataKey // the live key the ztls extension names (ztlsKey)
	zlooked      bool
	zsecret      *keyschedule.EarlySecret
	zRejectedMax uint32 // a rejected offer's published max_early_data_size
	early        bool   // 0-RTT accepted
	alpn         string
	cert         *Certificate
	certLeaf     *x509.Certificate // cert's parsed leaf
	certForName  bool              // cert's leaf is valid for the client's SNI
	scheme       uint16
	ech          *echServer // Encrypted ClientHello (ech_server.go); nil: none

	// The flight.
	transcript  *keyschedule.Transcript
	es          keyschedule.EarlySecret
	shared      []byte // the (EC)DHE shared secret (nil with psk_ke)
	earlySecret []byte // client_early_traffic_secret, when 0-RTT is accepted
	hs          keyschedule.HandshakeSecret
	hsTraffic   trafficSecrets
	certReq     *wire.CertificateRequest
	keys        *serverKeys // what the states after the flight need
}

// handle answers a ClientHello: with a HelloRetryRequest when it carries
// no usable key share, otherwise with the server's whole flight.
func (s *serverExpectClientHello) handle(e *engine, typ uint8, msg []byte) (state, error) {
	if typ != wire.TypeClientHello {
		return nil, unexpectedMessage(typ, wire.TypeClientHello)
	}
	hs := &serverHandshake{e: e, cfg: e.cfg, hrr: s.hrr}
	if err := hs.readClientHello(msg); err != nil {
		return nil, err
	}
	if err := hs.acceptECH(); err != nil {
		return nil, err
	}
	if err := hs.pickCipherSuite(); err != nil {
		return nil, err
	}
	if err := hs.checkSecondHello(); err != nil {
		return nil, err
	}
	if err := hs.pickKeyShare(); err != nil {
		return nil, err
	}
	if err := hs.checkForResumption(); err != nil {
		return nil, err
	}
	if hs.needsRetry() {
		return hs.sendHelloRetryRequest()
	}
	if err := hs.checkKeyExchange(); err != nil {
		return nil, err
	}
	if err := hs.pickALPN(); err != nil {
		return nil, err
	}
	if err := hs.considerZTLS(); err != nil {
		return nil, err
	}
	if err := hs.pickCertificate(); err != nil {
		return nil, err
	}
	return hs.sendServerFlight()
}

// readClientHello parses the ClientHello and refuses what no TLS 1.3
// server takes.
func (hs *serverHandshake) readClientHello(msg []byte) error {
	cp, err := hs.cfg.ztlsCodepoint()
	if err != nil {
		return &LocalError{Alert: AlertInternalError, Err: err}
	}
	ch, err := wire.ParseClientHelloZTLS(msg, cp)
	if err != nil {
		return err
	}
	if !contains(ch.SupportedVersions, wire.VersionTLS13) {
		return errPeerTLS12Only
	}
	// A legacy_version of 0x0300 or lower (RFC 8446, Appendix D.5) was
	// refused with protocol_version by the parser, on the wire value.
	if !bytes.Equal(ch.CompressionMethods, []byte{0}) {
		return errorf(AlertIllegalParameter, "ClientHello offers compression")
	}
	// Without Z-data keys the ztls extension is not answered: the client
	// sees no echo and treats its early data as rejected (docs/ztls-spec.md, Section 2).
	hs.ch = ch
	hs.e.info.ServerName = ch.ServerName
	hs.e.serverName = ch.ServerName
	return nil
}

// pickCipherSuite takes the server's preference among the client's offers.
func (hs *serverHandshake) pickCipherSuite() error {
	for _, id := range hs.cfg.cipherSuites() {
		if contains(hs.ch.CipherSuites, id) && suite.Lookup(id) != nil {
			hs.suite = suite.Lookup(id)
			return nil
		}
	}
	return errorf(AlertHandshakeFailure, "no cipher suite in common")
}

// checkSecondHello enforces RFC 8446, Section 4.1.2 on the ClientHello
// that answers our HelloRetryRequest (there is nothing to check on a
// first ClientHello).
func (hs *serverHandshake) checkSecondHello() error {
	hrr, ch := hs.hrr, hs.ch
	if hrr == nil {
		return nil
	}
	if hs.suite.ID != hrr.suite {
		return errorf(AlertIllegalParameter, "second ClientHello changed the cipher suite")
	}
	if !bytes.Equal(ch.SessionID, hrr.sessionID) {
		return errorf(AlertIllegalParameter, "second ClientHello changed the session ID")
	}
	if !hmac.Equal(ch.Cookie, hrr.cookie) {
		return errorf(AlertIllegalParameter, "second ClientHello without our cookie")
	}
	if ch.EarlyData {
		return errorf(AlertIllegalParameter, "early_data in the second ClientHello")
	}
	if err := wire.CheckRetryClientHello(hrr.first, ch); err != nil {
		return err
	}
	if len(ch.KeyShares) != 1 || ch.KeyShares[0].Group != hrr.group {
		return errorf(AlertIllegalParameter, "second ClientHello lacks the requested key share")
	}
	hs.transcript = hrr.transcript
	return nil
}

// pickKeyShare checks the client's key shares (distinct, for groups it
// supports) and takes the first of our groups it sent a share for; the
// first of our groups it supports is the one a HelloRetryRequest would
// ask for. There is no retry for our preference alone.
func (hs *serverHandshake) pickKeyShare() error {
	ch := hs.ch
	seen := map[uint16]bool{}
	for _, ks := range ch.KeyShares {
		if seen[ks.Group] || !contains(ch.SupportedGroups, ks.Group) {
			return errorf(AlertIllegalParameter, "key_share for a duplicate or unsupported group")
		}
		seen[ks.Group] = true
	}
	if !ch.HasKeyShare {
		return nil
	}
	for _, g := range hs.cfg.groups() {
		if !kex.Supported(g) || !contains(ch.SupportedGroups, g) {
			continue
		}
		if hs.hrrGroup == 0 {
			hs.hrrGroup = g
		}
		for _, ks := range ch.KeyShares {
			if ks.Group == g && hs.group == 0 {
				hs.group, hs.share = g, ks.Data
			}
		}
	}
	return nil
}

// checkForResumption looks for a ticket of ours among the client's PSK
// identities (choosePSK); with psk_ke the key share goes unused.
func (hs *serverHandshake) checkForResumption() error {
	if err := hs.choosePSK(); err != nil {
		return err
	}
	if hs.psk != nil && hs.pskMode == PSKModeKE {
		hs.group, hs.share = 0, nil // psk_ke: no (EC)DHE, no key_share
	}
	return nil
}

// needsRetry: no key exchange is possible with this ClientHello, but
// would be with a share for a group it supports, and we have not asked
// for one yet.
func (hs *serverHandshake) needsRetry() bool {
	return hs.group == 0 && hs.psk == nil && hs.hrrGroup != 0 && hs.hrr == nil
}

// checkKeyExchange refuses a ClientHello that leaves no key exchange, and
// a second one that does not use the group we asked for.
func (hs *serverHandshake) checkKeyExchange() error {
	if hs.group == 0 && hs.psk == nil {
		if !hs.ch.HasKeyShare {
			return errorf(AlertMissingExtension, "ClientHello without key_share or usable PSK")
		}
		return errorf(AlertHandshakeFailure, "no key exchange group in common")
	}
	if hs.hrr != nil && hs.group != 0 && hs.group != hs.hrr.group {
		return errorf(AlertIllegalParameter, "second ClientHello does not use the group the server asked for")
	}
	return nil
}

// pickALPN takes our first protocol the client offers (RFC 7301, Section
// 3.2), or for a ztls ClientHello for one of our keys the key's early
// ALPN when both sides speak it: its early data is written in that
// protocol (docs/ztls-spec.md, Section 2), which a preference for
// another would refuse. 0-RTT is kept only with the ticket's protocol
// and suite (RFC 8446, Section 4.2.10).
func (hs *serverHandshake) pickALPN() error {
	ch := hs.ch
	if len(ch.ALPN) > 0 && len(hs.cfg.NextProtos) > 0 {
		prefs := hs.cfg.NextProtos
		if key := hs.ztlsKey(); key != nil && key.ALPN != "" && contains(prefs, key.ALPN) {
			prefs = append([]string{key.ALPN}, prefs...)
		}
		for _, proto := range prefs {
			if contains(ch.ALPN, proto) {
				hs.alpn = proto
				break
			}
		}
		if hs.alpn == "" {
			return errorf(AlertNoApplicationProto, "no ALPN protocol in common (client offered %q)", ch.ALPN)
		}
	}
	if hs.early && (hs.ticket.ALPN != hs.alpn || hs.ticket.Suite != hs.suite.ID) {
		hs.early = false
	}
	return nil
}

// pickCertificate picks the chain to authenticate with, unless a PSK
// authenticates the server.
func (hs *serverHandshake) pickCertificate() error {
	if hs.psk != nil {
		return nil
	}
	if len(hs.ch.SignatureAlgorithms) == 0 {
		return errorf(AlertMissingExtension, "ClientHello without signature_algorithms")
	}
	return hs.chooseCertificate()
}

// sendHelloRetryRequest asks the client for a share for hs.hrrGroup
// (RFC 8446, Section 4.1.4).
func (hs *serverHandshake) sendHelloRetryRequest() (state, error) {
	e, ch, s := hs.e, hs.ch, hs.suite
	e.event(EventHelloRetryRequest)
	t := keyschedule.NewTranscript(s.Hash)
	t.Write(ch.Raw)
	t.RestartWithMessageHash()
	// The cookie binds the retry to this ClientHello: MAC(cookie key, Hash(CH1)).
	key, err := hs.cfg.helloRetryCookieKey()
	if err != nil {
		return nil, err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write(hashOf(s.Hash, ch.Raw))
	cookie := mac.Sum(nil)
	hrr := &wire.ServerHello{
		Random:           wire.HelloRetryRequestRandom,
		SessionID:        ch.SessionID,
		CipherSuite:      s.ID,
		SupportedVersion: wire.VersionTLS13,
		SelectedGroup:    hs.hrrGroup,
		Cookie:           cookie,
	}
	hs.addECHRetrySignal(hrr)
	raw, err := hrr.Marshal()
	if err != nil {
		return nil, err
	}
	hs.confirmECHRetry(t, raw)
	t.Write(raw)
	e.suite, e.hash = s, s.Hash
	e.queueHandshake(raw)
	if err := e.flushHandshake(); err != nil {
		return nil, err
	}
	st := &serverHRR{transcript: t, suite: s.ID, group: hs.hrrGroup, cookie: hrr.Cookie, sessionID: ch.SessionID, first: ch, ech: hs.ech}
	if len(ch.SessionID) > 0 {
		e.sendCCS()
		st.sentCCS = true
	}
	if ch.EarlyData {
		// The client may already have sent 0-RTT records; they are skipped
		// up to our limit (RFC 8446, Section 4.2.10).
		e.skipEarly = e.earlySkipBudget(0)
	}
	e.event(EventHelloRetryRequest)
	return &serverExpectClientHello{hrr: st}, nil
}

// earlySkipBudget is how much early plaintext a server that rejected
// 0-RTT skips (RFC 8446, Section 4.2.10: up to its max_early_data_size;
// docs/ztls-spec.md, Section 3: the larger of its own limit and the published
// Z-data limit); see skipEarlyRecord for how records are charged.
func (e *engine) earlySkipBudget(published uint32) int {
	if n := max(int(e.cfg.MaxEarlyData), int(published)); n > 0 {
		return n
	}
	// No limit configured (this server takes no 0-RTT, or lost the
	// Z-data key the client used): skip what BoringSSL skips
	// (kMaxEarlyDataSkipped), so such a client still gets its handshake.
	return defaultEarlySkip
}

const defaultEarlySkip = 16384

// choosePSK looks for a ticket we issued among the client's identities
// and verifies its binder (RFC 8446, Section 4.2.11).
func (hs *serverHandshake) choosePSK() error {
	ch, cfg := hs.ch, hs.cfg
	if len(ch.PSKIdentities) == 0 || cfg.SessionTicketsDisabled {
		return nil
	}
	if len(ch.PSKModes) == 0 {
		return errorf(AlertMissingExtension, "pre_shared_key without psk_key_exchange_modes")
	}
	if len(ch.PSKIdentities) != len(ch.PSKBinders) {
		return errorf(AlertIllegalParameter, "PSK identities and binders differ in number")
	}
	// The first of our modes, in our order, that the client offers too
	// (psk_dhe_ke only with a key share to answer).
	hs.pskMode = 0xff
	for _, m := range cfg.pskModes() {
		if offersMode(ch.PSKModes, m) && (m == PSKModeKE || m == PSKModeDHEKE && hs.group != 0) {
			hs.pskMode = m
			break
		}
	}
	if hs.pskMode == 0xff {
		return nil // no mode in common: full handshake
	}
	now := cfg.now()
	for i, id := range ch.PSKIdentities {
		t, err := hs.e.unwrapTicket(id.Identity)
		if err != nil || suite.Lookup(t.Suite) == nil || suite.Lookup(t.Suite).Hash != hs.suite.Hash {
			continue
		}
		created := time.Unix(0, t.CreatedNS)
		if now.Sub(created) > time.Duration(t.LifetimeS)*time.Second || now.Before(created.Add(-time.Minute)) {
			continue
		}
		if t.SNI != ch.ServerName {
			continue
		}
		if !hs.verifyBinder(t, i) {
			return errPeerBadBinder
		}
		// Only a client that proved it holds the ticket gets its chain
		// re-checked (x509 work and the application's hook); a chain that
		// no longer passes means a full handshake.
		if !hs.resumeClientChain(t) {
			continue
		}
		hs.psk, hs.pskIndex, hs.ticket = t.PSK, i, t
		hs.early = hs.acceptEarlyData(t, i, now)
		return nil
	}
	return nil
}

// verifyBinder checks the binder of PSK identity i, ticket t, over the
// ClientHello up to the binders (RFC 8446, Section 4.2.11.2).
func (hs *serverHandshake) verifyBinder(t *sessionTicket, i int) bool {
	ch, h := hs.ch, hs.suite.Hash
	truncated := ch.Raw[:len(ch.Raw)-ch.BindersLen()]
	var th []byte
	if hs.hrr != nil {
		th = hs.hrr.transcript.HashOf(truncated)
	} else {
		th = hashOf(h, truncated)
	}
	es := keyschedule.NewEarlySecret(h, t.PSK)
	return keyschedule.VerifyFinished(h, es.ResumptionBinderKey(), th, ch.PSKBinders[i])
}

// acceptEarlyData decides on 0-RTT under ticket t, identity i (RFC 8446,
// Sections 4.2.10 and 8): first identity only, no HRR, within the
// freshness window, and never seen before.
func (hs *serverHandshake) acceptEarlyData(t *sessionTicket, i int, now time.Time) bool {
	ch, cfg := hs.ch, hs.cfg
	if !ch.EarlyData || i != 0 || hs.hrr != nil || cfg.MaxEarlyData == 0 || t.MaxEarlyData == 0 || cfg.requiresClientCert() {
		return false
	}
	// The client's view of when it sent this ClientHello, on our clock:
	// the ticket's creation plus the age it claims. It is fresh within W
	// of that instant, so its register entry must live until then + W (a
	// replay at any moment it would still be fresh is caught), and any
	// server could first have taken it at the later of the ticket's
	// creation and then - W.
	created := time.Unix(0, t.CreatedNS)
	clientAge := time.Duration(ch.PSKIdentities[i].ObfuscatedTicketAge-t.AgeAdd) * time.Millisecond
	sent := created.Add(clientAge)
	w := cfg.earlyDataWindow()
	if d := now.Sub(sent); d > w || d < -w {
		return false
	}
	notBefore := sent.Add(-w)
	if notBefore.Before(created) {
		notBefore = created
	}
	fresh, err := cfg.strikeRegister().CheckAndInsert(ch.PSKBinders[i], now, notBefore, sent.Add(w))
	return err == nil && fresh
}

// chooseCertificate picks the first chain that matches the SNI (or the
// first at all) and whose key can sign with a scheme the client offers,
// preferring among those for the SNI one under a CA of the client's
// certificate_authorities.
func (hs *serverHandshake) chooseCertificate() error {
	cfg, name, cas := hs.cfg, hs.ch.ServerName, hs.ch.CertificateAuthorities
	type choice struct {
		c      *Certificate
		leaf   *x509.Certificate
		scheme uint16
	}
	// The first certificate for the name, the first for the name under a
	// CA the client named in certificate_authorities (RFC 8446, Section
	// 4.2.4: it SHOULD guide the choice), and the first of any name.
	var forName, underCA, fallback *choice
	for i := range cfg.Certificates {
		c := &cfg.Certificates[i]
		leaf, pub, err := cfg.certLeaf(i)
		if err != nil {
			continue
		}
		scheme, err := sig.Select(pub, intersect(hs.ch.SignatureAlgorithms, cfg.signatureSchemes()))
		if err != nil {
			continue
		}
		ch := &choice{c, leaf, scheme}
		if fallback == nil {
			fallback = ch
		}
		if name != "" && leaf.VerifyHostname(name) != nil {
			continue
		}
		if forName == nil {
			forName = ch
		}
		if len(cas) == 0 || c.issuedUnder(cas) {
			underCA = ch
			break
		}
	}
	pick := fallback
	switch {
	case underCA != nil:
		pick = underCA
	case forName != nil:
		pick = forName
	}
	if pick == nil {
		if len(cfg.Certificates) == 0 {
			return errorf(AlertInternalError, "server has no certificate configured")
		}
		return errorf(AlertHandshakeFailure, "no certificate whose key can sign with a scheme the client offers")
	}
	hs.cert, hs.certLeaf, hs.scheme = pick.c, pick.leaf, pick.scheme
	hs.certForName = name != "" && (underCA != nil || forName != nil)
	return nil
}

// issuedUnder reports whether c's chain leads to one of authorities, the
// DER distinguished names of certificate_authorities (RFC 8446, Section
// 4.2.4): a certificate of the chain was issued by one, or one of its CA
// certificates (all but the leaf) is one.
func (c *Certificate) issuedUnder(authorities [][]byte) bool {
	for i, der := range c.Chain {
		x, err := parseCertificate(der)
		if err != nil {
			continue
		}
		for _, dn := range authorities {
			if bytes.Equal(x.RawIssuer, dn) || i > 0 && bytes.Equal(x.RawSubject, dn) {
				return true
			}
		}
	}
	return false
}

func intersect[T comparable](peer, ours []T) []T {
	var out []T
	for _, x := range peer {
		if contains(ours, x) {
			out = append(out, x)
		}
	}
	return out
}

// sendServerFlight sends ServerHello through Finished, switching keys as
// it goes, and says what the client's flight must be.
func (hs *serverHandshake) sendServerFlight() (state, error) {
	if err := hs.sendServerHello(); err != nil {
		return nil, err
	}
	if err := hs.installHandshakeKeys(); err != nil {
		return nil, err
	}
	if err := hs.sendEncryptedExtensions(); err != nil {
		return nil, err
	}
	if err := hs.sendServerCertificate(); err != nil {
		return nil, err
	}
	if err := hs.sendServerFinished(); err != nil {
		return nil, err
	}
	hs.recordConnectionState()
	return hs.readClientFlight()
}

// sendServerHello sends the ServerHello (and the middlebox compatibility
// ChangeCipherSpec) and fixes the early secret: the PSK's, the Z-data's,
// or none.
func (hs *serverHandshake) sendServerHello() error {
	e, cfg, ch := hs.e, hs.cfg, hs.ch
	h := hs.suite.Hash
	e.suite, e.hash = hs.suite, h
	if hs.transcript == nil {
		hs.transcript = keyschedule.NewTranscript(h)
	}
	t := hs.transcript
	t.Write(ch.Raw)
	sh := &wire.ServerHello{SessionID: ch.SessionID, CipherSuite: hs.suite.ID, SupportedVersion: wire.VersionTLS13}
	if _, err := io.ReadFull(cfg.rand(), sh.Random[:]); err != nil {
		return err
	}
	var shared []byte
	if hs.group != 0 {
		pub, sec, err := cfg.serverShare(hs.group, hs.share)
		if err != nil {
			return err
		}
		shared = sec
		sh.HasKeyShare = true
		sh.KeyShare = wire.KeyShare{Group: hs.group, Data: pub}
		e.info.Group = CurveID(hs.group)
	}
	if hs.psk != nil {
		sh.HasPSK = true
		sh.PSKIdentity = uint16(hs.pskIndex)
	}
	hs.es = keyschedule.NewEarlySecret(h, hs.psk)
	if hs.zkey != nil {
		hs.es = *hs.zsecret
		sh.HasZTLS, sh.ZTLSID = true, hs.zkey.ID
	}
	if hs.early {
		hs.earlySecret = e.clientEarlyTrafficSecret(hs.es, t.Sum(), ch.Random[:])
	}
	if cfg.testHookServerHello != nil {
		cfg.testHookServerHello(sh)
	}
	sh.ZTLSCodepoint = ch.ZTLSCodepoint
	shRaw, err := sh.Marshal()
	if err != nil {
		return err
	}
	hs.confirmECH(shRaw)
	t.Write(shRaw)
	e.queueHandshake(shRaw)
	if err := e.flushHandshake(); err != nil {
		return err
	}
	if len(ch.SessionID) > 0 && (hs.hrr == nil || !hs.hrr.sentCCS) {
		e.sendCCS()
	}
	hs.shared = shared
	return nil
}

// installHandshakeKeys derives the handshake traffic secrets and protects
// the rest of the flight under the server's (RFC 8446, Section 7.1).
func (hs *serverHandshake) installHandshakeKeys() error {
	e := hs.e
	hs.hs, hs.hsTraffic = e.deriveHandshakeSecrets(hs.es, hs.shared, hs.transcript.Sum(), hs.ch.Random[:])
	if err := e.setWriteKey(hs.hsTraffic.server); err != nil {
		return err
	}
	e.event(EventHandshakeKeys)
	return nil
}

// sendEncryptedExtensions answers the ClientHello's extensions: ALPN,
// early_data, record_size_limit (RFC 8449), server_name.
func (hs *serverHandshake) sendEncryptedExtensions() error {
	e, cfg, ch := hs.e, hs.cfg, hs.ch
	ee := &wire.EncryptedExtensions{ALPN: hs.alpn, EarlyData: hs.early}
	if ch.RecordSizeLimit != 0 {
		if ch.RecordSizeLimit < 64 {
			return errorf(AlertIllegalParameter, "record_size_limit %d below 64", ch.RecordSizeLimit)
		}
		e.maxSendPlain = min(int(ch.RecordSizeLimit)-1, e.maxSendPlain)
		ee.RecordSizeLimit = uint16(cfg.recordSizeLimit())
	}
	if ch.ServerName != "" && hs.cert != nil && hs.certForName {
		ee.ServerName = true
	}
	if hs.group != 0 && hs.hrrGroup != 0 && hs.group != hs.hrrGroup {
		// RFC 8446, Section 4.2.7: we took a share for a group other than
		// the one we prefer among the client's; supported_groups tells it
		// our preference (all our groups), for its next ClientHello.
		for _, g := range cfg.groups() {
			if kex.Supported(g) {
				ee.SupportedGroups = append(ee.SupportedGroups, g)
			}
		}
	}
	hs.addECHRetryConfigs(ee)
	if cfg.testHookEncryptedExtensions != nil {
		cfg.testHookEncryptedExtensions(ee)
	}
	raw, err := ee.Marshal()
	if err != nil {
		return err
	}
	hs.queue(raw)
	return nil
}

// sendServerCertificate authenticates the server unless a PSK does:
// CertificateRequest (when it asks for client certificates), Certificate
// (left out when ZTLS allows, docs/ztls-spec.md, Section 4), CertificateVerify.
func (hs *serverHandshake) sendServerCertificate() error {
	if hs.psk != nil {
		return nil
	}
	if err := hs.sendCertificateRequest(); err != nil {
		return err
	}
	omit := hs.zkey != nil && hs.mayOmitCertificate()
	if !omit {
		cm := &wire.Certificate{}
		for _, der := range hs.cert.Chain {
			cm.Entries = append(cm.Entries, wire.CertificateEntry{Data: der})
		}
		raw, err := cm.Marshal()
		if err != nil {
			return err
		}
		if raw, err = hs.e.compressCertificate(raw, hs.ch.Extra); err != nil { // RFC 8879
			return err
		}
		hs.queue(raw)
	}
	hs.e.info.CertificateOmitted = omit
	signature, err := sig.Sign(hs.cfg.rand(), hs.cert.PrivateKey, hs.scheme, sig.ServerContext, hs.transcript.Sum())
	if err != nil {
		return errorf(AlertInternalError, "signing CertificateVerify: %v", err)
	}
	cv, err := (&wire.CertificateVerify{Scheme: hs.scheme, Signature: signature}).Marshal()
	if err != nil {
		return err
	}
	hs.queue(cv)
	return nil
}

// sendCertificateRequest asks for the client's certificate when
// Config.ClientAuth says so.
func (hs *serverHandshake) sendCertificateRequest() error {
	cfg := hs.cfg
	if cfg.ClientAuth == NoClientCert {
		return nil
	}
	cr := &wire.CertificateRequest{
		SignatureAlgorithms:     cfg.signatureSchemes(),
		SignatureAlgorithmsCert: sig.SupportedForCertificates(),
	}
	var err error
	if cr.Extra, err = cfg.certCompressionExtension(); err != nil { // RFC 8879
		return &LocalError{Alert: AlertInternalError, Err: err}
	}
	raw, err := cr.Marshal()
	if err != nil {
		return err
	}
	hs.queue(raw)
	hs.certReq = cr
	return nil
}

// sendServerFinished ends the flight with Finished and moves our write
// side to the application traffic secret: 0.5-RTT data may follow.
func (hs *serverHandshake) sendServerFinished() error {
	e, t := hs.e, hs.transcript
	verify := keyschedule.FinishedMAC(hs.suite.Hash, hs.hsTraffic.server, t.Sum())
	if hs.cfg.testHookFinished != nil {
		hs.cfg.testHookFinished(verify)
	}
	fin, err := (&wire.Finished{VerifyData: verify}).Marshal()
	if err != nil {
		return err
	}
	hs.queue(fin)
	ms, app := e.deriveApplicationSecrets(hs.hs, t.Sum(), hs.ch.Random[:])
	if err := e.setWriteKey(app.server); err != nil {
		return err
	}
	e.outSecret = app.server
	e.canWriteApp = true
	e.event(EventServerFlightSent)
	hs.keys = &serverKeys{t: t, ms: ms, chs: hs.hsTraffic.client, cap: app.client, certReq: hs.certReq, pskModes: hs.ch.PSKModes}
	return nil
}

// queue adds a message of the flight to the transcript and the output.
func (hs *serverHandshake) queue(msg []byte) {
	hs.transcript.Write(msg)
	hs.e.queueHandshake(msg)
}

// recordConnectionState notes what was negotiated in ConnectionState.
func (hs *serverHandshake) recordConnectionState() {
	info := &hs.e.info
	info.CipherSuite = CipherSuite(hs.suite.ID)
	info.NegotiatedProtocol = hs.alpn
	info.DidResume = hs.psk != nil
	if hs.psk != nil {
		info.PeerCertificates, info.VerifiedChains = hs.clientCerts, hs.clientChains
	}
	info.EarlyDataOffered = hs.ch.EarlyData
	info.EarlyDataAccepted = hs.early
	info.ZTLSOffered = hs.ch.ZTLS != nil
	info.ZTLS = hs.zkey != nil
	info.ZTLSBFE = hs.zkey != nil && hs.zkey.Decapsulate != nil
	info.ZTLSKEM = hs.zkey != nil && hs.zkey.Group == X25519MLKEM768
}

// readClientFlight installs the key the client's next records come under:
// the early traffic key for accepted 0-RTT data, else the handshake key
// (skipping rejected 0-RTT records).
func (hs *serverHandshake) readClientFlight() (state, error) {
	e := hs.e
	e.skipEarly = 0 // what a HelloRetryRequest allowed is spent
	if hs.early {
		if err := e.setReadKey(hs.earlySecret); err != nil {
			return nil, err
		}
		e.mode = appEarly
		limit := int(hs.cfg.MaxEarlyData)
		if hs.zkey != nil {
			limit = int(hs.zkey.MaxEarlyData)
		} else {
			limit = min(limit, int(hs.ticket.MaxEarlyData))
		}
		e.earlyIn = &earlyIntake{limit: limit}
		e.event(EventEarlyDataAccepted)
		return &serverExpectEndOfEarlyData{keys: hs.keys}, nil
	}
	if hs.ch.EarlyData {
		e.skipEarly = e.earlySkipBudget(hs.zRejectedMax)
		e.event(EventEarlyDataRejected)
	}
	if err := e.setReadKey(hs.hsTraffic.client); err != nil {
		return nil, err
	}
	return hs.keys.next(), nil
}

// serverKeys is what the server carries from its flight to the client's Finished.
type serverKeys struct {
	t       *keyschedule.Transcript
	ms      keyschedule.MasterSecret
	chs     []byte
	cap     []byte
	certReq *wire.CertificateRequest
	// pskModes are the client's psk_key_exchange_modes: without one we
	// accept, no ticket is sent (RFC 8446, Section 4.2.9).
	pskModes []uint8
}

func (k *serverKeys) next() state {
	if k.certReq != nil {
		return &serverExpectClientCertificate{keys: k}
	}
	return &serverExpectClientFinished{keys: k}
}

type serverExpectEndOfEarlyData struct{ keys *serverKeys }

func (s *serverExpectEndOfEarlyData) handle(e *engine, typ uint8, msg []byte) (state, error) {
	if typ != wire.TypeEndOfEarlyData {
		return nil, unexpectedMessage(typ, wire.TypeEndOfEarlyData)
	}
	eoed, err := wire.ParseEndOfEarlyData(msg)
	if err != nil {
		return nil, err
	}
	s.keys.t.Write(eoed.Raw)
	if err := e.setReadKey(s.keys.chs); err != nil {
		return nil, err
	}
	e.mode = appNone
	e.earlyIn.ended = true
	return s.keys.next(), nil
}

type serverExpectClientCertificate struct{ keys *serverKeys }

func (s *serverExpectClientCertificate) handle(e *engine, typ uint8, msg []byte) (state, error) {
	if typ != wire.TypeCertificate && typ != wire.TypeCompressedCertificate {
		return nil, unexpectedMessage(typ, wire.TypeCertificate, wire.TypeCompressedCertificate)
	}
	c, err := e.readCertificateMessage(typ, msg, s.keys.certReq.Extra) // RFC 8879
	if err != nil {
		return nil, err
	}
	if len(c.RequestContext) != 0 {
		return nil, errorf(AlertIllegalParameter, "client Certificate with a request context")
	}
	if err := checkCertificateEntries(c); err != nil {
		return nil, err
	}
	s.keys.t.Write(c.Raw)
	cfg := e.cfg
	if len(c.Entries) == 0 {
		if cfg.ClientAuth == RequireAnyClientCert || cfg.ClientAuth == RequireAndVerifyClientCert {
			return nil, errorf(AlertCertificateRequired, "client sent no certificate")
		}
		return &serverExpectClientFinished{keys: s.keys}, nil
	}
	certs, raws, err := parseChain(c)
	if err != nil {
		return nil, err
	}
	e.info.PeerCertificates = certs
	chains, err := cfg.checkClientChain(certs, raws)
	if err != nil {
		return nil, err
	}
	e.info.VerifiedChains = chains
	pub, err := leafPublicKey(certs[0])
	if err != nil {
		return nil, err
	}
	return &serverExpectClientCertificateVerify{keys: s.keys, pub: pub}, nil
}

// resumeClientChain re-checks, on resumption, the client certificate the
// ticket was issued to: the policy may have changed, the certificate may
// have expired or been revoked since. A ticket that fails is not used
// (the handshake is a full one, asking for a certificate again).
func (hs *serverHandshake) resumeClientChain(t *sessionTicket) bool {
	cfg := hs.cfg
	if len(t.ClientCerts) == 0 {
		return !cfg.requiresClientCert() // issued to a client without one
	}
	certs := make([]*x509.Certificate, len(t.ClientCerts))
	for i, der := range t.ClientCerts {
		c, err := parseCertificate(der)
		if err != nil {
			return false
		}
		certs[i] = c
	}
	chains, err := cfg.checkClientChain(certs, t.ClientCerts)
	if err != nil {
		return false
	}
	hs.clientCerts, hs.clientChains = certs, chains
	return true
}

type serverExpectClientCertificateVerify struct {
	keys *serverKeys
	pub  crypto.PublicKey
}

func (s *serverExpectClientCertificateVerify) handle(e *engine, typ uint8, msg []byte) (state, error) {
	if typ != wire.TypeCertificateVerify {
		return nil, unexpectedMessage(typ, wire.TypeCertificateVerify)
	}
	cv, err := wire.ParseCertificateVerify(msg)
	if err != nil {
		return nil, err
	}
	if !contains(s.keys.certReq.SignatureAlgorithms, cv.Scheme) {
		return nil, errorf(AlertIllegalParameter, "client signed with %s, which the server did not offer", sig.Name(cv.Scheme))
	}
	if err := sig.Verify(s.pub, cv.Scheme, sig.ClientContext, s.keys.t.Sum(), cv.Signature); err != nil {
		return nil, err
	}
	e.info.SignatureScheme = SignatureScheme(cv.Scheme) // the peer's, as documented
	s.keys.t.Write(cv.Raw)
	return &serverExpectClientFinished{keys: s.keys}, nil
}

type serverExpectClientFinished struct{ keys *serverKeys }

func (s *serverExpectClientFinished) handle(e *engine, typ uint8, msg []byte) (state, error) {
	if typ != wire.TypeFinished {
		return nil, unexpectedMessage(typ, wire.TypeFinished)
	}
	fin, err := wire.ParseFinished(msg)
	if err != nil {
		return nil, err
	}
	k := s.keys
	if err := e.checkPeerFinished(k.chs, k.t.Sum(), fin); err != nil {
		return nil, err
	}
	k.t.Write(fin.Raw)
	next := &serverConnected{resMaster: k.ms.ResumptionMasterSecret(k.t.Sum())}
	if err := e.setReadKey(k.cap); err != nil {
		return nil, err
	}
	e.inSecret = k.cap
	e.mode = appData
	e.done = true
	e.info.HandshakeComplete = true
	e.event(EventPeerFinished)
	e.event(EventHandshakeDone)
	if !e.cfg.SessionTicketsDisabled && slices.ContainsFunc(e.cfg.pskModes(), func(m PSKMode) bool { return offersMode(k.pskModes, m) }) {
		if err := next.sendSessionTicket(e); err != nil {
			return nil, err
		}
	}
	return next, nil
}

// serverConnected is a server after the client's Finished.
type serverConnected struct {
	resMaster   []byte // resumption_master_secret, for tickets
	ticketsSent uint32
}

func (s *serverConnected) handle(e *engine, typ uint8, msg []byte) (state, error) {
	if typ == wire.TypeKeyUpdate {
		return s, e.handleKeyUpdate(msg)
	}
	return nil, unexpectedMessage(typ, wire.TypeKeyUpdate)
}

// sendSessionTicket issues one NewSessionTicket (RFC 8446, Section 4.6.1).
func (s *serverConnected) sendSessionTicket(e *engine) error {
	cfg := e.cfg
	var nonce [8]byte
	binary.BigEndian.PutUint64(nonce[:], uint64(s.ticketsSent))
	s.ticketsSent++
	var ageAdd [4]byte
	if _, err := io.ReadFull(cfg.rand(), ageAdd[:]); err != nil {
		return err
	}
	t := &sessionTicket{
		Suite:        e.suite.ID,
		CreatedNS:    cfg.now().UnixNano(),
		AgeAdd:       binary.BigEndian.Uint32(ageAdd[:]),
		LifetimeS:    uint32(cfg.ticketLifetime() / time.Second),
		MaxEarlyData: cfg.MaxEarlyData,
		PSK:          keyschedule.ResumptionPSK(e.hash, s.resMaster, nonce[:]),
		ALPN:         e.info.NegotiatedProtocol,
		SNI:          e.serverName,
	}
	for _, c := range e.info.PeerCertificates {
		t.ClientCerts = append(t.ClientCerts, c.Raw)
	}
	ticket, err := e.wrapTicket(t)
	if err != nil {
		return err
	}
	nst := &wire.NewSessionTicket{
		Lifetime: t.LifetimeS, AgeAdd: t.AgeAdd, Nonce: nonce[:], Ticket: ticket,
		MaxEarlyData: cfg.MaxEarlyData, HasEarlyData: cfg.MaxEarlyData > 0,
	}
	raw, err := nst.Marshal()
	if err != nil {
		return err
	}
	e.queueHandshake(raw)
	return e.flushHandshake()
}
