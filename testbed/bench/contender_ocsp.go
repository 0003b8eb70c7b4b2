package bench

// The OCSP contenders (issue 14): tls-ocsp and ztls-ocsp are tls and ztls
// with the client asking the leaf's OCSP responder, hard-fail (a visit
// without a good answer fails), as Stark et al. measured browsers do on
// the critical path; tls-ocsp-prefetch and ztls-ocsp-prefetch ask it at
// prefetch time, before the click, and keep the answer. The responder
// runs on a host of its own, Config.OCSPRTT (150 ms by default) from the
// client, and the certificate's authority information access names it.
// Without prevalidation a visit pays a TCP connect and a POST to it (two
// of its round trips); with it, nothing.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"golang.org/x/crypto/ocsp"

	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/testbed/hosts"
)

// ocspSuffix marks a contender that asks the OCSP responder; it comes
// before prefetchSuffix in a name.
const ocspSuffix = "-ocsp"

// DefaultOCSPRTT is the client–OCSP responder round trip.
const DefaultOCSPRTT = 150 * time.Millisecond

func init() {
	for _, mode := range []string{"tls", "ztls"} {
		name := mode + ocspSuffix
		Register(name, func() Contender { return &engineContender{name: name, mode: mode, ocsp: true} })
		Register(name+prefetchSuffix, func() Contender {
			return &engineContender{name: name + prefetchSuffix, mode: mode, ocsp: true, prefetch: true}
		})
	}
}

// usesOCSP reports whether a contender asks the OCSP responder.
func usesOCSP(c Contender) bool {
	e, ok := c.(*engineContender)
	return ok && e.ocsp
}

// ocspResponder answers "good" for every certificate the CA issued, valid
// for an hour, on the host's port 80.
type ocspResponder struct {
	srv *http.Server
	URL string
}

// ocspURL is the responder's URL on h, for the certificate's AIA.
func ocspURL(h *hosts.Host) string { return "http://" + h.Addr.String() + "/" }

func startOCSP(h *hosts.Host, ca *testpki.CA) (*ocspResponder, error) {
	ln, err := h.Listen("tcp", net.JoinHostPort(h.Addr.String(), "80"))
	if err != nil {
		return nil, fmt.Errorf("bench: OCSP responder: %w", err)
	}
	r := &ocspResponder{URL: ocspURL(h)}
	r.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(io.LimitReader(req.Body, 4<<10))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		resp, err := answerOCSP(ca, body, clock.Now())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/ocsp-response")
		w.Write(resp)
	}), ReadHeaderTimeout: 10 * time.Second}
	go r.srv.Serve(ln)
	return r, nil
}

// answerOCSP signs a "good" answer to the DER request, as ca.
func answerOCSP(ca *testpki.CA, der []byte, now time.Time) ([]byte, error) {
	req, err := ocsp.ParseRequest(der)
	if err != nil {
		return nil, err
	}
	if req.SerialNumber == nil {
		return nil, errors.New("no serial number")
	}
	return ocsp.CreateResponse(ca.Cert, ca.Cert, ocsp.Response{
		Status:       ocsp.Good,
		SerialNumber: req.SerialNumber,
		ThisUpdate:   now.Add(-time.Minute),
		NextUpdate:   now.Add(time.Hour),
	}, ca.Key)
}

func (r *ocspResponder) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	r.srv.Shutdown(ctx)
}
