// Package lab starts a complete ztls world on loopback: a private CA, an
// authoritative DNS server publishing a host's address and Z-data, and a
// ZTLS server for that host. The demo and the end-to-end tests use it.
package lab

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dns/authority"
	"github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/server"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/turbo"
	"github.com/ztls-project/ztls/zdata"
)

// Options shape the world; the zero value is the demo's.
type Options struct {
	Host         string // default "www.ztls.test"
	Respond      string // what the server answers to each request; default "hello"
	NoZData      bool   // publish no Z-data (a plain TLS 1.3 site)
	ServerZData  *bool  // give the server the Z-data keys (default: when published)
	ZDataOptions zdata.Options
	Now          func() time.Time
	// Handler replaces the default respond-once server loop.
	Handler func(*tls13.Conn)
	// External: start no TLS server; publish Z-data for a free port that
	// another server (OpenSSL, GnuTLS, crypto/tls) will listen on, with the
	// certificate and key written to CertFile and KeyFile.
	External bool
	// Dir receives the PEM files (External); default a new temp dir.
	Dir string
	// AltNames are extra DNS names on the certificate.
	AltNames []string
	// HostIP is the address published for Host; default 127.0.0.1.
	HostIP string
	// Turbo also serves TurboTLS on UDP (the TCP port's number) and
	// publishes the HTTPS record advertising it (key65280).
	Turbo bool
	// HTTPSZData also publishes the Z-data in the service's HTTPS record
	// (key65370, docs/ztls-spec.md, Section 8), built by
	// zdata.HTTPSRecord: one ServiceMode RR with alpn h2,http/1.1 and,
	// with Turbo, TurboTLS's key65280 beside it.
	HTTPSZData bool
	// NoTXT, with HTTPSZData, publishes the Z-data in the HTTPS record
	// only: no TXT record (the TLSA and CERT records stay).
	NoTXT bool
	// PostQuantum also publishes v3 records (docs/ztls-spec.md, Section 9):
	// a second Service of group X25519MLKEM768 (World.PQService) sharing
	// the classical one's keyring, whose records then announce it
	// (zdata.Options.AnnouncePQ) unless PQNoAnnounce. The v3 records go
	// in TXT only (Section 9.8); the TXT answer then exceeds 1232 bytes
	// and comes over TCP.
	PostQuantum  bool
	PQNoAnnounce bool
}

// World is the running set-up. Close stops everything it started.
type World struct {
	Host       string
	Port       int
	ServerAddr string // 127.0.0.1:port of the TLS server
	DNSAddr    string // 127.0.0.1:port of the authority (UDP and TCP)
	Roots      *x509.CertPool
	Service    *zdata.Service
	Zones      *authority.Zones
	ServerTLS  *tls13.Config
	Cert       tls13.Certificate
	CertFile   string           // External: PEM chain
	KeyFile    string           // External: PEM key
	CAFile     string           // External: PEM root
	Turbo      *turbo.TLSServer // the UDP side (Options.Turbo)
	PQService  *zdata.Service   // the v3 records' Service (Options.PostQuantum), sharing Service's keyring

	opts     Options
	queries  sync.Map // "name/TYPE" -> *atomic.Int64: the authority's queries
	ca       *testpki.CA
	now      func() time.Time
	closers  []func()
	wg       sync.WaitGroup
	accepted atomic.Int64 // TCP connections the server accepted
}

// Start builds and starts a world.
func Start(o Options) (w *World, err error) {
	if o.Host == "" {
		o.Host = "www.ztls.test"
	}
	if o.Respond == "" {
		o.Respond = "hello"
	}
	if o.Now == nil {
		o.Now = clock.Now
	}
	if o.HostIP == "" {
		o.HostIP = "127.0.0.1"
	}
	world := &World{Host: o.Host, opts: o}
	w = world
	defer func() {
		if err != nil {
			world.Close()
		}
	}()
	if w.ca, err = testpki.MakeCA("ecdsa-p256"); err != nil {
		return nil, err
	}
	w.now = o.Now
	w.Roots = w.ca.Pool()
	cert, err := w.IssueCert(append([]string{o.Host}, o.AltNames...)...)
	if err != nil {
		return nil, err
	}
	w.Cert = cert

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ln = &countingListener{Listener: ln, n: &w.accepted}
	w.closers = append(w.closers, func() { ln.Close() })
	w.ServerAddr = ln.Addr().String()
	w.Port = ln.Addr().(*net.TCPAddr).Port
	if o.External {
		ln.Close() // the external server binds the port
		if err := w.writePEM(o.Dir); err != nil {
			return nil, err
		}
	}

	zo := o.ZDataOptions
	zo.AnnouncePQ = zo.AnnouncePQ || (o.PostQuantum && !o.PQNoAnnounce)
	svc, err := zdata.NewService(o.Host, w.Port, cert, zo, nil)
	if err != nil {
		return nil, err
	}
	if _, err := svc.Rotate(o.Now()); err != nil {
		return nil, err
	}
	w.Service = svc
	if o.PostQuantum {
		if w.PQService, err = w.newPQService(cert); err != nil {
			return nil, err
		}
	}
	// The lab made these Z-data keys (and the server's ticket key) just
	// now for this one server, so nothing took early data under them
	// before its register: the register may say it saw everything (the
	// zero time), where a real server's starts when it does.
	w.ServerTLS = &tls13.Config{Certificates: []tls13.Certificate{cert}, Time: o.Now,
		StrikeRegister: tls13.NewMemoryStrikeRegister(1<<16, time.Time{})}
	serverKeys := !o.NoZData
	if o.ServerZData != nil {
		serverKeys = *o.ServerZData
	}
	if serverKeys {
		w.ServerTLS.ZData = svc.Keyring
	}

	// The authority: SOA, NS, the host's address, and its Z-data.
	zone := dns.Fqdn(parentOf(o.Host))
	rrs := []dns.RR{
		mustRR(zone + " 3600 IN SOA ns1." + zone + " hostmaster." + zone + " 1 3600 600 86400 60"),
		mustRR(zone + " 3600 IN NS ns1." + zone),
		mustRR("ns1." + zone + " 3600 IN A 127.0.0.1"),
		mustRR(dns.Fqdn(o.Host) + " 300 IN A " + o.HostIP),
	}
	rrs = append(rrs, w.serviceRRs(o.Now(), cert.Chain[1:])...)
	z, err := authority.NewZone(zone, rrs)
	if err != nil {
		return nil, err
	}
	zones, err := authority.NewZones(z)
	if err != nil {
		return nil, err
	}
	w.Zones = zones
	// One client asks every question of the world, the same ones again
	// and again: response rate limiting, which counts identical answers
	// per client network, would drop its repeats. The lab is no target.
	srv := &authority.Server{Handler: authority.Chain(zones, w.countQueries, authority.CheckQuery),
		RateLimit: &authority.RateLimit{ResponsesPerSecond: 0}}
	pc, dl, err := authority.ListenUDPAndTCP("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	w.DNSAddr = pc.LocalAddr().String()
	w.closers = append(w.closers, func() { srv.Close(); pc.Close(); dl.Close() })
	w.wg.Add(2)
	go func() { defer w.wg.Done(); srv.ServeUDP(pc) }()
	go func() { defer w.wg.Done(); srv.ServeTCP(dl) }()

	handler := o.Handler
	if handler == nil {
		handler = respondOnce(o.Respond)
	}
	if o.External {
		return w, nil
	}
	return w, w.serve(ln, handler, o)
}

// serve serves TLS on ln, each connection with 10 s from its accept to
// its end; with o.Turbo also TurboTLS on the UDP port of the same number,
// where an early request is answered in the UDP flight when the default
// handler is in use. Close stops accepting and waits for the handlers.
func (w *World) serve(ln net.Listener, handler func(*tls13.Conn), o Options) error {
	cfg := server.Config{
		TLS:              func() *tls13.Config { return w.ServerTLS },
		HandshakeTimeout: 10 * time.Second,
		Handler: func(c *server.Conn) {
			if c.EarlyAnswered {
				if c.FinishHandshake() == nil {
					c.CloseWrite()
				}
				return
			}
			handler(c.Conn)
		},
	}
	if o.Turbo {
		pc, err := net.ListenPacket("udp", w.ServerAddr)
		if err != nil {
			return err
		}
		var answer turbo.AnswerFunc
		if o.Handler == nil {
			answer = func([]byte, tls13.ConnectionState) []byte { return []byte(o.Respond) }
		}
		tsrv := turbo.NewTLSServer(w.ServerTLS, answer, turbo.Config{})
		w.Turbo, cfg.Turbo = tsrv, tsrv
		w.closers = append(w.closers, func() { tsrv.Close() })
		w.wg.Add(1)
		go func() { defer w.wg.Done(); tsrv.ServeUDP(pc) }()
	}
	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	w.closers = append(w.closers, func() { srv.Shutdown(context.Background()) })
	w.wg.Add(1)
	go func() { defer w.wg.Done(); srv.Serve(ln) }()
	return nil
}

// respondOnce answers the first request (early or not) with text; an early
// request is answered in the server's first flight.
func respondOnce(text string) func(*tls13.Conn) {
	return func(c *tls13.Conn) {
		if err := c.HandshakeEarly(context.Background()); err != nil {
			return
		}
		buf := make([]byte, 4096)
		if n, _ := c.ReadEarlyData(buf); n > 0 {
			c.Write([]byte(text))
			c.Handshake()
			c.CloseWrite()
			return
		}
		if n, _ := c.Read(buf); n > 0 {
			c.Write([]byte(text))
		}
		c.CloseWrite()
	}
}

// serviceRRs are the records of the service at now: the HTTPS record
// (with Turbo or HTTPSZData) and, unless NoZData, the Z-data records
// (TXT unless NoTXT, TLSA, CERT for inter).
func (w *World) serviceRRs(now time.Time, inter [][]byte) []dns.RR {
	o := w.opts
	var rrs []dns.RR
	var recs []*zdata.Record
	if !o.NoZData {
		recs = w.Service.Records(now)
	}
	ttl := zdata.TTLFor(recs, now, 5*time.Minute)
	switch {
	case o.HTTPSZData:
		h, err := w.HTTPSRecord(recs, ttl)
		if err != nil {
			panic(fmt.Sprintf("lab: the HTTPS record: %v", err)) // the lab's own records
		}
		rrs = append(rrs, h)
	case o.Turbo:
		rrs = append(rrs, turbo.HTTPSRecord(o.Host, w.Port, uint16(w.Port), 300))
	}
	if o.NoZData {
		return rrs
	}
	for _, rr := range zdata.ZoneRRs(recs, w.Cert.Chain[0], inter, ttl) {
		if o.NoTXT && o.HTTPSZData && rr.Header().Rrtype == dns.TypeTXT {
			continue
		}
		rrs = append(rrs, rr)
	}
	return rrs
}

// HTTPSRecord is the world's HTTPS record carrying recs (none: a record
// without Z-data) as Options.HTTPSZData publishes it: alpn h2,http/1.1,
// TurboTLS's key65280 with Options.Turbo, and the records under
// zdata.DefaultSvcParamKey.
func (w *World) HTTPSRecord(recs []*zdata.Record, ttl time.Duration) (*dns.HTTPS, error) {
	var classical []*zdata.Record // v3 records go in TXT only (Section 9.8)
	for _, r := range recs {
		if !r.V3 {
			classical = append(classical, r)
		}
	}
	p := zdata.HTTPSParams{Host: w.Host, Port: w.Port, ALPN: []string{"h2", "http/1.1"}, Records: classical, TTL: ttl}
	if w.opts.Turbo {
		p.Extra = turbo.HTTPSRecord(w.Host, w.Port, uint16(w.Port), 300).Value
	}
	return zdata.HTTPSRecord(p)
}

// PublishHTTPS replaces the HTTPS RRset of the service with rrs, whose
// owner is set to the service's HTTPS owner (zdata.HTTPSOwner).
func (w *World) PublishHTTPS(rrs ...dns.RR) error {
	return w.PublishHTTPSAt(zdata.HTTPSOwner(w.Host, w.Port), rrs...)
}

// PublishHTTPSAt replaces name's HTTPS RRset with rrs, their owner set to
// name.
func (w *World) PublishHTTPSAt(name string, rrs ...dns.RR) error {
	owner := dns.Fqdn(name)
	var set []dns.RR
	for _, rr := range rrs {
		c := dns.Copy(rr)
		c.Header().Name = owner
		set = append(set, c)
	}
	return w.Zones.ReplaceRRset(owner, dns.TypeHTTPS, set)
}

// EditedHTTPS is HTTPSRecord (TTL a minute) changed by edit, if not nil:
// the record a test of a forged or broken value publishes.
func (w *World) EditedHTTPS(recs []*zdata.Record, edit func(h *dns.HTTPS)) (*dns.HTTPS, error) {
	h, err := w.HTTPSRecord(recs, time.Minute)
	if err == nil && edit != nil {
		edit(h)
	}
	return h, err
}

// ZDataSvcParam is h's Z-data SvcParam under the default key, or nil.
func ZDataSvcParam(h *dns.HTTPS) *dns.SVCBLocal {
	for _, kv := range h.Value {
		if l, ok := kv.(*dns.SVCBLocal); ok && l.KeyCode == zdata.DefaultSvcParamKey {
			return l
		}
	}
	return nil
}

// PublishAliasChain publishes n AliasMode records from the service's
// HTTPS owner through a1…an under the world's zone, the last name's RRset
// being end (none: an alias back to a1, a loop).
func (w *World) PublishAliasChain(n int, end ...dns.RR) error {
	name := func(i int) string { return "a" + strconv.Itoa(i) + "." + dns.Fqdn(parentOf(w.Host)) }
	if err := w.PublishHTTPS(AliasHTTPS("", name(1))); err != nil {
		return err
	}
	for i := 1; i < n; i++ {
		if err := w.PublishHTTPSAt(name(i), AliasHTTPS(name(i), name(i+1))); err != nil {
			return err
		}
	}
	if len(end) == 0 {
		end = []dns.RR{AliasHTTPS(name(n), name(1))}
	}
	return w.PublishHTTPSAt(name(n), end...)
}

// AliasHTTPS is an AliasMode HTTPS record at name for target.
func AliasHTTPS(name, target string) dns.RR {
	return &dns.HTTPS{SVCB: dns.SVCB{Hdr: dns.RR_Header{Name: dns.Fqdn(name), Rrtype: dns.TypeHTTPS, Class: dns.ClassINET, Ttl: 60},
		Priority: 0, Target: dns.Fqdn(target)}}
}

// countQueries counts the authority's queries by name and type (Queries).
func (w *World) countQueries(next authority.Handler) authority.Handler {
	return authority.HandlerFunc(func(ctx context.Context, rw authority.ResponseWriter, r *dns.Msg) {
		if len(r.Question) == 1 {
			q := r.Question[0]
			k := strings.ToLower(dns.Fqdn(q.Name)) + "/" + dns.TypeToString[q.Qtype]
			n, _ := w.queries.LoadOrStore(k, new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
		}
		next.ServeDNS(ctx, rw, r)
	})
}

// Queries is how many queries for name and qtype the world's authority
// received.
func (w *World) Queries(name string, qtype uint16) int64 {
	n, ok := w.queries.Load(strings.ToLower(dns.Fqdn(name)) + "/" + dns.TypeToString[qtype])
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

// Accepted is how many TCP connections the world's TLS server accepted,
// handshakes that failed included.
func (w *World) Accepted() int64 { return w.accepted.Load() }

// countingListener counts the connections it accepts into n.
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// Resolver returns a T-DNS resolver that asks this world's authority.
func (w *World) Resolver(t resolver.Transport) (*resolver.Resolver, error) {
	return resolver.New(resolver.Config{Servers: []string{w.DNSAddr}, Transport: t, Timeout: 2 * time.Second})
}

// RootsPEM is the world's CA certificate in PEM.
func (w *World) RootsPEM() []byte {
	return w.ca.PEM()
}

// ClientTLS is a client configuration trusting this world's CA.
func (w *World) ClientTLS() *tls13.Config { return &tls13.Config{RootCAs: w.Roots} }

// HostPort is the address a client dials by name.
func (w *World) HostPort() string { return net.JoinHostPort(w.Host, strconv.Itoa(w.Port)) }

// Close stops everything.
func (w *World) Close() {
	for i := len(w.closers) - 1; i >= 0; i-- {
		w.closers[i]()
	}
	w.closers = nil
	w.wg.Wait()
}

func parentOf(host string) string {
	for i := 0; i < len(host); i++ {
		if host[i] == '.' {
			return host[i+1:]
		}
	}
	return host
}

func mustRR(s string) dns.RR {
	rr, err := dns.NewRR(s)
	if err != nil {
		panic(fmt.Sprintf("lab: bad record %q: %v", s, err))
	}
	return rr
}

// writePEM writes the certificate, key and CA for an external server.
func (w *World) writePEM(dir string) error {
	if dir == "" {
		d, err := os.MkdirTemp("", "ztls-lab")
		if err != nil {
			return err
		}
		dir = d
		w.closers = append(w.closers, func() { os.RemoveAll(d) })
	}
	certPEM, keyPEM, err := (&testpki.Leaf{Chain: w.Cert.Chain, Key: w.Cert.PrivateKey}).PEM()
	if err != nil {
		return err
	}
	w.CertFile, w.KeyFile, w.CAFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), filepath.Join(dir, "ca.pem")
	for path, data := range map[string][]byte{w.CertFile: certPEM, w.KeyFile: keyPEM, w.CAFile: w.ca.PEM()} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// IssueCert makes an ECDSA P-256 leaf for names, signed by the world's CA
// and valid for a day from an hour before the world's now.
func (w *World) IssueCert(names ...string) (tls13.Certificate, error) {
	now := w.now()
	leaf, err := w.ca.Make(testpki.LeafOpts{DNSNames: names, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour)})
	if err != nil {
		return tls13.Certificate{}, err
	}
	return tls13.Certificate{Chain: leaf.Chain, PrivateKey: leaf.Key, Leaf: leaf.Cert}, nil
}

// CRL returns a certificate revocation list signed by the world's CA,
// revoking serials, current for an hour, in DER.
func (w *World) CRL(serials ...*big.Int) ([]byte, error) {
	now := w.now()
	tmpl := &x509.RevocationList{Number: big.NewInt(now.UnixNano()), ThisUpdate: now.Add(-time.Minute), NextUpdate: now.Add(time.Hour)}
	for _, s := range serials {
		tmpl.RevokedCertificateEntries = append(tmpl.RevokedCertificateEntries,
			x509.RevocationListEntry{SerialNumber: s, RevocationTime: now.Add(-time.Minute)})
	}
	return x509.CreateRevocationList(rand.Reader, tmpl, w.ca.Cert, w.ca.Key)
}

// Publish replaces the Z-data RRsets of host:port with rrs (TXT, CERT and
// TLSA found in it; absent types are emptied).
func (w *World) Publish(host string, port int, rrs []dns.RR) error {
	for _, set := range []struct {
		name  string
		qtype uint16
	}{{zdata.TXTName(host, port), dns.TypeTXT}, {zdata.TXTName(host, port), dns.TypeCERT}, {zdata.TLSAName(host, port), dns.TypeTLSA}} {
		var keep []dns.RR
		for _, rr := range rrs {
			if rr.Header().Rrtype == set.qtype {
				c := dns.Copy(rr)
				c.Header().Name = set.name
				keep = append(keep, c)
			}
		}
		if err := w.Zones.ReplaceRRset(set.name, set.qtype, keep); err != nil {
			return err
		}
	}
	return nil
}

// Republish rotates the service's keys at now and publishes its records.
func (w *World) Republish(now time.Time) error {
	if _, err := w.Service.Rotate(now); err != nil {
		return err
	}
	if w.PQService != nil {
		if _, err := w.PQService.Rotate(now); err != nil {
			return err
		}
	}
	w.Service.Keyring.Prune(now)
	recs := w.Service.Records(now)
	if w.opts.HTTPSZData {
		h, err := w.HTTPSRecord(recs, zdata.TTLFor(recs, now, 5*time.Minute))
		if err != nil {
			return err
		}
		if err := w.PublishHTTPS(h); err != nil {
			return err
		}
	}
	var rrs []dns.RR
	for _, rr := range zdata.ZoneRRs(recs, w.Cert.Chain[0], nil, zdata.TTLFor(recs, now, 5*time.Minute)) {
		if !w.opts.NoTXT || !w.opts.HTTPSZData || rr.Header().Rrtype != dns.TypeTXT {
			rrs = append(rrs, rr)
		}
	}
	return w.Publish(w.Host, w.Port, rrs)
}

// AddAddress publishes an A record.
func (w *World) AddAddress(name, ip string) error {
	return w.Zones.ReplaceRRset(dns.Fqdn(name), dns.TypeA, []dns.RR{mustRR(dns.Fqdn(name) + " 300 IN A " + ip)})
}

// newPQService is Options.PostQuantum's Service: group X25519MLKEM768,
// the classical Service's validity, lead time and window, its keys in
// the classical Service's keyring (one key ring, distinct Zdata_ids).
func (w *World) newPQService(cert tls13.Certificate) (*zdata.Service, error) {
	co := w.Service.Options
	pq, err := zdata.NewService(w.Host, w.Port, cert, zdata.Options{Group: zdata.GroupX25519MLKEM768,
		MaxEarlyData: co.MaxEarlyData, ALPN: co.ALPN, Validity: co.Validity, LeadTime: co.LeadTime, Window: co.Window}, nil)
	if err != nil {
		return nil, err
	}
	pq.Keyring = w.Service.Keyring
	if _, err := pq.Rotate(w.now()); err != nil {
		return nil, err
	}
	return pq, nil
}
