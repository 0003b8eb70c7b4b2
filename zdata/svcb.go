package zdata

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/bfe"
	"github.com/ztls-project/ztls/tls13"
)

// DefaultSvcParamKey is the private-use SvcParamKey (RFC 9460, Section
// 14.3.2) under which a service's HTTPS record carries its Z-data
// (docs/ztls-spec.md, Section 8.1): 65370, 0xFF5A, the number of the
// ztls extension's codepoint. TurboTLS's key65280 is another key.
// Publisher and client must agree on it, as on the extension codepoint.
const DefaultSvcParamKey dns.SVCBKey = 0xFF5A

// MaxSvcRecords is the most records one SvcParamValue carries: the
// current and the next period's, each as v1 and v2 twin (Section 8.4).
const MaxSvcRecords = 4

// Versions and flags of a ZDataSvcRecord (docs/ztls-spec.md, Section 8.2).
const (
	svcVersion1       = 1
	svcVersion2       = 2
	svcFlagClientCert = 0x01
)

// MarshalSvcParam returns the SvcParamValue carrying recs
// (docs/ztls-spec.md, Section 8.2): 1 to MaxSvcRecords entries, each a
// uint16 length and one record. Each record's signature must be over
// the canonical text this package writes (a record ParseTXT read in
// another spelling, a lower-case z or a DER share, is refused: its
// signature would not verify from the binary form; sign it again).
func MarshalSvcParam(recs []*Record) ([]byte, error) {
	if len(recs) == 0 || len(recs) > MaxSvcRecords {
		return nil, fmt.Errorf("zdata: svcparam: %d records, want 1 to %d", len(recs), MaxSvcRecords)
	}
	var out []byte
	for i, r := range recs {
		b, err := r.appendSvcRecord(nil)
		if err != nil {
			return nil, fmt.Errorf("zdata: svcparam record %d: %w", i+1, errors.Unwrap(err))
		}
		if len(b) > math.MaxUint16 {
			return nil, fmt.Errorf("zdata: svcparam record %d: %d bytes, longer than 65535", i+1, len(b))
		}
		out = binary.BigEndian.AppendUint16(out, uint16(len(b)))
		out = append(out, b...)
	}
	return out, nil
}

// appendSvcRecord appends r as one ZDataSvcRecord. Its errors wrap the
// cause in a "zdata: svcparam" error that MarshalSvcParam unwraps to add
// the record's place.
func (r *Record) appendSvcRecord(b []byte) ([]byte, error) {
	fail := func(format string, args ...any) ([]byte, error) {
		return nil, fmt.Errorf("zdata: svcparam: %w", fmt.Errorf(format, args...))
	}
	if r.pub != nil && r.fields() != r.canonical() {
		return fail("signed over a non-canonical TXT spelling; sign the record again")
	}
	nb, na := r.NotBefore.Unix(), r.NotAfter.Unix()
	if nb < 0 || nb > math.MaxUint32 || na < 0 || na > math.MaxUint32 {
		return fail("not-before or not-after outside 1970–2106 (a uint32 of Unix seconds)")
	}
	switch {
	case len(r.KeyShare) == 0 || len(r.KeyShare) > 255:
		return fail("key share is %d bytes, want 1 to 255", len(r.KeyShare))
	case len(r.NSC) > 127:
		return fail("%d nsc cipher suites, at most 127 fit", len(r.NSC))
	case len(r.ALPN) > 255:
		return fail("alpn is %d bytes, at most 255", len(r.ALPN))
	case !r.V2 && len(r.BFE) > 0:
		return fail("a v1 record carries no bfe key")
	case len(r.BFE) > 255:
		return fail("bfe key is %d bytes, at most 255", len(r.BFE))
	case len(r.Signature) == 0 || len(r.Signature) > math.MaxUint16:
		return fail("signature is %d bytes, want 1 to 65535", len(r.Signature))
	}
	if r.ALPN != "" {
		if err := checkALPN(r.ALPN); err != nil {
			return fail("%s", causeText(err))
		}
	}
	version, flags := byte(svcVersion1), byte(0)
	if r.V2 {
		version = svcVersion2
	}
	if r.ClientCert {
		flags |= svcFlagClientCert
	}
	b = append(b, version, flags)
	b = binary.BigEndian.AppendUint32(b, uint32(nb))
	b = binary.BigEndian.AppendUint32(b, uint32(na))
	b = binary.BigEndian.AppendUint32(b, r.MaxEarlyData)
	b = binary.BigEndian.AppendUint32(b, r.ID)
	b = binary.BigEndian.AppendUint16(b, uint16(r.Group))
	b = append(b, byte(len(r.KeyShare)))
	b = append(b, r.KeyShare...)
	b = append(b, byte(2*len(r.NSC)))
	for _, s := range r.NSC {
		b = binary.BigEndian.AppendUint16(b, s)
	}
	b = append(b, byte(len(r.ALPN)))
	b = append(b, r.ALPN...)
	if r.V2 {
		b = append(b, byte(len(r.BFE)))
		b = append(b, r.BFE...)
	}
	b = binary.BigEndian.AppendUint16(b, uint16(r.Scheme))
	b = binary.BigEndian.AppendUint16(b, uint16(len(r.Signature)))
	return append(b, r.Signature...), nil
}

// ParseSvcParam parses a Z-data SvcParamValue (docs/ztls-spec.md, Section
// 8.2) into its records, in order. It is strict: any length that runs
// past its bounds, bytes after a record or after the last entry, an
// empty list or more than MaxSvcRecords entries, a version other than 1
// or 2, unknown flag bits, a share whose length does not fit its
// (known) group, an odd nsc length, a bad alpn, bfe in a v1 record or
// a bfe key bfe.ParsePublicKey refuses, and an empty signature refuse
// the whole value, with an error of ReasonMalformed naming the record
// and field. Unknown groups and schemes parse (Select reports them).
//
// The records come back as if parsed from the canonical TXT text of the
// same fields, so Record.Verify, ZDataHash and Selector (through
// Record.TXT) treat them exactly as the TXT record signed alike; Host,
// Port and LeafHash are left zero, as ParseTXT leaves them.
func ParseSvcParam(b []byte) ([]*Record, error) {
	var recs []*Record
	for n := 1; len(b) > 0; n++ {
		if n > MaxSvcRecords {
			return nil, svcErr(n, "entry", "more than %d records", MaxSvcRecords)
		}
		if len(b) < 2 {
			return nil, svcErr(n, "entry length", "%d byte left, want 2", len(b))
		}
		l := int(binary.BigEndian.Uint16(b))
		b = b[2:]
		if l > len(b) {
			return nil, svcErr(n, "entry length", "%d bytes, only %d left", l, len(b))
		}
		r, err := parseSvcRecord(n, b[:l])
		if err != nil {
			return nil, err
		}
		recs = append(recs, r)
		b = b[l:]
	}
	if len(recs) == 0 {
		return nil, reasonErr(ReasonMalformed, errors.New("zdata: svcparam: empty value, want at least one record"))
	}
	return recs, nil
}

// causeText is err's cause without the package prefix and reason.
func causeText(err error) string {
	if c := errors.Unwrap(err); c != nil {
		err = c
	}
	return trimPrefix(err.Error())
}

func svcErr(n int, field, format string, args ...any) error {
	return reasonErr(ReasonMalformed, fmt.Errorf("zdata: svcparam record %d: %s: %s", n, field, fmt.Sprintf(format, args...)))
}

// svcReader reads one ZDataSvcRecord, remembering the first error.
type svcReader struct {
	n   int // the record's place in the value, for errors
	b   []byte
	err error
}

func (s *svcReader) fail(field, format string, args ...any) {
	if s.err == nil {
		s.err = svcErr(s.n, field, format, args...)
	}
}

func (s *svcReader) bytes(field string, n int) []byte {
	if s.err != nil {
		return nil
	}
	if n > len(s.b) {
		s.fail(field, "needs %d bytes, %d left", n, len(s.b))
		return nil
	}
	v := s.b[:n:n]
	s.b = s.b[n:]
	return v
}

func (s *svcReader) u8(field string) int {
	if v := s.bytes(field, 1); v != nil {
		return int(v[0])
	}
	return 0
}

func (s *svcReader) u16(field string) uint16 {
	if v := s.bytes(field, 2); v != nil {
		return binary.BigEndian.Uint16(v)
	}
	return 0
}

func (s *svcReader) u32(field string) uint32 {
	if v := s.bytes(field, 4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

// vector reads an opaque vector with a 1- or 2-byte length, copied.
func (s *svcReader) vector(field string, lenBytes int) []byte {
	var n int
	if lenBytes == 1 {
		n = s.u8(field + " length")
	} else {
		n = int(s.u16(field + " length"))
	}
	v := s.bytes(field, n)
	if v == nil {
		return nil
	}
	return append([]byte{}, v...)
}

func parseSvcRecord(n int, b []byte) (*Record, error) {
	s := &svcReader{n: n, b: b}
	r := &Record{}
	switch v := s.u8("version"); {
	case s.err != nil:
	case v == svcVersion1:
	case v == svcVersion2:
		r.V2 = true
	default:
		s.fail("version", "%d unknown, want 1 or 2", v)
	}
	flags := s.u8("flags")
	if flags&^svcFlagClientCert != 0 {
		s.fail("flags", "unknown bits 0x%02x", flags&^svcFlagClientCert)
	}
	r.ClientCert = flags&svcFlagClientCert != 0
	r.NotBefore = time.Unix(int64(s.u32("not_before")), 0).UTC()
	r.NotAfter = time.Unix(int64(s.u32("not_after")), 0).UTC()
	r.MaxEarlyData = s.u32("max_early_data_size")
	r.ID = s.u32("zdata_id")
	r.Group = tls13.CurveID(s.u16("group"))
	r.KeyShare = s.vector("key_share", 1)
	if want := rawShareLen(r.Group); s.err == nil && (len(r.KeyShare) == 0 || want != 0 && len(r.KeyShare) != want) {
		s.fail("key_share", "%d bytes for group %v, want %d", len(r.KeyShare), r.Group, max(want, 1))
	}
	nsc := s.vector("nsc", 1)
	if len(nsc)%2 != 0 {
		s.fail("nsc", "odd length %d", len(nsc))
	}
	for i := 0; i+1 < len(nsc); i += 2 {
		r.NSC = append(r.NSC, binary.BigEndian.Uint16(nsc[i:]))
	}
	if alpn := s.vector("alpn", 1); len(alpn) > 0 {
		if err := checkALPN(string(alpn)); err != nil {
			s.fail("alpn", "%s", causeText(err))
		}
		r.ALPN = string(alpn)
	}
	if r.V2 {
		if k := s.vector("bfe", 1); len(k) > 0 {
			if _, err := bfe.ParsePublicKey(k); err != nil {
				s.fail("bfe", "%v", err)
			}
			r.BFE = k
		}
	}
	r.Scheme = tls13.SignatureScheme(s.u16("scheme"))
	r.Signature = s.vector("signature", 2)
	if s.err == nil && len(r.Signature) == 0 {
		s.fail("signature", "empty")
	}
	if s.err == nil && len(s.b) > 0 {
		s.fail("record", "%d bytes after the signature", len(s.b))
	}
	if s.err != nil {
		return nil, s.err
	}
	return r, nil
}

// SvcParam returns the Z-data SvcParam for recs under key (0 means
// DefaultSvcParamKey), for an HTTPS or SVCB record's Value.
func SvcParam(key dns.SVCBKey, recs []*Record) (*dns.SVCBLocal, error) {
	if key == 0 {
		key = DefaultSvcParamKey
	}
	b, err := MarshalSvcParam(recs)
	if err != nil {
		return nil, err
	}
	return &dns.SVCBLocal{KeyCode: key, Data: b}, nil
}

// ErrNoSvcParam means an HTTPS record carries no Z-data under the key
// asked for.
var ErrNoSvcParam = reasonErr(ReasonNoZData, errors.New("zdata: the HTTPS record carries no Z-data SvcParam"))

// RecordsFromSVCB returns the Z-data records rr carries under key (0
// means DefaultSvcParamKey): ErrNoSvcParam when it has none, and
// AliasMode records never have any (RFC 9460, Section 2.4.2).
func RecordsFromSVCB(rr *dns.SVCB, key dns.SVCBKey) ([]*Record, error) {
	if key == 0 {
		key = DefaultSvcParamKey
	}
	if rr == nil || rr.Priority == 0 {
		return nil, ErrNoSvcParam
	}
	for _, kv := range rr.Value {
		if kv.Key() != key {
			continue
		}
		l, ok := kv.(*dns.SVCBLocal)
		if !ok {
			return nil, reasonErr(ReasonMalformed, fmt.Errorf("zdata: svcparam: key %d is a registered key, not a private-use one", key))
		}
		return ParseSvcParam(l.Data)
	}
	return nil, ErrNoSvcParam
}
