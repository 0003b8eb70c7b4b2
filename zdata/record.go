package zdata

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/idna"

	"github.com/ztls-project/ztls/bfe"
	"github.com/ztls-project/ztls/tls13"
)

// Groups and signature schemes ztls v1 allows (docs/ztls-spec.md, Section
// 1): tls13's named codepoints, which print their IANA names.
const (
	GroupX25519    = tls13.X25519 // 29 x25519
	GroupSecp256r1 = tls13.P256   // 23 secp256r1
	// GroupX25519MLKEM768 (4588) is the post-quantum hybrid of v3 records
	// only (docs/ztls-spec.md, Section 9).
	GroupX25519MLKEM768 = tls13.X25519MLKEM768

	SchemeRSAPSSSHA256    = tls13.PSSWithSHA256          // 2052 rsa_pss_rsae_sha256
	SchemeECDSAP256SHA256 = tls13.ECDSAWithP256AndSHA256 // 1027 ecdsa_secp256r1_sha256
	SchemeECDSAP384SHA384 = tls13.ECDSAWithP384AndSHA384 // 1283 ecdsa_secp384r1_sha384
	SchemeEd25519         = tls13.Ed25519                // 2055 ed25519
)

// MaxValidity is the longest window from not-before to not-after a client
// accepts, and ClockSkew the slack it allows before not-before when no
// record is valid by its clock (a clock behind the server's; servers take a
// key only from its not-before, tls13.ZDataLive).
const (
	MaxValidity = time.Hour
	ClockSkew   = 60 * time.Second
)

// Version is the first character-string of every ztls v1 TXT record,
// Version2 of every v2 record (docs/ztls-spec.md, Section 7.1) and
// Version3 of every v3 (post-quantum) record (Section 9.2).
const (
	Version  = "v=ztls1"
	Version2 = "v=ztls2"
	Version3 = "v=ztls3"
)

const timeLayout = "20060102150405"

// Record is one Z-data record: the paper's fields plus the service it is
// bound to (Host and Port are signed but not published) and the SHA-256 of
// the TLSA leaf that signed it (also signed, not published).
//
// A Record parsed by ParseTXT remembers the exact published text of each
// field, so its signature input is computed from what the signer signed
// (a lower-case z, upper-case hex or a DER key share stay as they were);
// fields changed afterwards are encoded canonically. Records are not safe
// for concurrent mutation; read-only use from several goroutines is fine.
type Record struct {
	Host         string // A-label host the client connects to (SNI)
	Port         int
	NotBefore    time.Time // UTC, second precision
	NotAfter     time.Time // UTC, second precision
	MaxEarlyData uint32
	ID           uint32
	Group        tls13.CurveID
	KeyShare     []byte   // raw TLS key_exchange bytes for Group
	NSC          []uint16 // cipher suites the server does not support
	ALPN         string   // the early-data ALPN protocol; "" means none
	// V2 makes the record a ztls v2 record (docs/ztls-spec.md, Section
	// 7.1): v=ztls2, its own signature context, and room for BFE.
	V2 bool
	// V3 makes the record a ztls v3 record (docs/ztls-spec.md, Section
	// 9.2): v=ztls3, group X25519MLKEM768 only, its 1216-byte key share
	// over several character-strings, its own signature context, and the
	// v2 fields (bfe=). V2 and V3 are never both set.
	V3 bool
	// BFE is the bfe.PublicKey encoding of the v2 field bfe= (nil: none);
	// only a V2 or V3 record carries it.
	BFE        []byte
	ClientCert bool // the server sends CertificateRequest
	Scheme     tls13.SignatureScheme
	Signature  []byte
	LeafHash   [32]byte // SHA-256 of the TLSA leaf DER

	pub *published
}

// published is what ParseTXT saw: the trimmed text of fields 1–11 and the
// canonical text the parsed values had then.
type published struct {
	raw, canon [numSigned]string
}

// Indexes of the signed fields 1–11 (docs/ztls-spec.md, Section 1).
const (
	fVersion = iota
	fNotBefore
	fNotAfter
	fMaxEarly
	fID
	fGroup
	fShare
	fNSC
	fALPN
	fBFE // v2 only (docs/ztls-spec.md, Section 7.1)
	fClientCert
	fScheme
	numSigned
)

// CanonicalHost returns host as it is signed and sent as SNI: A-labels,
// lower case, no trailing dot.
func CanonicalHost(host string) (string, error) {
	h := strings.TrimSuffix(host, ".")
	if h == "" {
		return "", errors.New("zdata: empty host")
	}
	ascii := true
	for i := 0; i < len(h); i++ {
		if h[i] >= 0x80 {
			ascii = false
			break
		}
	}
	if !ascii {
		a, err := idna.Lookup.ToASCII(h)
		if err != nil {
			return "", fmt.Errorf("zdata: host %q: %v", host, err)
		}
		h = a
	}
	h = strings.ToLower(h)
	for i := 0; i < len(h); i++ {
		c := h[i]
		if c <= ' ' || c >= 0x7f || c == '"' || c == '\\' {
			return "", fmt.Errorf("zdata: host %q has an invalid character", host)
		}
	}
	if len(h) > 253 {
		return "", fmt.Errorf("zdata: host %q too long", host)
	}
	return h, nil
}

func hostOrLower(host string) string {
	if h, err := CanonicalHost(host); err == nil {
		return h
	}
	return strings.ToLower(strings.TrimSuffix(host, "."))
}

// TXTName returns the owner of the Z-data TXT (and CERT) RRset of a
// service: "_ztls._<port>._tcp.<host>." in lower-case A-labels.
func TXTName(host string, port int) string {
	return "_ztls._" + strconv.Itoa(port) + "._tcp." + hostOrLower(host) + "."
}

// TLSAName returns the owner of the service's TLSA RRset:
// "_<port>._tcp.<host>." (RFC 6698, Section 3).
func TLSAName(host string, port int) string {
	return "_" + strconv.Itoa(port) + "._tcp." + hostOrLower(host) + "."
}

func formatTime(t time.Time) string { return t.UTC().Format(timeLayout) + "Z" }

func formatNSC(nsc []uint16) string {
	if len(nsc) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("nsc=")
	for i, s := range nsc {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%04x", s)
	}
	return b.String()
}

// canonical returns fields 1–11 as this package writes them.
func (r *Record) canonical() [numSigned]string {
	var f [numSigned]string
	f[fVersion] = Version
	switch {
	case r.V3:
		f[fVersion] = Version3
	case r.V2:
		f[fVersion] = Version2
	}
	f[fNotBefore] = formatTime(r.NotBefore)
	f[fNotAfter] = formatTime(r.NotAfter)
	f[fMaxEarly] = strconv.FormatUint(uint64(r.MaxEarlyData), 10)
	f[fID] = strconv.FormatUint(uint64(r.ID), 10)
	f[fGroup] = strconv.FormatUint(uint64(r.Group), 10)
	f[fShare] = base64.StdEncoding.EncodeToString(r.KeyShare)
	f[fNSC] = formatNSC(r.NSC)
	if r.ALPN != "" {
		f[fALPN] = "alpn=" + r.ALPN
	}
	if r.hasBFEField() && len(r.BFE) > 0 {
		f[fBFE] = "bfe=" + base64.StdEncoding.EncodeToString(r.BFE)
	}
	f[fClientCert] = "N"
	if r.ClientCert {
		f[fClientCert] = "Y"
	}
	f[fScheme] = strconv.FormatUint(uint64(r.Scheme), 10)
	return f
}

// fields returns fields 1–11 as published: the parsed text where the value
// is unchanged since parsing, else the canonical text.
func (r *Record) fields() [numSigned]string {
	f := r.canonical()
	if r.pub != nil {
		for i := range f {
			if f[i] == r.pub.canon[i] {
				f[i] = r.pub.raw[i]
			}
		}
	}
	return f
}

// signatureContext starts every v1 signature input (docs/ztls-spec.md,
// Section 1), after 64 spaces, as in RFC 8446, Section 4.4.3;
// signatureContext2 every v2 one (Section 7.1), signatureContext3 every
// v3 one (Section 9.2).
const (
	signatureContext  = "ztls v1 Z-data"
	signatureContext2 = "ztls v2 Z-data"
	signatureContext3 = "ztls v3 Z-data"
)

// hasBFEField reports whether the record's version has the bfe= field
// (v2, Section 7.1, and v3, Section 9.2).
func (r *Record) hasBFEField() bool { return r.V2 || r.V3 }

// SignatureInput returns the bytes the leaf key signs (docs/ztls-spec.md,
// Section 1): 64 spaces, "ztls v1 Z-data", 0x00, then 14 elements each
// with a uint16 length: host, port, fields 1–11 and the leaf hash. A v2
// record (Section 7.1) signs "ztls v2 Z-data" and 15 elements: the bfe=
// field, empty when absent, after alpn=; a v3 record (Section 9.2) the
// same with "ztls v3 Z-data", its key share one element.
func (r *Record) SignatureInput(host string, port int) []byte {
	f := r.fields()
	ctx := signatureContext
	switch {
	case r.V3:
		ctx = signatureContext3
	case r.V2:
		ctx = signatureContext2
	}
	elems := make([][]byte, 0, 15)
	elems = append(elems, []byte(hostOrLower(host)), []byte(strconv.Itoa(port)))
	for i, s := range f {
		if i == fBFE && !r.hasBFEField() {
			continue
		}
		elems = append(elems, []byte(s))
	}
	elems = append(elems, r.LeafHash[:])
	n := 64 + len(ctx) + 1
	for _, e := range elems {
		n += 2 + len(e)
	}
	b := make([]byte, 0, n)
	for i := 0; i < 64; i++ {
		b = append(b, ' ')
	}
	b = append(b, ctx...)
	b = append(b, 0)
	for _, e := range elems {
		b = binary.BigEndian.AppendUint16(b, uint16(len(e)))
		b = append(b, e...)
	}
	return b
}

// ZDataHash returns zdata_hash: the SHA-256 of SignatureInput(r.Host,
// r.Port). It names this exact record; LeafHash must be set.
func (r *Record) ZDataHash() [32]byte {
	return sha256.Sum256(r.SignatureInput(r.Host, r.Port))
}

// CheckValidity checks the validity window at now (docs/ztls-spec.md,
// Section 1): at most one hour long, bounds inclusive at one-second
// precision, 60 s of clock skew tolerated before not-before only.
func (r *Record) CheckValidity(now time.Time) error {
	w := r.NotAfter.Sub(r.NotBefore)
	if w < 0 || w > MaxValidity {
		return ErrWindowTooLong
	}
	now = now.Truncate(time.Second)
	if now.Before(r.NotBefore.Add(-ClockSkew)) {
		return ErrNotYetValid
	}
	if now.After(r.NotAfter) {
		return ErrExpired
	}
	return nil
}

// ValidAt reports whether now (at one-second precision) is within the
// record's validity without the ClockSkew allowance: not-before ≤ now ≤
// not-after. A client prefers such a record (Selector).
func (r *Record) ValidAt(now time.Time) bool {
	now = now.Truncate(time.Second)
	return !now.Before(r.NotBefore) && !now.After(r.NotAfter)
}

// Offer returns what the TLS engine needs to send a ZTLS ClientHello with
// this verified record; leaf is the TLSA leaf that verified it.
func (r *Record) Offer(leaf *x509.Certificate) *tls13.ZDataOffer {
	z := &tls13.ZDataOffer{Leaf: leaf}
	r.FillOffer(z)
	return z
}

// FillOffer sets z's fields from the record, leaving its Leaf and
// Intermediates (and the certificate policy's verdict on them, see
// tls13.Config.VerifyZDataOffer) as they are.
func (r *Record) FillOffer(z *tls13.ZDataOffer) {
	z.ID = r.ID
	z.Hash = r.ZDataHash()
	z.Group = r.Group
	z.Share = append([]byte(nil), r.KeyShare...)
	z.MaxEarlyData = r.MaxEarlyData
	z.ALPN = r.ALPN
	z.NSC = nil
	for _, s := range r.NSC {
		z.NSC = append(z.NSC, tls13.CipherSuite(s))
	}
	z.BFE = nil
	if pk := r.BFEPublicKey(); pk != nil {
		z.BFE = pk
	}
}

// BFEPublicKey returns the key of the record's bfe= field, or nil
// (docs/ztls-spec.md, Section 7.1).
func (r *Record) BFEPublicKey() *bfe.PublicKey {
	if !r.hasBFEField() || len(r.BFE) == 0 {
		return nil
	}
	pk, err := bfe.ParsePublicKey(r.BFE)
	if err != nil {
		return nil
	}
	return pk
}

// Clone returns a deep copy of r.
func (r *Record) Clone() *Record {
	c := *r
	c.KeyShare = append([]byte(nil), r.KeyShare...)
	c.NSC = append([]uint16(nil), r.NSC...)
	c.BFE = append([]byte(nil), r.BFE...)
	if r.BFE == nil {
		c.BFE = nil
	}
	c.Signature = append([]byte(nil), r.Signature...)
	if r.pub != nil {
		p := *r.pub
		c.pub = &p
	}
	return &c
}

// Prepare makes the client's share and ZS for the record's group and
// share ahead of a handshake (tls13.ZDataKeyShare.Prepare; ks may be
// nil) and, for a record with bfe=, its BFE encapsulation, so that its
// k pairings leave the first flight's path too (docs/ztls-spec.md,
// Section 7.2). The result serves one handshake.
func (r *Record) Prepare(ks *tls13.ZDataKeyShare) *tls13.ZDataPrepared {
	p := ks.Prepare(r.Group, r.KeyShare, nil)
	if pk := r.BFEPublicKey(); pk != nil {
		// On error the engine encapsulates itself when it sends.
		_ = p.EncapsulateBFE(pk, nil)
	}
	return p
}
