package dial

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/zdata"
)

// Report is the connection report of `ztls connect --json`:
// what was negotiated, whether early data went through, and where the
// time went, measured from the start of the DNS lookup.
type Report struct {
	Mode           string `json:"mode"`      // "ztls" or "tls"
	Transport      string `json:"transport"` // "tcp" or "turbo"
	FallbackReason string `json:"fallback_reason"`
	// TurboFallback says why a TurboTLS connection (Options.Turbo) ran
	// over TCP alone; Turbo has its UDP figures when it was tried.
	TurboFallback string       `json:"turbo_fallback_reason,omitempty"`
	Turbo         *TurboReport `json:"turbo,omitempty"`
	EarlyData     EarlyReport  `json:"early_data"`
	TLS           TLSReport    `json:"tls"`
	Timing        Timing       `json:"timing_ms"`
	ResponseBytes int          `json:"response_bytes"`
	Address       string       `json:"address,omitempty"`
	PeerChain     []string     `json:"peer_chain,omitempty"` // subjects, leaf first
	Trace         []TraceStep  `json:"trace,omitempty"`
	Error         string       `json:"error,omitempty"` // why it failed; the report is as far as it got
	// AnswerInFirstFlight: the response arrived with the server's first
	// flight, before the client's Finished left (ZTLS's one round trip).
	AnswerInFirstFlight bool `json:"answer_in_first_flight"`
	// ResponseLimited: reading stopped at Options.ReadResponse bytes
	// before the server closed the connection.
	ResponseLimited bool `json:"response_limited,omitempty"`
	// Prefetch says what came from the Cache: PrefetchValidated (no DNS
	// lookup, no certificate verification before the first flight),
	// PrefetchDNS (the DNS answers only) or "" (nothing).
	Prefetch string `json:"prefetch,omitempty"`
	// PrefetchDropped: the server refused the cached Z-data, and the
	// entry was dropped from the cache.
	PrefetchDropped bool `json:"prefetch_dropped,omitempty"`
	// ZDataFrom is the record the Z-data checked came from:
	// ZDataFromHTTPS ("https": the HTTPS record's key65370,
	// docs/ztls-spec.md, Section 8) or ZDataFromTXT ("txt"); "" when none
	// was checked. With ZTLS it is the record used; after a fallback, the
	// one whose failure FallbackReason gives.
	ZDataFrom string `json:"zdata_from,omitempty"`
	// HTTPSZDataSkipped says why the HTTPS record's Z-data was not used
	// when it was looked for (none in the record, a malformed value, an
	// alias loop, Z-data for another endpoint): the TXT record was then
	// asked for.
	HTTPSZDataSkipped string `json:"https_zdata_skipped,omitempty"`
	// PostQuantum is the post-quantum policy the connection ran under
	// (Options.PostQuantum: prefer, only or classical).
	PostQuantum string `json:"post_quantum_policy"`
	// ECH is what became of Encrypted ClientHello (Options.ECH):
	// accepted, rejected, grease or none; ECHRetried, that the server
	// rejected the first config and the one retry used its retry configs
	// (or, with ECHAuto and no retry configs, went without ECH: ECH is
	// then none).
	ECH        string `json:"ech"`
	ECHRetried bool   `json:"ech_retried,omitempty"`
}

// Report.Prefetch values.
const (
	// PrefetchValidated: the addresses, the HTTPS record and the Z-data
	// verdict came from the cache, and the chains it verified were not
	// verified again.
	PrefetchValidated = "validated"
	// PrefetchDNS: the DNS answers came from the cache (an entry loaded
	// from a file, or validated under another certificate policy); the
	// Z-data and the certificate were verified as without a cache.
	PrefetchDNS = "dns"
)

// TurboReport is the UDP side of a TurboTLS attempt.
type TurboReport struct {
	UDPPort       int     `json:"udp_port"`
	Requests      int     `json:"requests"`  // request datagrams sent
	Responses     int     `json:"responses"` // response datagrams received
	BytesSent     int     `json:"bytes_sent"`
	BytesReceived int     `json:"bytes_received"`
	ServerFlight  int     `json:"server_flight"` // bytes (0: incomplete)
	WaitedMS      float64 `json:"waited_ms"`     // after TCP connected
}

// EarlyReport says what happened to 0-RTT data.
type EarlyReport struct {
	Offered  bool `json:"offered"`
	Accepted bool `json:"accepted"`
	Bytes    int  `json:"bytes"`
	// BFE: the accepted ZTLS early secret also rested on the server's
	// Bloom filter encryption key (docs/ztls-spec.md, Section 7).
	BFE bool `json:"bfe,omitempty"`
	// PostQuantum: the early data was sent under a v3 (X25519MLKEM768)
	// record (docs/ztls-spec.md, Section 9): confidential against a
	// future quantum computer, whether the server accepted it or not.
	PostQuantum bool `json:"post_quantum"`
	// ClassicalForced: the early data went under a classical record only
	// because the user opted in (PQClassical) while the service announced
	// v3 records or was pinned to them.
	ClassicalForced bool `json:"classical_forced,omitempty"`
}

// TLSReport is the negotiated TLS parameters.
type TLSReport struct {
	Version     string `json:"version"`
	CipherSuite string `json:"cipher_suite"`
	Group       string `json:"group"`
	Resumed     bool   `json:"resumed"`
	ALPN        string `json:"alpn"`
	Signature   string `json:"signature_scheme,omitempty"`
	// CertificateFromDNS: ZTLS let the server omit its Certificate; the
	// leaf verified is the TLSA record's.
	CertificateFromDNS bool `json:"certificate_from_dns,omitempty"`
	// CertificateCompression is the algorithm (RFC 8879) the server's
	// Certificate came compressed with ("brotli"); "" when it came whole
	// or was omitted.
	CertificateCompression string `json:"certificate_compression,omitempty"`
	// Chain is where the verified chain came from: "verified" (for this
	// connection), "cache" (verified by an earlier connection, the
	// Cache's tls13.ChainCache; revocation checked again) or
	// "prevalidated" (by Prefetch); see tls13.ConnectionState.ChainSource.
	Chain string `json:"chain,omitempty"`
}

// Timing holds milliseconds since the start of the DNS lookup, except
// dns, tcp_connect and handshake, which are durations of those steps.
// FirstByte is 0 when no response byte came.
type Timing struct {
	DNS        float64 `json:"dns"`
	TCPConnect float64 `json:"tcp_connect"`
	Handshake  float64 `json:"handshake"`
	FirstByte  float64 `json:"first_byte"`
	Total      float64 `json:"total"`
}

// TraceStep is one timed event of the connection.
type TraceStep struct {
	Step string  `json:"step"`
	AtMS float64 `json:"at_ms"`
}

// ms is milliseconds with microsecond resolution.
func ms(d time.Duration) float64 { return math.Round(float64(d.Microseconds())) / 1000 }

// fillTLS copies the negotiated parameters from a connection state.
func (r *Report) fillTLS(st tls13.ConnectionState) {
	r.TLS = TLSReport{
		Version:     "TLS 1.3",
		CipherSuite: st.CipherSuite.String(),
		Resumed:     st.DidResume,
		ALPN:        st.NegotiatedProtocol,
	}
	if st.Group != 0 {
		r.TLS.Group = st.Group.String()
	}
	if st.SignatureScheme != 0 {
		r.TLS.Signature = st.SignatureScheme.String()
	}
	r.TLS.CertificateFromDNS = st.CertificateOmitted
	if st.CertificateCompression != 0 {
		r.TLS.CertificateCompression = st.CertificateCompression.String()
	}
	r.TLS.Chain = st.ChainSource
	r.EarlyData.Offered = st.EarlyDataOffered
	r.EarlyData.Accepted = st.EarlyDataAccepted
	r.EarlyData.BFE = st.ZTLSBFE
	for _, c := range st.PeerCertificates {
		r.PeerChain = append(r.PeerChain, c.Subject.String())
	}
}

// WriteText prints the report for people.
func (r *Report) WriteText(w io.Writer) {
	mode := strings.ToUpper(r.Mode)
	if r.Mode == "tls" {
		mode = "TLS 1.3"
	}
	fmt.Fprintf(w, "connected to %s: %s over %s", r.Address, mode, r.Transport)
	switch {
	case r.FallbackReason == "":
	case r.fellBack():
		fmt.Fprintf(w, " (fell back from ZTLS because %s)", r.FallbackReason)
	default:
		fmt.Fprintf(w, " (no ZTLS: %s)", r.FallbackReason)
	}
	if r.TurboFallback != "" {
		fmt.Fprintf(w, " (TurboTLS not used: %s)", r.TurboFallback)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  %s, %s, %s", r.TLS.Version, r.TLS.CipherSuite, orNone(r.TLS.Group, "no key exchange (psk_ke)"))
	if r.TLS.Signature != "" {
		fmt.Fprintf(w, ", signed with %s", r.TLS.Signature)
	}
	if r.TLS.ALPN != "" {
		fmt.Fprintf(w, ", ALPN %s", r.TLS.ALPN)
	}
	if r.TLS.Resumed {
		fmt.Fprint(w, ", resumed")
	}
	fmt.Fprintln(w)
	r.writeChain(w)
	if r.EarlyData.Offered {
		state := "rejected"
		if r.EarlyData.Accepted {
			state = "accepted"
		}
		fmt.Fprintf(w, "  early data: %d bytes offered, %s\n", r.EarlyData.Bytes, state)
	}
	r.writePQ(w)
	r.writeECH(w)
	r.writeZDataFrom(w)
	switch r.Prefetch {
	case PrefetchValidated:
		fmt.Fprintln(w, "  prefetched: addresses, Z-data and chain validated ahead (no lookup, no verification before the first flight)")
	case PrefetchDNS:
		fmt.Fprintln(w, "  prefetched: the DNS answers (no lookup); verified on connecting")
	}
	if r.PrefetchDropped {
		fmt.Fprintln(w, "  the server refused the prefetched Z-data: dropped from the cache")
	}
	if u := r.Turbo; u != nil {
		fmt.Fprintf(w, "  TurboTLS: UDP port %d, %d request datagrams (%d bytes) out, %d (%d bytes) back", u.UDPPort,
			u.Requests, u.BytesSent, u.Responses, u.BytesReceived)
		if u.ServerFlight > 0 {
			fmt.Fprintf(w, ", server flight %d bytes", u.ServerFlight)
		}
		fmt.Fprintf(w, ", waited %.1f ms after TCP connected\n", u.WaitedMS)
	}
	t := r.Timing
	first := "no response byte"
	if r.ResponseBytes > 0 {
		first = fmt.Sprintf("first byte at %.1f ms", t.FirstByte)
	}
	fmt.Fprintf(w, "  time: dns %.1f ms, tcp connect %.1f ms, handshake %.1f ms, %s, total %.1f ms\n",
		t.DNS, t.TCPConnect, t.Handshake, first, t.Total)
	r.writeSteps(w)
	limited := ""
	if r.ResponseLimited {
		limited = " (stopped there: the most asked for)"
	}
	fmt.Fprintf(w, "  response: %d bytes%s\n", r.ResponseBytes, limited)
}

// writeZDataFrom prints which record the Z-data came from, and why the
// HTTPS record's was not used.
func (r *Report) writeZDataFrom(w io.Writer) {
	switch r.ZDataFrom {
	case ZDataFromHTTPS:
		fmt.Fprintln(w, "  Z-data from the HTTPS record (key65370; no TXT query)")
	case ZDataFromTXT:
		fmt.Fprint(w, "  Z-data from the TXT record")
		if r.HTTPSZDataSkipped != "" {
			fmt.Fprintf(w, " (asked after the HTTPS record: %s)", r.HTTPSZDataSkipped)
		}
		fmt.Fprintln(w)
	default:
		if r.HTTPSZDataSkipped != "" {
			fmt.Fprintf(w, "  no Z-data from the HTTPS record: %s\n", r.HTTPSZDataSkipped)
		}
	}
}

// writeChain prints the verified chain and where it came from, or that
// none was verified.
func (r *Report) writeChain(w io.Writer) {
	if len(r.PeerChain) == 0 {
		if !r.TLS.Resumed {
			fmt.Fprintln(w, "  certificate NOT verified (InsecureSkipVerify)")
		}
		return
	}
	from := ""
	if r.TLS.CertificateFromDNS {
		from = " (leaf from DNS: the server omitted its Certificate)"
	}
	switch r.TLS.Chain {
	case tls13.ChainCached:
		from += " (verified by an earlier connection: from the chain cache, revocation checked again)"
	case tls13.ChainPrevalidated:
		from += " (verified ahead, by the prefetch)"
	}
	if r.TLS.CertificateCompression != "" {
		from += " (sent " + r.TLS.CertificateCompression + "-compressed)"
	}
	fmt.Fprintf(w, "  verified chain: %s%s\n", strings.Join(r.PeerChain, " <- "), from)
}

// writeSteps prints the trace in the order the steps happened (several
// parts of dial append to it, not in time order), those of one moment
// (one record batch) together.
func (r *Report) writeSteps(w io.Writer) {
	if len(r.Trace) == 0 {
		return
	}
	steps := slices.Clone(r.Trace)
	slices.SortStableFunc(steps, func(a, b TraceStep) int { return cmp.Compare(a.AtMS, b.AtMS) })
	fmt.Fprint(w, "  steps (ms from the start):")
	for i := 0; i < len(steps); {
		j := i + 1
		for j < len(steps) && steps[j].AtMS == steps[i].AtMS {
			j++
		}
		names := make([]string, 0, j-i)
		for _, s := range steps[i:j] {
			names = append(names, s.Step)
		}
		sep := ","
		if i == 0 {
			sep = ""
		}
		fmt.Fprintf(w, "%s %s %.2f", sep, strings.Join(names, "+"), steps[i].AtMS)
		i = j
	}
	fmt.Fprintln(w)
}

// fellBack reports whether ZTLS was tried and given up (Z-data found but
// not usable, an offer the server refused or aborted on, answers too late),
// as opposed to never tried: Mode "tls", no Z-data published, nothing to
// send early, no name or resolver to look the Z-data up with.
func (r *Report) fellBack() bool {
	if r.FallbackReason == "" {
		return false
	}
	// A reason may go on with details (the name looked up, why the
	// request is not replay-safe).
	for _, notTried := range []string{ReasonModeTLS, ReasonNoResolver, ReasonIPLiteral, ReasonNoEarly,
		ReasonServerName, ReasonRemembered, string(zdata.ReasonNoZData)} {
		if strings.HasPrefix(r.FallbackReason, notTried) {
			return false
		}
	}
	return true
}

func orNone(s, none string) string {
	if s == "" {
		return none
	}
	return s
}
