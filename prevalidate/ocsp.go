package prevalidate

// OCSP (RFC 6960) to the responder named in the server certificate's
// authority information access, its answers kept in the Cache until their
// nextUpdate. Without prefetch the check sits on the connection's
// critical path, as browsers' does (Stark et al. measured a median of
// 291 ms per lookup); Prefetch moves it off.

import (
	"bytes"
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ocsp"

	"github.com/ztls-project/ztls/revocation"
)

// OCSPPolicy says whether and how the client asks the leaf's OCSP
// responder about it (Options.OCSP, dial.Options.OCSP).
type OCSPPolicy int

const (
	// OCSPOff asks no responder (the zero value).
	OCSPOff OCSPPolicy = iota
	// OCSPSoftFail, as browsers do: a revoked answer fails the
	// certificate; no answer (responder down, slow or wrong) and an
	// "unknown" answer pass.
	OCSPSoftFail
	// OCSPHardFail: only a "good" answer passes.
	OCSPHardFail
)

func (p OCSPPolicy) String() string {
	switch p {
	case OCSPOff:
		return "off"
	case OCSPSoftFail:
		return "soft"
	case OCSPHardFail:
		return "hard"
	}
	return fmt.Sprintf("OCSPPolicy(%d)", int(p))
}

// ParseOCSPPolicy parses "off", "soft" (soft-fail) or "hard" (hard-fail).
func ParseOCSPPolicy(s string) (OCSPPolicy, error) {
	switch strings.ToLower(s) {
	case "", "off", "none":
		return OCSPOff, nil
	case "soft", "soft-fail":
		return OCSPSoftFail, nil
	case "hard", "hard-fail":
		return OCSPHardFail, nil
	}
	return OCSPOff, fmt.Errorf("prevalidate: OCSP policy %q: want off, soft or hard", s)
}

// Errors of the OCSP check; errors.Is tells them apart. A revoked answer
// is also a revocation.ErrRevoked.
var (
	ErrOCSPRevoked     = fmt.Errorf("prevalidate: OCSP: %w", revocation.ErrRevoked)
	ErrOCSPUnknown     = errors.New(`prevalidate: OCSP: the responder answered "unknown" (hard-fail)`)
	ErrOCSPUnavailable = errors.New("prevalidate: OCSP: no usable answer from the responder (hard-fail)")
)

// ocspTimeout bounds one OCSP request.
const ocspTimeout = 5 * time.Second

// ocspFailureTTL is how long a soft-fail check that got no answer is
// not retried, so that a responder that is down does not cost every
// connection its timeout.
const ocspFailureTTL = time.Minute

// ocspDefaultTTL is how long an answer without nextUpdate is kept
// (RFC 6960, Section 4.2.2.1: newer information is always available).
const ocspDefaultTTL = 5 * time.Minute

// ocspKey names a certificate to its responder: the issuer's key and
// the serial number.
type ocspKey struct {
	issuer [32]byte
	serial string
}

// ocspAnswer is a responder's answer (or its absence), kept until next.
type ocspAnswer struct {
	status    int // ocsp.Good, ocsp.Revoked, ocsp.Unknown; -1: no answer
	revokedAt time.Time
	next      time.Time
	err       error // why there is no answer
}

// ocspOutcome is one check: what the responder said and until when.
type ocspOutcome struct {
	Status string    // "good", "revoked", "unknown", "unavailable", or "" (the leaf names no responder)
	Next   time.Time // the answer's nextUpdate (as kept)
	Cached bool      // no request was sent
	Err    error     // the policy's verdict on it
}

// checkOCSP asks (or finds in the cache) the leaf's responder about
// chain[0], chain[1] being its issuer, and applies pol.
func (c *Cache) checkOCSP(ctx context.Context, pol OCSPPolicy, chain []*x509.Certificate, now time.Time) ocspOutcome {
	if pol == OCSPOff || len(chain) < 2 || len(chain[0].OCSPServer) == 0 {
		return ocspOutcome{}
	}
	leaf, issuer := chain[0], chain[1]
	k := ocspKey{issuer: sha256.Sum256(issuer.RawSubjectPublicKeyInfo), serial: string(leaf.SerialNumber.Bytes())}
	c.mu.Lock()
	a, ok := c.ocsp[k]
	if ok && !now.Before(a.next) {
		delete(c.ocsp, k)
		ok = false
	}
	c.mu.Unlock()
	cached := ok
	if !ok {
		a = c.fetchOCSP(ctx, leaf, issuer, now)
		if a.status >= 0 || pol == OCSPSoftFail {
			c.mu.Lock()
			if len(c.ocsp) >= 4*c.max {
				for k, old := range c.ocsp {
					if !now.Before(old.next) || len(c.ocsp) >= 4*c.max {
						delete(c.ocsp, k)
					}
				}
			}
			c.ocsp[k] = a
			c.mu.Unlock()
		}
	}
	out := ocspOutcome{Next: a.next, Cached: cached}
	switch a.status {
	case ocsp.Good:
		out.Status = "good"
	case ocsp.Revoked:
		out.Status = "revoked"
		out.Err = fmt.Errorf("%w: %q (serial %x) revoked at %s, says %s", ErrOCSPRevoked, leaf.Subject, leaf.SerialNumber,
			a.revokedAt.UTC().Format(time.RFC3339), leaf.OCSPServer[0])
	case ocsp.Unknown:
		out.Status = "unknown"
		if pol == OCSPHardFail {
			out.Err = fmt.Errorf("%w: %q at %s", ErrOCSPUnknown, leaf.Subject, leaf.OCSPServer[0])
		}
	default:
		out.Status = "unavailable"
		if pol == OCSPHardFail {
			out.Err = fmt.Errorf("%w: %v", ErrOCSPUnavailable, a.err)
		}
	}
	return out
}

// fetchOCSP asks the leaf's responders in turn (HTTP POST, RFC 6960,
// Appendix A.1) until one gives an answer that verifies.
func (c *Cache) fetchOCSP(ctx context.Context, leaf, issuer *x509.Certificate, now time.Time) *ocspAnswer {
	req, err := ocsp.CreateRequest(leaf, issuer, &ocsp.RequestOptions{Hash: crypto.SHA1})
	if err != nil {
		return &ocspAnswer{status: -1, next: now.Add(ocspFailureTTL), err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, ocspTimeout)
	defer cancel()
	for _, url := range leaf.OCSPServer {
		var resp *ocsp.Response
		resp, err = c.askResponder(ctx, url, req, leaf, issuer)
		if err != nil {
			continue
		}
		if now.Add(time.Minute).Before(resp.ThisUpdate) {
			err = fmt.Errorf("prevalidate: OCSP answer from %s is from the future (%s)", url, resp.ThisUpdate.UTC().Format(time.RFC3339))
			continue
		}
		next := resp.NextUpdate
		if next.IsZero() {
			next = now.Add(ocspDefaultTTL)
		}
		if !now.Before(next) {
			err = fmt.Errorf("prevalidate: OCSP answer from %s is stale (next update %s)", url, next.UTC().Format(time.RFC3339))
			continue
		}
		return &ocspAnswer{status: resp.Status, revokedAt: resp.RevokedAt, next: next}
	}
	return &ocspAnswer{status: -1, next: now.Add(ocspFailureTTL), err: err}
}

func (c *Cache) askResponder(ctx context.Context, url string, req []byte, leaf, issuer *x509.Certificate) (*ocsp.Response, error) {
	if !strings.HasPrefix(url, "http://") {
		return nil, fmt.Errorf("prevalidate: OCSP responder %q is not an http:// URL", url)
	}
	c.mu.Lock()
	c.ocspFetches++
	c.mu.Unlock()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(req))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/ocsp-request")
	hreq.Header.Set("Accept", "application/ocsp-response")
	hresp, err := c.httpClient().Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("prevalidate: OCSP responder %s: %w", url, err)
	}
	defer hresp.Body.Close()
	if hresp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("prevalidate: OCSP responder %s: HTTP %s", url, hresp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(hresp.Body, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("prevalidate: OCSP responder %s: %w", url, err)
	}
	resp, err := ocsp.ParseResponseForCert(body, leaf, issuer)
	if err != nil {
		return nil, fmt.Errorf("prevalidate: OCSP responder %s: %w", url, err)
	}
	return resp, nil
}

// httpClient is the OCSP client: no proxy from the environment, no
// redirects, connections through the cache's dialer.
func (c *Cache) httpClient() *http.Client {
	dial := c.dialer
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	return &http.Client{
		Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// ocspNote is what an OCSP check found for the chains a verification
// accepted: the earliest nextUpdate and a line for people.
type ocspNote struct {
	mu     sync.Mutex
	next   time.Time
	status string
}

func (n *ocspNote) add(o ocspOutcome) {
	if n == nil || o.Status == "" {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.next.IsZero() || o.Next.Before(n.next) {
		n.next = o.Next
	}
	n.status = o.Status
}

// VerifyFunc is a tls13.Config.VerifyPeerCertificate.
type VerifyFunc = func(rawCerts [][]byte, verifiedChains [][]*x509.Certificate) error

// CheckOCSP returns a tls13.Config.VerifyPeerCertificate that checks the
// verified chain's leaf with OCSP under pol before running next (the
// application's hook, may be nil), with the answers kept in the cache
// (and keeping the answers it gets) until their nextUpdate: a connection
// after a Prefetch under pol asks no responder. Without verified chains
// (InsecureSkipVerify) nothing is asked. ctx bounds the requests.
func (c *Cache) CheckOCSP(ctx context.Context, pol OCSPPolicy, now func() time.Time, next VerifyFunc) VerifyFunc {
	return c.ocspHook(ctx, pol, now, next, nil)
}

// ocspHook is CheckOCSP, noting what it found in note (may be nil).
func (c *Cache) ocspHook(ctx context.Context, pol OCSPPolicy, now func() time.Time, next VerifyFunc, note *ocspNote) VerifyFunc {
	return func(raws [][]byte, chains [][]*x509.Certificate) error {
		if len(chains) > 0 {
			o := c.checkOCSP(ctx, pol, chains[0], now())
			if o.Err != nil {
				return o.Err
			}
			note.add(o)
		}
		if next != nil {
			return next(raws, chains)
		}
		return nil
	}
}
