package tls13

// ZTLS (docs/ztls-spec.md) in the handshake: a client that found a
// server's Z-data in DNS sends its first request as early data with its
// first ClientHello, keyed by an ECDH with the Z-data's semi-static share
// (and, for a record with a BFE key, a key encapsulated to it);
// everything after the ServerHello still rests on a fresh (EC)DHE. This
// file holds all of ZTLS the engine does, for both roles, so that the
// handshake files keep only the TLS 1.3 state machines, which call it:
//
//   - the client's side: what the application hands it (ZDataOffer,
//     ZDataPrepared, ZDataKeyShare, ZDataBFE) and its steps, offerZTLS
//     (the ztls extension and the early secret from ZS, Section 3, or
//     ZS || K_bfe, Section 7.3: ztlsEarlySuite, ztlsSharedSecret,
//     ztlsBFE) and checkZTLSEcho on the ServerHello;
//   - the server's side: its keys (ZDataKey, ZDataKeys), when a key is
//     live (ZDataLive), and its steps, considerZTLS and acceptZTLS (the
//     acceptance rules of Section 5: ztlsKey, checkZTLSFreshness) and
//     mayOmitCertificate (Section 4).
//
// The client's policy on the Z-data leaf (VerifyZDataOffer) is
// certificate verification and lives in verify.go; the secrets derived
// after the early secret are the shared ones of secrets.go. Post-quantum
// Z-data (X25519MLKEM768 keys and ztls_kem, Section 9) adds ztls_pq.go:
// the server's key type and the client's encapsulation, which
// ztlsSharedSecret and acceptZTLS (ztlsClientShare) call.

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ztls-project/ztls/tls13/internal/kex"
	"github.com/ztls-project/ztls/tls13/internal/keyschedule"
	"github.com/ztls-project/ztls/tls13/internal/suite"
	"github.com/ztls-project/ztls/tls13/internal/wire"
)

// ZDataOffer is verified Z-data in a client's hands. The caller (package
// dial) has already checked its signature, validity window, host and port.
// The leaf itself must pass the client Config's certificate policy, the
// same as a Certificate message (see VerifyZDataOffer), before the engine
// sends a byte encrypted to the Z-data key; an offer that fails it is not
// used (ConnectionState.ZTLSSkipped says why) and the handshake is plain
// TLS 1.3.
type ZDataOffer struct {
	ID    uint32
	Hash  [32]byte // zdata_hash: SHA-256 of the record's signature input
	Group CurveID  // X25519 or P256; X25519MLKEM768 for a v3 record (Section 9)
	// Share is the server's semi-static key_exchange bytes: for
	// X25519MLKEM768 the ML-KEM-768 encapsulation key then the x25519 key
	// (docs/ztls-spec.md, Section 9.1), which the client encapsulates to,
	// sending the result in ztls_kem.
	Share        []byte
	MaxEarlyData uint32
	ALPN         string        // the early ALPN protocol; "" means none
	NSC          []CipherSuite // cipher suites the server does not support
	// Leaf is the TLSA leaf the record was signed with. With it the client
	// sends cert_hash and the server may omit its Certificate.
	Leaf *x509.Certificate
	// Intermediates are the CA certificates published with the leaf (CERT
	// records), used to build its chain.
	Intermediates []*x509.Certificate
	// Prepared, if set, holds a key share and ZS made ahead for this
	// offer's Group and Share (PrepareZData), and the BFE encapsulation
	// (ZDataPrepared.EncapsulateBFE); otherwise the engine makes them
	// when the handshake starts.
	Prepared *ZDataPrepared
	// BFE is the Bloom filter encryption public key of a ztls v2 record
	// with bfe= (docs/ztls-spec.md, Section 7); nil for any other record.
	// With it the client sends ztls_bfe and the early secret needs both
	// ZS and the encapsulated key.
	BFE ZDataBFE

	verdict *zdataVerdict // set by VerifyZDataOffer
}

// ZDataPrepared is a client key share for a Z-data record's group and the
// semi-static secret ZS between it and the record's share, computed while
// the record's signature and chain are still being verified: the two
// scalar multiplications then leave the first flight's critical path.
// Nothing is sent until the offer is verified. It is used by at most one
// handshake (a key share is never reused) and only for an offer with the
// same group and share.
type ZDataPrepared struct {
	group  CurveID
	zshare []byte
	share  kex.ClientShare
	zs     []byte
	err    error
	taken  atomic.Bool
	// kemShare is, for X25519MLKEM768, the ztls_kem value made ahead
	// (the encapsulation to zshare and a fresh x25519 share); share is
	// then nil.
	kemShare []byte

	// A BFE encapsulation made ahead (EncapsulateBFE): the key it is for,
	// the ciphertext and the key; nil when none.
	bfePub, bfeCiphertext, bfeKey []byte
}

// EncapsulateBFE encapsulates to pub ahead of the handshake (about ten
// pairings leave the first flight's path; nil rand: crypto/rand). Call it
// before p is handed to an offer; the handshake that takes p sends the
// ciphertext if its offer's BFE key is pub. An error leaves p without one
// (the engine then encapsulates itself).
func (p *ZDataPrepared) EncapsulateBFE(pub ZDataBFE, rand io.Reader) error {
	ct, key, err := pub.Encapsulate(rand)
	if err != nil {
		return err
	}
	p.bfePub, p.bfeCiphertext, p.bfeKey = pub.Bytes(), ct, key
	return nil
}

// Public returns the key share the prepared Z-data exchange sends (the
// ClientHello's key_exchange for its group), nil if it failed or the
// group is X25519MLKEM768 (its share travels in ztls_kem).
func (p *ZDataPrepared) Public() []byte {
	if p == nil || p.err != nil || p.share == nil {
		return nil
	}
	return p.share.Public()
}

// PrepareZData makes a key share for group and the ZS between it and the
// Z-data share zshare (nil rand: crypto/rand). An invalid zshare is
// reported when the engine would use it.
func PrepareZData(group CurveID, zshare []byte, rand io.Reader) *ZDataPrepared {
	return (*ZDataKeyShare)(nil).Prepare(group, zshare, rand)
}

// ZDataKeyShare is a client key share made before the Z-data it will be
// used with has arrived (while the DNS answers are awaited): when the
// record lands only the ECDH with its share is left to do. It serves one
// Prepare at most, and a key share is never used twice.
type ZDataKeyShare struct {
	group CurveID
	share kex.ClientShare
	err   error
	taken atomic.Bool
}

// NewZDataKeyShare makes a key share for group, which should be the
// group the Z-data is expected to use (x25519 in the default profile;
// nil rand: crypto/rand).
func NewZDataKeyShare(group CurveID, rand io.Reader) *ZDataKeyShare {
	ks := &ZDataKeyShare{group: group}
	if group == X25519MLKEM768 {
		// docs/ztls-spec.md, Section 9.4: the client's side is an
		// encapsulation to the record's key, made once the record is in.
		ks.err = errors.New("tls13: no key share is made ahead for X25519MLKEM768 Z-data (PrepareZData encapsulates once the record is in)")
		return ks
	}
	if ks.err = checkZDataGroup(group); ks.err == nil {
		ks.share, ks.err = kex.GenerateClientShare(uint16(group), rand)
	}
	return ks
}

// Prepare is PrepareZData with ks's key share when ks (which may be nil)
// is for group and unused; otherwise it makes a new share.
func (ks *ZDataKeyShare) Prepare(group CurveID, zshare []byte, rand io.Reader) *ZDataPrepared {
	p := &ZDataPrepared{group: group, zshare: bytes.Clone(zshare)}
	if p.err = checkZDataGroup(group); p.err != nil {
		return p
	}
	if group == X25519MLKEM768 {
		// docs/ztls-spec.md, Section 9.4: encapsulate now, off the first
		// flight's path; a share made before the record is of no use.
		p.kemShare, p.zs, p.err = kex.ServerShare(uint16(group), zshare, rand)
		return p
	}
	if ks != nil && ks.err == nil && ks.group == group && ks.taken.CompareAndSwap(false, true) {
		p.share = ks.share
	} else {
		p.share, p.err = kex.GenerateClientShare(uint16(group), rand)
	}
	if p.err == nil {
		p.zs, p.err = p.share.Shared(zshare)
	}
	return p
}

// take hands the prepared share to one handshake for offer z, or nil.
func (p *ZDataPrepared) take(z *ZDataOffer) *ZDataPrepared {
	if p == nil || p.err != nil || p.group != z.Group || !bytes.Equal(p.zshare, z.Share) || !p.taken.CompareAndSwap(false, true) {
		return nil
	}
	return p
}

// checkZDataGroup: Z-data keys are x25519 or secp256r1 (docs/ztls-spec.md,
// Section 1), or X25519MLKEM768 in v3 records (Section 9).
func checkZDataGroup(g CurveID) error {
	if g != X25519 && g != P256 && g != X25519MLKEM768 {
		return fmt.Errorf("tls13: Z-data group %s is not usable for ztls", g)
	}
	return nil
}

// ZDataBFE is a Z-data record's Bloom filter encryption public key as the
// engine uses it (docs/ztls-spec.md, Section 7); package zdata hands it a
// *bfe.PublicKey, so tls13 itself links no pairing code.
type ZDataBFE interface {
	// Bytes is the BFEPublicKey encoding.
	Bytes() []byte
	// Encapsulate returns a fresh ciphertext and the 32-byte key in it.
	Encapsulate(rand io.Reader) (ciphertext, key []byte, err error)
}

// offerZTLS adds the ztls extension for a verified Z-data offer, or says
// why it can't be used (the caller records that as the reason).
func (e *engine) offerZTLS(p *clientHelloParams, z *ZDataOffer, earlyLen int) error {
	early, err := e.ztlsEarlySuite(p, z, earlyLen)
	if err != nil {
		return err
	}
	// The certificate policy last of the checks (it is x509 work unless
	// the offer was verified ahead, as package dial does), and before
	// the ClientHello is changed for ztls.
	v, err := e.cfg.zdataVerdict(z)
	if err != nil {
		return fmt.Errorf("the Z-data leaf fails the certificate policy: %v", err)
	}
	ch := p.hello
	if z.ALPN != "" {
		// Offer the early protocol first so the server can select it.
		alpn := []string{z.ALPN}
		for _, a := range ch.ALPN {
			if a != z.ALPN {
				alpn = append(alpn, a)
			}
		}
		ch.ALPN = alpn
	}
	zs, err := e.ztlsSharedSecret(p, z)
	if err != nil {
		return err
	}
	ikm, err := e.ztlsBFE(p, z, zs)
	if err != nil {
		return err
	}
	es := keyschedule.NewEarlySecret(early.Hash, ikm)
	mask := es.Expand("ztls time", 8)
	ext := &wire.ZTLSClientHello{
		ZDataID:          z.ID,
		ZDataHash:        z.Hash,
		EarlySuite:       early.ID,
		ObfuscatedTimeMS: uint64(e.cfg.now().UnixMilli()) ^ binary.BigEndian.Uint64(mask),
		Binder:           make([]byte, early.Hash.Size()),
	}
	if z.Leaf != nil {
		sum := sha256.Sum256(z.Leaf.Raw)
		ext.CertHash = sum[:]
	}
	ch.ZTLS = ext
	ch.EarlyData = true
	p.ztls, p.ztlsSecret, p.ztlsSuite, p.zverdict = z, &es, early, v
	e.info.ZTLSOffered = true
	return nil
}

// ztlsEarlySuite checks that the offer suits this ClientHello (group,
// early data size, ALPN) and picks the early suite: our first one the
// Z-data's server supports.
func (e *engine) ztlsEarlySuite(p *clientHelloParams, z *ZDataOffer, earlyLen int) (*suite.Suite, error) {
	if err := checkZDataGroup(z.Group); err != nil {
		return nil, err
	}
	if earlyLen > int(z.MaxEarlyData) {
		return nil, fmt.Errorf("request of %d bytes exceeds the Z-data's max_early_data_size %d", earlyLen, z.MaxEarlyData)
	}
	var early *suite.Suite
	for _, id := range e.cfg.cipherSuites() {
		if s := suite.Lookup(id); s != nil && !contains(z.NSC, CipherSuite(id)) {
			early = s
			break
		}
	}
	if early == nil {
		return nil, errors.New("no cipher suite in common with the Z-data's server")
	}
	if z.ALPN != "" && !contains(p.hello.ALPN, z.ALPN) {
		return nil, fmt.Errorf("tls13: the Z-data's early ALPN %q is not among ours", z.ALPN)
	}
	return early, nil
}

// ztlsSharedSecret is ZS, the ECDH of our key share for the Z-data's
// group (added to the ClientHello if there is none yet) with the Z-data
// share (docs/ztls-spec.md, Section 3), prepared ahead when it could be.
func (e *engine) ztlsSharedSecret(p *clientHelloParams, z *ZDataOffer) ([]byte, error) {
	if z.Group == X25519MLKEM768 {
		return e.ztlsKEM(p, z)
	}
	ch, group := p.hello, uint16(z.Group)
	var share kex.ClientShare
	for _, cs := range p.shares {
		if cs.Group() == group {
			share = cs
		}
	}
	if share == nil {
		if zp := p.zprepared; zp != nil {
			share = zp.share
		} else {
			var err error
			if share, err = e.cfg.newClientShare(group); err != nil {
				return nil, err
			}
		}
		p.shares = append(p.shares, share)
		ch.KeyShares = append(ch.KeyShares, wire.KeyShare{Group: group, Data: share.Public()})
		if !contains(ch.SupportedGroups, group) {
			ch.SupportedGroups = append(ch.SupportedGroups, group)
		}
	}
	if zp := p.zprepared; zp != nil && share == zp.share {
		return zp.zs, nil
	}
	zs, err := share.Shared(z.Share)
	if err != nil {
		return nil, fmt.Errorf("invalid Z-data key share: %v", err)
	}
	return zs, nil
}

// ztlsBFE returns the early secret's input for offer z: ZS, or for a
// record with a BFE key ZS || K_bfe, its ciphertext then going in
// ztls_bfe (docs/ztls-spec.md, Section 7.3). The encapsulation made ahead
// with the prepared share is used when it is for this key.
func (e *engine) ztlsBFE(p *clientHelloParams, z *ZDataOffer, zs []byte) ([]byte, error) {
	if z.BFE == nil {
		return zs, nil
	}
	var ct, key []byte
	if zp := p.zprepared; zp != nil && zp.bfeKey != nil && bytes.Equal(zp.bfePub, z.BFE.Bytes()) {
		ct, key = zp.bfeCiphertext, zp.bfeKey
	} else {
		var err error
		if ct, key, err = z.BFE.Encapsulate(e.cfg.rand()); err != nil {
			return nil, fmt.Errorf("BFE encapsulation: %v", err)
		}
	}
	p.hello.ZTLSBFE = ct
	return append(append(make([]byte, 0, len(zs)+len(key)), zs...), key...), nil
}

// checkZTLSEcho checks a ztls echo (docs/ztls-spec.md, Section 3): our record, our early
// suite, no PSK beside it, and a fresh key share.
func (k *clientKeys) checkZTLSEcho(sh *wire.ServerHello) error {
	p := k.p
	if !sh.HasZTLS {
		return nil
	}
	if sh.ZTLSID != p.ztls.ID {
		return errorf(AlertIllegalParameter, "server echoed zdata_id %d, the client used %d", sh.ZTLSID, p.ztls.ID)
	}
	if sh.CipherSuite != p.hello.ZTLS.EarlySuite {
		return errorf(AlertIllegalParameter, "server accepted ztls but selected another cipher suite than early_suite")
	}
	if k.resumed {
		return errorf(AlertIllegalParameter, "server selected both a PSK and ztls")
	}
	if sh.HasKeyShare && bytes.Equal(sh.KeyShare.Data, p.ztls.Share) {
		return errorf(AlertIllegalParameter, "server's fresh key share equals its Z-data share (no forward secrecy)")
	}
	k.ztls = true
	return nil
}

// ZDataKey is one live Z-data record's private side on a server.
type ZDataKey struct {
	ID           uint32
	Hash         [32]byte
	Host         string // the signed host: the SNI must equal it
	Group        CurveID
	MaxEarlyData uint32
	ALPN         string
	// NotBefore and NotAfter are the record's validity. The server takes
	// early data under the key only while ZDataLive, and no earlier than
	// NotBefore: the anti-replay guards measure from it.
	NotBefore time.Time
	NotAfter  time.Time
	// ECDH computes the shared secret with a client's key_exchange bytes
	// for Group, validating the share (an invalid share is an error).
	ECDH func(peer []byte) ([]byte, error)
	// For X25519MLKEM768 (a v3 record, docs/ztls-spec.md, Section 9) the
	// client's bytes are its ztls_kem value (the ML-KEM-768 ciphertext
	// then its x25519 share) and the result is ZS = ss_M || ss_X
	// (ZDataKEMKey.Shared); a mauled ciphertext is no error, only a wrong
	// ZS, which the binder then refuses.
	//
	// Decapsulate, for a ztls v2 record with bfe= (docs/ztls-spec.md,
	// Section 7), returns the key in a ztls_bfe ciphertext, puncturing
	// the record's BFE key; any error (a replay, a false positive, a full
	// filter, the fleet's puncture log unreachable) rejects early data.
	// nil for any other record. A record with it needs no strike
	// register: the punctured key refuses a replay.
	Decapsulate func(ciphertext []byte) ([]byte, error)
}

// ZDataKeys finds the Z-data key named by a ClientHello's zdata_id and
// zdata_hash among the records live at now (ZDataLive: not-before ≤ now ≤
// not-after plus the freshness window). The server checks the returned
// key's liveness again. Implementations must be safe for concurrent use.
type ZDataKeys interface {
	LookupZData(id uint32, hash [32]byte, now time.Time) *ZDataKey
}

// ZDataLive is the one definition of when a server decrypts with a Z-data
// key (docs/ztls-spec.md, Section 5): from the record's not-before, never
// earlier, until its not-after plus the freshness window w, bounds
// inclusive. Every guard takes the key's start from here: the restart guard
// and the strike registers (no ClientHello under the key can have been
// accepted before from), the fleet's BFE puncture log (the epoch is the
// not-before), key rings (Keyring.Live, LookupZData) and pruning. A client
// may use a record from 60 s before its not-before when its clock is behind
// and no record is valid by it (package zdata, ClockSkew); the server's
// clock has then reached the not-before.
func ZDataLive(notBefore, notAfter time.Time, w time.Duration, now time.Time) bool {
	return !now.Before(notBefore) && !now.After(notAfter.Add(w))
}

// considerZTLS applies the ZTLS acceptance rules to a ztls offer and
// records why it was rejected, if it was.
func (hs *serverHandshake) considerZTLS() error {
	if hs.ch.ZTLS == nil {
		if hs.ch.ZTLSBFE != nil || hs.ch.ZTLSKEM != nil {
			return errorf(AlertIllegalParameter, "ztls_bfe or ztls_kem without ztls")
		}
		return nil
	}
	reason, err := hs.acceptZTLS()
	if err != nil {
		return err
	}
	hs.e.info.ZTLSRejectReason = reason
	return nil
}

// ztlsKey is the live key the ClientHello's ztls extension names, nil
// when there is none (or no extension, or no key ring).
func (hs *serverHandshake) ztlsKey() *ZDataKey {
	if !hs.zlooked {
		hs.zlooked = true
		if z := hs.ch.ZTLS; z != nil && hs.cfg.ZData != nil {
			hs.zfound = hs.cfg.ZData.LookupZData(z.ZDataID, z.ZDataHash, hs.cfg.now())
		}
	}
	return hs.zfound
}

// acceptZTLS applies the acceptance rules of docs/ztls-spec.md, Section 5 before the
// ServerHello. It never aborts for a rule that fails (the early data is
// rejected and the handshake goes on as TLS 1.3) except for an invalid
// key share, which is the client's protocol error. It returns why it
// rejected ("" when accepted).
func (hs *serverHandshake) acceptZTLS() (string, error) {
	cfg := hs.cfg
	ch, z := hs.ch, hs.ch.ZTLS
	switch {
	case cfg.ZData == nil:
		return "server has no Z-data keys", nil
	case hs.hrr != nil:
		return "HelloRetryRequest", nil
	case !ch.EarlyData:
		return "ztls without early_data", nil
	case hs.psk != nil:
		return "ClientHello also resumes a session", nil
	case cfg.requiresClientCert():
		// docs/ztls-spec.md, Section 1 field 10: early data is never client-authenticated.
		return "server requires client certificates; early data is not client-authenticated", nil
	}
	now := cfg.now()
	key := hs.ztlsKey()
	if key == nil {
		return "no live Z-data record with that zdata_id and zdata_hash", nil
	}
	if !ZDataLive(key.NotBefore, key.NotAfter, cfg.earlyDataWindow(), now) {
		// A key ring that hands out a key before its not-before would let
		// a flight be accepted before the instant every anti-replay guard
		// measures from (docs/ztls-spec.md, Section 5).
		return fmt.Sprintf("Z-data record not live at %s (valid %s to %s)", now.UTC().Format(time.RFC3339),
			key.NotBefore.UTC().Format(time.RFC3339), key.NotAfter.UTC().Format(time.RFC3339)), nil
	}
	hs.zRejectedMax = key.MaxEarlyData
	if !strings.EqualFold(ch.ServerName, key.Host) { // DNS names ignore ASCII case
		return fmt.Sprintf("SNI %q is not the Z-data's host %q", ch.ServerName, key.Host), nil
	}
	early := suite.Lookup(z.EarlySuite)
	if early == nil || !contains(cfg.cipherSuites(), z.EarlySuite) || !contains(ch.CipherSuites, z.EarlySuite) {
		return "early_suite not supported", nil
	}
	if hs.alpn != key.ALPN {
		return fmt.Sprintf("negotiated ALPN %q is not the Z-data's %q", hs.alpn, key.ALPN), nil
	}
	share, reason := hs.ztlsClientShare(key)
	if reason != "" {
		return reason, nil
	}
	if (key.Decapsulate != nil) != (ch.ZTLSBFE != nil) {
		// docs/ztls-spec.md, Section 7.4: the record named decides.
		return "ztls_bfe sent for a record without a BFE key, or missing for one with", nil
	}
	zs, err := key.ECDH(share)
	if err != nil {
		return "", errorf(AlertIllegalParameter, "invalid key share for the Z-data group: %v", err)
	}
	ikm := zs
	if key.Decapsulate != nil {
		// docs/ztls-spec.md, Section 7.3: ES = HKDF-Extract(0, ZS || K_bfe).
		// Decapsulation punctures first; any failure rejects early data.
		k, err := key.Decapsulate(ch.ZTLSBFE)
		if err != nil {
			return "BFE: " + err.Error(), nil
		}
		ikm = append(append(make([]byte, 0, len(zs)+len(k)), zs...), k...)
	}
	es := keyschedule.NewEarlySecret(early.Hash, ikm)
	truncated := ch.Raw[:len(ch.Raw)-ch.BindersLen()]
	if !keyschedule.VerifyFinished(early.Hash, es.BinderKey("ztls binder"), hashOf(early.Hash, truncated), z.Binder) {
		return "binder does not verify", nil
	}
	if reason := hs.checkZTLSFreshness(key, es, early, now, key.Decapsulate == nil); reason != "" {
		return reason, nil
	}
	hs.suite = early
	hs.zkey, hs.zsecret = key, &es
	hs.early = true
	return "", nil
}

// ztlsClientShare is what the client sent for ZS under key, or why there
// is none: its key_share for the key's group, or for an X25519MLKEM768
// key its ztls_kem value (docs/ztls-spec.md, Section 9.5: the record
// named decides, and a ztls_kem for a classical record is refused).
func (hs *serverHandshake) ztlsClientShare(key *ZDataKey) ([]byte, string) {
	ch := hs.ch
	if key.Group == X25519MLKEM768 {
		if ch.ZTLSKEM == nil {
			return nil, "ztls_kem missing for an X25519MLKEM768 record"
		}
		return ch.ZTLSKEM, ""
	}
	if ch.ZTLSKEM != nil {
		return nil, "ztls_kem sent for a record without an ML-KEM key"
	}
	for _, ks := range ch.KeyShares {
		if ks.Group == uint16(key.Group) {
			return ks.Data, ""
		}
	}
	return nil, "no key share for the Z-data's group"
}

// checkZTLSFreshness takes a ztls ClientHello only within the freshness
// window of the time the client claims and, with strike, only once (the
// strike register; a BFE key refuses replays itself, docs/ztls-spec.md,
// Section 7.4); it returns why not, or "".
func (hs *serverHandshake) checkZTLSFreshness(key *ZDataKey, es keyschedule.EarlySecret, early *suite.Suite, now time.Time, strike bool) string {
	cfg, z := hs.cfg, hs.ch.ZTLS
	w := cfg.earlyDataWindow()
	clientMS := int64(z.ObfuscatedTimeMS ^ binary.BigEndian.Uint64(es.Expand("ztls time", 8)))
	skew := now.Sub(time.UnixMilli(clientMS))
	if skew < 0 {
		skew = -skew
	}
	if skew > w {
		return fmt.Sprintf("client clock %v off (window %v)", skew.Round(time.Millisecond), w)
	}
	if !strike {
		return ""
	}
	// Entries live until server time exceeds client time + W. No server
	// could take this ClientHello before client time - W, nor before the
	// key's not-before (ZDataLive: no key is live earlier).
	sent := time.UnixMilli(clientMS)
	notBefore := sent.Add(-w)
	if notBefore.Before(key.NotBefore) {
		notBefore = key.NotBefore
	}
	fresh, err := cfg.strikeRegister().CheckAndInsert(hashOf(early.Hash, hs.ch.Raw), now, notBefore, sent.Add(w))
	if err != nil {
		return "strike register unavailable: " + err.Error()
	}
	if !fresh {
		return "replayed ClientHello"
	}
	return ""
}

// mayOmitCertificate: docs/ztls-spec.md, Section 4 lets an accepting server leave out the
// Certificate the client already verified from DNS.
func (hs *serverHandshake) mayOmitCertificate() bool {
	ch := hs.ch
	if hs.cert == nil || len(ch.ZTLS.CertHash) != 32 || ch.StatusRequest || ch.SCT {
		return false
	}
	sum := sha256.Sum256(hs.cert.Chain[0])
	if !hmac.Equal(sum[:], ch.ZTLS.CertHash) {
		return false
	}
	for _, ext := range hs.certLeaf.Extensions {
		if ext.Id.Equal(oidMustStaple) {
			return false
		}
	}
	return true
}

// oidMustStaple is the TLS Feature extension (RFC 7633).
var oidMustStaple = asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 1, 24}
