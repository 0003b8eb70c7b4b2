package zdata

import (
	"encoding/asn1"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ztls-project/ztls/bfe"
	"github.com/ztls-project/ztls/tls13"
)

// maxString is the longest DNS character-string (RFC 1035, Section 3.3).
const maxString = 255

// TXT returns the record's character-strings in publication order
// (docs/ztls-spec.md, Section 1), the base64 signature split into pieces of at
// most 255 bytes, and so the key share of a v3 record (Section 9.2).
func (r *Record) TXT() []string {
	f := r.fields()
	out := make([]string, 0, numSigned+2)
	for i, s := range f {
		switch {
		case s == "" && (i == fNSC || i == fALPN || i == fBFE):
		case i == fShare && r.V3:
			out = appendPieces(out, s)
		default:
			out = append(out, s)
		}
	}
	return appendPieces(out, base64.StdEncoding.EncodeToString(r.Signature))
}

// appendPieces appends s split into character-strings of at most 255
// bytes (RFC 1035, Section 3.3), the last one shorter.
func appendPieces(out []string, s string) []string {
	for len(s) > maxString {
		out = append(out, s[:maxString])
		s = s[maxString:]
	}
	return append(out, s)
}

func syntaxErr(field, format string, args ...any) error {
	return reasonErr(ReasonMalformed, fmt.Errorf("zdata: %s: "+format, append([]any{field}, args...)...))
}

// trimField trims ASCII spaces at both ends and rejects any other
// whitespace or non-printable byte.
func trimField(s string) (string, error) {
	if len(s) > maxString {
		return "", syntaxErr("character-string", "longer than 255 bytes")
	}
	t := strings.Trim(s, " ")
	for i := 0; i < len(t); i++ {
		if t[i] <= ' ' || t[i] >= 0x7f {
			return "", syntaxErr("character-string", "byte 0x%02x not allowed", t[i])
		}
	}
	return t, nil
}

// ParseTXT parses one TXT record's character-strings. It returns
// ErrNotZTLS when the first string is not v=ztls1, v=ztls2 or v=ztls3
// (after trimming; v2 adds the optional bfe= field, docs/ztls-spec.md,
// Section 7.1, which must hold a key bfe.ParsePublicKey accepts; v3 is
// v2 for group X25519MLKEM768 only, its key share over as many strings as
// it takes, Section 9.2), and
// an error with ReasonMalformed for any syntax error: other whitespace,
// unknown or out-of-order fields, leading zeros, bad nsc=/alpn=/Y/N,
// bad base64. It accepts the key share as raw key_exchange bytes or as a
// DER SubjectPublicKeyInfo (the paper's form) for x25519 and secp256r1,
// and stores the raw form. Unknown groups and schemes parse (Select
// reports them); validity, share validity and the signature are not
// checked here. Host, Port and LeafHash are left zero.
func ParseTXT(strs []string) (*Record, error) {
	if len(strs) == 0 {
		return nil, ErrNotZTLS
	}
	if len(strs[0]) > maxString {
		return nil, ErrNotZTLS
	}
	var v2, v3 bool
	switch strings.Trim(strs[0], " ") {
	case Version:
	case Version2:
		v2 = true
	case Version3:
		v3 = true
	default:
		return nil, ErrNotZTLS
	}
	fs := make([]string, len(strs))
	for i, s := range strs {
		t, err := trimField(s)
		if err != nil {
			return nil, err
		}
		if t == "" {
			return nil, syntaxErr("field "+strconv.Itoa(i+1), "empty")
		}
		fs[i] = t
	}
	// Fields 1–7, 10 and 11 and one signature piece are mandatory.
	if len(fs) < 10 {
		return nil, syntaxErr("record", "%d character-strings, want at least 10", len(fs))
	}
	r := &Record{V2: v2, V3: v3}
	p := &published{}
	p.raw[fVersion] = fs[0]
	var err error
	if r.NotBefore, err = parseTime("not-before", fs[1]); err != nil {
		return nil, err
	}
	if r.NotAfter, err = parseTime("not-after", fs[2]); err != nil {
		return nil, err
	}
	med, err := parseDecimal("max_early_data_size", fs[3], 32)
	if err != nil {
		return nil, err
	}
	id, err := parseDecimal("Zdata_id", fs[4], 32)
	if err != nil {
		return nil, err
	}
	group, err := parseDecimal("group", fs[5], 16)
	if err != nil {
		return nil, err
	}
	r.MaxEarlyData, r.ID, r.Group = uint32(med), uint32(id), tls13.CurveID(group)
	copy(p.raw[fNotBefore:fGroup+1], fs[1:6])
	i := 7
	if v3 {
		if p.raw[fShare], i, err = joinV3Share(r.Group, fs); err != nil {
			return nil, err
		}
	} else {
		p.raw[fShare] = fs[6]
	}
	if r.KeyShare, err = parseShare(r.Group, p.raw[fShare], v3); err != nil {
		return nil, err
	}
	if i >= len(fs) {
		return nil, syntaxErr("record", "missing client-certificate flag, scheme or signature")
	}
	if strings.HasPrefix(fs[i], "nsc=") {
		if r.NSC, err = parseNSC(fs[i]); err != nil {
			return nil, err
		}
		p.raw[fNSC] = fs[i]
		i++
	}
	if i < len(fs) && strings.HasPrefix(fs[i], "alpn=") {
		if r.ALPN, err = parseALPN(fs[i]); err != nil {
			return nil, err
		}
		p.raw[fALPN] = fs[i]
		i++
	}
	if r.hasBFEField() && i < len(fs) && strings.HasPrefix(fs[i], "bfe=") {
		if r.BFE, err = parseBFE(fs[i]); err != nil {
			return nil, err
		}
		p.raw[fBFE] = fs[i]
		i++
	}
	if len(fs)-i < 3 {
		return nil, syntaxErr("record", "missing client-certificate flag, scheme or signature")
	}
	switch fs[i] {
	case "Y":
		r.ClientCert = true
	case "N":
	default:
		return nil, syntaxErr("client certificate flag", "%q is not Y or N (unknown or out-of-order field?)", fs[i])
	}
	p.raw[fClientCert] = fs[i]
	i++
	scheme, err := parseDecimal("signature scheme", fs[i], 16)
	if err != nil {
		return nil, err
	}
	r.Scheme = tls13.SignatureScheme(scheme)
	p.raw[fScheme] = fs[i]
	i++
	sig := strings.Join(fs[i:], "")
	if r.Signature, err = base64.StdEncoding.Strict().DecodeString(sig); err != nil {
		return nil, syntaxErr("signature", "bad base64: %v", err)
	}
	if len(r.Signature) == 0 {
		return nil, syntaxErr("signature", "empty")
	}
	p.canon = r.canonical()
	r.pub = p
	return r, nil
}

func parseTime(field, s string) (time.Time, error) {
	if len(s) != len(timeLayout)+1 || (s[len(s)-1] != 'Z' && s[len(s)-1] != 'z') {
		return time.Time{}, syntaxErr(field, "%q is not YYYYMMDDHHMMSSZ", s)
	}
	for i := 0; i < len(timeLayout); i++ {
		if s[i] < '0' || s[i] > '9' {
			return time.Time{}, syntaxErr(field, "%q is not YYYYMMDDHHMMSSZ", s)
		}
	}
	t, err := time.Parse(timeLayout, s[:len(timeLayout)])
	if err != nil {
		return time.Time{}, syntaxErr(field, "%q: %v", s, err)
	}
	return t.UTC(), nil
}

func parseDecimal(field, s string, bits int) (uint64, error) {
	if s == "" || len(s) > 20 {
		return 0, syntaxErr(field, "%q is not a decimal", s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, syntaxErr(field, "%q is not a decimal", s)
		}
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, syntaxErr(field, "%q has a leading zero", s)
	}
	v, err := strconv.ParseUint(s, 10, bits)
	if err != nil {
		return 0, syntaxErr(field, "%q out of range", s)
	}
	return v, nil
}

// parseBFE reads bfe= (docs/ztls-spec.md, Section 7.1): the standard
// base64 of a BFEPublicKey that bfe.ParsePublicKey accepts.
func parseBFE(s string) ([]byte, error) {
	b, err := base64.StdEncoding.Strict().DecodeString(strings.TrimPrefix(s, "bfe="))
	if err != nil {
		return nil, syntaxErr("bfe", "bad base64: %v", err)
	}
	if _, err := bfe.ParsePublicKey(b); err != nil {
		return nil, syntaxErr("bfe", "%v", err)
	}
	return b, nil
}

func parseNSC(s string) ([]uint16, error) {
	list := strings.TrimPrefix(s, "nsc=")
	if list == "" {
		return nil, syntaxErr("nsc", "empty list")
	}
	var out []uint16
	for _, item := range strings.Split(list, ",") {
		if len(item) != 4 {
			return nil, syntaxErr("nsc", "%q is not 4 hex digits", item)
		}
		v, err := strconv.ParseUint(item, 16, 16)
		if err != nil {
			return nil, syntaxErr("nsc", "%q is not 4 hex digits", item)
		}
		out = append(out, uint16(v))
	}
	return out, nil
}

func parseALPN(s string) (string, error) {
	a := strings.TrimPrefix(s, "alpn=")
	if err := checkALPN(a); err != nil {
		return "", err
	}
	return a, nil
}

func checkALPN(a string) error {
	if len(a) == 0 || len(a) > 255 {
		return syntaxErr("alpn", "length %d, want 1–255", len(a))
	}
	for i := 0; i < len(a); i++ {
		if a[i] <= ' ' || a[i] >= 0x7f || a[i] == ',' {
			return syntaxErr("alpn", "byte 0x%02x not allowed", a[i])
		}
	}
	return nil
}

// Object identifiers of the DER SubjectPublicKeyInfo share form.
var (
	oidX25519      = asn1.ObjectIdentifier{1, 3, 101, 110}         // RFC 8410, Section 3
	oidECPublicKey = asn1.ObjectIdentifier{1, 2, 840, 10045, 2, 1} // RFC 5480, Section 2.1.1
	oidP256        = asn1.ObjectIdentifier{1, 2, 840, 10045, 3, 1, 7}
)

// rawShareLen is the key_exchange length of a group (RFC 8446, Section
// 4.2.8.2; docs/ztls-spec.md, Section 9.1 for X25519MLKEM768), 0 for
// groups ztls does not know.
func rawShareLen(group tls13.CurveID) int {
	switch group {
	case GroupX25519:
		return 32
	case GroupSecp256r1:
		return 65
	case GroupX25519MLKEM768:
		return pqShareLen
	}
	return 0
}

// joinV3Share reads the key share of a v3 record (docs/ztls-spec.md,
// Section 9.2): the strings after the group, joined until they hold
// exactly the base64 length of the group's share. It returns the joined
// text and the index of the next field.
func joinV3Share(group tls13.CurveID, fs []string) (string, int, error) {
	if group != GroupX25519MLKEM768 {
		return "", 0, syntaxErr("group", "%d in a v=ztls3 record, which is for %d only", group, GroupX25519MLKEM768)
	}
	want := base64.StdEncoding.EncodedLen(pqShareLen)
	var b strings.Builder
	i := 6
	for ; i < len(fs) && b.Len() < want; i++ {
		b.WriteString(fs[i])
	}
	if b.Len() != want {
		return "", 0, syntaxErr("key share", "%d base64 characters over strings 7 to %d, want exactly %d", b.Len(), i, want)
	}
	return b.String(), i, nil
}

// parseShare decodes a key share. A v1 or v2 record naming the
// post-quantum group parses as an unknown group does (Select refuses it:
// usable); a v3 record's share must have the group's length.
func parseShare(group tls13.CurveID, s string, v3 bool) ([]byte, error) {
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, syntaxErr("key share", "bad base64: %v", err)
	}
	if len(b) == 0 {
		return nil, syntaxErr("key share", "empty")
	}
	n := rawShareLen(group)
	if n == 0 || len(b) == n || (group == GroupX25519MLKEM768 && !v3) {
		return b, nil
	}
	if group == GroupX25519MLKEM768 {
		return nil, syntaxErr("key share", "%d bytes, X25519MLKEM768 needs %d", len(b), n)
	}
	raw, err := shareFromSPKI(group, b)
	if err != nil {
		return nil, err
	}
	if len(raw) != n {
		return nil, syntaxErr("key share", "SubjectPublicKeyInfo key is %d bytes, want %d", len(raw), n)
	}
	return raw, nil
}

// shareFromSPKI extracts the raw key from a DER SubjectPublicKeyInfo
// (RFC 5280, Section 4.1.2.7) whose algorithm matches group.
func shareFromSPKI(group tls13.CurveID, der []byte) ([]byte, error) {
	var spki struct {
		Algorithm struct {
			Algorithm  asn1.ObjectIdentifier
			Parameters asn1.RawValue `asn1:"optional"`
		}
		PublicKey asn1.BitString
	}
	rest, err := asn1.Unmarshal(der, &spki)
	if err != nil || len(rest) != 0 {
		return nil, syntaxErr("key share", "%d bytes: neither raw key_exchange nor a DER SubjectPublicKeyInfo", len(der))
	}
	alg := spki.Algorithm
	switch group {
	case GroupX25519:
		if !alg.Algorithm.Equal(oidX25519) || len(alg.Parameters.FullBytes) != 0 {
			return nil, syntaxErr("key share", "SubjectPublicKeyInfo is not X25519")
		}
	case GroupSecp256r1:
		var curve asn1.ObjectIdentifier
		if !alg.Algorithm.Equal(oidECPublicKey) {
			return nil, syntaxErr("key share", "SubjectPublicKeyInfo is not an EC key")
		}
		if rest, err := asn1.Unmarshal(alg.Parameters.FullBytes, &curve); err != nil || len(rest) != 0 || !curve.Equal(oidP256) {
			return nil, syntaxErr("key share", "SubjectPublicKeyInfo curve is not P-256")
		}
	}
	if spki.PublicKey.BitLength%8 != 0 {
		return nil, syntaxErr("key share", "SubjectPublicKeyInfo key is not whole bytes")
	}
	return spki.PublicKey.Bytes, nil
}

var errNoHost = errors.New("zdata: record has no host or port (set Host and Port)")
