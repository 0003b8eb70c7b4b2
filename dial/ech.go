package dial

// Encrypted ClientHello from the HTTPS record (docs/ztls-spec.md,
// Section 10): the ech SvcParam (RFC 9848) of the origin's HTTPS answer
// becomes the connection's tls13.Config.ECHConfigList, with ZTLS inside
// the ClientHelloInner. A server that rejects ECH with retry configs
// gets one retry with them, on a new connection; the rejected
// connection delivered nothing (its early data was under keys the server
// did not have), so the request goes exactly once.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/tls13"
)

// ECHMode says whether a connection uses Encrypted ClientHello
// (Options.ECH).
type ECHMode string

const (
	// ECHAuto uses ECH when the HTTPS record publishes a usable config;
	// "" means the same.
	ECHAuto ECHMode = "auto"
	// ECHRequire fails the connection (ErrECHRequired) when the record
	// publishes none, or the server rejects ECH after the one retry: the
	// server name never goes in clear.
	ECHRequire ECHMode = "require"
	// ECHOff never uses ECH.
	ECHOff ECHMode = "off"
)

// Report.ECH values besides tls13's accepted, rejected and grease.
const ECHReportNone = "none"

// ErrECHRequired is what Connect's error wraps when Options.ECH is
// ECHRequire and ECH cannot be used or was rejected.
var ErrECHRequired = errors.New(`dial: ECH required`)

// echHTTPSWait is how long ECHRequire waits for the HTTPS answer after
// the address (ECHAuto waits the Z-data budget).
const echHTTPSWait = 5 * time.Second

// ParseECHMode parses "auto", "require" or "off" ("" is auto).
func ParseECHMode(s string) (ECHMode, error) {
	switch ECHMode(s) {
	case "", ECHAuto, ECHRequire, ECHOff:
		return ECHMode(s), nil
	}
	return "", fmt.Errorf("dial: unknown ECH mode %q (want auto, require or off)", s)
}

// echState is an attempt's ECH: the config list in use, and whether the
// one retry with the server's retry configs was made.
type echState struct {
	settled bool
	list    []byte
	retried bool
}

// settleECH fixes, before the first ClientHello, the ECHConfigList: the
// HTTPS record's ech when it has a usable config (waited for up to the
// Z-data budget, or echHTTPSWait with ECHRequire), none otherwise.
func (a *attempt) settleECH(ctx context.Context) error {
	if a.ech.settled || a.o.ECH == ECHOff {
		return nil
	}
	a.ech.settled = true
	if a.cfg.ECHConfigList != nil {
		a.ech.list = a.cfg.ECHConfigList // the application's own
		return nil
	}
	wait := a.budget()
	if a.o.ECH == ECHRequire {
		wait = echHTTPSWait
	}
	a.awaitHTTPS(ctx, wait)
	list, why := echFromAnswer(a)
	if list == nil && a.o.ECH == ECHRequire {
		return fmt.Errorf("%w: %s: connect without --ech (the server name then goes in clear), or publish ECH keys ('ztls zdata new|rotate --ech-public-name NAME')", ErrECHRequired, why)
	}
	a.ech.list = list
	return nil
}

// awaitHTTPS waits up to wait for the origin's HTTPS answer, unless it
// is in.
func (a *attempt) awaitHTTPS(ctx context.Context, wait time.Duration) {
	if a.https != nil || a.look == nil {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case a.https = <-a.look.https:
	case <-t.C:
	case <-ctx.Done():
	}
}

// echFromAnswer is the ech SvcParam of the first ServiceMode record that
// carries one with a usable config, or nil and why there is none.
func echFromAnswer(a *attempt) ([]byte, string) {
	if a.https == nil {
		return nil, "no HTTPS record answered for " + a.host
	}
	why := "the HTTPS record of " + a.host + " carries no ech"
	for _, rr := range a.https.RRs {
		h, ok := rr.(*dns.HTTPS)
		if !ok || h.Priority == 0 {
			continue
		}
		for _, kv := range h.Value {
			e, ok := kv.(*dns.SVCBECHConfig)
			if !ok {
				continue
			}
			infos, err := tls13.ParseECHConfigList(e.ECH)
			if err != nil {
				why = "the HTTPS record's ech is malformed: " + err.Error()
				continue
			}
			for _, i := range infos {
				if i.Usable {
					return e.ECH, ""
				}
			}
			why = "the HTTPS record's ech has no config this client can use"
		}
	}
	return nil, why
}

// echConfig is the configuration of a new handshake: a.cfg with the
// ECHConfigList settled (a.cfg itself without), its ALPN list in the
// configured order: the engine puts the outer ClientHello's alpn in
// NextProtos' order, and the Z-data's protocol moved first (alpnFor)
// would hint at a ZTLS offer there (spec Section 10.1); the engine moves
// it first in the inner ClientHello itself.
func (a *attempt) echConfig() *tls13.Config { return a.withECH(a.cfg) }

// withECH is echConfig for another configuration of the attempt (TurboTLS's
// first flight made from the likeliest record has its own ALPN list).
func (a *attempt) withECH(base *tls13.Config) *tls13.Config {
	if a.ech.list == nil {
		return base
	}
	cfg := base.Clone()
	cfg.ECHConfigList = a.ech.list
	cfg.NextProtos = configuredOrder(a.protos, cfg.NextProtos)
	return cfg
}

// configuredOrder is protos in the order of configured (those not in it
// after, as they were).
func configuredOrder(configured, protos []string) []string {
	out := make([]string, 0, len(protos))
	for _, p := range configured {
		if slices.Contains(protos, p) && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	for _, p := range protos {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return protos // nil stays nil: no ALPN
	}
	return out
}

// retryECH reports whether the handshake that failed with err is to be
// retried once with the server's retry configs (taken as the list).
// With ECHAuto, a server that sent no retry configs (it does not do ECH
// for this name now, though the record says so) gets one retry without
// ECH, the name in clear as with no ech published.
func (a *attempt) retryECH(err error) bool {
	var rej *tls13.ECHRejectedError
	if a.ech.retried || !errors.As(err, &rej) {
		return false
	}
	switch {
	case len(rej.RetryConfigList) > 0:
		a.ech.list = rej.RetryConfigList
		a.step("ech_retry")
	case a.o.ECH != ECHRequire && a.cfg.ECHConfigList == nil:
		a.ech.list = nil
		a.step("ech_retry_without")
	default:
		return false
	}
	a.ech.retried, a.r.ECHRetried = true, true
	return true
}

// echError is err, wrapping ErrECHRequired when ECH was required and
// rejected.
func (a *attempt) echError(err error) error {
	var rej *tls13.ECHRejectedError
	if a.o.ECH == ECHRequire && errors.As(err, &rej) {
		return fmt.Errorf("%w: the server rejected ECH (authenticated as its public name %q)%s: %v", ErrECHRequired, rej.PublicName,
			map[bool]string{true: " after the retry with its retry configs", false: ""}[a.ech.retried], err)
	}
	return err
}

// reportECH puts the connection's ECH status in the report.
func (a *attempt) reportECH(st tls13.ConnectionState) {
	a.r.ECH = string(st.ECH)
	if st.ECH == tls13.ECHNone {
		a.r.ECH = ECHReportNone
	}
}

// writeECH prints the ECH line when ECH was used.
func (r *Report) writeECH(w io.Writer) {
	if r.ECH == "" || r.ECH == ECHReportNone {
		if r.ECHRetried {
			fmt.Fprintln(w, "  Encrypted ClientHello: rejected without retry configs; retried once without ECH (the name in clear)")
		}
		return
	}
	retried := ""
	if r.ECHRetried {
		retried = " (after one retry with the server's retry configs)"
	}
	fmt.Fprintf(w, "  Encrypted ClientHello: %s%s\n", r.ECH, retried)
}
