// Package metrics is what the ztls servers (serve, dns serve,
// turbo-proxy) expose to Prometheus on --metrics ADDR: handshakes by mode,
// ZTLS offers accepted and rejected by reason, early data, fallbacks,
// strike-register errors, DNS queries by type and rcode, TurboTLS
// datagrams, and when the Z-data keys run out. Each server makes one
// Registry; nothing here is global, so tests can run several.
package metrics

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ztls-project/ztls/tls13"
)

// Registry holds one server's metrics.
type Registry struct {
	reg *prometheus.Registry

	handshakes   *prometheus.CounterVec
	failures     prometheus.Counter
	ztls         *prometheus.CounterVec
	earlyBytes   prometheus.Counter
	strikeErrors prometheus.Counter
	ech          *prometheus.CounterVec
	dnsQueries   *prometheus.CounterVec

	ready atomic.Pointer[func() error] // /readyz's check; nil: starting
}

// New makes a registry with the Go runtime and process collectors and
// ztls_build_info. A server then adds the series it updates (TLSServer,
// DNSServer, GaugeFunc, CounterFunc) and no others, so that no series it
// exports stays 0 because nothing could move it.
func New() *Registry {
	r := &Registry{reg: prometheus.NewRegistry()}
	r.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfo())
	r.handshakes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ztls_handshakes_total",
		Help: "Server first flights sent, by mode (tls, ztls, resumed, resumed_0rtt) and transport (tcp, turbo); failures count separately.",
	}, []string{"mode", "transport"})
	r.failures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ztls_handshake_failures_total",
		Help: "Server handshakes that failed (bad input, timeouts, refused certificates).",
	})
	r.ztls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ztls_ztls_offers_total",
		Help: "ZTLS offers by result (accepted, rejected) and reason of a rejection (replay, register, client_clock, client_auth, unknown_record, sni, binder, suite, alpn, hrr, no_keys, other).",
	}, []string{"result", "reason"})
	r.earlyBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ztls_early_data_bytes_total",
		Help: "Bytes of 0-RTT and ZTLS early data accepted and read, whatever serves them (answer, echo, reverse proxy).",
	})
	r.strikeErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ztls_strike_register_errors_total",
		Help: "Early data refused because the anti-replay register was unavailable or too young (restart, lost data).",
	})
	r.ech = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ztls_ech_total",
		Help: "Encrypted ClientHellos by result: accepted (decrypted), rejected (the outer could not be decrypted — a retired or unknown config, or a GREASE extension — the handshake went on with the outer and the retry configs).",
	}, []string{"result"})
	r.dnsQueries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ztls_dns_queries_total",
		Help: "DNS queries answered by the authority, by query type and response code.",
	}, []string{"qtype", "rcode"})
	return r
}

// TLSServer exports the series of a TLS server (Flight, EarlyBytes,
// HandshakeFailed): handshakes by mode, ZTLS offers, early data bytes,
// strike-register refusals and failures. Call it once.
func (r *Registry) TLSServer() *Registry {
	r.reg.MustRegister(r.handshakes, r.failures, r.ztls, r.earlyBytes, r.strikeErrors, r.ech)
	return r
}

// DNSServer exports the series of a DNS server (DNSMiddleware,
// DNSAnswered): queries by type and response code. Call it once.
func (r *Registry) DNSServer() *Registry {
	r.reg.MustRegister(r.dnsQueries)
	return r
}

// buildInfo is ztls_build_info, 1, labelled as Prometheus's own
// <name>_build_info: the module's version, the VCS revision it was built
// from, and the Go toolchain, OS and architecture.
func buildInfo() prometheus.Collector {
	version, revision := "unknown", "unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		version = info.Main.Version
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				revision = s.Value
			}
		}
	}
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ztls_build_info",
		Help: "Always 1; its labels say which ztls build runs (version, revision) and how it was built (goversion, goos, goarch).",
		ConstLabels: prometheus.Labels{
			"version": version, "revision": revision,
			"goversion": runtime.Version(), "goos": runtime.GOOS, "goarch": runtime.GOARCH,
		},
	}, func() float64 { return 1 })
}

// Flight records a server first flight once it is out (when ZTLS and
// early data are decided). A nil Registry records nothing, so servers
// without --metrics call it all the same.
func (r *Registry) Flight(st tls13.ConnectionState, turbo bool) {
	if r == nil {
		return
	}
	mode := "tls"
	switch {
	case st.ZTLS:
		mode = "ztls"
	case st.DidResume && st.EarlyDataAccepted:
		mode = "resumed_0rtt"
	case st.DidResume:
		mode = "resumed"
	}
	transport := "tcp"
	if turbo {
		transport = "turbo"
	}
	r.handshakes.WithLabelValues(mode, transport).Inc()
	if st.ECH == tls13.ECHAccepted || st.ECH == tls13.ECHRejected {
		r.ech.WithLabelValues(string(st.ECH)).Inc()
	}
	if st.ZTLS {
		r.ztls.WithLabelValues("accepted", "").Inc()
	} else if st.ZTLSOffered {
		reason := RejectReason(st.ZTLSRejectReason)
		r.ztls.WithLabelValues("rejected", reason).Inc()
		if reason == "register" {
			r.strikeErrors.Inc()
		}
	}
}

// EarlyBytes counts accepted early data read by the application.
func (r *Registry) EarlyBytes(n int) {
	if r != nil {
		r.earlyBytes.Add(float64(n))
	}
}

// HandshakeFailed counts a failed handshake.
func (r *Registry) HandshakeFailed() {
	if r != nil {
		r.failures.Inc()
	}
}

// RejectReason maps a server's ZTLS rejection reason (which may hold
// numbers) to one of a few label values.
func RejectReason(s string) string {
	for _, c := range []struct{ prefix, label string }{
		{"replayed ClientHello", "replay"},
		{"strike register", "register"},
		{"client clock", "client_clock"},
		{"server requires client certificates", "client_auth"},
		{"no live Z-data record", "unknown_record"},
		{"SNI ", "sni"},
		{"binder", "binder"},
		{"early_suite", "suite"},
		{"negotiated ALPN", "alpn"},
		{"HelloRetryRequest", "hrr"},
		{"server has no Z-data keys", "no_keys"},
	} {
		if strings.HasPrefix(s, c.prefix) {
			return c.label
		}
	}
	return "other"
}

// DNSQuery counts one answered query.
func (r *Registry) DNSQuery(qtype, rcode string) {
	if r != nil {
		r.dnsQueries.WithLabelValues(qtype, rcode).Inc()
	}
}

// GaugeFunc adds a gauge read when scraped (key expiry, table sizes),
// with constant labels given as name, value pairs (one gauge per service).
func (r *Registry) GaugeFunc(name, help string, f func() float64, labels ...string) {
	cl := prometheus.Labels{}
	for i := 0; i+1 < len(labels); i += 2 {
		cl[labels[i]] = labels[i+1]
	}
	r.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: cl}, f))
}

// CounterFunc adds a counter read when scraped from a server's own
// running totals (TurboTLS datagrams, RRL drops).
func (r *Registry) CounterFunc(name, help string, f func() float64) {
	r.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f))
}

// SetReady says the server is up (its listeners bound, its keys loaded):
// from then on /readyz answers 200 while check returns nil, and 503 with
// check's error otherwise. check (nil: always ready) runs on every probe,
// so it must be cheap and bounded in time. Before SetReady, /readyz
// answers 503 "starting".
func (r *Registry) SetReady(check func() error) {
	if r == nil {
		return
	}
	if check == nil {
		check = func() error { return nil }
	}
	r.ready.Store(&check)
}

// Serve exposes the registry until ctx ends, on http://addr/:
//   - /metrics: the series, for Prometheus;
//   - /healthz: liveness, 200 "ok" whenever the process answers HTTP;
//   - /readyz: readiness, 200 "ready" once SetReady was called and its
//     check passes, else 503 with the reason (take the server out of a
//     load balancer's rotation, but do not restart it).
//
// It returns the address it listens on (for addr ":0") once it listens.
func (r *Registry) Serve(ctx context.Context, addr string) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("/readyz", r.serveReady)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			ln.Close()
		}
	}()
	return ln.Addr(), nil
}

// serveReady answers /readyz.
func (r *Registry) serveReady(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	check := r.ready.Load()
	if check == nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "not ready: starting\n")
		return
	}
	if err := (*check)(); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "not ready: "+err.Error()+"\n")
		return
	}
	io.WriteString(w, "ready\n")
}
