package publish

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dns/dnsname"
)

// DefaultTimeout bounds one UPDATE exchange when the context has no
// earlier deadline.
const DefaultTimeout = 10 * time.Second

// TSIGKey is a shared TSIG key (RFC 8945). Its String method omits the
// secret, so formatting a key with %v never leaks it.
type TSIGKey struct {
	// Name is the key's name as the primary knows it, e.g. "ztls-update.".
	Name string
	// Algorithm is a TSIG algorithm name; "" means hmac-sha256
	// (dns.HmacSHA256). hmac-sha384 and hmac-sha512 are accepted too.
	Algorithm string
	// Secret is the base64-encoded shared secret.
	Secret string
}

// String returns the key's name and algorithm, never its secret.
func (k TSIGKey) String() string { return fmt.Sprintf("TSIG key %s (%s)", k.Name, k.algorithm()) }

// GoString is String, so %#v does not print the secret either.
func (k TSIGKey) GoString() string { return k.String() }

func (k TSIGKey) algorithm() string {
	if k.Algorithm == "" {
		return dns.HmacSHA256
	}
	return dnsname.Canonical(k.Algorithm)
}

func (k TSIGKey) check() error {
	if _, ok := dns.IsDomainName(k.Name); !ok || k.Name == "" {
		return fmt.Errorf("publish: bad TSIG key name %q", k.Name)
	}
	switch k.algorithm() {
	case dns.HmacSHA256, dns.HmacSHA384, dns.HmacSHA512:
	default:
		return fmt.Errorf("publish: TSIG algorithm %q not supported (use hmac-sha256)", k.Algorithm)
	}
	secret, err := base64.StdEncoding.DecodeString(k.Secret)
	if err != nil || len(secret) == 0 {
		return errors.New("publish: TSIG secret is not valid base64") // never echo the secret
	}
	return nil
}

// RRSet is the new content of one RRset: every record is owned by Name,
// has type Type and class IN. Empty Records deletes the set.
type RRSet struct {
	Name    string
	Type    uint16
	Records []dns.RR
	// IfUnchanged makes the whole UPDATE conditional on the primary's
	// RRset still being Was, as Publisher.Read returned it (RFC 2136,
	// Section 2.4.2: "RRset exists (value dependent)"; Section 2.4.3,
	// "RRset does not exist", when Was is empty): a set someone changed
	// since it was read makes the primary refuse the UPDATE with NXRRSET
	// or YXRRSET (an *UpdateError; IsChanged) and change nothing, so a
	// publisher that merges its records into an RRset it read never
	// overwrites an edit made in between. Read again and retry.
	IfUnchanged bool
	Was         []dns.RR
}

// IsChanged reports whether err is a primary's refusal because an
// IfUnchanged RRset changed since it was read.
func IsChanged(err error) bool {
	var ue *UpdateError
	return errors.As(err, &ue) && (ue.Rcode == dns.RcodeNXRrset || ue.Rcode == dns.RcodeYXRrset)
}

// UpdateError is the primary's refusal of an UPDATE.
type UpdateError struct {
	// Rcode is the response's RCODE, e.g. dns.RcodeRefused or
	// dns.RcodeNotAuth.
	Rcode int
	// TSIGError is the error field of the response's TSIG record
	// (dns.RcodeBadSig, dns.RcodeBadKey, dns.RcodeBadTime), 0 if none.
	TSIGError uint16
}

func (e *UpdateError) Error() string {
	s := "publish: primary answered " + rcodeName(e.Rcode)
	if e.TSIGError != 0 {
		s += " (TSIG " + rcodeName(int(e.TSIGError)) + ")"
	}
	return s
}

func rcodeName(rc int) string {
	if s, ok := dns.RcodeToString[rc]; ok {
		return s
	}
	return fmt.Sprintf("RCODE%d", rc)
}

// Publisher sends UPDATEs to one primary for one zone. The zero Net and
// Timeout mean TCP and DefaultTimeout. A Publisher is safe for concurrent
// use; the primary orders concurrent UPDATEs.
type Publisher struct {
	// Server is the primary's "host:port".
	Server string
	// Zone is the zone's apex, e.g. "example.org.".
	Zone string
	// Key signs the UPDATE. DangerousUnsigned must be set to send without
	// one (only useful to test that a primary refuses it).
	Key TSIGKey
	// DangerousUnsigned sends the UPDATE without TSIG.
	DangerousUnsigned bool
	// Net is "tcp" (default) or "udp".
	Net string
	// Timeout bounds the exchange. 0 means DefaultTimeout.
	Timeout time.Duration
}

// Read asks the primary for the RRset of name and rrtype over TCP (its
// authoritative answer, as an IfUnchanged RRSet's Was), unsigned. An
// empty answer (NODATA or NXDOMAIN) is no records.
func (p *Publisher) Read(ctx context.Context, name string, rrtype uint16) ([]dns.RR, error) {
	q := new(dns.Msg)
	q.SetQuestion(dnsname.Canonical(name), rrtype)
	q.RecursionDesired = false
	c := &dns.Client{Net: "tcp", Timeout: p.Timeout}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	r, _, err := c.ExchangeContext(ctx, q, p.Server)
	if err != nil {
		return nil, fmt.Errorf("publish: reading %s %s from %s: %w", name, typeName(rrtype), p.Server, err)
	}
	if r.Rcode != dns.RcodeSuccess && r.Rcode != dns.RcodeNameError {
		return nil, fmt.Errorf("publish: reading %s %s from %s: %s", name, typeName(rrtype), p.Server, rcodeName(r.Rcode))
	}
	if !r.Authoritative {
		return nil, fmt.Errorf("publish: %s answered %s %s without authority: is it the zone's primary?", p.Server, name, typeName(rrtype))
	}
	var out []dns.RR
	for _, rr := range r.Answer {
		if h := rr.Header(); h.Rrtype == rrtype && dnsname.Canonical(h.Name) == dnsname.Canonical(name) {
			out = append(out, rr)
		}
	}
	return out, nil
}

// Publish replaces the RRsets of sets in zone at the primary server with
// one UPDATE signed by key; see Publisher.Publish.
func Publish(ctx context.Context, server, zone string, key TSIGKey, sets []RRSet) error {
	p := &Publisher{Server: server, Zone: zone, Key: key}
	return p.Publish(ctx, sets)
}

// Publish sends one UPDATE that replaces each of sets and waits for the
// primary's answer, whose TSIG it verifies. It returns an *UpdateError if
// the primary refused or failed the update.
func (p *Publisher) Publish(ctx context.Context, sets []RRSet) error {
	m, err := NewUpdate(p.Zone, sets)
	if err != nil {
		return err
	}
	c := &dns.Client{Net: p.Net, Timeout: p.Timeout}
	if c.Net == "" {
		c.Net = "tcp"
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if !p.DangerousUnsigned {
		if err := p.Key.check(); err != nil {
			return err
		}
		name := dnsname.Canonical(p.Key.Name)
		c.TsigSecret = map[string]string{name: p.Key.Secret}
		m.SetTsig(name, p.Key.algorithm(), 300, time.Now().Unix()) // real time: the primary checks TSIG against its system clock (RFC 8945)
	}
	r, _, err := c.ExchangeContext(ctx, m, p.Server)
	if r != nil && r.Rcode != dns.RcodeSuccess {
		// A refusal may come unsigned or with a TSIG the client cannot
		// verify (BADSIG, BADKEY); the RCODE is what matters then.
		ue := &UpdateError{Rcode: r.Rcode}
		if t := r.IsTsig(); t != nil {
			ue.TSIGError = t.Error
		}
		return ue
	}
	if err != nil {
		return fmt.Errorf("publish: UPDATE to %s: %w", p.Server, err)
	}
	if !p.DangerousUnsigned && r.IsTsig() == nil {
		return errors.New("publish: the primary's answer is not signed")
	}
	if r.Opcode != dns.OpcodeUpdate || !r.Response {
		return errors.New("publish: the primary's answer is not an UPDATE response")
	}
	return nil
}

// NewUpdate builds the unsigned UPDATE message that replaces sets in zone
// (RFC 2136, Section 2.5): for each set, "delete an RRset" followed by
// "add to an RRset" for each record, all in one update section. It checks
// that every record belongs to its set and to the zone, and that no set
// appears twice or touches the SOA.
func NewUpdate(zone string, sets []RRSet) (*dns.Msg, error) {
	if _, ok := dns.IsDomainName(zone); !ok || zone == "" {
		return nil, fmt.Errorf("publish: bad zone %q", zone)
	}
	zone = dnsname.Canonical(zone)
	if len(sets) == 0 {
		return nil, errors.New("publish: no RRsets to publish")
	}
	m := new(dns.Msg)
	m.SetUpdate(zone)
	type key struct {
		name string
		t    uint16
	}
	seen := make(map[key]bool)
	for _, set := range sets {
		if _, ok := dns.IsDomainName(set.Name); !ok || set.Name == "" {
			return nil, fmt.Errorf("publish: bad owner name %q", set.Name)
		}
		name := dnsname.Canonical(set.Name)
		if !dns.IsSubDomain(zone, name) {
			return nil, fmt.Errorf("publish: %s is outside zone %s", name, zone)
		}
		switch set.Type {
		case dns.TypeSOA, dns.TypeANY, dns.TypeOPT, dns.TypeTSIG, dns.TypeTKEY, dns.TypeAXFR, dns.TypeIXFR, dns.TypeNone:
			return nil, fmt.Errorf("publish: cannot replace the %s RRset", typeName(set.Type))
		}
		if seen[key{name, set.Type}] {
			return nil, fmt.Errorf("publish: RRset %s %s given twice", name, typeName(set.Type))
		}
		seen[key{name, set.Type}] = true
		if set.IfUnchanged {
			if err := addPrerequisite(m, name, set); err != nil {
				return nil, err
			}
		}
		// RFC 2136, Section 2.5.2: CLASS ANY, TTL 0, RDLENGTH 0 deletes
		// the RRset of NAME and TYPE.
		m.Ns = append(m.Ns, &dns.ANY{Hdr: dns.RR_Header{Name: name, Rrtype: set.Type, Class: dns.ClassANY}})
		for _, rr := range set.Records {
			if rr == nil {
				return nil, fmt.Errorf("publish: nil record in %s %s", name, typeName(set.Type))
			}
			h := rr.Header()
			if dnsname.Canonical(h.Name) != name || h.Rrtype != set.Type || h.Class != dns.ClassINET {
				return nil, fmt.Errorf("publish: record %q does not belong to RRset %s IN %s", rr.String(), name, typeName(set.Type))
			}
			m.Ns = append(m.Ns, dns.Copy(rr)) // Section 2.5.1: add to an RRset
		}
	}
	return m, nil
}

// addPrerequisite adds to m's prerequisite section that set's RRset is
// exactly set.Was (RFC 2136, Section 2.4.2: class IN, TTL 0, each record's
// RDATA) or, when Was is empty, that it does not exist (Section 2.4.3:
// class NONE, TTL 0, no RDATA).
func addPrerequisite(m *dns.Msg, name string, set RRSet) error {
	if len(set.Was) == 0 {
		m.Answer = append(m.Answer, &dns.ANY{Hdr: dns.RR_Header{Name: name, Rrtype: set.Type, Class: dns.ClassNONE}})
		return nil
	}
	for _, rr := range set.Was {
		h := rr.Header()
		if dnsname.Canonical(h.Name) != name || h.Rrtype != set.Type || h.Class != dns.ClassINET {
			return fmt.Errorf("publish: prerequisite %q does not belong to RRset %s IN %s", rr.String(), name, typeName(set.Type))
		}
		c := dns.Copy(rr)
		c.Header().Ttl = 0
		m.Answer = append(m.Answer, c)
	}
	return nil
}

func typeName(t uint16) string {
	if s, ok := dns.TypeToString[t]; ok {
		return s
	}
	return fmt.Sprintf("TYPE%d", t)
}
