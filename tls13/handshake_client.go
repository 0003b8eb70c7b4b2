package tls13

// The client side of the TLS 1.3 handshake (RFC 8446, Section 2):
//
//	ClientHello (+key_share, +pre_shared_key, +early_data) -->
//	(0-RTT application data)                               -->
//	                       <-- ServerHello (or HelloRetryRequest: send ClientHello again)
//	                       <-- {EncryptedExtensions}
//	                       <-- {CertificateRequest}          (optional)
//	                       <-- {Certificate} {CertificateVerify}  (not with a PSK)
//	                       <-- {Finished} [0.5-RTT data]
//	{EndOfEarlyData}     (if the server accepted 0-RTT)      -->
//	{Certificate} {CertificateVerify}  (if requested)        -->
//	{Finished}                                               -->
//	                       <-- [NewSessionTicket] [KeyUpdate]
//
// Each state below is one line of that picture. The ZTLS steps
// (offerZTLS, checkZTLSEcho) are in ztls.go, the server certificate's
// checks (startServerCertificateCheck, finishServerCertificateCheck) in
// verify.go.

import (
	"bytes"
	"crypto"
	"io"
	"net"
	"time"

	"github.com/ztls-project/ztls/tls13/internal/kex"
	"github.com/ztls-project/ztls/tls13/internal/keyschedule"
	"github.com/ztls-project/ztls/tls13/internal/sig"
	"github.com/ztls-project/ztls/tls13/internal/suite"
	"github.com/ztls-project/ztls/tls13/internal/wire"
)

// clientHelloParams is what the client remembers of its ClientHello until
// the ServerHello arrives.
type clientHelloParams struct {
	hello      *wire.ClientHello
	raw        []byte
	shares     []kex.ClientShare
	zprepared  *ZDataPrepared          // the offer's prepared share, taken for this handshake
	transcript *keyschedule.Transcript // pending until the suite is known
	session    *ClientSession          // the ticket offered, if any
	pskSecret  *keyschedule.EarlySecret
	earlyData  bool // early_data offered

	// ZTLS (docs/ztls-spec.md, Section 2-3): the Z-data offer and the early secret from
	// ECDH(our share, the Z-data share), under the early suite's hash.
	ztls       *ZDataOffer
	ztlsSecret *keyschedule.EarlySecret
	ztlsSuite  *suite.Suite
	zverdict   *zdataVerdict // the Z-data leaf's chain, verified under our policy
	afterHRR   bool
	hrrSuite   uint16
	sentCCS    bool
	ech        *echClient // Encrypted ClientHello (ech_client.go); nil: not offered
}

// startClient builds and queues the first ClientHello, resuming session
// or opening with Z-data z when they are usable, and any early data.
func (e *engine) startClient(session *ClientSession, z *ZDataOffer, earlyData []byte) error {
	if e.cfg.ServerName == "" && !e.cfg.InsecureSkipVerify {
		// Nothing has been sent: no alert, just the error.
		e.err = errNoServerName
		return e.err
	}
	e.serverName = e.cfg.ServerName
	p, err := e.newClientHello(z)
	if err != nil {
		return err
	}
	e.offerResumption(p, session, earlyData)
	if p.session == nil || !e.cfg.pskKEOnly() {
		if err := e.addKeyShares(p); err != nil {
			return e.fail(err)
		}
	}
	// Else resumption without a key exchange is all we offer: the
	// key_share list stays empty (RFC 8446, Section 4.2.8), so no share is
	// made for nothing; a server that does not take the ticket asks for
	// one with a HelloRetryRequest.
	if z != nil && p.session == nil {
		if err := e.offerZTLS(p, z, len(earlyData)); err != nil {
			e.info.ZTLSSkipped = err.Error()
		} else {
			p.earlyData = true
		}
	}
	if err := e.offerECH(p); err != nil {
		e.err = err // nothing sent yet: no alert
		return err
	}
	if e.cfg.testHookClientHello != nil {
		e.cfg.testHookClientHello(p.hello)
	}
	e.info.EarlyDataOffered = p.earlyData
	if err := e.sendClientHello(p); err != nil {
		return e.fail(err)
	}
	e.st = &clientExpectServerHello{p: p}
	e.event(EventClientHelloSent)
	if p.earlyData {
		return e.sendEarlyData(p, earlyData)
	}
	return nil
}

// newClientHello builds the ClientHello of our Config: randoms, server
// name, PSK modes, certificate compression; startClient adds the key
// shares (addKeyShares) once it knows whether a session is offered.
func (e *engine) newClientHello(z *ZDataOffer) (*clientHelloParams, error) {
	cfg := e.cfg
	p := &clientHelloParams{transcript: keyschedule.NewPendingTranscript()}
	ch := &wire.ClientHello{
		CipherSuites:            cfg.cipherSuites(),
		SupportedVersions:       []uint16{wire.VersionTLS13},
		SupportedGroups:         cfg.groups(),
		SignatureAlgorithms:     cfg.signatureSchemes(),
		SignatureAlgorithmsCert: sig.SupportedForCertificates(),
		HasKeyShare:             true,
		ALPN:                    cfg.NextProtos,
		RecordSizeLimit:         uint16(cfg.recordSizeLimit()),
	}
	p.hello = ch
	if _, err := io.ReadFull(cfg.rand(), ch.Random[:]); err != nil {
		return nil, e.fail(err)
	}
	if cfg.MiddleboxCompat {
		ch.SessionID = make([]byte, 32)
		if _, err := io.ReadFull(cfg.rand(), ch.SessionID); err != nil {
			return nil, e.fail(err)
		}
	}
	if name := cfg.ServerName; name != "" && net.ParseIP(name) == nil {
		ch.ServerName = name
	}
	if z != nil {
		p.zprepared = z.Prepared.take(z)
	}
	if !cfg.SessionTicketsDisabled {
		ch.PSKModes = wireModes(cfg.pskModes())
	}
	ext, err := cfg.certCompressionExtension()
	if err != nil {
		e.err = err // nothing sent yet: no alert
		return nil, err
	}
	ch.Extra = append(ch.Extra, ext...)
	return p, nil
}

// addKeyShares makes a key share for each of Config.KeyShareGroups, the
// one prepared for the Z-data where the group is the same.
func (e *engine) addKeyShares(p *clientHelloParams) error {
	groups := e.cfg.keyShareGroups()
	for _, g := range groups {
		var s kex.ClientShare
		if zp := p.zprepared; zp != nil && zp.share != nil && g == uint16(zp.group) {
			s = zp.share
		} else {
			var err error
			if s, err = e.cfg.newClientShare(g); err != nil {
				return err
			}
		}
		p.shares = append(p.shares, s)
		p.hello.KeyShares = append(p.hello.KeyShares, wire.KeyShare{Group: g, Data: s.Public()})
	}
	return nil
}

// offerResumption offers session, when it is usable, and early data
// under it, when the session allows that much with the same ALPN.
func (e *engine) offerResumption(p *clientHelloParams, session *ClientSession, earlyData []byte) {
	cfg := e.cfg
	if session == nil || cfg.SessionTicketsDisabled || !session.usable(cfg, e.serverName) {
		return
	}
	p.session = session
	if len(earlyData) > 0 && session.MaxEarlyData > 0 && session.earlyALPNMatches(cfg.NextProtos) &&
		len(earlyData) <= int(session.MaxEarlyData) {
		p.hello.EarlyData = true
		p.earlyData = true
	}
}

// sendEarlyData sends data as 0-RTT application data right after the
// ClientHello (RFC 8446, Section 4.2.10), under the client early traffic
// secret of the offered PSK or Z-data. Its size was checked against the
// session's or the Z-data's max_early_data_size when it was offered.
func (e *engine) sendEarlyData(p *clientHelloParams, data []byte) error {
	if e.cfg.MiddleboxCompat {
		e.sendCCS()
		p.sentCCS = true
	}
	s, es := p.ztlsSuite, p.ztlsSecret
	if p.session != nil {
		s, es = p.session.cipherSuite(), p.pskSecret
	}
	e.suite = s
	secret := e.clientEarlyTrafficSecret(*es, hashOf(s.Hash, p.raw), p.hello.Random[:])
	if err := e.setWriteKey(secret); err != nil {
		return e.fail(err)
	}
	_, err := e.sealApp(data)
	return err
}

// sendClientHello marshals p.hello, fills in the PSK binder and queues it.
func (e *engine) sendClientHello(p *clientHelloParams) error {
	ch := p.hello
	if p.session != nil {
		s := p.session.cipherSuite()
		age := uint32(e.cfg.now().Sub(p.session.ReceivedAt) / time.Millisecond)
		ch.PSKIdentities = []wire.PSKIdentity{{Identity: p.session.Ticket, ObfuscatedTicketAge: age + p.session.AgeAdd}}
		ch.PSKBinders = [][]byte{make([]byte, s.Hash.Size())}
		if !offersMode(ch.PSKModes, PSKModeDHEKE) && !offersMode(ch.PSKModes, PSKModeKE) {
			ch.PSKModes = []uint8{uint8(PSKModeDHEKE)}
		}
	}
	cp, err := e.cfg.ztlsCodepoint()
	if err != nil {
		return err
	}
	ch.ZTLSCodepoint = cp
	if err := e.sizeGreaseECH(p); err != nil {
		return err
	}
	raw, err := ch.Marshal()
	if err != nil {
		return err
	}
	if p.session != nil {
		s := p.session.cipherSuite()
		es := keyschedule.NewEarlySecret(s.Hash, p.session.PSK)
		p.pskSecret = &es
		truncated := raw[:len(raw)-ch.BindersLen()]
		var th []byte
		if p.afterHRR {
			th = p.transcript.HashOf(truncated)
		} else {
			th = hashOf(s.Hash, truncated)
		}
		binder := keyschedule.FinishedMAC(s.Hash, es.ResumptionBinderKey(), th)
		if err := ch.UpdateBinders(raw, [][]byte{binder}); err != nil {
			return err
		}
	}
	if ch.ZTLS != nil {
		h := p.ztlsSuite.Hash
		truncated := raw[:len(raw)-ch.BindersLen()]
		binder := keyschedule.FinishedMAC(h, p.ztlsSecret.BinderKey("ztls binder"), hashOf(h, truncated))
		if err := ch.UpdateZTLSBinder(raw, binder); err != nil {
			return err
		}
	}
	p.raw = raw
	p.transcript.Write(raw)
	out, err := e.sealECH(p, raw) // the outer ClientHello with ECH
	if err != nil {
		return err
	}
	e.queueHandshake(out)
	legacy := uint16(0x0301)
	if p.afterHRR {
		legacy = 0x0303
	}
	return e.flushHandshakeVersion(legacy)
}

type clientExpectServerHello struct{ p *clientHelloParams }

func (s *clientExpectServerHello) handle(e *engine, typ uint8, msg []byte) (state, error) {
	p := s.p
	if typ != wire.TypeServerHello {
		return nil, unexpectedMessage(typ, wire.TypeServerHello)
	}
	cp, err := e.cfg.ztlsCodepoint()
	if err != nil {
		return nil, err
	}
	sh, err := wire.ParseServerHelloZTLS(msg, cp)
	if err != nil {
		return nil, err
	}
	if err := e.checkECHServerHello(p, sh); err != nil {
		return nil, err
	}
	if sh.SupportedVersion == 0 {
		return nil, errPeerTLS12Only
	}
	if sh.SupportedVersion != wire.VersionTLS13 {
		return nil, errorf(AlertIllegalParameter, "server selected version 0x%04x", sh.SupportedVersion)
	}
	if !bytes.Equal(sh.SessionID, p.hello.SessionID) {
		return nil, errorf(AlertIllegalParameter, "server did not echo the legacy session ID")
	}
	if !contains(p.hello.CipherSuites, sh.CipherSuite) || suite.Lookup(sh.CipherSuite) == nil {
		return nil, errPeerSelectedUnofferedSuite
	}
	if p.afterHRR && sh.CipherSuite != p.hrrSuite {
		return nil, errorf(AlertIllegalParameter, "server changed cipher suite after HelloRetryRequest")
	}
	for _, x := range sh.Extra {
		return nil, errorf(AlertUnsupportedExtension, "server sent extension %d in its ServerHello", x.Type)
	}
	if sh.HasZTLS && (p.hello.ZTLS == nil || sh.IsHelloRetryRequest()) {
		return nil, errorf(AlertUnsupportedExtension, "server echoed ztls, which the client did not offer")
	}
	if sh.IsHelloRetryRequest() {
		return e.handleHelloRetryRequest(p, sh)
	}
	return e.handleServerHello(p, sh)
}

func (e *engine) handleHelloRetryRequest(p *clientHelloParams, hrr *wire.ServerHello) (state, error) {
	if p.afterHRR {
		return nil, errorf(AlertUnexpectedMessage, "second HelloRetryRequest")
	}
	if hrr.HasPSK || hrr.HasKeyShare {
		return nil, errorf(AlertIllegalParameter, "HelloRetryRequest with a key share or PSK")
	}
	changed := len(hrr.Cookie) > 0
	if hrr.SelectedGroup != 0 {
		if !contains(p.hello.SupportedGroups, hrr.SelectedGroup) || !kex.Supported(hrr.SelectedGroup) {
			return nil, errPeerSelectedUnofferedGroup
		}
		for _, ks := range p.hello.KeyShares {
			if ks.Group == hrr.SelectedGroup {
				return nil, errorf(AlertIllegalParameter, "HelloRetryRequest asks for a group the client already sent a share for")
			}
		}
		changed = true
	}
	if !changed {
		return nil, errorf(AlertIllegalParameter, "HelloRetryRequest that would not change the ClientHello")
	}
	s := suite.Lookup(hrr.CipherSuite)
	e.suite, e.hash = s, s.Hash
	p.transcript.SetHash(s.Hash)
	p.transcript.RestartWithMessageHash()
	p.transcript.Write(hrr.Raw)
	e.event(EventHelloRetryRequest)

	ch := p.hello
	if hrr.SelectedGroup != 0 {
		share, err := e.cfg.newClientShare(hrr.SelectedGroup)
		if err != nil {
			return nil, err
		}
		for _, cs := range p.shares {
			cs.Erase()
		}
		p.shares = []kex.ClientShare{share}
		ch.KeyShares = []wire.KeyShare{{Group: hrr.SelectedGroup, Data: share.Public()}}
	}
	ch.Cookie = hrr.Cookie
	ch.ZTLS, ch.ZTLSBFE, ch.ZTLSKEM = nil, nil, nil // docs/ztls-spec.md, Sections 2, 7.2 and 9.3: rejected after a HelloRetryRequest
	if p.earlyData {
		ch.EarlyData = false
		p.earlyData = false
		e.event(EventEarlyDataRejected)
	}
	if p.session != nil && p.session.cipherSuite().Hash != s.Hash {
		p.session, p.pskSecret = nil, nil
		ch.PSKIdentities, ch.PSKBinders = nil, nil
	}
	ch.Order = nil
	p.afterHRR = true
	p.hrrSuite = hrr.CipherSuite
	// The second ClientHello goes out unprotected, whatever keys 0-RTT used.
	e.rout = nil
	if e.cfg.MiddleboxCompat && !p.sentCCS {
		e.sendCCS()
		p.sentCCS = true
	}
	if err := e.sendClientHello(p); err != nil {
		return nil, err
	}
	return &clientExpectServerHello{p: p}, nil
}

// handleServerHello checks what the server selected (PSK, key share,
// ztls) and installs the handshake keys.
func (e *engine) handleServerHello(p *clientHelloParams, sh *wire.ServerHello) (state, error) {
	s := suite.Lookup(sh.CipherSuite)
	e.suite, e.hash = s, s.Hash
	e.event(EventServerHelloReceived)
	k := &clientKeys{p: p}
	if err := k.checkSelectedPSK(sh, s); err != nil {
		return nil, err
	}
	shared, err := e.readServerKeyShare(k, sh)
	if err != nil {
		return nil, err
	}
	if err := k.checkZTLSEcho(sh); err != nil {
		return nil, err
	}
	p.transcript.SetHash(s.Hash)
	p.transcript.Write(sh.Raw)
	k.hs, k.hsTraffic = e.deriveHandshakeSecrets(k.earlySecret(s), shared, p.transcript.Sum(), p.hello.Random[:])
	if err := e.setReadKey(k.hsTraffic.server); err != nil {
		return nil, err
	}
	if !p.earlyData {
		// From here on our alerts are protected (RFC 8446, Section 6).
		if err := e.setWriteKey(k.hsTraffic.client); err != nil {
			return nil, err
		}
	}
	e.info.CipherSuite = CipherSuite(s.ID)
	e.info.DidResume = k.resumed
	e.info.ZTLS = k.ztls
	e.info.ZTLSBFE = k.ztls && p.hello.ZTLSBFE != nil
	e.info.ZTLSKEM = k.ztls && p.hello.ZTLSKEM != nil
	e.event(EventHandshakeKeys)
	return (*clientExpectEncryptedExtensions)(k), nil
}

// checkSelectedPSK: the server may select only the one ticket we offered,
// and only with a suite of the ticket's hash (RFC 8446, Section 4.2.11).
func (k *clientKeys) checkSelectedPSK(sh *wire.ServerHello, s *suite.Suite) error {
	if !sh.HasPSK {
		return nil
	}
	if k.p.session == nil || sh.PSKIdentity != 0 {
		return errPeerSelectedUnofferedPSK
	}
	if k.p.session.cipherSuite().Hash != s.Hash {
		return errorf(AlertIllegalParameter, "server selected a PSK whose hash does not match the cipher suite")
	}
	k.resumed = true
	return nil
}

// readServerKeyShare computes the (EC)DHE secret with the server's share
// for one of our groups; there is none only when the server resumed with
// psk_ke, which we offered.
func (e *engine) readServerKeyShare(k *clientKeys, sh *wire.ServerHello) ([]byte, error) {
	p := k.p
	if !sh.HasKeyShare {
		if !k.resumed || !offersMode(p.hello.PSKModes, PSKModeKE) {
			return nil, errorf(AlertMissingExtension, "ServerHello without key_share")
		}
		return nil, nil
	}
	var share kex.ClientShare
	for _, cs := range p.shares {
		if cs.Group() == sh.KeyShare.Group {
			share = cs
		}
	}
	if share == nil {
		return nil, errPeerSelectedUnofferedGroup
	}
	shared, err := share.Shared(sh.KeyShare.Data)
	if err != nil {
		return nil, err
	}
	e.info.Group = CurveID(share.Group())
	// Each key share serves one handshake: forget them all now.
	for _, cs := range p.shares {
		cs.Erase()
	}
	return shared, nil
}

// earlySecret is the first stage of the key schedule the server chose:
// the PSK's, the Z-data's, or none.
func (k *clientKeys) earlySecret(s *suite.Suite) keyschedule.EarlySecret {
	switch {
	case k.resumed:
		return *k.p.pskSecret
	case k.ztls:
		return *k.p.ztlsSecret
	}
	return keyschedule.NewEarlySecret(s.Hash, nil)
}

// clientKeys is what the client carries from the ServerHello to its Finished.
type clientKeys struct {
	p         *clientHelloParams
	hs        keyschedule.HandshakeSecret
	hsTraffic trafficSecrets
	resumed   bool
	ztls      bool // server echoed ztls
	early     bool // server accepted 0-RTT
}

type clientExpectEncryptedExtensions clientKeys

func (s *clientExpectEncryptedExtensions) handle(e *engine, typ uint8, msg []byte) (state, error) {
	if typ != wire.TypeEncryptedExtensions {
		return nil, unexpectedMessage(typ, wire.TypeEncryptedExtensions)
	}
	ee, err := wire.ParseEncryptedExtensions(msg)
	if err != nil {
		return nil, err
	}
	p := s.p
	if ee.Extra, err = e.readECHRetryConfigs(p, ee.Extra); err != nil {
		return nil, err
	}
	for _, x := range ee.Extra {
		return nil, errorf(AlertUnsupportedExtension, "server sent unrequested extension %d", x.Type)
	}
	if ee.ServerName && p.hello.ServerName == "" {
		return nil, errorf(AlertUnsupportedExtension, "server acknowledged server_name, which the client did not send")
	}
	if ee.ALPN != "" {
		if len(p.hello.ALPN) == 0 {
			return nil, errorf(AlertUnsupportedExtension, "server selected ALPN protocol %q, the client offered no ALPN", ee.ALPN)
		}
		if !contains(p.hello.ALPN, ee.ALPN) {
			return nil, errorf(AlertIllegalParameter, "server selected ALPN protocol %q the client did not offer", ee.ALPN)
		}
		e.info.NegotiatedProtocol = ee.ALPN
	}
	if ee.RecordSizeLimit != 0 {
		if ee.RecordSizeLimit < 64 {
			return nil, errorf(AlertIllegalParameter, "record_size_limit %d below 64", ee.RecordSizeLimit)
		}
		e.maxSendPlain = min(int(ee.RecordSizeLimit)-1, e.maxSendPlain)
	}
	if s.ztls != ee.EarlyData && p.hello.ZTLS != nil && !s.resumed {
		return nil, errorf(AlertIllegalParameter, "ztls echo and early_data disagree")
	}
	if ee.EarlyData {
		switch {
		case !p.earlyData:
			// RFC 8446, Section 4.2: an extension the client did not send
			// is an unsupported_extension.
			return nil, errorf(AlertUnsupportedExtension, "server sent early_data, which the client did not offer")
		case !s.resumed && !s.ztls:
			// Section 4.2.10: early data is accepted with the PSK it was sent under.
			return nil, errorf(AlertIllegalParameter, "server accepted early data without selecting the PSK it was sent under")
		case s.resumed && (uint16(p.session.Suite) != e.suite.ID || p.session.ALPN != e.info.NegotiatedProtocol):
			return nil, errorf(AlertIllegalParameter, "server accepted early data with another suite or ALPN")
		case s.ztls && p.ztls.ALPN != e.info.NegotiatedProtocol:
			return nil, errorf(AlertIllegalParameter, "server accepted ztls with ALPN %q, the Z-data names %q", e.info.NegotiatedProtocol, p.ztls.ALPN)
		}
		s.early = true
		e.event(EventEarlyDataAccepted)
	} else if p.earlyData {
		e.event(EventEarlyDataRejected)
		if err := e.setWriteKey(s.hsTraffic.client); err != nil {
			return nil, err
		}
	}
	e.info.EarlyDataAccepted = s.early
	p.transcript.Write(ee.Raw)
	if s.resumed {
		return &clientExpectFinished{keys: (*clientKeys)(s)}, nil
	}
	return &clientExpectCertificate{keys: (*clientKeys)(s)}, nil
}

type clientExpectCertificate struct {
	keys    *clientKeys
	certReq *wire.CertificateRequest
}

func (s *clientExpectCertificate) handle(e *engine, typ uint8, msg []byte) (state, error) {
	p := s.keys.p
	switch {
	case typ == wire.TypeCertificateRequest && s.certReq == nil:
		cr, err := wire.ParseCertificateRequest(msg)
		if err != nil {
			return nil, err
		}
		if len(cr.RequestContext) != 0 {
			return nil, errorf(AlertIllegalParameter, "CertificateRequest with a context during the handshake")
		}
		p.transcript.Write(cr.Raw)
		return &clientExpectCertificate{keys: s.keys, certReq: cr}, nil
	case typ == wire.TypeCertificateVerify && s.keys.ztls && p.ztls.Leaf != nil && len(p.hello.ZTLS.CertHash) == 32:
		// docs/ztls-spec.md, Section 4: the server omitted its Certificate because we named
		// the TLSA leaf (verified before the handshake) with cert_hash.
		pub, err := sig.ParsePublicKey(p.ztls.Leaf)
		if err != nil {
			return nil, errorf(AlertUnsupportedCert, "unsupported key in the Z-data leaf: %v", err)
		}
		// The leaf (and its chain) passed the same certificate policy as a
		// Certificate message before any early byte left (offerZTLS).
		e.info.PeerCertificates = p.zverdict.certs
		e.info.VerifiedChains, e.info.ChainSource = p.zverdict.chains, p.zverdict.source
		e.info.CertificateOmitted = true
		st := &clientExpectCertificateVerify{keys: s.keys, certReq: s.certReq, pub: pub}
		return st.handle(e, typ, msg)
	case typ == wire.TypeCertificate || typ == wire.TypeCompressedCertificate:
		c, err := e.readCertificateMessage(typ, msg, p.hello.Extra) // RFC 8879
		if err != nil {
			return nil, err
		}
		if len(c.RequestContext) != 0 {
			return nil, errorf(AlertIllegalParameter, "server Certificate with a request context")
		}
		chain, pub, err := e.startServerCertificateCheck(c)
		if err != nil {
			return nil, err
		}
		p.transcript.Write(c.Raw)
		return &clientExpectCertificateVerify{keys: s.keys, certReq: s.certReq, pub: pub, chain: chain}, nil
	}
	if s.certReq == nil {
		return nil, unexpectedMessage(typ, wire.TypeCertificateRequest, wire.TypeCertificate, wire.TypeCompressedCertificate)
	}
	return nil, unexpectedMessage(typ, wire.TypeCertificate, wire.TypeCompressedCertificate)
}

type clientExpectCertificateVerify struct {
	keys    *clientKeys
	certReq *wire.CertificateRequest
	pub     crypto.PublicKey
	chain   *chainCheck // nil when the Certificate was omitted (ZTLS)
}

func (s *clientExpectCertificateVerify) handle(e *engine, typ uint8, msg []byte) (state, error) {
	err := s.verify(e, typ, msg)
	// A chain that does not verify is reported before anything the
	// CertificateVerify did wrong, as if the checks ran in order.
	if s.chain != nil {
		if cerr := e.finishServerCertificateCheck(s.chain); cerr != nil {
			return nil, cerr
		}
	}
	if err != nil {
		return nil, err
	}
	p := s.keys.p
	p.transcript.Write(msg)
	return &clientExpectFinished{keys: s.keys, certReq: s.certReq}, nil
}

// verify checks the CertificateVerify message against the leaf's key.
func (s *clientExpectCertificateVerify) verify(e *engine, typ uint8, msg []byte) error {
	if typ != wire.TypeCertificateVerify {
		return unexpectedMessage(typ, wire.TypeCertificateVerify)
	}
	cv, err := wire.ParseCertificateVerify(msg)
	if err != nil {
		return err
	}
	p := s.keys.p
	if !contains(p.hello.SignatureAlgorithms, cv.Scheme) {
		return errorf(AlertIllegalParameter, "server signed with %s, which the client did not offer", sig.Name(cv.Scheme))
	}
	if err := sig.Verify(s.pub, cv.Scheme, sig.ServerContext, p.transcript.Sum(), cv.Signature); err != nil {
		return err
	}
	e.info.SignatureScheme = SignatureScheme(cv.Scheme)
	return nil
}

type clientExpectFinished struct {
	keys    *clientKeys
	certReq *wire.CertificateRequest
}

// handle checks the server's Finished, installs the application keys
// and sends the client's second flight.
func (s *clientExpectFinished) handle(e *engine, typ uint8, msg []byte) (state, error) {
	if typ != wire.TypeFinished {
		return nil, unexpectedMessage(typ, wire.TypeFinished)
	}
	fin, err := wire.ParseFinished(msg)
	if err != nil {
		return nil, err
	}
	k := s.keys
	p := k.p
	if err := e.checkPeerFinished(k.hsTraffic.server, p.transcript.Sum(), fin); err != nil {
		return nil, err
	}
	p.transcript.Write(fin.Raw)
	e.event(EventPeerFinished)
	if err := e.checkECHRejected(p); err != nil {
		return nil, err
	}

	ms, app := e.deriveApplicationSecrets(k.hs, p.transcript.Sum(), p.hello.Random[:])
	if err := e.setReadKey(app.server); err != nil {
		return nil, err
	}
	e.inSecret = app.server
	e.mode = appData
	if err := s.sendClientFlight(e); err != nil {
		return nil, err
	}
	next := &clientConnected{resMaster: ms.ResumptionMasterSecret(p.transcript.Sum())}
	if err := e.setWriteKey(app.client); err != nil {
		return nil, err
	}
	e.outSecret = app.client
	e.canWriteApp = true
	e.done = true
	e.info.HandshakeComplete = true
	e.event(EventHandshakeDone)
	return next, nil
}

// sendClientFlight sends the client's second flight (RFC 8446, Section
// 2): EndOfEarlyData if 0-RTT was accepted (or the compatibility
// ChangeCipherSpec), then under the handshake key a Certificate and
// CertificateVerify if the server asked, and Finished.
func (s *clientExpectFinished) sendClientFlight(e *engine) error {
	k := s.keys
	p := k.p
	if k.early {
		eoed, err := (&wire.EndOfEarlyData{}).Marshal()
		if err != nil {
			return err
		}
		p.transcript.Write(eoed)
		e.queueHandshake(eoed)
	} else if e.cfg.MiddleboxCompat && !p.sentCCS {
		if err := e.flushHandshake(); err != nil {
			return err
		}
		e.sendCCS()
		p.sentCCS = true
	}
	if err := e.setWriteKey(k.hsTraffic.client); err != nil {
		return err
	}
	if s.certReq != nil {
		if err := e.sendClientCertificate(p.transcript, s.certReq); err != nil {
			return err
		}
	}
	verify := keyschedule.FinishedMAC(e.hash, k.hsTraffic.client, p.transcript.Sum())
	if e.cfg.testHookFinished != nil {
		e.cfg.testHookFinished(verify)
	}
	finMsg, err := (&wire.Finished{VerifyData: verify}).Marshal()
	if err != nil {
		return err
	}
	p.transcript.Write(finMsg)
	e.queueHandshake(finMsg)
	return nil
}

// sendClientCertificate answers a CertificateRequest with our chain (or an
// empty one) and, with a chain, a CertificateVerify.
func (e *engine) sendClientCertificate(t *keyschedule.Transcript, cr *wire.CertificateRequest) error {
	// The first certificate that can sign with a scheme the server
	// accepts, preferring one under a CA the server named in
	// certificate_authorities (RFC 8446, Section 4.2.4: it SHOULD guide
	// the choice).
	var chosen *Certificate
	var scheme uint16
	for i := range e.cfg.Certificates {
		c := &e.cfg.Certificates[i]
		_, pub, err := e.cfg.certLeaf(i)
		if err != nil {
			continue
		}
		sc, ok := preferredScheme(pub, e.cfg.signatureSchemes(), cr.SignatureAlgorithms)
		if !ok {
			continue
		}
		if chosen == nil {
			chosen, scheme = c, sc
		}
		if len(cr.CertificateAuthorities) == 0 || c.issuedUnder(cr.CertificateAuthorities) {
			chosen, scheme = c, sc
			break
		}
	}
	cm := &wire.Certificate{RequestContext: cr.RequestContext}
	if chosen != nil {
		for _, der := range chosen.Chain {
			cm.Entries = append(cm.Entries, wire.CertificateEntry{Data: der})
		}
	}
	raw, err := cm.Marshal()
	if err != nil {
		return err
	}
	if chosen != nil {
		if raw, err = e.compressCertificate(raw, cr.Extra); err != nil { // RFC 8879
			return err
		}
	}
	t.Write(raw)
	e.queueHandshake(raw)
	if chosen == nil {
		return nil
	}
	signature, err := sig.Sign(e.cfg.rand(), chosen.PrivateKey, scheme, sig.ClientContext, t.Sum())
	if err != nil {
		return err
	}
	cv, err := (&wire.CertificateVerify{Scheme: scheme, Signature: signature}).Marshal()
	if err != nil {
		return err
	}
	t.Write(cv)
	e.queueHandshake(cv)
	return nil
}

// preferredScheme picks, in our order of preference (Config.SignatureSchemes),
// the first scheme the peer accepts and key can sign with.
func preferredScheme(key crypto.PublicKey, ours, peer []uint16) (uint16, bool) {
	for _, s := range ours {
		if !contains(peer, s) {
			continue
		}
		if _, err := sig.Select(key, []uint16{s}); err == nil {
			return s, true
		}
	}
	return 0, false
}

// clientConnected is a client after its Finished.
type clientConnected struct {
	resMaster []byte         // resumption_master_secret, for tickets
	session   *ClientSession // the last ticket received
	// AnswerInFirstFlight: whether our Finished left with takeOutput, and
	// whether application data has arrived.
	finishedTaken, sawAppData bool
}

// lastSession is the newest ticket the server sent, or nil (client).
func (e *engine) lastSession() *ClientSession {
	if c, ok := e.st.(*clientConnected); ok {
		return c.session
	}
	return nil
}

func (s *clientConnected) handle(e *engine, typ uint8, msg []byte) (state, error) {
	switch typ {
	case wire.TypeNewSessionTicket:
		nst, err := wire.ParseNewSessionTicket(msg)
		if err != nil {
			return nil, err
		}
		if e.cfg.SessionTicketsDisabled || nst.Lifetime == 0 {
			return s, nil
		}
		cs := &ClientSession{
			Suite:        CipherSuite(e.suite.ID),
			PSK:          keyschedule.ResumptionPSK(e.hash, s.resMaster, nst.Nonce),
			Ticket:       nst.Ticket,
			AgeAdd:       nst.AgeAdd,
			ReceivedAt:   e.cfg.now(),
			Lifetime:     time.Duration(min(nst.Lifetime, 7*24*3600)) * time.Second,
			ServerName:   e.serverName,
			ALPN:         e.info.NegotiatedProtocol,
			MaxEarlyData: 0,
		}
		if nst.HasEarlyData {
			cs.MaxEarlyData = nst.MaxEarlyData
		}
		s.session = cs
		if e.cfg.ClientSessionCache != nil {
			e.cfg.ClientSessionCache.Put(sessionCacheKey(e.cfg), cs)
		}
		e.event(EventSessionTicket)
		return s, nil
	case wire.TypeKeyUpdate:
		return s, e.handleKeyUpdate(msg)
	}
	return nil, unexpectedMessage(typ, wire.TypeNewSessionTicket, wire.TypeKeyUpdate)
}

func hashOf(h crypto.Hash, data []byte) []byte {
	hh := h.New()
	hh.Write(data)
	return hh.Sum(nil)
}

func nextTrafficSecret(h crypto.Hash, secret []byte) []byte {
	return keyschedule.NextTrafficSecret(h, secret)
}
