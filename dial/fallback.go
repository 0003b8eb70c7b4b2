package dial

// Every decision to fall back, from ZTLS to TLS 1.3 (docs/ztls-spec.md, Section 6) and
// from TurboTLS to TCP alone, and the reason the report gives for it.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"

	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/turbo"
)

// Fallback reasons that are not Z-data verification failures.
const (
	ReasonModeTLS       = "mode tls"
	ReasonNoResolver    = "no DNS resolver for Z-data"
	ReasonIPLiteral     = "address given as an IP: no name to look Z-data up"
	ReasonBudget        = "Z-data not answered within the budget after TCP connected"
	ReasonRejected      = "server rejected the ztls early data (a server without these Z-data keys ignores ztls; a ztls server refuses early data that may be a replay, after a restart that lost its anti-replay memory or while that memory is unavailable, and when it requires client certificates; its log (ztls serve -v) says which)"
	ReasonRemembered    = "server aborted on ztls before (remembered)"
	ReasonServerAborted = "server aborted on the ztls ClientHello; retried without"
	ReasonNoEarly       = "no replay-safe request to send as early data"
	ReasonServerName    = "TLS ServerName differs from the dialled host (Z-data is signed for the dialled host)"
)

// Reasons TurboTLS was not tried (Report.TurboFallback); the reasons it
// was tried and fell back come from package turbo.
const (
	ReasonTurboNoAdvert = "no TurboTLS advertisement (HTTPS key65280)"
	ReasonTurboNoHTTPS  = "HTTPS record not answered within the budget after the address"
	ReasonTurboNoDNS    = "UDP port unknown: no TurboPort, and no HTTPS record to look up (no DNS resolver, or an IP address)"
)

// ErrZTLSImpossible is what Connect's error wraps when Options.Mode is
// "ztls" and ZTLS cannot be used; the error goes on with the reason, one
// that would have been Report.FallbackReason in Mode "auto".
var ErrZTLSImpossible = errors.New(`dial: mode "ztls" impossible`)

// planZTLS decides, before any lookup, whether ZTLS may be tried at all.
func (a *attempt) planZTLS() error {
	a.wantZ = a.o.Mode != ModeTLS
	switch {
	case !a.wantZ:
		a.reason = ReasonModeTLS
	case a.ip.IsValid():
		a.reason, a.wantZ = ReasonIPLiteral, false
	case a.o.Resolver == nil:
		a.reason, a.wantZ = ReasonNoResolver, false
	case len(a.o.Request) == 0 || !a.o.ReplaySafe:
		// ZTLS's gain is the answer to an early request; a request that
		// must not be replayed never goes early (RFC 8470).
		a.reason, a.wantZ = ReasonNoEarly, false
	case !strings.EqualFold(strings.TrimSuffix(a.cfg.ServerName, "."), strings.TrimSuffix(a.host, ".")):
		// The certificate is checked against ServerName, the Z-data and
		// the SNI it needs against the host: one name must serve both.
		a.reason, a.wantZ = ReasonServerName, false
	case a.mem.Aborted(a.host, a.port, a.now()):
		a.reason, a.wantZ = ReasonRemembered, false
	}
	if !a.wantZ {
		return a.requireZTLS()
	}
	return nil
}

// requireZTLS fails an attempt in Mode "ztls" once it is settled that it
// has no verified offer to make, saying why.
func (a *attempt) requireZTLS() error {
	if a.o.Mode == ModeZTLS && a.offer == nil {
		return fmt.Errorf("%w: %s", ErrZTLSImpossible, a.reason)
	}
	return nil
}

// abortedOnZTLS reports whether the handshake c failed with err because
// the server aborted on the ztls ClientHello: an alert, or a closed or
// reset connection, before any ServerHello byte. A server that does not
// know ztls may abort on early_data without a PSK (docs/ztls-spec.md, Section 6); it gets
// one retry without ztls (dropZTLS).
func (a *attempt) abortedOnZTLS(c *tls13.Conn, err error) bool {
	if err == nil || a.offer == nil {
		return false
	}
	for _, ev := range c.Trace() {
		if ev.Event == tls13.EventServerHelloReceived {
			return false
		}
	}
	var ae *tls13.AlertError
	if errors.As(err, &ae) && ae.Alert == tls13.AlertNoApplicationProto {
		// About the ALPN list, not ztls: a retry without ztls would be
		// refused the same way.
		return false
	}
	return errors.As(err, &ae) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		isReset(err) || errors.Is(err, tls13.ErrClosedDuringHandshake)
}

// isReset reports whether err is the peer resetting the connection.
func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// dropZTLS makes the retry after an abort on ztls plain TLS 1.3: the
// server is remembered (ReasonRemembered from now on), and what the
// report said about the aborted attempt's early data is cleared.
func (a *attempt) dropZTLS() {
	a.mem.RememberAbort(a.host, a.port, a.now())
	a.offer, a.reason = nil, ReasonServerAborted
	a.setALPN(a.plainALPN())
	a.r.EarlyData.Bytes = 0
	a.step("ztls_aborted_retry")
}

// settleReason sets the report's mode and fallback reason from what the
// finished handshake did with the offer.
func (a *attempt) settleReason(st tls13.ConnectionState) {
	reason := a.reason
	if st.ZTLS {
		a.r.Mode, reason = "ztls", ""
	} else if a.offer != nil {
		reason = ReasonRejected
		if st.ZTLSSkipped != "" {
			reason = "Z-data not usable: " + st.ZTLSSkipped
		} else {
			a.dropCached() // sent and refused: rotated away since?
		}
	}
	a.r.FallbackReason = reason
}

// turboFallback runs the handshake over TCP when TurboTLS's outcome o is
// a Miss: the server's flight did not finish the handshake over UDP. A
// server that answered the ztls ClientHello sent over UDP with an alert
// gets the one retry without ztls (docs/ztls-spec.md, Section 6), as TLS
// 1.3 on the TCP connection already open, which has carried nothing yet.
// Otherwise the handshake begun over UDP goes on over TCP when it can
// (the flight just did not come, and the ClientHello carries no early
// data), else a new one starts there; a ztls abort on TCP is retried on a
// new TCP connection, without UDP (it just failed to arrive in time).
func (a *attempt) turboFallback(ctx context.Context, o *turbo.Outcome) (*tls13.Conn, error) {
	if o.Miss.Kind == turbo.MissAborted && a.offer != nil {
		a.dropZTLS()
		c, err := a.handshake(ctx, o.TCP)
		if err != nil {
			o.TCP.Close()
			return nil, err
		}
		return c, nil
	}
	var same *tls13.Conn
	if o.CanContinue() {
		var err error
		if same, err = o.ContinueOnTCP(); err != nil {
			o.TCP.Close()
			return nil, fmt.Errorf("dial: %w", err)
		}
	}
	return a.handshakeTCP(ctx, o.TCP, same)
}
