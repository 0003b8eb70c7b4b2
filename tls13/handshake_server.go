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
// ClientHello arrives and sends its whole flight at once.

import (
	"bytes"
	"crypto"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
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
}

type serverExpectClientHello struct{ hrr *serverHRR }

// serverParams are the negotiated choices for one ClientHello.
type serverParams struct {
	ch       *wire.ClientHello
	suite    *suite.Suite
	group    uint16 // 0: psk_ke
	share    []byte // client's share for group
	psk      []byte
	pskIndex int
	pskMode  uint8
	// ZTLS: the accepted Z-data key and the early secret it gives.
	zkey         *ZDataKey
	zsecret      *keyschedule.EarlySecret
	zRejectedMax uint32 // a rejected offer's published max_early_data_size
	ticket       *sessionTicket
	early        bool
	alpn         string
	cert         *Certificate
	certLeaf     *x509.Certificate // cert's parsed leaf
	// A resumed ticket's client chain, re-checked (resumeClientChain).
	clientCerts  []*x509.Certificate
	clientChains [][]*x509.Certificate
	scheme       uint16
	transcript   *keyschedule.Transcript
}

func (s *serverExpectClientHello) handle(e *engine, typ uint8, msg []byte) (state, error) {
	if typ != wire.TypeClientHello {
		return nil, unexpectedMessage(typ, wire.TypeClientHello)
	}
	cp, err := e.cfg.ztlsCodepoint()
	if err != nil {
		return nil, &LocalError{Alert: AlertInternalError, Err: err}
	}
	ch, err := wire.ParseClientHelloZTLS(msg, cp)
	if err != nil {
		return nil, err
	}
	cfg := e.cfg
	if !contains(ch.SupportedVersions, wire.VersionTLS13) {
		return nil, errPeerTLS12Only
	}
	// A legacy_version of 0x0300 or lower (RFC 8446, Appendix D.5) was
	// refused with protocol_version by the parser, on the wire value.
	if !bytes.Equal(ch.CompressionMethods, []byte{0}) {
		return nil, errorf(AlertIllegalParameter, "ClientHello offers compression")
	}
	// Without Z-data keys the ztls extension is not answered: the client
	// sees no echo and treats its early data as rejected (ZTLS-SPEC §2).
	p := &serverParams{ch: ch}
	e.info.ServerName = ch.ServerName
	e.serverName = ch.ServerName

	// Cipher suite: the server's preference among the client's offers.
	for _, id := range cfg.cipherSuites() {
		if contains(ch.CipherSuites, id) && suite.Lookup(id) != nil {
			p.suite = suite.Lookup(id)
			break
		}
	}
	if p.suite == nil {
		return nil, errorf(AlertHandshakeFailure, "no cipher suite in common")
	}
	if s.hrr != nil {
		if err := s.checkSecondHello(ch, p); err != nil {
			return nil, err
		}
	}
	// Key shares must be distinct and for groups the client supports.
	seen := map[uint16]bool{}
	for _, ks := range ch.KeyShares {
		if seen[ks.Group] || !contains(ch.SupportedGroups, ks.Group) {
			return nil, errorf(AlertIllegalParameter, "key_share for a duplicate or unsupported group")
		}
		seen[ks.Group] = true
	}
	hrrGroup := uint16(0)
	if ch.HasKeyShare {
		// Prefer a group the client sent a share for; ask for our favourite
		// supported group only when there is none (no HRR for preference alone).
		for _, g := range cfg.groups() {
			if !kex.Supported(g) || !contains(ch.SupportedGroups, g) {
				continue
			}
			if hrrGroup == 0 {
				hrrGroup = g
			}
			for _, ks := range ch.KeyShares {
				if ks.Group == g && p.group == 0 {
					p.group, p.share = g, ks.Data
				}
			}
		}
	}
	if err := e.choosePSK(p, s.hrr); err != nil {
		return nil, err
	}
	if p.psk != nil && p.pskMode == PSKModeKE {
		p.group, p.share = 0, nil // psk_ke: no (EC)DHE, no key_share
	}
	if p.group == 0 && p.psk == nil {
		if hrrGroup != 0 && s.hrr == nil {
			return e.sendHelloRetryRequest(ch, p.suite, hrrGroup)
		}
		if !ch.HasKeyShare {
			return nil, errorf(AlertMissingExtension, "ClientHello without key_share or usable PSK")
		}
		return nil, errorf(AlertHandshakeFailure, "no key exchange group in common")
	}
	if s.hrr != nil && p.group != 0 && p.group != s.hrr.group {
		return nil, errorf(AlertIllegalParameter, "second ClientHello does not use the group the server asked for")
	}

	// ALPN (RFC 7301, Section 3.2).
	if len(ch.ALPN) > 0 && len(cfg.NextProtos) > 0 {
		for _, proto := range cfg.NextProtos {
			if contains(ch.ALPN, proto) {
				p.alpn = proto
				break
			}
		}
		if p.alpn == "" {
			return nil, errorf(AlertNoApplicationProto, "no ALPN protocol in common (client offered %q)", ch.ALPN)
		}
	}
	if p.early && (p.ticket.ALPN != p.alpn || p.ticket.Suite != p.suite.ID) {
		p.early = false
	}
	if ch.ZTLS != nil {
		reason, err := e.acceptZTLS(p, s.hrr != nil)
		if err != nil {
			return nil, err
		}
		e.info.ZTLSRejectReason = reason
	}
	if p.psk == nil {
		if len(ch.SignatureAlgorithms) == 0 {
			return nil, errorf(AlertMissingExtension, "ClientHello without signature_algorithms")
		}
		if err := e.chooseCertificate(p); err != nil {
			return nil, err
		}
	}
	if p.transcript == nil {
		p.transcript = keyschedule.NewTranscript(p.suite.Hash)
	}
	p.transcript.Write(ch.Raw)
	return e.sendServerFlight(p, s.hrr)
}

// checkSecondHello enforces RFC 8446, Section 4.1.2 on the ClientHello
// that answers our HelloRetryRequest.
func (s *serverExpectClientHello) checkSecondHello(ch *wire.ClientHello, p *serverParams) error {
	if p.suite.ID != s.hrr.suite {
		return errorf(AlertIllegalParameter, "second ClientHello changed the cipher suite")
	}
	if !bytes.Equal(ch.SessionID, s.hrr.sessionID) {
		return errorf(AlertIllegalParameter, "second ClientHello changed the session ID")
	}
	if !hmac.Equal(ch.Cookie, s.hrr.cookie) {
		return errorf(AlertIllegalParameter, "second ClientHello without our cookie")
	}
	if ch.EarlyData {
		return errorf(AlertIllegalParameter, "early_data in the second ClientHello")
	}
	if err := wire.CheckRetryClientHello(s.hrr.first, ch); err != nil {
		return err
	}
	if len(ch.KeyShares) != 1 || ch.KeyShares[0].Group != s.hrr.group {
		return errorf(AlertIllegalParameter, "second ClientHello lacks the requested key share")
	}
	p.transcript = s.hrr.transcript
	return nil
}

func (e *engine) sendHelloRetryRequest(ch *wire.ClientHello, s *suite.Suite, group uint16) (state, error) {
	t := keyschedule.NewTranscript(s.Hash)
	t.Write(ch.Raw)
	t.RestartWithMessageHash()
	// The cookie binds the retry to this ClientHello: MAC(cookie key, Hash(CH1)).
	mac := hmac.New(sha256.New, e.cfg.cookieKeyBytes())
	mac.Write(hashOf(s.Hash, ch.Raw))
	cookie := mac.Sum(nil)
	hrr := &wire.ServerHello{
		Random:           wire.HelloRetryRequestRandom,
		SessionID:        ch.SessionID,
		CipherSuite:      s.ID,
		SupportedVersion: wire.VersionTLS13,
		SelectedGroup:    group,
		Cookie:           cookie,
	}
	raw, err := hrr.Marshal()
	if err != nil {
		return nil, err
	}
	t.Write(raw)
	e.suite, e.hash = s, s.Hash
	e.queueHandshake(raw)
	if err := e.flushHandshake(); err != nil {
		return nil, err
	}
	st := &serverHRR{transcript: t, suite: s.ID, group: group, cookie: cookie, sessionID: ch.SessionID, first: ch}
	if len(ch.SessionID) > 0 {
		e.sendCCS()
		st.sentCCS = true
	}
	if ch.EarlyData {
		// The client may already have sent 0-RTT records; they are skipped
		// up to our limit (RFC 8446, Section 4.2.10).
		e.skipPlain = e.earlySkipBudget(0)
	}
	e.event(EventHelloRetryRequest)
	return &serverExpectClientHello{hrr: st}, nil
}

// earlySkipBudget is how much early plaintext a server that rejected
// 0-RTT skips (RFC 8446, Section 4.2.10: up to its max_early_data_size;
// ZTLS-SPEC Section 3: the larger of its own limit and the published
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
func (e *engine) choosePSK(p *serverParams, hrr *serverHRR) error {
	ch := p.ch
	cfg := e.cfg
	if len(ch.PSKIdentities) == 0 || cfg.SessionTicketsDisabled {
		return nil
	}
	if len(ch.PSKModes) == 0 {
		return errorf(AlertMissingExtension, "pre_shared_key without psk_key_exchange_modes")
	}
	if len(ch.PSKIdentities) != len(ch.PSKBinders) {
		return errorf(AlertIllegalParameter, "PSK identities and binders differ in number")
	}
	switch {
	case p.group != 0 && contains(ch.PSKModes, PSKModeDHEKE) && contains(cfg.pskModes(), PSKModeDHEKE):
		p.pskMode = PSKModeDHEKE
	case contains(ch.PSKModes, PSKModeKE) && contains(cfg.pskModes(), PSKModeKE):
		p.pskMode = PSKModeKE
	default:
		return nil // no mode in common: full handshake
	}
	now := cfg.now()
	for i, id := range ch.PSKIdentities {
		t, err := e.unwrapTicket(id.Identity)
		if err != nil || suite.Lookup(t.Suite) == nil || suite.Lookup(t.Suite).Hash != p.suite.Hash {
			continue
		}
		created := time.UnixMilli(t.CreatedMS)
		if now.Sub(created) > time.Duration(t.LifetimeS)*time.Second || now.Before(created.Add(-time.Minute)) {
			continue
		}
		if t.SNI != ch.ServerName {
			continue
		}
		// Verify the binder over the ClientHello up to the binders.
		truncated := ch.Raw[:len(ch.Raw)-ch.BindersLen()]
		var th []byte
		if hrr != nil {
			th = hrr.transcript.HashOf(truncated)
		} else {
			th = hashOf(p.suite.Hash, truncated)
		}
		es := keyschedule.NewEarlySecret(p.suite.Hash, t.PSK)
		if !keyschedule.VerifyFinished(p.suite.Hash, es.ResumptionBinderKey(), th, ch.PSKBinders[i]) {
			return errPeerBadBinder
		}
		// Only a client that proved it holds the ticket gets its chain
		// re-checked (x509 work and the application's hook); a chain that
		// no longer passes means a full handshake.
		if !e.resumeClientChain(t, p) {
			continue
		}
		p.psk, p.pskIndex, p.ticket = t.PSK, i, t
		// 0-RTT (RFC 8446, Sections 4.2.10 and 8): first identity only, no
		// HRR, within the freshness window, and never seen before.
		if ch.EarlyData && i == 0 && hrr == nil && cfg.MaxEarlyData > 0 && t.MaxEarlyData > 0 && !cfg.requiresClientCert() {
			// The client's view of when it sent this ClientHello, on
			// our clock: the ticket's creation plus the age it claims.
			// It is fresh within W of that instant, so its register
			// entry must live until then + W (a replay at any moment
			// it would still be fresh is caught), and any server could
			// first have taken it at the later of the ticket's creation
			// and then - W.
			clientAge := time.Duration(id.ObfuscatedTicketAge-t.AgeAdd) * time.Millisecond
			sent := created.Add(clientAge)
			w := cfg.earlyDataWindow()
			if d := now.Sub(sent); d <= w && d >= -w {
				notBefore := sent.Add(-w)
				if notBefore.Before(created) {
					notBefore = created
				}
				fresh, err := cfg.strikeRegister().CheckAndInsert(ch.PSKBinders[i], now, notBefore, sent.Add(w))
				p.early = err == nil && fresh
			}
		}
		return nil
	}
	return nil
}

// chooseCertificate picks the first chain that matches the SNI (or the
// first at all) and whose key can sign with a scheme the client offers.
func (e *engine) chooseCertificate(p *serverParams) error {
	var fallback *Certificate
	var fallbackScheme uint16
	var fallbackLeaf *x509.Certificate
	for i := range e.cfg.Certificates {
		c := &e.cfg.Certificates[i]
		leaf, pub, err := e.cfg.certLeaf(i)
		if err != nil {
			continue
		}
		scheme, err := sig.Select(pub, intersect(p.ch.SignatureAlgorithms, e.cfg.signatureSchemes()))
		if err != nil {
			continue
		}
		if p.ch.ServerName == "" || leaf.VerifyHostname(p.ch.ServerName) == nil {
			p.cert, p.certLeaf, p.scheme = c, leaf, scheme
			return nil
		}
		if fallback == nil {
			fallback, fallbackLeaf, fallbackScheme = c, leaf, scheme
		}
	}
	if fallback == nil {
		if len(e.cfg.Certificates) == 0 {
			return errorf(AlertInternalError, "server has no certificate configured")
		}
		return errorf(AlertHandshakeFailure, "no certificate whose key can sign with a scheme the client offers")
	}
	p.cert, p.certLeaf, p.scheme = fallback, fallbackLeaf, fallbackScheme
	return nil
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

// sendServerFlight sends ServerHello through Finished and installs keys.
func (e *engine) sendServerFlight(p *serverParams, hrr *serverHRR) (state, error) {
	cfg := e.cfg
	ch := p.ch
	h := p.suite.Hash
	e.suite, e.hash = p.suite, h
	t := p.transcript

	sh := &wire.ServerHello{
		SessionID:        ch.SessionID,
		CipherSuite:      p.suite.ID,
		SupportedVersion: wire.VersionTLS13,
	}
	if _, err := io.ReadFull(cfg.rand(), sh.Random[:]); err != nil {
		return nil, err
	}
	var shared []byte
	if p.group != 0 {
		pub, sec, err := kex.ServerShare(p.group, p.share, cfg.rand())
		if err != nil {
			return nil, err
		}
		shared = sec
		sh.HasKeyShare = true
		sh.KeyShare = wire.KeyShare{Group: p.group, Data: pub}
		e.info.Group = CurveID(p.group)
	}
	if p.psk != nil {
		sh.HasPSK = true
		sh.PSKIdentity = uint16(p.pskIndex)
	}
	es := keyschedule.NewEarlySecret(h, p.psk)
	if p.zkey != nil {
		es = *p.zsecret
		sh.HasZTLS, sh.ZTLSID = true, p.zkey.ID
	}
	var earlySecret []byte
	if p.early {
		earlySecret = es.ClientEarlyTrafficSecret(t.Sum())
		e.keyLog("CLIENT_EARLY_TRAFFIC_SECRET", ch.Random[:], earlySecret)
	}
	if cfg.testHookServerHello != nil {
		cfg.testHookServerHello(sh)
	}
	sh.ZTLSCodepoint = ch.ZTLSCodepoint
	shRaw, err := sh.Marshal()
	if err != nil {
		return nil, err
	}
	t.Write(shRaw)
	e.queueHandshake(shRaw)
	if err := e.flushHandshake(); err != nil {
		return nil, err
	}
	if len(ch.SessionID) > 0 && (hrr == nil || !hrr.sentCCS) {
		e.sendCCS()
	}
	if shared == nil {
		shared = make([]byte, h.Size())
	}
	hs := es.HandshakeSecret(shared)
	th := t.Sum()
	chs := hs.ClientHandshakeTrafficSecret(th)
	shs := hs.ServerHandshakeTrafficSecret(th)
	e.keyLog("CLIENT_HANDSHAKE_TRAFFIC_SECRET", ch.Random[:], chs)
	e.keyLog("SERVER_HANDSHAKE_TRAFFIC_SECRET", ch.Random[:], shs)
	if err := e.setWriteKey(shs); err != nil {
		return nil, err
	}
	e.event(EventHandshakeKeys)

	ee := &wire.EncryptedExtensions{ALPN: p.alpn, EarlyData: p.early}
	if ch.RecordSizeLimit != 0 {
		if ch.RecordSizeLimit < 64 {
			return nil, errorf(AlertIllegalParameter, "record_size_limit %d below 64", ch.RecordSizeLimit)
		}
		e.maxSendPlain = min(int(ch.RecordSizeLimit)-1, e.maxSendPlain)
		ee.RecordSizeLimit = uint16(cfg.recordSizeLimit())
	}
	if ch.ServerName != "" && p.cert != nil && p.certLeaf.VerifyHostname(ch.ServerName) == nil {
		ee.ServerName = true
	}
	if cfg.testHookEncryptedExtensions != nil {
		cfg.testHookEncryptedExtensions(ee)
	}
	eeRaw, err := ee.Marshal()
	if err != nil {
		return nil, err
	}
	t.Write(eeRaw)
	e.queueHandshake(eeRaw)

	var certReq *wire.CertificateRequest
	omitCert := p.zkey != nil && e.mayOmitCertificate(p)
	if p.psk == nil {
		if cfg.ClientAuth != NoClientCert {
			certReq = &wire.CertificateRequest{
				SignatureAlgorithms:     cfg.signatureSchemes(),
				SignatureAlgorithmsCert: sig.SupportedForCertificates(),
			}
			if certReq.Extra, err = cfg.certCompressionExtension(); err != nil { // RFC 8879
				return nil, &LocalError{Alert: AlertInternalError, Err: err}
			}
			raw, err := certReq.Marshal()
			if err != nil {
				return nil, err
			}
			t.Write(raw)
			e.queueHandshake(raw)
		}
		if !omitCert {
			cm := &wire.Certificate{}
			for _, der := range p.cert.Chain {
				cm.Entries = append(cm.Entries, wire.CertificateEntry{Data: der})
			}
			raw, err := cm.Marshal()
			if err != nil {
				return nil, err
			}
			if raw, err = e.compressCertificate(raw, ch.Extra); err != nil { // RFC 8879
				return nil, err
			}
			t.Write(raw)
			e.queueHandshake(raw)
		}
		e.info.CertificateOmitted = omitCert
		signature, err := sig.Sign(cfg.rand(), p.cert.PrivateKey, p.scheme, sig.ServerContext, t.Sum())
		if err != nil {
			return nil, errorf(AlertInternalError, "signing CertificateVerify: %v", err)
		}
		cv, err := (&wire.CertificateVerify{Scheme: p.scheme, Signature: signature}).Marshal()
		if err != nil {
			return nil, err
		}
		t.Write(cv)
		e.queueHandshake(cv)
	}
	verify := keyschedule.FinishedMAC(h, shs, t.Sum())
	if cfg.testHookFinished != nil {
		cfg.testHookFinished(verify)
	}
	fin, err := (&wire.Finished{VerifyData: verify}).Marshal()
	if err != nil {
		return nil, err
	}
	t.Write(fin)
	e.queueHandshake(fin)

	ms := hs.MasterSecret()
	th = t.Sum()
	cap := ms.ClientApplicationTrafficSecret(th)
	sap := ms.ServerApplicationTrafficSecret(th)
	e.exporter = ms.ExporterMasterSecret(th)
	e.keyLog("CLIENT_TRAFFIC_SECRET_0", ch.Random[:], cap)
	e.keyLog("SERVER_TRAFFIC_SECRET_0", ch.Random[:], sap)
	e.keyLog("EXPORTER_SECRET", ch.Random[:], e.exporter)
	if err := e.setWriteKey(sap); err != nil {
		return nil, err
	}
	e.outSecret = sap
	e.canWriteApp = true // 0.5-RTT data may follow the flight
	e.event(EventServerFlightSent)

	e.info.CipherSuite = CipherSuite(p.suite.ID)
	e.info.NegotiatedProtocol = p.alpn
	e.info.DidResume = p.psk != nil
	if p.psk != nil {
		e.info.PeerCertificates, e.info.VerifiedChains = p.clientCerts, p.clientChains
	}
	e.info.EarlyDataOffered = ch.EarlyData
	e.info.EarlyDataAccepted = p.early
	e.info.ZTLSOffered = ch.ZTLS != nil
	e.info.ZTLS = p.zkey != nil

	keys := &serverKeys{t: t, ms: ms, chs: chs, cap: cap, certReq: certReq, random: ch.Random, pskModes: ch.PSKModes}
	if p.early {
		if err := e.setReadKey(earlySecret); err != nil {
			return nil, err
		}
		e.mode = appEarly
		if p.zkey != nil {
			e.earlyLimit = int(p.zkey.MaxEarlyData)
		} else {
			e.earlyLimit = int(min(cfg.MaxEarlyData, p.ticket.MaxEarlyData))
		}
		e.earlyEnded = false
		e.event(EventEarlyDataAccepted)
		return &serverExpectEndOfEarlyData{keys: keys}, nil
	}
	if ch.EarlyData {
		e.skipEarly = e.earlySkipBudget(p.zRejectedMax)
		e.event(EventEarlyDataRejected)
	}
	if err := e.setReadKey(chs); err != nil {
		return nil, err
	}
	return keys.next(), nil
}

// serverKeys is what the server carries from its flight to the client's Finished.
type serverKeys struct {
	t       *keyschedule.Transcript
	ms      keyschedule.MasterSecret
	chs     []byte
	cap     []byte
	certReq *wire.CertificateRequest
	random  [32]byte
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
	e.earlyEnded = true
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

// checkClientChain is the server's policy for a client's certificate
// chain (leaf first): with ClientAuth >= VerifyClientCertIfGiven the PKIX
// path to ClientCAs at Config.Time and revocation; otherwise only the
// leaf's validity period; then VerifyPeerCertificate. A full handshake's
// Certificate and a resumption's ticket both go through it.
func (c *Config) checkClientChain(certs []*x509.Certificate, raws [][]byte) ([][]*x509.Certificate, error) {
	now := c.now()
	var chains [][]*x509.Certificate
	if c.ClientAuth >= VerifyClientCertIfGiven {
		opts := x509.VerifyOptions{
			Roots:         c.ClientCAs,
			Intermediates: x509.NewCertPool(),
			CurrentTime:   now,
			KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}
		for _, ic := range certs[1:] {
			opts.Intermediates.AddCert(ic)
		}
		var err error
		if chains, err = certs[0].Verify(opts); err != nil {
			return nil, certificateError(err)
		}
		if err := c.Revocation.CheckAny(chains, now); err != nil {
			return nil, revocationError(err)
		}
	} else if leaf := certs[0]; now.After(leaf.NotAfter) || now.Before(leaf.NotBefore) {
		return nil, certificateError(x509.CertificateInvalidError{Cert: leaf, Reason: x509.Expired})
	}
	if c.VerifyPeerCertificate != nil {
		if err := c.VerifyPeerCertificate(raws, chains); err != nil {
			return nil, &LocalError{Alert: AlertBadCertificate, Err: err}
		}
	}
	return chains, nil
}

// resumeClientChain re-checks, on resumption, the client certificate the
// ticket was issued to: the policy may have changed, the certificate may
// have expired or been revoked since. A ticket that fails is not used
// (the handshake is a full one, asking for a certificate again).
func (e *engine) resumeClientChain(t *sessionTicket, p *serverParams) bool {
	cfg := e.cfg
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
	p.clientCerts, p.clientChains = certs, chains
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
	e.resMaster = k.ms.ResumptionMasterSecret(k.t.Sum())
	if err := e.setReadKey(k.cap); err != nil {
		return nil, err
	}
	e.inSecret = k.cap
	e.mode = appData
	e.done = true
	e.info.HandshakeComplete = true
	e.event(EventPeerFinished)
	e.event(EventHandshakeDone)
	if !e.cfg.SessionTicketsDisabled && len(intersect(k.pskModes, e.cfg.pskModes())) > 0 {
		if err := e.sendSessionTicket(); err != nil {
			return nil, err
		}
	}
	return &serverConnected{}, nil
}

// sendSessionTicket issues one NewSessionTicket (RFC 8446, Section 4.6.1).
func (e *engine) sendSessionTicket() error {
	cfg := e.cfg
	var nonce [8]byte
	binary.BigEndian.PutUint64(nonce[:], uint64(e.ticketsSent))
	e.ticketsSent++
	var ageAdd [4]byte
	if _, err := io.ReadFull(cfg.rand(), ageAdd[:]); err != nil {
		return err
	}
	t := &sessionTicket{
		Suite:        e.suite.ID,
		CreatedMS:    cfg.now().UnixMilli(),
		AgeAdd:       binary.BigEndian.Uint32(ageAdd[:]),
		LifetimeS:    uint32(cfg.ticketLifetime() / time.Second),
		MaxEarlyData: cfg.MaxEarlyData,
		PSK:          keyschedule.ResumptionPSK(e.hash, e.resMaster, nonce[:]),
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

type serverConnected struct{}

func (s *serverConnected) handle(e *engine, typ uint8, msg []byte) (state, error) {
	if typ == wire.TypeKeyUpdate {
		return s, e.handleKeyUpdate(msg)
	}
	return nil, unexpectedMessage(typ, wire.TypeKeyUpdate)
}

// acceptZTLS applies the acceptance rules of ZTLS-SPEC §5 before the
// ServerHello. It never aborts for a rule that fails (the early data is
// rejected and the handshake goes on as TLS 1.3) except for an invalid
// key share, which is the client's protocol error. It returns why it
// rejected ("" when accepted).
func (e *engine) acceptZTLS(p *serverParams, afterHRR bool) (string, error) {
	cfg := e.cfg
	ch, z := p.ch, p.ch.ZTLS
	if cfg.ZData == nil {
		return "server has no Z-data keys", nil
	}
	if afterHRR {
		return "HelloRetryRequest", nil
	}
	if !ch.EarlyData {
		return "ztls without early_data", nil
	}
	if p.psk != nil {
		return "ClientHello also resumes a session", nil
	}
	if cfg.requiresClientCert() {
		// ZTLS-SPEC §1 field 10: early data is never client-authenticated.
		return "server requires client certificates; early data is not client-authenticated", nil
	}
	now := cfg.now()
	key := cfg.ZData.LookupZData(z.ZDataID, z.ZDataHash, now)
	if key == nil {
		return "no live Z-data record with that zdata_id and zdata_hash", nil
	}
	p.zRejectedMax = key.MaxEarlyData
	if !strings.EqualFold(ch.ServerName, key.Host) { // DNS names ignore ASCII case
		return fmt.Sprintf("SNI %q is not the Z-data's host %q", ch.ServerName, key.Host), nil
	}
	early := suite.Lookup(z.EarlySuite)
	if early == nil || !contains(cfg.cipherSuites(), z.EarlySuite) || !contains(ch.CipherSuites, z.EarlySuite) {
		return "early_suite not supported", nil
	}
	if p.alpn != key.ALPN {
		return fmt.Sprintf("negotiated ALPN %q is not the Z-data's %q", p.alpn, key.ALPN), nil
	}
	var share []byte
	for _, ks := range ch.KeyShares {
		if ks.Group == uint16(key.Group) {
			share = ks.Data
		}
	}
	if share == nil {
		return "no key share for the Z-data's group", nil
	}
	zs, err := key.ECDH(share)
	if err != nil {
		return "", errorf(AlertIllegalParameter, "invalid key share for the Z-data group: %v", err)
	}
	es := keyschedule.NewEarlySecret(early.Hash, zs)
	truncated := ch.Raw[:len(ch.Raw)-ch.BindersLen()]
	if !keyschedule.VerifyFinished(early.Hash, es.BinderKey("ztls binder"), hashOf(early.Hash, truncated), z.Binder) {
		return "binder does not verify", nil
	}
	clientMS := int64(z.ObfuscatedTimeMS ^ binary.BigEndian.Uint64(es.Expand("ztls time", 8)))
	skew := now.Sub(time.UnixMilli(clientMS))
	if skew < 0 {
		skew = -skew
	}
	if skew > cfg.earlyDataWindow() {
		return fmt.Sprintf("client clock %v off (window %v)", skew.Round(time.Millisecond), cfg.earlyDataWindow()), nil
	}
	// Entries live until server time exceeds client time + W. No server
	// could take this ClientHello before client time - W, nor before the
	// key's not-before.
	sent := time.UnixMilli(clientMS)
	notBefore := sent.Add(-cfg.earlyDataWindow())
	if notBefore.Before(key.NotBefore) {
		notBefore = key.NotBefore
	}
	fresh, err := cfg.strikeRegister().CheckAndInsert(hashOf(early.Hash, ch.Raw), now, notBefore, sent.Add(cfg.earlyDataWindow()))
	if err != nil {
		return "strike register unavailable: " + err.Error(), nil
	}
	if !fresh {
		return "replayed ClientHello", nil
	}
	p.suite = early
	p.zkey, p.zsecret = key, &es
	p.early = true
	return "", nil
}

// mayOmitCertificate: ZTLS-SPEC §4 lets an accepting server leave out the
// Certificate the client already verified from DNS.
func (e *engine) mayOmitCertificate(p *serverParams) bool {
	ch := p.ch
	if p.cert == nil || len(ch.ZTLS.CertHash) != 32 || ch.StatusRequest || ch.SCT {
		return false
	}
	sum := sha256.Sum256(p.cert.Chain[0])
	if !hmac.Equal(sum[:], ch.ZTLS.CertHash) {
		return false
	}
	for _, ext := range p.certLeaf.Extensions {
		if ext.Id.Equal(oidMustStaple) {
			return false
		}
	}
	return true
}

// oidMustStaple is the TLS Feature extension (RFC 7633).
var oidMustStaple = asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 1, 24}
