package keyschedule

import (
	"bytes"
	"crypto"
	"crypto/hkdf"
	"crypto/hmac"
	sha2 "crypto/sha256" // also links crypto.SHA256
	sha5 "crypto/sha512" // also links crypto.SHA384
	"errors"
	"fmt"
	"hash"
	"sync"
)

// ivLen is the AEAD nonce length of every TLS 1.3 cipher suite
// (RFC 8446, Section 5.3: iv_length is at least 8 and the three suites use 12).
const ivLen = 12

// maxLabelLen is the longest label ExpandLabel accepts: HkdfLabel.label is
// opaque<7..255> and carries the 6-byte "tls13 " prefix.
const maxLabelLen = 255 - len(labelPrefix)

const labelPrefix = "tls13 "

// hkdfLabel builds the HkdfLabel structure of RFC 8446, Section 7.1:
//
//	struct {
//	    uint16 length = Length;
//	    opaque label<7..255> = "tls13 " + Label;
//	    opaque context<0..255> = Context;
//	} HkdfLabel;
func hkdfLabel(label string, context []byte, length int) ([]byte, error) {
	return appendHkdfLabel(make([]byte, 0, 2+1+len(labelPrefix)+len(label)+1+len(context)), label, context, length)
}

// maxHkdfLabel is the longest HkdfLabel: length, label<7..255>, context<0..255>.
const maxHkdfLabel = 2 + 1 + 255 + 1 + 255

// appendHkdfLabel appends the HkdfLabel of hkdfLabel to b.
func appendHkdfLabel(b []byte, label string, context []byte, length int) ([]byte, error) {
	if len(label) > maxLabelLen {
		return nil, fmt.Errorf("keyschedule: label is %d bytes, at most %d fit in HkdfLabel", len(label), maxLabelLen)
	}
	if len(context) > 255 {
		return nil, fmt.Errorf("keyschedule: context is %d bytes, at most 255 fit in HkdfLabel", len(context))
	}
	if length < 0 || length > 0xffff {
		return nil, fmt.Errorf("keyschedule: output length %d out of range", length)
	}
	b = append(b, byte(length>>8), byte(length))
	b = append(b, byte(len(labelPrefix)+len(label)))
	b = append(b, labelPrefix...)
	b = append(b, label...)
	b = append(b, byte(len(context)))
	b = append(b, context...)
	return b, nil
}

func checkHash(h crypto.Hash) error {
	if !h.Available() {
		return fmt.Errorf("keyschedule: hash %v is not available", h)
	}
	return nil
}

// expandLabel is ExpandLabel with the reason for a failure.
func expandLabel(h crypto.Hash, secret []byte, label string, context []byte, length int) ([]byte, error) {
	if err := checkHash(h); err != nil {
		return nil, err
	}
	if length <= h.Size() {
		var sum [maxHashSize]byte
		if out, ok, err := expandLabelBlock(&sum, h, secret, label, context, length); ok || err != nil {
			return bytes.Clone(out), err
		}
	}
	info, err := hkdfLabel(label, context, length)
	if err != nil {
		return nil, err
	}
	if length <= h.Size() {
		mac := hmac.New(h.New, secret)
		mac.Write(info)
		mac.Write([]byte{1})
		return mac.Sum(nil)[:length], nil
	}
	out, err := hkdf.Expand(h.New, secret, string(info), length)
	if err != nil {
		return nil, fmt.Errorf("keyschedule: %w", err)
	}
	return out, nil
}

// expandLabelBlock computes an HKDF-Expand-Label output of at most one
// hash block into out, without allocating: every TLS 1.3 derivation fits
// one block, T(1) = HMAC(secret, info || 0x01) (RFC 5869, Section 2.3).
// ok is false, with no error, when sumHMAC does not cover h or the secret.
func expandLabelBlock(out *[maxHashSize]byte, h crypto.Hash, secret []byte, label string, context []byte, length int) (_ []byte, ok bool, _ error) {
	var ib [maxHkdfLabel + 1]byte // on the stack: sumHMAC keeps nothing
	info, err := appendHkdfLabel(ib[:0], label, context, length)
	if err != nil {
		return nil, false, err
	}
	sum, ok := sumHMAC(out, h, secret, append(info, 1))
	if !ok {
		return nil, false, nil
	}
	return sum[:length], true, nil
}

// ExpandLabelInto is ExpandLabel with len(out) as the length, writing into
// out instead of allocating, for callers that keep the output in their own
// memory (the record layer's key and IV). It reports whether it could.
func ExpandLabelInto(out []byte, h crypto.Hash, secret []byte, label string, context []byte) bool {
	if checkHash(h) != nil {
		return false
	}
	if len(out) <= h.Size() {
		var sum [maxHashSize]byte
		b, ok, err := expandLabelBlock(&sum, h, secret, label, context, len(out))
		copy(out, b)
		clear(sum[:])
		if ok || err != nil {
			return ok
		}
	}
	b, err := expandLabel(h, secret, label, context, len(out))
	copy(out, b)
	clear(b)
	return err == nil
}

// ExpandLabel is HKDF-Expand-Label of RFC 8446, Section 7.1: HKDF-Expand of
// secret with an HkdfLabel whose label is "tls13 " + label. It returns nil if
// h is not linked into the binary or the inputs cannot be encoded (label
// longer than 249 bytes, context longer than 255 bytes, or length beyond
// 255*h.Size()); the fixed labels of TLS 1.3 never hit these limits.
func ExpandLabel(h crypto.Hash, secret []byte, label string, context []byte, length int) []byte {
	out, _ := expandLabel(h, secret, label, context, length)
	return out
}

// DeriveSecret is Derive-Secret of RFC 8446, Section 7.1, taking the
// transcript hash rather than the messages:
// ExpandLabel(h, secret, label, transcriptHash, h.Size()).
func DeriveSecret(h crypto.Hash, secret []byte, label string, transcriptHash []byte) []byte {
	return ExpandLabel(h, secret, label, transcriptHash, h.Size())
}

// emptyHashes caches Hash("") per hash function.
var emptyHashes sync.Map // crypto.Hash -> []byte

// emptyHash returns Hash(""), the context of Derive-Secret(., ., "").
// Callers must not modify it.
func emptyHash(h crypto.Hash) []byte {
	if !h.Available() {
		return nil
	}
	if v, ok := emptyHashes.Load(h); ok {
		return v.([]byte)
	}
	sum := h.New().Sum(nil)
	emptyHashes.Store(h, sum)
	return sum
}

// extract is HKDF-Extract(salt, ikm), with an all-zero salt or ikm of
// h.Size() bytes when they are nil (RFC 8446, Section 7.1: "0" means a
// string of Hash.length zero bytes). The result is written into out when
// sumHMAC covers h, and allocated otherwise; nil if h is not available.
func extract(out *[maxHashSize]byte, h crypto.Hash, salt, ikm []byte) []byte {
	if !h.Available() || h.Size() > len(zeros) {
		return nil
	}
	if ikm == nil {
		ikm = zeros[:h.Size()]
	}
	if salt == nil {
		salt = zeros[:h.Size()]
	}
	if sum, ok := sumHMAC(out, h, salt, ikm); ok { // HKDF-Extract is HMAC(salt, ikm)
		return sum
	}
	// Copies, so that callers' stack buffers do not escape through hkdf.
	sum, err := hkdf.Extract(h.New, bytes.Clone(ikm), bytes.Clone(salt))
	if err != nil {
		return nil
	}
	return sum
}

// zeros is the all-zero salt and IKM of HKDF-Extract; only read.
var zeros [maxHashSize]byte

// maxHMACBlock and maxHMACMessage bound sumHMAC's stack buffers: SHA-384's
// block, and an HkdfLabel with its counter byte (longer than any IKM the
// key schedule extracts from: a hybrid or ZTLS-with-BFE secret is 64 bytes).
const (
	maxHMACBlock   = 128
	maxHMACMessage = maxHkdfLabel + 1
)

// maxHashSize is the longest output of a hash the key schedule runs on
// without allocating (SHA-384's 48 bytes, rounded up to SHA-512's).
const maxHashSize = 64

// sumHMAC is HMAC-h(key, msg) of RFC 2104, H((K ^ opad) || H((K ^ ipad) ||
// msg)), for SHA-256 and SHA-384 with a key no longer than the hash's
// block (every key the key schedule uses: secrets and salts are one hash
// long): computed in stack buffers, without hmac.New's allocations, since
// a handshake runs it some forty times. ok is false for anything else,
// which the caller computes with crypto/hmac. Nothing depends on the
// key's bytes but XORs; the buffers are cleared before it returns. The MAC
// is written into out and returned as a slice of it.
func sumHMAC(out *[maxHashSize]byte, h crypto.Hash, key, msg []byte) (_ []byte, ok bool) {
	var block int
	switch h {
	case crypto.SHA256:
		block = sha2.BlockSize
	case crypto.SHA384:
		block = sha5.BlockSize
	default:
		return nil, false
	}
	if len(key) > block || len(msg) > maxHMACMessage {
		return nil, false
	}
	var in [maxHMACBlock + maxHMACMessage]byte
	var outer [maxHMACBlock + sha5.Size384]byte
	defer clear(in[:])
	defer clear(outer[:])
	copy(in[:], key)
	copy(outer[:], key)
	for i := range block {
		in[i] ^= 0x36
		outer[i] ^= 0x5c
	}
	n := block + copy(in[block:], msg)
	if h == crypto.SHA256 {
		inner := sha2.Sum256(in[:n])
		copy(outer[block:], inner[:])
		sum := sha2.Sum256(outer[:block+sha2.Size])
		return out[:copy(out[:], sum[:])], true
	}
	inner := sha5.Sum384(in[:n])
	copy(outer[block:], inner[:])
	sum := sha5.Sum384(outer[:block+sha5.Size384])
	return out[:copy(out[:], sum[:])], true
}

// stage holds the secret of one key schedule stage. The secret lives in
// buf when sumHMAC computed it, so a stage is one allocation. key holds
// the HMAC states keyed by the secret, which every derivation from the
// stage reuses; saltKey, set only on the shared no-PSK early stages (a
// public constant), is keyed by the next stage's salt.
type stage struct {
	hash    crypto.Hash
	secret  []byte
	buf     [maxHashSize]byte
	key     hmacKey
	saltKey *hmacKey
}

// newStage returns the stage whose secret is HKDF-Extract(salt, ikm), or
// nil if h is not available.
func newStage(h crypto.Hash, salt, ikm []byte) *stage {
	st := &stage{hash: h}
	if st.secret = extract(&st.buf, h, salt, ikm); st.secret == nil {
		return nil
	}
	st.key.init(h, st.secret)
	return st
}

// newStageKeyed is newStage with the salt's HMAC states already keyed.
func newStageKeyed(h crypto.Hash, salt *hmacKey, ikm []byte) *stage {
	if ikm == nil {
		ikm = zeros[:h.Size()]
	}
	st := &stage{hash: h}
	sum, ok := salt.sum(&st.buf, ikm)
	if !ok {
		return nil
	}
	st.secret = sum
	st.key.init(h, st.secret)
	return st
}

// noPSKStages are the early stages HKDF-Extract(0, 0) of SHA-256 and
// SHA-384, with their "derived" salts keyed: both are public constants
// (no PSK), computed once and shared.
var noPSKStages [2]struct {
	once sync.Once
	st   *stage
}

// noPSKStage returns the shared early stage of h without a PSK, or nil
// if h is neither SHA-256 nor SHA-384.
func noPSKStage(h crypto.Hash) *stage {
	i, _, ok := hashIndex(h)
	if !ok {
		return nil
	}
	c := &noPSKStages[i]
	c.once.Do(func() {
		st := newStage(h, nil, nil)
		var sb [maxHashSize]byte
		salt, ok, _ := st.key.expandLabelBlock(&sb, "derived", emptyHash(h), h.Size())
		sk := new(hmacKey)
		if ok && sk.init(h, salt) {
			st.saltKey = sk
			c.st = st
		}
	})
	return c.st
}

// sealed hides a stage behind a closure. The stage types hold one, so that
// fmt, which reflects into unexported fields it cannot call String on,
// finds only a func value (printed as an address) and never the secret.
type sealed func() *stage

func seal(s *stage) sealed {
	if s == nil {
		return nil
	}
	return func() *stage { return s }
}

// open returns the stage, or nil for a zero value.
func (f sealed) open() *stage {
	if f == nil {
		return nil
	}
	return f()
}

func (s *stage) derive(label string, transcriptHash []byte) []byte {
	if s == nil {
		return nil
	}
	return s.expand(label, transcriptHash, s.hash.Size())
}

// expand is ExpandLabel(secret, label, context, length) through the
// stage's keyed HMAC states when the output fits one block.
func (s *stage) expand(label string, context []byte, length int) []byte {
	var sum [maxHashSize]byte
	if b, ok, err := s.key.expandLabelBlock(&sum, label, context, length); ok || err != nil {
		out := bytes.Clone(b)
		clear(sum[:])
		return out
	}
	return ExpandLabel(s.hash, s.secret, label, context, length)
}

// next computes the following stage's secret:
// HKDF-Extract(Derive-Secret(secret, "derived", ""), ikm).
func (s *stage) next(ikm []byte) *stage {
	if s == nil {
		return nil
	}
	if s.saltKey.keyed() {
		return newStageKeyed(s.hash, s.saltKey, ikm)
	}
	var sb [maxHashSize]byte
	defer clear(sb[:])
	salt, ok, _ := s.key.expandLabelBlock(&sb, "derived", emptyHash(s.hash), s.hash.Size())
	if !ok {
		if salt = DeriveSecret(s.hash, s.secret, "derived", emptyHash(s.hash)); salt == nil {
			return nil
		}
	}
	return newStage(s.hash, salt, ikm)
}

// formatSecret prints "<secret>" for every fmt verb, %#v and %+v included.
func formatSecret(f fmt.State) { _, _ = f.Write([]byte("<secret>")) }

// EarlySecret is the first stage of the key schedule (RFC 8446, Section 7.1):
// HKDF-Extract(0, PSK). ZTLS enters it with its semi-static DH secret in
// place of the PSK. The zero value holds no secret; its methods return nil.
type EarlySecret struct{ k sealed }

// NewEarlySecret computes the early secret HKDF-Extract(0, ikm). A nil ikm
// (no PSK) means h.Size() zero bytes, as RFC 8446, Section 7.1 specifies.
func NewEarlySecret(h crypto.Hash, ikm []byte) EarlySecret {
	if ikm == nil {
		if st := noPSKStage(h); st != nil {
			return EarlySecret{seal(st)}
		}
	}
	st := newStage(h, nil, ikm)
	if st == nil {
		return EarlySecret{}
	}
	return EarlySecret{seal(st)}
}

// Hash returns the hash the schedule runs on (zero for the zero value).
func (s EarlySecret) Hash() crypto.Hash {
	if st := s.k.open(); st != nil {
		return st.hash
	}
	return 0
}

// ResumptionBinderKey is Derive-Secret(ES, "res binder", ""), the base key
// of resumption PSK binders (RFC 8446, Section 4.2.11.2).
func (s EarlySecret) ResumptionBinderKey() []byte { return s.BinderKey("res binder") }

// BinderKey is Derive-Secret(ES, label, "") for any binder label: "ext
// binder" for external PSKs, "ztls binder" for ZTLS.
func (s EarlySecret) BinderKey(label string) []byte {
	st := s.k.open()
	if st == nil {
		return nil
	}
	return st.derive(label, emptyHash(st.hash))
}

// ClientEarlyTrafficSecret is Derive-Secret(ES, "c e traffic", ClientHello),
// given the transcript hash of the ClientHello.
func (s EarlySecret) ClientEarlyTrafficSecret(transcriptHash []byte) []byte {
	return s.k.open().derive("c e traffic", transcriptHash)
}

// EarlyExporterMasterSecret is Derive-Secret(ES, "e exp master",
// ClientHello).
func (s EarlySecret) EarlyExporterMasterSecret(transcriptHash []byte) []byte {
	return s.k.open().derive("e exp master", transcriptHash)
}

// Expand returns HKDF-Expand-Label(ES, label, "", length), for derivations
// outside RFC 8446 such as ZTLS's "ztls time" mask.
func (s EarlySecret) Expand(label string, length int) []byte {
	st := s.k.open()
	if st == nil {
		return nil
	}
	return st.expand(label, nil, length)
}

// HandshakeSecret moves to the next stage:
// HKDF-Extract(Derive-Secret(ES, "derived", ""), sharedSecret), where
// sharedSecret is the (EC)DHE output. A nil sharedSecret (PSK-only key
// exchange, psk_ke) means h.Size() zero bytes, RFC 8446, Section 7.1.
func (s EarlySecret) HandshakeSecret(sharedSecret []byte) HandshakeSecret {
	return HandshakeSecret{seal(s.k.open().next(sharedSecret))}
}

// String returns "<secret>".
func (EarlySecret) String() string { return "<secret>" }

// Format prints "<secret>" whatever the verb.
func (EarlySecret) Format(f fmt.State, _ rune) { formatSecret(f) }

// HandshakeSecret is the second stage of the key schedule, from which the
// handshake traffic secrets derive. The zero value holds no secret; its
// methods return nil.
type HandshakeSecret struct{ k sealed }

// Hash returns the hash the schedule runs on (zero for the zero value).
func (s HandshakeSecret) Hash() crypto.Hash {
	if st := s.k.open(); st != nil {
		return st.hash
	}
	return 0
}

// ClientHandshakeTrafficSecret is Derive-Secret(HS, "c hs traffic",
// ClientHello...ServerHello).
func (s HandshakeSecret) ClientHandshakeTrafficSecret(transcriptHash []byte) []byte {
	return s.k.open().derive("c hs traffic", transcriptHash)
}

// ServerHandshakeTrafficSecret is Derive-Secret(HS, "s hs traffic",
// ClientHello...ServerHello).
func (s HandshakeSecret) ServerHandshakeTrafficSecret(transcriptHash []byte) []byte {
	return s.k.open().derive("s hs traffic", transcriptHash)
}

// MasterSecret moves to the last stage:
// HKDF-Extract(Derive-Secret(HS, "derived", ""), 0).
func (s HandshakeSecret) MasterSecret() MasterSecret {
	return MasterSecret{seal(s.k.open().next(nil))}
}

// String returns "<secret>".
func (HandshakeSecret) String() string { return "<secret>" }

// Format prints "<secret>" whatever the verb.
func (HandshakeSecret) Format(f fmt.State, _ rune) { formatSecret(f) }

// MasterSecret is the last stage of the key schedule, from which the
// application traffic, exporter and resumption secrets derive. The zero
// value holds no secret; its methods return nil.
type MasterSecret struct{ k sealed }

// Hash returns the hash the schedule runs on (zero for the zero value).
func (s MasterSecret) Hash() crypto.Hash {
	if st := s.k.open(); st != nil {
		return st.hash
	}
	return 0
}

// ClientApplicationTrafficSecret is Derive-Secret(MS, "c ap traffic",
// ClientHello...server Finished).
func (s MasterSecret) ClientApplicationTrafficSecret(transcriptHash []byte) []byte {
	return s.k.open().derive("c ap traffic", transcriptHash)
}

// ServerApplicationTrafficSecret is Derive-Secret(MS, "s ap traffic",
// ClientHello...server Finished).
func (s MasterSecret) ServerApplicationTrafficSecret(transcriptHash []byte) []byte {
	return s.k.open().derive("s ap traffic", transcriptHash)
}

// ExporterMasterSecret is Derive-Secret(MS, "exp master",
// ClientHello...server Finished).
func (s MasterSecret) ExporterMasterSecret(transcriptHash []byte) []byte {
	return s.k.open().derive("exp master", transcriptHash)
}

// ResumptionMasterSecret is Derive-Secret(MS, "res master",
// ClientHello...client Finished).
func (s MasterSecret) ResumptionMasterSecret(transcriptHash []byte) []byte {
	return s.k.open().derive("res master", transcriptHash)
}

// String returns "<secret>".
func (MasterSecret) String() string { return "<secret>" }

// Format prints "<secret>" whatever the verb.
func (MasterSecret) Format(f fmt.State, _ rune) { formatSecret(f) }

// TrafficKeys derives the record protection key (keyLen bytes) and the
// 12-byte IV from a traffic secret (RFC 8446, Section 7.3); nil, nil if it
// cannot.
func TrafficKeys(h crypto.Hash, keyLen int, trafficSecret []byte) (key, iv []byte) {
	key, iv = make([]byte, keyLen), make([]byte, ivLen)
	if !TrafficKeysInto(key, iv, h, trafficSecret) {
		return nil, nil
	}
	return key, iv
}

// TrafficKeysInto is TrafficKeys writing the key into key (its length is
// the key's) and the IV into iv (12 bytes), for a caller that keeps them
// in its own memory: the record layer derives them on its stack. It
// reports whether it could.
func TrafficKeysInto(key, iv []byte, h crypto.Hash, trafficSecret []byte) bool {
	if len(iv) != ivLen {
		return false
	}
	if _, _, ok := hashIndex(h); ok && len(key) <= h.Size() { // one HMAC key for both: the pad blocks hashed once
		var k hmacKey
		defer k.clear()
		if k.init(h, trafficSecret) {
			return k.expandInto(key, "key") && k.expandInto(iv, "iv")
		}
	}
	return ExpandLabelInto(key, h, trafficSecret, "key", nil) &&
		ExpandLabelInto(iv, h, trafficSecret, "iv", nil)
}

// NextTrafficSecret is application_traffic_secret_N+1 of RFC 8446,
// Section 7.2, used after a KeyUpdate.
func NextTrafficSecret(h crypto.Hash, secret []byte) []byte {
	return ExpandLabel(h, secret, "traffic upd", nil, h.Size())
}

// FinishedKey is HKDF-Expand-Label(BaseKey, "finished", "", Hash.length)
// (RFC 8446, Section 4.4.4). BaseKey is a handshake traffic secret for
// Finished or a binder key for PSK binders.
func FinishedKey(h crypto.Hash, baseKey []byte) []byte {
	return ExpandLabel(h, baseKey, "finished", nil, h.Size())
}

// FinishedMAC computes verify_data = HMAC(finished_key, transcriptHash)
// (RFC 8446, Section 4.4.4); with a binder key as baseKey and the hash of the
// truncated ClientHello it is the PSK binder (RFC 8446, Section 4.2.11.2).
func FinishedMAC(h crypto.Hash, baseKey, transcriptHash []byte) []byte {
	var sum [maxHashSize]byte
	mac := finishedMAC(&sum, h, baseKey, transcriptHash)
	if mac == nil {
		return nil
	}
	out := bytes.Clone(mac)
	clear(sum[:])
	return out
}

// finishedMAC is FinishedMAC writing into out where sumHMAC covers h (the
// finished key then never leaves the stack).
func finishedMAC(out *[maxHashSize]byte, h crypto.Hash, baseKey, transcriptHash []byte) []byte {
	if !h.Available() {
		return nil
	}
	var kb [maxHashSize]byte
	defer clear(kb[:])
	if key, ok, _ := expandLabelBlock(&kb, h, baseKey, "finished", nil, h.Size()); ok {
		if mac, ok := sumHMAC(out, h, key, transcriptHash); ok {
			return mac
		}
	}
	mac := hmac.New(h.New, FinishedKey(h, baseKey))
	mac.Write(transcriptHash)
	return mac.Sum(nil)
}

// VerifyFinished reports whether verifyData is the Finished MAC (or binder)
// for baseKey and transcriptHash, comparing in constant time.
func VerifyFinished(h crypto.Hash, baseKey, transcriptHash, verifyData []byte) bool {
	var sum [maxHashSize]byte
	defer clear(sum[:])
	want := finishedMAC(&sum, h, baseKey, transcriptHash)
	return want != nil && hmac.Equal(want, verifyData)
}

// ResumptionPSK derives the PSK of a session ticket from the resumption
// master secret and the ticket_nonce (RFC 8446, Section 4.6.1).
func ResumptionPSK(h crypto.Hash, resumptionMaster, ticketNonce []byte) []byte {
	return ExpandLabel(h, resumptionMaster, "resumption", ticketNonce, h.Size())
}

// Exporter is TLS-Exporter of RFC 8446, Section 7.5:
//
//	HKDF-Expand-Label(Derive-Secret(exporterMaster, label, ""),
//	                  "exporter", Hash(context), length)
//
// exporterMaster is the (early) exporter master secret. Exporter returns nil
// when label or length cannot be encoded; ExportKeyingMaterial reports why.
func Exporter(h crypto.Hash, exporterMaster []byte, label string, context []byte, length int) []byte {
	out, _ := ExportKeyingMaterial(h, exporterMaster, label, context, length)
	return out
}

// ExportKeyingMaterial is Exporter with an error for inputs that cannot be
// encoded (a label over 249 bytes, length over 255*h.Size()), for callers that
// pass labels and lengths chosen by an application.
func ExportKeyingMaterial(h crypto.Hash, exporterMaster []byte, label string, context []byte, length int) ([]byte, error) {
	if err := checkHash(h); err != nil {
		return nil, err
	}
	if len(exporterMaster) == 0 {
		return nil, errors.New("keyschedule: no exporter master secret")
	}
	secret, err := expandLabel(h, exporterMaster, label, emptyHash(h), h.Size())
	if err != nil {
		return nil, err
	}
	ctxHash := hashOf(h, context)
	return expandLabel(h, secret, "exporter", ctxHash, length)
}

func hashOf(h crypto.Hash, b []byte) []byte {
	d := h.New()
	d.Write(b)
	return d.Sum(nil)
}

// cloneHash returns an independent copy of a running hash, or nil if the
// implementation supports neither hash.Cloner nor binary marshaling (every
// hash in the standard library supports both).
func cloneHash(h crypto.Hash, d hash.Hash) hash.Hash {
	if c, ok := d.(hash.Cloner); ok {
		if cp, err := c.Clone(); err == nil {
			return cp
		}
	}
	m, ok := d.(interface{ MarshalBinary() ([]byte, error) })
	if !ok {
		return nil
	}
	st, err := m.MarshalBinary()
	if err != nil {
		return nil
	}
	cp := h.New()
	u, ok := cp.(interface{ UnmarshalBinary([]byte) error })
	if !ok || u.UnmarshalBinary(st) != nil {
		return nil
	}
	return cp
}
