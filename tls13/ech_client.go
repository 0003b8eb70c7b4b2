package tls13

// The client's Encrypted ClientHello (RFC 9849, Section 6). The
// ClientHello the engine builds is the inner one: it gets the inner
// encrypted_client_hello extension (offerECH), is marshalled, bound and
// written to the transcript as ever, and then sealed into an outer
// ClientHello (sealECH), which is what goes on the wire. The outer has a
// fresh random, the config's public name as server_name, the same key
// shares, groups, suites and signature schemes (compressed out of the
// inner with ech_outer_extensions), early_data when the inner has it
// (Section 6.1, so a server that rejects ECH skips the early records),
// a GREASE pre_shared_key when the inner has a ticket or early data
// (greasePSK), and never ztls, ztls_bfe, ztls_kem or the real ticket:
// nothing that names the service, the Z-data record or the ticket. The ServerHello
// says which was used (checkECHServerHello); on rejection the handshake
// goes on with the outer ClientHello, authenticates the public name, and
// ends with ech_required and the server's retry configs
// (checkECHRejected).

import (
	"bytes"
	"crypto/hmac"
	"encoding/binary"
	"io"
	"slices"

	"github.com/ztls-project/ztls/tls13/internal/ech"
	"github.com/ztls-project/ztls/tls13/internal/keyschedule"
	"github.com/ztls-project/ztls/tls13/internal/suite"
	"github.com/ztls-project/ztls/tls13/internal/wire"
)

// echClient is a client's ECH state for one connection.
type echClient struct {
	grease   bool
	config   *ech.Config
	ctx      *ech.ClientContext
	random   [32]byte          // the outer ClientHello's random
	outer    *wire.ClientHello // the outer ClientHello sent
	outerRaw []byte
	status   ECHStatus // after the ServerHello: accepted or rejected
	retry    []byte    // retry_configs from EncryptedExtensions (rejected)
}

// greaseMaxNameLength is the maximum_name_length a GREASE extension's
// size assumes: what zdata's ECH configs publish (zdata/ech.go).
const greaseMaxNameLength = 64

// offerECH prepares ECH for the ClientHello in p: the inner extension
// and the HPKE context for Config.ECHConfigList's first usable config,
// or a GREASE extension (ECHGrease without a config list). An unusable
// list is an error before anything is sent.
func (e *engine) offerECH(p *clientHelloParams) error {
	cfg := e.cfg
	if len(cfg.ECHConfigList) == 0 {
		// No GREASE beside a ZTLS offer (docs/ztls-spec.md, Section
		// 10.2): its ztls extension in clear already shows the hello is
		// not an ECH outer, and a server with ECH keys ignores the ztls
		// of an outer it cannot decrypt, so GREASE would hide nothing and
		// cost the early data.
		if cfg.ECHGrease && p.ztls == nil {
			return e.offerGreaseECH(p)
		}
		return nil
	}
	c, err := cfg.echClientConfig()
	if err != nil {
		return err
	}
	ctx, err := ech.NewClientContext(c)
	if err != nil {
		return err
	}
	st := &echClient{config: c, ctx: ctx}
	if _, err := io.ReadFull(cfg.rand(), st.random[:]); err != nil {
		return err
	}
	p.ech = st
	p.hello.Extra = append(p.hello.Extra, innerECHExtension())
	return nil
}

func innerECHExtension() wire.Extension {
	return wire.Extension{Type: ech.ExtEncryptedClientHello, Data: []byte{ech.TypeInner}}
}

// offerGreaseECH adds an encrypted_client_hello extension that looks
// like a real one (RFC 9849, Section 6.2): a random config id, a random
// X25519 enc, and a payload that sizeGreaseECH sizes and fills once the
// rest of the ClientHello is known.
func (e *engine) offerGreaseECH(p *clientHelloParams) error {
	r := make([]byte, 1+32)
	if _, err := io.ReadFull(e.cfg.rand(), r); err != nil {
		return err
	}
	x := &ech.ClientExtension{Type: ech.TypeOuter, Suite: ech.Suite{KDF: ech.KDFHKDFSHA256, AEAD: ech.AEADAES128GCM},
		ConfigID: r[0], Enc: r[1:33], Payload: []byte{0}}
	data, err := x.Marshal()
	if err != nil {
		return err
	}
	p.ech = &echClient{grease: true}
	p.hello.Extra = append(p.hello.Extra, wire.Extension{Type: ech.ExtEncryptedClientHello, Data: data})
	e.info.ECH = ECHGrease
	return nil
}

// sizeGreaseECH gives the GREASE extension of the first ClientHello its
// payload: random bytes as many as a real offer's would be for this
// ClientHello (RFC 9849, Section 6.2), the EncodedClientHelloInner that
// sealECH would make of it, compressed against the outer it would send
// and padded for greaseMaxNameLength, plus the AEAD's tag. The PSK and
// ztls binders may still be zero: only their lengths count. The second
// ClientHello after a HelloRetryRequest repeats the first's extension
// as it is (Section 6.2).
func (e *engine) sizeGreaseECH(p *clientHelloParams) error {
	if p.ech == nil || !p.ech.grease || p.afterHRR {
		return nil
	}
	ch := p.hello
	i := slices.IndexFunc(ch.Extra, func(x wire.Extension) bool { return x.Type == ech.ExtEncryptedClientHello })
	if i < 0 {
		return nil
	}
	x, err := ech.ParseClientExtension(ch.Extra[i].Data)
	if err != nil {
		return err
	}
	inner := *ch
	inner.Raw = nil
	inner.Extra = slices.Clone(ch.Extra)
	inner.Extra[i] = innerECHExtension()
	innerRaw, err := inner.Marshal()
	if err != nil {
		return err
	}
	// The outer's server_name is the public name, never the inner's; its
	// length does not count, only that it differs.
	outer, err := e.newOuterHello(&inner, "", zeroReader{})
	if err != nil {
		return err
	}
	encoded, err := encodeInner(outer, &ech.ClientExtension{Type: ech.TypeOuter, Suite: x.Suite, Enc: x.Enc, Payload: []byte{0}}, innerRaw, greaseMaxNameLength)
	if err != nil {
		return err
	}
	x.Payload = make([]byte, len(encoded)+ech.TagLen)
	if _, err := io.ReadFull(e.cfg.rand(), x.Payload); err != nil {
		return err
	}
	data, err := x.Marshal()
	if err != nil {
		return err
	}
	ch.Extra = slices.Clone(ch.Extra)
	ch.Extra[i].Data = data
	return nil
}

// zeroReader reads zeros: the GREASE PSK of an outer ClientHello built
// only for its size.
type zeroReader struct{}

func (zeroReader) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}

// sealECH returns what goes on the wire for the inner ClientHello
// innerRaw: the outer ClientHello that carries it encrypted, or innerRaw
// itself without ECH.
func (e *engine) sealECH(p *clientHelloParams, innerRaw []byte) ([]byte, error) {
	st := p.ech
	if st == nil || st.grease || st.status == ECHRejected {
		// After a HelloRetryRequest that rejected ECH, innerRaw is the
		// second outer ClientHello (rejectECH).
		return innerRaw, nil
	}
	enc := st.ctx.Enc
	if st.outer != nil {
		enc = nil // the second ClientHelloOuter (RFC 9849, Section 6.1.5)
	}
	outer, err := e.newOuterHello(p.hello, st.config.PublicName, e.cfg.rand())
	if err != nil {
		return nil, err
	}
	outer.Random = st.random
	x := &ech.ClientExtension{Type: ech.TypeOuter, Suite: st.ctx.Suite, ConfigID: st.config.ConfigID, Enc: enc, Payload: []byte{0}}
	encoded, err := encodeInner(outer, x, innerRaw, st.config.MaxNameLength)
	if err != nil {
		return nil, err
	}
	x.Payload = make([]byte, len(encoded)+ech.TagLen)
	aad, err := marshalOuter(outer, x)
	if err != nil {
		return nil, err
	}
	if x.Payload, err = st.ctx.Seal(aad[4:], encoded); err != nil {
		return nil, err
	}
	raw, err := marshalOuter(outer, x)
	if err != nil {
		return nil, err
	}
	st.outer, st.outerRaw = outer, raw
	return raw, nil
}

// newOuterHello returns the ClientHelloOuter for the ClientHelloInner
// inner (RFC 9849, Section 6.1), without its encrypted_client_hello: the
// inner's fields but for the public name as server_name, the configured
// ALPN order, no ztls, ztls_bfe or ztls_kem, and a GREASE PSK drawn from
// r in place of the inner's (greasePSK). The caller sets the random.
func (e *engine) newOuterHello(inner *wire.ClientHello, publicName string, r io.Reader) (*wire.ClientHello, error) {
	outer := *inner
	outer.Raw, outer.Order = nil, nil
	outer.ServerName = publicName
	// The configured ALPN order, not the inner's: ZTLS may move the
	// Z-data's early protocol first (ztlsOffer), and that order in the
	// outer would hint at a ZTLS offer (spec Section 10.1).
	outer.ALPN = e.cfg.NextProtos
	outer.ZTLS, outer.ZTLSBFE, outer.ZTLSKEM = nil, nil, nil
	outer.PSKIdentities, outer.PSKBinders = nil, nil
	if err := greasePSK(inner, &outer, r); err != nil {
		return nil, err
	}
	outer.Extra = nil
	for _, x := range inner.Extra {
		if x.Type != ech.ExtEncryptedClientHello {
			outer.Extra = append(outer.Extra, x)
		}
	}
	return &outer, nil
}

// encodeInner returns the EncodedClientHelloInner of the marshalled
// ClientHelloInner innerRaw (RFC 9849, Section 5.1): the extensions outer
// carries as they are (with x, whose payload is a placeholder) replaced
// by ech_outer_extensions, padded for maxNameLength (Section 6.1.3).
func encodeInner(outer *wire.ClientHello, x *ech.ClientExtension, innerRaw []byte, maxNameLength uint8) ([]byte, error) {
	draft, err := marshalOuter(outer, x)
	if err != nil {
		return nil, err
	}
	compress, err := ech.Compressible(innerRaw[4:], draft[4:])
	if err != nil {
		return nil, err
	}
	return ech.EncodeInner(innerRaw[4:], compress, maxNameLength)
}

// greaseTicketLen is the identity length of a GREASE PSK when the inner
// ClientHello has no ticket to copy the length of: about this engine's
// own tickets' size.
const greaseTicketLen = 208

// greasePSK gives the outer ClientHello a pre_shared_key no server can
// use (RFC 9849, Section 6.1.2): a random identity, age and binder of the
// lengths of the inner's ticket, or, when the inner offers early data
// without one (ZTLS), of a typical ticket. The outer then carries early
// data the way a resumption does, which servers that reject ECH expect
// (Go's crypto/tls refuses early_data without pre_shared_key), and looks
// like one to the path.
func greasePSK(inner, outer *wire.ClientHello, rand io.Reader) error {
	idLen, binderLen := greaseTicketLen, 32
	switch {
	case len(inner.PSKIdentities) > 0 && len(inner.PSKBinders) > 0:
		idLen, binderLen = len(inner.PSKIdentities[0].Identity), len(inner.PSKBinders[0])
	case !outer.EarlyData:
		return nil
	}
	r := make([]byte, idLen+4+binderLen)
	if _, err := io.ReadFull(rand, r); err != nil {
		return err
	}
	outer.PSKIdentities = []wire.PSKIdentity{{Identity: r[:idLen], ObfuscatedTicketAge: binary.BigEndian.Uint32(r[idLen:])}}
	outer.PSKBinders = [][]byte{r[idLen+4:]}
	if len(outer.PSKModes) == 0 {
		outer.PSKModes = []uint8{uint8(PSKModeDHEKE)}
	}
	return nil
}

// marshalOuter marshals outer with x as the last of its Extra
// extensions (before early_data), replacing the x of an earlier call.
func marshalOuter(outer *wire.ClientHello, x *ech.ClientExtension) ([]byte, error) {
	data, err := x.Marshal()
	if err != nil {
		return nil, err
	}
	n := len(outer.Extra)
	if n > 0 && outer.Extra[n-1].Type == ech.ExtEncryptedClientHello {
		n--
	}
	outer.Extra = append(outer.Extra[:n:n], wire.Extension{Type: ech.ExtEncryptedClientHello, Data: data})
	return outer.Marshal()
}

// checkECHServerHello reads the acceptance signal (RFC 9849, Section
// 7.2): the last 8 bytes of ServerHello.random, computed over the inner
// transcript. Without it the server used the outer ClientHello, and so
// does the rest of the handshake. A HelloRetryRequest carries its own
// signal (checkECHRetryRequest).
func (e *engine) checkECHServerHello(p *clientHelloParams, sh *wire.ServerHello) error {
	st := p.ech
	if st == nil || st.grease {
		return nil
	}
	if sh.IsHelloRetryRequest() {
		return e.checkECHRetryRequest(p, sh)
	}
	s := suite.Lookup(sh.CipherSuite)
	if st.status == ECHRejected || s == nil || len(sh.Raw) < 4+2+32 {
		return nil // rejected at the HelloRetryRequest, or refused by the ServerHello's own checks
	}
	at := 4 + 2 + 32 - ech.ConfirmationLen
	zeroed := append([]byte(nil), sh.Raw...)
	clear(zeroed[at : at+ech.ConfirmationLen])
	t := p.transcript // after a HelloRetryRequest: the inner one, hash set
	if !p.afterHRR || t.Hash() != s.Hash {
		t = keyschedule.NewTranscript(s.Hash)
		t.Write(p.raw)
	}
	want := ech.AcceptConfirmation(s.Hash, p.hello.Random[:], t.HashOf(zeroed))
	accepted := hmac.Equal(want, sh.Raw[at:at+ech.ConfirmationLen])
	switch {
	case accepted:
		st.status = ECHAccepted
		e.info.ECH = ECHAccepted
	case st.status == ECHAccepted:
		return errorf(AlertIllegalParameter, "server accepted ECH in its HelloRetryRequest but not in its ServerHello")
	default:
		e.rejectECH(p)
	}
	return nil
}

// checkECHRetryRequest reads a HelloRetryRequest's encrypted_client_hello
// extension (RFC 9849, Section 7.2.1): its 8 bytes are the signal over
// the inner ClientHello's message_hash and the HelloRetryRequest with
// those bytes zero. The extension is taken out of sh.Extra.
func (e *engine) checkECHRetryRequest(p *clientHelloParams, sh *wire.ServerHello) error {
	var x *wire.Extension
	for i := range sh.Extra {
		if sh.Extra[i].Type == ech.ExtEncryptedClientHello {
			x = &wire.Extension{Type: sh.Extra[i].Type, Data: sh.Extra[i].Data}
			sh.Extra = append(sh.Extra[:i:i], sh.Extra[i+1:]...)
			break
		}
	}
	s := suite.Lookup(sh.CipherSuite)
	if p.afterHRR || p.ech.status != ECHNone || s == nil {
		return nil // refused by the HelloRetryRequest's own checks
	}
	if x != nil {
		if len(x.Data) != ech.ConfirmationLen {
			return errorf(AlertDecodeError, "HelloRetryRequest's encrypted_client_hello of %d bytes", len(x.Data))
		}
		pattern := append([]byte{0xfe, 0x0d, 0, ech.ConfirmationLen}, x.Data...) // type, length, signal
		i := bytes.LastIndex(sh.Raw, pattern) + 4
		zeroed := append([]byte(nil), sh.Raw...)
		clear(zeroed[i : i+ech.ConfirmationLen])
		t := keyschedule.NewTranscript(s.Hash)
		t.Write(p.raw)
		t.RestartWithMessageHash()
		if hmac.Equal(x.Data, ech.AcceptConfirmationHRR(s.Hash, p.hello.Random[:], t.HashOf(zeroed))) {
			p.ech.status = ECHAccepted
			e.info.ECH = ECHAccepted
			return nil
		}
	}
	e.rejectECH(p)
	return e.reGreaseECH(p)
}

// reGreaseECH makes the encrypted_client_hello of the second outer
// ClientHello after a rejecting HelloRetryRequest: the same config id and
// suite, an empty enc, and a payload of the same length that no server
// will read (RFC 9849, Section 6.1.5; the server ignores it).
func (e *engine) reGreaseECH(p *clientHelloParams) error {
	st := p.ech
	for i, x := range p.hello.Extra {
		if x.Type != ech.ExtEncryptedClientHello {
			continue
		}
		old, err := ech.ParseClientExtension(x.Data)
		if err != nil {
			return err
		}
		old.Enc = nil
		if _, err := io.ReadFull(e.cfg.rand(), old.Payload); err != nil {
			return err
		}
		data, err := old.Marshal()
		if err != nil {
			return err
		}
		extra := append([]wire.Extension(nil), p.hello.Extra...)
		extra[i].Data = data
		p.hello.Extra = extra
	}
	st.outer = p.hello
	return nil
}

// rejectECH moves the handshake to the outer ClientHello: its transcript,
// no PSK, no Z-data, and the public name as the name the certificate
// must be valid for (RFC 9849, Section 6.1.7). Early data was sent under
// the inner ClientHello's keys: the server cannot read it and does not
// accept it (the outer offers nothing it could be accepted under).
func (e *engine) rejectECH(p *clientHelloParams) {
	st := p.ech
	st.status = ECHRejected
	e.info.ECH = ECHRejected
	p.hello, p.raw = st.outer, st.outerRaw
	p.transcript = keyschedule.NewPendingTranscript()
	p.transcript.Write(st.outerRaw)
	p.session, p.pskSecret = nil, nil
	p.ztls, p.ztlsSecret, p.ztlsSuite, p.zverdict = nil, nil, nil, nil
	cfg := e.cfg.Clone()
	cfg.ServerName = st.config.PublicName
	cfg.VerifiedChains = nil // its answers are for the inner name
	cfg.ECHConfigList = nil
	e.cfg = cfg
	e.serverName = st.config.PublicName
}

// readECHRetryConfigs takes the encrypted_client_hello extension out of
// the EncryptedExtensions' unknown ones: retry_configs after a rejection
// (kept for the error), ignored after GREASE (Section 6.2), refused
// after an acceptance or without an offer.
func (e *engine) readECHRetryConfigs(p *clientHelloParams, extra []wire.Extension) ([]wire.Extension, error) {
	var rest []wire.Extension
	for _, x := range extra {
		if x.Type != ech.ExtEncryptedClientHello || p.ech == nil {
			rest = append(rest, x)
			continue
		}
		st := p.ech
		switch {
		case st.grease:
		case st.status == ECHAccepted:
			return nil, errorf(AlertUnsupportedExtension, "server sent ECH retry configs after accepting ECH")
		default:
			if _, err := ech.ParseConfigList(x.Data); err != nil {
				return nil, errorf(AlertDecodeError, "the server's ECH retry_configs: %v", err)
			}
			st.retry = append([]byte(nil), x.Data...)
		}
	}
	return rest, nil
}

// checkECHRejected ends a handshake whose ECH was rejected, once the
// server's Finished has authenticated the public name: ech_required,
// and the error with the retry configs (RFC 9849, Section 6.1.6).
func (e *engine) checkECHRejected(p *clientHelloParams) error {
	if p.ech == nil || p.ech.status != ECHRejected {
		return nil
	}
	return &LocalError{Alert: AlertECHRequired, Err: &ECHRejectedError{PublicName: p.ech.config.PublicName, RetryConfigList: p.ech.retry}}
}
