package main

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ztls-project/ztls/dns/publish"
	"github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/turbo"
	"github.com/ztls-project/ztls/zdata"
)

var zdataCmd = &cobra.Command{
	Use:   "zdata",
	Short: "Make, rotate, inspect, publish and check Z-data (the DNS records ZTLS needs)",
	Long: `Z-data is what a ZTLS server publishes in DNS so that a client that has never
seen it can send its first request with its ClientHello: a signed TXT record
with a semi-static key share and validity window at _ztls._PORT._tcp.HOST,
the same records in the service's HTTPS record (SvcParam key65370 at HOST or
_PORT._https.HOST, asked by browsers beside A and AAAA anyway), the
certificate's leaf as TLSA 3 0 0 at _PORT._tcp.HOST, and intermediates as
CERT records. A Z-data directory holds a service's keys; 'ztls serve
--zdata DIR' and 'ztls dns serve --zdata DIR' read it.

Typical life:
  ztls zdata new --host www.example.org --port 443 --cert cert.pem --key key.pem --out zd/
  ztls dns serve --zone example.org.zone --zdata zd/ --listen :53
      (or put the printed lines in your zone: ztls zdata publish, or serve --publish)
  ztls serve --listen :443 --zdata zd/ --backend http://127.0.0.1:8080
  ztls zdata check www.example.org --port 443

The servers keep the keys current themselves: the first to claim
zd/rotate.lock adds each period's key before it is due and drops expired
ones, the others pick up what it writes, and one of them takes the
rotation over when it stops. 'ztls zdata rotate zd/' from cron is only for
a directory no server rotates (--rotate=false); a fleet made with
--seed-file derives its keys. A renewed certificate: replace its files,
then reload every server on zd/ (SIGHUP, 'systemctl reload'): the rotating
one signs new keys with it at once.`,
}

func init() {
	groupCommand(zdataCmd)
	rootCmd.AddCommand(zdataCmd)
}

// The help of zdata new.
const zdataNewLong = `Create DIR with the service's settings and the keys of the current period,
and print the records to publish. The certificate must name --host and be
valid now (clients would refuse Z-data signed with any other). DIR is made
all at once: if anything is refused, nothing is left behind. DIR may exist
if it is empty or holds only other files (such as the certificate).

--port is the port clients connect to: 'ztls serve --zdata DIR' should
listen on it (or behind a NAT or load balancer that forwards it).

The records printed: the TXT set, the TLSA leaf, CERT intermediates and the
service's HTTPS record carrying the Z-data (key65370 in RFC 9460's generic
presentation form, key65370="\000\130...", which BIND 9 and Knot read; with
--turbo-port TurboTLS's key65280 in the same RR). It holds the current and
next period's records, so it changes each period: publish it with the TXT
set ('ztls dns serve', 'ztls zdata publish'), not once by hand.

Post-quantum Z-data (docs/ztls-spec.md, Section 9): --post-quantum also
issues each period's X25519MLKEM768 key, published as a v3 TXT record (about
1.8 kB, never in the HTTPS record), and its classical records announce it
(Zdata_id bit 30), so that clients never take classical early data from a
path that strips the v3 records; --group x25519mlkem768 issues v3 records
only (no classical early data at all). The TXT answer then exceeds 1232
bytes: clients get it over TCP or DNS over TLS ('ztls zdata check' says).`

func init() {
	var cfg zdata.ServiceConfig
	var out, seedFile, group, nsc, echName string
	var ttl time.Duration
	var turboPort int
	var https httpsAdvert
	var bf bfeFlags
	cmd := &cobra.Command{
		Use:   "new --host HOST --port PORT --cert FILE --key FILE --out DIR",
		Short: "Create a Z-data directory and print the zone-file lines to publish",
		Long:  zdataNewLong,
		Example: `  ztls zdata new --host www.example.org --port 443 --cert cert.pem --key key.pem --out zd/
  # a fleet: every server with the same seed file derives the same keys
  head -c 32 /dev/urandom > fleet.seed; chmod 600 fleet.seed
  ztls zdata new --host www.example.org --port 443 --cert cert.pem --key key.pem --out zd/ --seed-file fleet.seed
  # a server run with 'ztls serve --turbo': TurboTLS's key in the same HTTPS record, with alpn
  ztls zdata new --host www.example.org --port 443 --cert cert.pem --key key.pem --out zd/ \
      --turbo-port 443 --https-alpn h2,http/1.1
  # Z-data in TXT only (no HTTPS record printed)
  ztls zdata new --host www.example.org --port 443 --cert cert.pem --key key.pem --out zd/ --zdata-https=false
  # post-quantum early data (v3 records beside the classical ones, which announce them)
  ztls zdata new --host www.example.org --port 443 --cert cert.pem --key key.pem --out zd/ --post-quantum
  # Bloom filter encryption: replay-proof, forward-secret first flights for clients that support it
  ztls zdata new --host www.example.org --port 443 --cert cert.pem --key key.pem --out zd/ --bfe-connections 16384`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cfg.Host == "" || cfg.Port == 0 || cfg.Cert == "" || cfg.Key == "" || out == "" {
				return fmt.Errorf("--host, --port, --cert, --key and --out are required")
			}
			if turboPort < 0 || turboPort > 65535 {
				return fmt.Errorf("--turbo-port: %d is not a port", turboPort)
			}
			if err := https.check(); err != nil {
				return err
			}
			if cfg.Port < 1 || cfg.Port > 65535 {
				return fmt.Errorf("--port %d: want the service's TCP port, 1 to 65535", cfg.Port)
			}
			g, err := parseZGroup(group)
			if err != nil {
				return err
			}
			cfg.Group = g
			if nsc != "" {
				cfg.NSC = strings.Split(nsc, ",")
			}
			var seed []byte
			if seedFile != "" {
				if seed, err = os.ReadFile(seedFile); err != nil {
					return fmt.Errorf("--seed-file: %w", err)
				}
			}
			if ttl < time.Second {
				return fmt.Errorf("--ttl %v: want at least 1s (records carry TTLs in whole seconds)", ttl)
			}
			if err := bf.check(); err != nil {
				return err
			}
			cfg.BFEConnections, cfg.BFEFalsePositiveRate, cfg.BFESizing = bf.connections, bf.fpRate, bf.sizing
			for _, f := range []*string{&cfg.Cert, &cfg.Key} {
				if abs, err := absPath(*f); err == nil {
					*f = abs
				}
			}
			if err := checkNoZData(out); err != nil {
				return err
			}
			// All or nothing: a refused certificate leaves no directory.
			d, err := zdata.NewDir(out, cfg, seed, clock.Now())
			if err != nil {
				return err
			}
			// The BFE keys of this period and the next two: an offline job
			// here, a background one in the server afterwards.
			if err := generateBFE(cmd.Context(), d, clock.Now(), os.Stderr); err != nil {
				return err
			}
			if err := addECHKeys(d, echName, clock.Now(), os.Stderr); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "ztls: Z-data for %s port %d in %s; publish these records (TTL ends before the records expire):\n", d.Config.Host, d.Config.Port, out)
			now := clock.Now()
			lines := d.ZoneLines(now, ttl)
			if https.turboPort = turboPort; https.wanted() {
				// One HTTPS RR with the Z-data and TurboTLS's key65280,
				// the Z-data key in RFC 9460's generic form (key65370="...").
				rr, err := https.record(d, now, ttl, nil, nil)
				if err != nil {
					return err
				}
				lines = append(lines, rr.String())
			}
			printLines(cmd.OutOrStdout(), lines)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&turboPort, "turbo-port", 0, "also advertise TurboTLS on this UDP port in the HTTPS record (key65280; 'ztls serve --turbo' uses the TCP port's number)")
	https.register(fs, "also print")
	fs.StringVar(&cfg.Host, "host", "", "the name clients connect to (and send as SNI)")
	fs.IntVar(&cfg.Port, "port", 443, "the TCP port of the service")
	fs.StringVar(&cfg.Cert, "cert", "", "PEM certificate chain of the service, leaf first")
	fs.StringVar(&cfg.Key, "key", "", "PEM private key of the leaf (signs the records)")
	fs.StringVar(&out, "out", "", "directory to create")
	fs.StringVar(&group, "group", "x25519", "key share group: x25519, secp256r1, or x25519mlkem768 (post-quantum v3 records only, TXT over TCP or DNS over TLS)")
	fs.BoolVar(&cfg.PostQuantum, "post-quantum", false, "also issue each period's post-quantum v3 key (X25519MLKEM768, TXT only); the classical records then announce it")
	fs.Uint32Var(&cfg.MaxEarlyData, "max-early-data", 0, "largest early request in bytes (0: 16384)")
	fs.StringVar(&cfg.ALPN, "alpn", "", "the ALPN protocol early data is for (e.g. http/1.1); empty: connections without ALPN")
	fs.StringVar(&nsc, "nsc", "", "cipher suites the server does not support, hex, comma-separated (e.g. 1303)")
	fs.BoolVar(&cfg.ClientCert, "client-cert", false, "announce that the server asks for client certificates")
	fs.StringVar(&seedFile, "seed-file", "", "fleet mode: derive each hour's key from this shared secret file")
	fs.StringVar(&echName, "ech-public-name", "", "also make Encrypted ClientHello keys (DIR/ech, rotated with the Z-data) with this public name, the name the outer ClientHello shows; the HTTPS record then carries ech= (docs/ztls-spec.md, Section 10)")
	fs.DurationVar(&ttl, "ttl", 5*time.Minute, "largest TTL to print")
	bf.add(fs)
	zdataCmd.AddCommand(cmd)
}

// checkNoZData refuses an --out that already holds Z-data, saying what is
// there and the ways forward: zdata new never replaces keys that servers
// may hold and clients may have cached.
func checkNoZData(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, zdata.ServiceFile)); err != nil {
		return nil // zdata.NewDir says what else is in the way
	}
	what := "Z-data"
	if d, err := zdata.LoadDir(dir); err == nil {
		now := clock.Now()
		what = fmt.Sprintf("the Z-data of %s port %d (%d keys, %d live now)", d.Config.Host, d.Config.Port,
			len(d.Keyring.All()), len(d.Keyring.Live(now)))
	}
	return fmt.Errorf("--out %s already holds %s: 'ztls zdata rotate %s' adds the keys of the coming periods, 'ztls zdata show %s' lists them; to start over (another host, port or certificate), give another --out, or stop the servers using %s and remove it first (clients keep its records until their TTL ends)",
		dir, what, dir, dir, dir)
}

func init() {
	var ttl time.Duration
	var bf bfeFlags
	var echName string
	cmd := &cobra.Command{
		Use:   "rotate DIR",
		Short: "Add the next period's key, drop expired ones, and print the records to publish",
		Long: `Make sure DIR holds the key of the current validity period and, close to its
end, the next one; erase keys past not-after plus the freshness window; print
the records to publish now. 'ztls serve --zdata DIR' and 'ztls dns serve
--zdata DIR' do this themselves; run it from cron or a timer only for a
directory none of them rotates (--rotate=false). Servers reading DIR pick
the change up within a second, without restart.

--bfe-connections N (0 to stop), --bfe-fp-rate and --bfe-sizing change the
Bloom filter encryption keys of the coming periods (a flag not given keeps
the directory's setting) and generate the missing ones now; servers
rotating DIR generate them in the background, a period ahead, after a
restart.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := zdata.LoadDir(args[0])
			if err != nil {
				return err
			}
			if fs := cmd.Flags(); fs.Changed("bfe-connections") || fs.Changed("bfe-fp-rate") || fs.Changed("bfe-sizing") {
				// A flag not given keeps the directory's setting.
				if !fs.Changed("bfe-connections") {
					bf.connections = d.Config.BFEConnections
				}
				if !fs.Changed("bfe-fp-rate") {
					bf.fpRate = d.Config.BFEFalsePositiveRate
				}
				if !fs.Changed("bfe-sizing") {
					bf.sizingName = d.Config.BFESizing.String()
				}
				if err := bf.check(); err != nil {
					return err
				}
				d.Config.BFEConnections, d.Config.BFEFalsePositiveRate, d.Config.BFESizing = bf.connections, bf.fpRate, bf.sizing
				if err := d.Save(); err != nil {
					return err
				}
				if d, err = zdata.LoadDir(args[0]); err != nil {
					return err
				}
			}
			if err := generateBFE(cmd.Context(), d, clock.Now(), os.Stderr); err != nil {
				return err
			}
			added, err := d.Rotate(clock.Now())
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "ztls: %d key(s) added\n", len(added))
			if err := addECHKeys(d, echName, clock.Now(), os.Stderr); err != nil {
				return err
			}
			printLines(cmd.OutOrStdout(), d.ZoneLines(clock.Now(), ttl))
			return nil
		},
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 5*time.Minute, "largest TTL to print")
	cmd.Flags().StringVar(&echName, "ech-public-name", "", "make Encrypted ClientHello keys with this public name (or change it for the coming periods); without it the directory's ECH keys, if any, are rotated")
	bf.add(cmd.Flags())
	zdataCmd.AddCommand(cmd)
}

func init() {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show DIR",
		Short: "List a Z-data directory's keys and their state",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := zdata.LoadDir(args[0])
			if err != nil {
				return err
			}
			now := clock.Now()
			type row struct {
				ID        uint32    `json:"id"`
				NotBefore time.Time `json:"not_before"`
				NotAfter  time.Time `json:"not_after"`
				State     string    `json:"state"`
				Group     string    `json:"group"`
				TXTBytes  int       `json:"txt_bytes"`
				Hash      string    `json:"zdata_hash"`
				BFE       *bfeRow   `json:"bfe,omitempty"`
			}
			var rows []row
			for _, k := range d.Keyring.All() {
				r := k.Record
				state := "live"
				switch {
				case now.Before(r.NotBefore):
					state = "next"
				case now.After(r.NotAfter):
					state = "expired (kept for the freshness window)"
				}
				h := r.ZDataHash()
				rows = append(rows, row{r.ID, r.NotBefore, r.NotAfter, state, zGroupName(r.Group), len(strings.Join(r.TXT(), "")), fmt.Sprintf("%x", h[:8]), showBFE(k, d.Config.BFEFalsePositiveRate)})
			}
			ahead := bfeFilesAhead(d)
			echRows, err := showECH(d, now)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				out := map[string]any{"host": d.Config.Host, "port": d.Config.Port, "fleet": d.Service.Seed != nil, "keys": rows}
				if d.Config.BFEConnections > 0 {
					out["bfe_connections"], out["bfe_keys_ahead"] = d.Config.BFEConnections, ahead
				}
				if len(echRows) > 0 {
					out["ech"] = echRows
				}
				return enc.Encode(out)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%s port %d%s\n", d.Config.Host, d.Config.Port, map[bool]string{true: " (fleet)", false: ""}[d.Service.Seed != nil])
			for _, r := range rows {
				fmt.Fprintf(w, "  id %-10d %s .. %s  %-8s %s, TXT %d bytes, hash %s…\n", r.ID,
					r.NotBefore.UTC().Format("2006-01-02 15:04:05"), r.NotAfter.UTC().Format("15:04:05Z"), r.State, r.Group, r.TXTBytes, r.Hash)
				if r.BFE != nil {
					fmt.Fprintf(w, "      %s\n", r.BFE.text())
				} else if d.Config.BFEConnections > 0 {
					fmt.Fprintf(w, "      no BFE key yet (%s record without bfe= only)\n", map[bool]string{true: "v3", false: "v1"}[r.Group == "X25519MLKEM768"])
				}
			}
			if d.Config.BFEConnections > 0 {
				fmt.Fprintf(w, "  BFE: %d connections per period; keys generated ahead: %d %v\n", d.Config.BFEConnections, len(ahead), ahead)
			}
			writeECHRows(w, echRows)
			for _, s := range d.Skipped {
				fmt.Fprintf(w, "  skipped: %s\n", s)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	zdataCmd.AddCommand(cmd)
}

// zdataSets groups a directory's records into the RRsets that replace
// what DNS holds for the service: TXT and CERT at the Z-data name, TLSA at
// the TLSA name (always all three, so stale records are removed).
func zdataSets(d *zdata.Dir, now time.Time, maxTTL time.Duration) []publish.RRSet {
	host, port := d.Config.Host, d.Config.Port
	sets := []publish.RRSet{
		{Name: zdata.TXTName(host, port), Type: dns.TypeTXT},
		{Name: zdata.TXTName(host, port), Type: dns.TypeCERT},
		{Name: zdata.TLSAName(host, port), Type: dns.TypeTLSA},
	}
	for _, rr := range d.RRs(now, maxTTL) {
		for i := range sets {
			if strings.EqualFold(rr.Header().Name, sets[i].Name) && rr.Header().Rrtype == sets[i].Type {
				sets[i].Records = append(sets[i].Records, rr)
			}
		}
	}
	return sets
}

// httpsAdvert is what the flags of 'dns serve', 'zdata new' and 'zdata
// publish' put in a service's HTTPS record (docs/ztls-spec.md, Section 8):
// its Z-data (unless off), TurboTLS's key, alpn and address hints. Every
// one of them builds the record with zdata.ServiceHTTPSRecord, so what is
// served, printed and published is the same.
type httpsAdvert struct {
	zdata     bool     // carry the Z-data (--zdata-https)
	key       int      // the Z-data SvcParamKey (--zdata-svc-key)
	alpn      []string // --https-alpn
	turboPort int      // TurboTLS's UDP port, 0: none
	// turboAtServicePort advertises TurboTLS on each service's own TCP
	// port number ('dns serve --turbo'), in place of turboPort.
	turboAtServicePort bool
	// zoneSets holds the HTTPS RRsets the zone files hold at the
	// services' owner names ('dns serve'; nil elsewhere), into which
	// the record's keys are merged (zdata.MergeHTTPS).
	zoneSets *zoneHTTPS
}

// zoneHTTPS is the HTTPS RRsets of the zone files at the services'
// owner names, by lower-case owner, as they were last loaded. It is read
// at each refresh and replaced at each reload, from two goroutines.
type zoneHTTPS struct {
	mu   sync.Mutex
	sets map[string][]dns.RR
}

func (z *zoneHTTPS) get(owner string) []dns.RR {
	if z == nil {
		return nil
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.sets[strings.ToLower(owner)]
}

func (z *zoneHTTPS) set(sets map[string][]dns.RR) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.sets = sets
}

// register defines --zdata-https, --zdata-svc-key and --https-alpn.
func (h *httpsAdvert) register(fs *pflag.FlagSet, what string) {
	fs.BoolVar(&h.zdata, "zdata-https", true, what+" the service's HTTPS record (RFC 9460) carrying its Z-data (SvcParam key65370, docs/ztls-spec.md Section 8) beside the TXT, TLSA and CERT records; false: TXT only (with TurboTLS, an HTTPS record with key65280 alone)")
	fs.IntVar(&h.key, "zdata-svc-key", int(zdata.DefaultSvcParamKey), "the private-use SvcParamKey carrying Z-data in the HTTPS record, 65281 to 65534 (clients must ask for the same; 65280 is TurboTLS's)")
	fs.StringSliceVar(&h.alpn, "https-alpn", nil, "the HTTPS record's alpn SvcParam, comma-separated (e.g. h2,http/1.1); none: clients assume http/1.1")
}

// check refuses a --zdata-svc-key outside the private-use range or equal
// to TurboTLS's key.
func (h *httpsAdvert) check() error {
	if h.key < 0 || h.key > 65535 { // 0: the default
		return fmt.Errorf("--zdata-svc-key %d: give a private-use SvcParamKey from 65281 to 65534 (default %d)", h.key, zdata.DefaultSvcParamKey)
	}
	if err := zdata.CheckSvcParamKey(dns.SVCBKey(h.key)); err != nil {
		return fmt.Errorf("--zdata-svc-key: %w", err)
	}
	for _, a := range h.alpn {
		if a == "" || len(a) > 255 {
			return fmt.Errorf("--https-alpn %q: each protocol 1 to 255 bytes, comma-separated", strings.Join(h.alpn, ","))
		}
	}
	return nil
}

// managed is the SvcParamKeys h puts in a service's HTTPS RRs: the
// Z-data key, and TurboTLS's when it advertises it.
func (h *httpsAdvert) managed() []dns.SVCBKey {
	keys := []dns.SVCBKey{dns.SVCBKey(h.key)}
	if h.key == 0 {
		keys[0] = zdata.DefaultSvcParamKey
	}
	if h.turboPort != 0 || h.turboAtServicePort {
		keys = append(keys, turbo.KeyUDPPort)
	}
	return keys
}

// wanted says whether the service has an HTTPS record to serve at all.
func (h *httpsAdvert) wanted() bool { return h.zdata || h.turboPort != 0 || h.turboAtServicePort }

// record is the service's HTTPS record at now, with the address hints
// given (none: nil).
func (h *httpsAdvert) record(d *zdata.Dir, now time.Time, maxTTL time.Duration, v4, v6 []net.IP) (*dns.HTTPS, error) {
	turboPort := h.turboPort
	if h.turboAtServicePort {
		turboPort = d.Config.Port
	}
	return d.HTTPSRR(now, maxTTL, zdata.HTTPSOptions{
		ALPN: h.alpn, TurboUDPPort: uint16(turboPort), IPv4Hint: v4, IPv6Hint: v6,
		Key: dns.SVCBKey(h.key), NoZData: !h.zdata,
	})
}

// serviceSets is zdataSets plus, when h wants one, the service's HTTPS
// RRset (one record).
func serviceSets(d *zdata.Dir, now time.Time, maxTTL time.Duration, h *httpsAdvert) ([]publish.RRSet, error) {
	sets := zdataSets(d, now, maxTTL)
	if h == nil || !h.wanted() {
		return sets, nil
	}
	rr, err := h.record(d, now, maxTTL, nil, nil)
	if err != nil {
		return nil, err
	}
	return append(sets, publish.RRSet{Name: rr.Hdr.Name, Type: dns.TypeHTTPS, Records: []dns.RR{rr}}), nil
}

// publishService pushes the service's sets to the primary in one UPDATE.
// The HTTPS record's keys go into the HTTPS RRset the primary holds at
// the owner (zdata.MergeHTTPS: the operator's alpn, ech and hints kept),
// or make it when there is none; the UPDATE is conditional on that RRset
// being as read, and read again when someone changed it in between.
func publishService(ctx context.Context, pub *publish.Publisher, d *zdata.Dir, now time.Time, ttl time.Duration, h *httpsAdvert) (records int, aliased bool, err error) {
	for attempt := 1; ; attempt++ {
		sets, err := serviceSets(d, now, ttl, h)
		if err != nil {
			return 0, false, err
		}
		for i := range sets {
			if sets[i].Type != dns.TypeHTTPS {
				continue
			}
			own := sets[i].Records[0].(*dns.HTTPS)
			was, err := pub.Read(ctx, own.Hdr.Name, dns.TypeHTTPS)
			if err != nil {
				return 0, false, err
			}
			sets[i].Records, aliased = zdata.MergeHTTPS(was, own, h.managed()...)
			if !aliased {
				// The Z-data's TTL, not one a former merge lowered.
				for _, rr := range sets[i].Records {
					rr.Header().Ttl = own.Hdr.Ttl
				}
			}
			sets[i].IfUnchanged, sets[i].Was = true, was
		}
		err = pub.Publish(ctx, sets)
		if publish.IsChanged(err) && attempt < 3 {
			continue
		}
		if err != nil {
			return 0, false, err
		}
		for _, s := range sets {
			records += len(s.Records)
		}
		return records, aliased, nil
	}
}

func init() {
	var server, zone, keyName, keySecret, keyAlg string
	var ttl time.Duration
	var turboPort int
	var https httpsAdvert
	cmd := &cobra.Command{
		Use:   "publish DIR --server ADDR --zone ZONE --tsig-name NAME --tsig-secret BASE64",
		Short: "Push a directory's records to a primary DNS server with a TSIG-signed UPDATE (RFC 2136)",
		Long: `Replace the service's Z-data TXT, CERT and TLSA sets and its HTTPS record
(the Z-data in key65370, with --turbo-port TurboTLS's key65280 in the same
RR) on the primary in one atomic UPDATE signed with TSIG (hmac-sha256 by
default). The HTTPS RRset at HOST (port 443) or _PORT._https.HOST is read
first: the keys go into each of its ServiceMode records (their target,
alpn, ech and hints kept), an AliasMode one is left alone, and without one
the service's own record is made (alpn from --https-alpn). The UPDATE
applies only if that RRset is still as read (RFC 2136 prerequisite), else
it is read again. --zdata-https=false (without --turbo-port) leaves the
HTTPS RRset alone. Run it at each period (from cron): the records change
every period.

The primary (BIND 9, Knot DNS, PowerDNS) must allow updates with that key,
e.g. in BIND:
  key "ztls" { algorithm hmac-sha256; secret "BASE64"; };
  zone "example.org" { type primary; file "..."; allow-update { key "ztls"; }; };
or in Knot DNS's knot.conf:
  key:
    - id: ztls
      algorithm: hmac-sha256
      secret: BASE64
  acl:
    - id: ztls-update
      key: ztls
      action: update
  zone:
    - domain: example.org
      acl: ztls-update`,
		Example: `  ztls zdata publish zd/ --server 192.0.2.53 --zone example.org \
      --tsig-name ztls --tsig-secret-file ztls.key     # chmod 600 ztls.key
  # a primary on another port
  ztls zdata publish zd/ --server 127.0.0.1:5300 --zone example.org \
      --tsig-name ztls --tsig-secret-file ztls.key
  # TurboTLS and alpn in the HTTPS record beside the Z-data
  ztls zdata publish zd/ --server 192.0.2.53 --zone example.org --tsig-name ztls \
      --tsig-secret-file ztls.key --turbo-port 443 --https-alpn h2,http/1.1`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if server == "" || zone == "" || keyName == "" || keySecret == "" {
				return fmt.Errorf("--server, --zone, --tsig-name and --tsig-secret (or --tsig-secret-file) are required")
			}
			addr, err := publishAddr(server)
			if err != nil {
				return err
			}
			d, err := zdata.LoadDir(args[0])
			if err != nil {
				return err
			}
			now := clock.Now()
			if len(d.Records(now)) == 0 {
				return fmt.Errorf("nothing to publish: no live record in %s (run 'ztls zdata rotate %s')", args[0], args[0])
			}
			if turboPort < 0 || turboPort > 65535 {
				return fmt.Errorf("--turbo-port: %d is not a port", turboPort)
			}
			https.turboPort = turboPort
			if err := https.check(); err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 15*time.Second)
			defer cancel()
			pub := &publish.Publisher{Server: addr, Zone: zone, Key: publish.TSIGKey{Name: keyName, Algorithm: keyAlg, Secret: keySecret}}
			n, aliased, err := publishService(ctx, pub, d, now, ttl, &https)
			if err != nil {
				return err
			}
			if aliased {
				fmt.Fprintf(cmd.ErrOrStderr(), "ztls: the HTTPS RRset at %s is AliasMode: left as it is, without the Z-data or TurboTLS keys (put them in its target's ServiceMode record, docs/ztls-spec.md Section 8.6)\n",
					zdata.HTTPSOwner(d.Config.Host, d.Config.Port))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "published %d records for %s port %d to %s\n", n, d.Config.Host, d.Config.Port, addr)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&server, "server", "", "the primary DNS server, HOST[:PORT] (port 53 when not given)")
	fs.StringVar(&zone, "zone", "", "the zone holding the service's names")
	fs.StringVar(&keyName, "tsig-name", "", "TSIG key name")
	fs.StringVar(&keySecret, "tsig-secret", "", "TSIG secret, base64 (visible in ps: prefer --tsig-secret-file)")
	fs.StringVar(&keyAlg, "tsig-algorithm", "hmac-sha256", "TSIG algorithm")
	fs.DurationVar(&ttl, "ttl", 5*time.Minute, "largest TTL (the records' TTL also ends before they expire)")
	fs.IntVar(&turboPort, "turbo-port", 0, "also advertise TurboTLS on this UDP port in the HTTPS record (key65280; 'ztls serve --turbo' uses the TCP port's number)")
	https.register(fs, "also publish")
	zdataCmd.AddCommand(cmd)
}

func init() {
	var port, svcKey int
	var ca string
	var dnsf dnsClientFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "check HOST",
		Short: "Fetch the Z-data DNS serves for HOST and report validity, signature, chain, sizes",
		Long: `Ask DNS what a ZTLS client would ask (TXT, CERT, TLSA) and check it as the
client does: syntax, validity window, signature and binding to HOST and
PORT, the leaf's chain (to --ca, as 'connect --ca') and name; and the
Z-data the service's HTTPS record carries (docs/ztls-spec.md, Section 8):
every record signed for HOST and PORT by the same leaf, one valid now.
Also reports each answer's size, the HTTPS record's too, for any leaf key
and with BFE twins: above 1232 bytes UDP answers are truncated and clients
need TCP or DNS over TLS (it asks again over TCP, as clients do, and
reports the whole answer's size).

The exit status is 0 when the Z-data is usable and 1 when it is not or DNS
failed, with --json as without.

DNS is reached as by 'ztls lookup': --resolver (default /etc/resolv.conf),
--dns-transport, and for DNS over TLS --dns-ca and --dns-servername.`,
		Example: `  ztls zdata check www.example.org --port 443
  ztls zdata check www.ztls.test --port 8443 --resolver 127.0.0.1:5353 --ca ca.pem
  # over DNS over TLS to a resolver with a private CA
  ztls zdata check www.ztls.test --port 8443 --resolver 127.0.0.1:853 --dns-transport tls \
      --dns-ca dns-ca.pem --ca ca.pem --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if port < 1 || port > 65535 {
				return fmt.Errorf("zdata check: --port %d: want the service's TCP port, 1 to 65535", port)
			}
			rcfg, err := dnsf.config("zdata check")
			if err != nil {
				return err
			}
			res, err := resolver.New(rcfg)
			if err != nil {
				return err
			}
			defer res.Close()
			roots, err := tlsRoots(ca)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Second)
			defer cancel()
			if err := zdata.CheckSvcParamKey(dns.SVCBKey(svcKey)); err != nil || svcKey < 0 || svcKey > 65535 {
				return fmt.Errorf("zdata check: --zdata-svc-key %d: give the private-use key the service publishes, 65281 to 65534 (default %d)", svcKey, zdata.DefaultSvcParamKey)
			}
			rep, err := checkZData(ctx, res, args[0], port, roots, dns.SVCBKey(svcKey), clock.Now())
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(rep); err != nil {
					return err
				}
			} else {
				rep.writeText(cmd.OutOrStdout())
			}
			if !rep.Valid {
				// The same exit status with and without --json.
				return fmt.Errorf("the Z-data for %s port %d is not usable: %s", args[0], port, rep.Reason)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&port, "port", 443, "the service's TCP port")
	fs.StringVar(&ca, "ca", "", "PEM roots the service's leaf must chain to, as 'connect --ca' (default: the system's)")
	fs.BoolVar(&asJSON, "json", false, "print JSON")
	fs.IntVar(&svcKey, "zdata-svc-key", int(zdata.DefaultSvcParamKey), "the SvcParamKey carrying Z-data in the HTTPS record")
	dnsf.register(fs, false)
	zdataCmd.AddCommand(cmd)
}

// publishAddr is --server as HOST:PORT, port 53 when not given.
func publishAddr(server string) (string, error) {
	if server == "" {
		return "", errors.New("zdata publish: --server: give the primary's address, e.g. 192.0.2.53 or 127.0.0.1:5300")
	}
	host, port, err := net.SplitHostPort(server)
	if err != nil {
		// No port: a name, an IPv4 address or a bare IPv6 one.
		host := strings.Trim(server, "[]")
		if strings.ContainsAny(host, "[]") || host == "" {
			return "", fmt.Errorf("zdata publish: --server %q: want HOST or HOST:PORT", server)
		}
		return net.JoinHostPort(host, "53"), nil
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || host == "" {
		return "", fmt.Errorf("zdata publish: --server %q: want HOST or HOST:PORT with a port from 1 to 65535", server)
	}
	return server, nil
}

// checkServePort compares the port a Z-data directory was made for with
// the port 'serve --listen' takes. Clients look the Z-data up under the
// port they connect to (_ztls._PORT._tcp.HOST) and bind it into the
// handshake, so a server on another port gets no ZTLS, unless a NAT or
// load balancer forwards the Z-data's port to it. It returns nil when the
// ports agree, and otherwise an error that says both ports and the cure.
func checkServePort(zdirPort int, listen string) error {
	_, p, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("--listen %q: want HOST:PORT, e.g. 127.0.0.1:%d", listen, zdirPort)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		if port, err = net.LookupPort("tcp", p); err != nil {
			return fmt.Errorf("--listen %q: %q is not a port", listen, p)
		}
	}
	if port == zdirPort {
		return nil
	}
	if port == 0 {
		return fmt.Errorf("--listen %s takes a random port, but the Z-data is for port %d: clients would find no Z-data for this server; listen on :%d", listen, zdirPort, zdirPort)
	}
	return fmt.Errorf("--listen port %d differs from the Z-data's port %d: clients connecting to port %d find no Z-data and get no ZTLS; listen on :%d, or make Z-data for port %d ('ztls zdata new --port %d'), unless a NAT or load balancer forwards port %d here", port, zdirPort, port, zdirPort, port, port, zdirPort)
}

// checkReport is what 'zdata check' found.
type checkReport struct {
	Host      string        `json:"host"`
	Port      int           `json:"port"`
	Valid     bool          `json:"valid"`
	Reason    string        `json:"reason,omitempty"`
	ID        uint32        `json:"zdata_id,omitempty"`
	NotBefore time.Time     `json:"not_before,omitempty"`
	NotAfter  time.Time     `json:"not_after,omitempty"`
	Leaf      string        `json:"leaf,omitempty"`
	Answers   []answerCheck `json:"answers"`
	// HTTPS is the Z-data the HTTPS record carries, nil when it carries
	// none (docs/ztls-spec.md, Section 8).
	HTTPS *httpsCheck `json:"https_zdata,omitempty"`
	// PQ is the post-quantum Z-data (v3 records, the announcement), nil
	// when there is none (zdata_pq.go).
	PQ *pqCheck `json:"post_quantum,omitempty"`
	// ECH is the HTTPS record's ech SvcParam (docs/ztls-spec.md, Section 10.3).
	ECH *echCheck `json:"ech,omitempty"`
}

// httpsCheck is what 'zdata check' found in the HTTPS record's Z-data.
type httpsCheck struct {
	Key      int    `json:"key"`
	Records  int    `json:"records"`
	ValidNow int    `json:"valid_now"`
	Verified bool   `json:"verified"` // every record signed for HOST and PORT by the leaf
	Problem  string `json:"problem,omitempty"`
}

type answerCheck struct {
	Name      string `json:"name"`
	Type      string `json:"type"`
	Records   int    `json:"records"`
	Bytes     int    `json:"bytes"` // the whole DNS answer message
	Truncated bool   `json:"truncated"`
	OverUDP   bool   `json:"over_1232"`
	Rcode     string `json:"rcode"`
}

func checkZData(ctx context.Context, res *resolver.Resolver, host string, port int, roots rootsPool, key dns.SVCBKey, now time.Time) (*checkReport, error) {
	rep := &checkReport{Host: host, Port: port}
	var https []*dns.HTTPS
	var txts [][]string
	var tlsas []*dns.TLSA
	var certs []*dns.CERT
	for _, q := range []struct {
		name  string
		qtype uint16
	}{{zdata.TXTName(host, port), dns.TypeTXT}, {zdata.TXTName(host, port), dns.TypeCERT}, {zdata.TLSAName(host, port), dns.TypeTLSA},
		// The record that may carry Z-data too (docs/ztls-spec.md, Section 8).
		{zdata.HTTPSOwner(host, port), dns.TypeHTTPS}} {
		a, err := res.Lookup(ctx, q.name, q.qtype)
		if err != nil {
			return nil, fmt.Errorf("looking up %s %s: %w", q.name, dns.TypeToString[q.qtype], err)
		}
		ac := answerCheck{Name: q.name, Type: dns.TypeToString[q.qtype], Records: len(a.RRs), Rcode: dns.RcodeToString[a.Rcode]}
		if a.Reply != nil {
			ac.Bytes = a.Reply.Len()
			ac.Truncated = a.Reply.Truncated
			ac.OverUDP = ac.Bytes > 1232
		}
		rep.Answers = append(rep.Answers, ac)
		for _, rr := range a.RRs {
			switch v := rr.(type) {
			case *dns.TXT:
				txts = append(txts, v.Txt)
			case *dns.TLSA:
				tlsas = append(tlsas, v)
			case *dns.CERT:
				certs = append(certs, v)
			case *dns.HTTPS:
				https = append(https, v)
			}
		}
	}
	sel := zdata.NewSelector(host, port, zdata.SelectOptions{Roots: roots, Now: now})
	sel.StartChains(tlsas, certs)
	rec, leaf, err := sel.Select(txts)
	rep.PQ = checkPQ(txts, rep.Answers[0].Bytes, rec) // the TXT answer is the first asked
	if err != nil {
		rep.Reason = err.Error()
		return rep, nil
	}
	if rep.HTTPS = checkHTTPSZData(https, key, leaf, host, port, now); rep.HTTPS != nil && rep.HTTPS.Problem != "" {
		rep.Reason = "the HTTPS record's Z-data: " + rep.HTTPS.Problem
		return rep, nil
	}
	if rep.ECH = checkECH(https); rep.ECH != nil && rep.ECH.Problem != "" {
		rep.Reason = "the HTTPS record's ech: " + rep.ECH.Problem
		return rep, nil
	}
	rep.Valid = true
	rep.ID, rep.NotBefore, rep.NotAfter = rec.ID, rec.NotBefore, rec.NotAfter
	rep.Leaf = leaf.Subject.String()
	return rep, nil
}

// checkHTTPSZData checks the Z-data the HTTPS records carry under key
// as a client reading it would: it parses, every record is signed for
// host and port by leaf (the TLSA leaf the TXT record was verified with),
// and one is valid now. Nil when no ServiceMode record carries any.
func checkHTTPSZData(rrs []*dns.HTTPS, key dns.SVCBKey, leaf *x509.Certificate, host string, port int, now time.Time) *httpsCheck {
	for _, rr := range rrs {
		recs, err := zdata.RecordsFromSVCB(&rr.SVCB, key)
		if errors.Is(err, zdata.ErrNoSvcParam) {
			continue
		}
		c := &httpsCheck{Key: int(key), Records: len(recs)}
		if err != nil {
			c.Problem = err.Error()
			return c
		}
		for _, r := range recs {
			if err := r.Verify(leaf, host, port); err != nil {
				c.Problem = fmt.Sprintf("record id %d: %v (not this service's, or signed with another certificate)", r.ID, err)
				return c
			}
			if r.CheckValidity(now) == nil {
				c.ValidNow++
			}
		}
		c.Verified = true
		if c.ValidNow == 0 {
			c.Problem = "no record is valid now"
		}
		return c
	}
	return nil
}

func (r *checkReport) writeText(w io.Writer) {
	for _, a := range r.Answers {
		size := fmt.Sprintf("%d bytes", a.Bytes)
		if a.OverUDP {
			size += " (over 1232: needs TCP or DNS over TLS)"
		}
		if a.Truncated {
			size += ", TRUNCATED"
		}
		fmt.Fprintf(w, "%-40s %-5s %d record(s), %s, %s\n", a.Name, a.Type, a.Records, size, a.Rcode)
	}
	r.PQ.writeText(w)
	r.ECH.writeText(w)
	if h := r.HTTPS; h != nil && h.Problem == "" {
		fmt.Fprintf(w, "HTTPS record: %d Z-data record(s) under key%d, %d valid now, signed for %s port %d by the leaf\n", h.Records, h.Key, h.ValidNow, r.Host, r.Port)
	}
	if r.Valid {
		fmt.Fprintf(w, "valid: Z-data id %d, %s .. %s, signature verified, leaf %s chains to a trusted root\n",
			r.ID, r.NotBefore.UTC().Format(time.RFC3339), r.NotAfter.UTC().Format(time.RFC3339), r.Leaf)
	} else {
		fmt.Fprintf(w, "NOT usable: %s\n", r.Reason)
	}
}

func printLines(w io.Writer, lines []string) {
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}

func parseZGroup(s string) (tls13.CurveID, error) {
	switch strings.ToLower(s) {
	case "", "x25519":
		return zdata.GroupX25519, nil
	case "secp256r1", "p-256", "p256":
		return zdata.GroupSecp256r1, nil
	case "x25519mlkem768":
		return zdata.GroupX25519MLKEM768, nil // v3 records (docs/ztls-spec.md, Section 9)
	}
	return 0, fmt.Errorf("--group: want x25519, secp256r1 or x25519mlkem768, got %q", s)
}

func zGroupName(g tls13.CurveID) string {
	switch g {
	case zdata.GroupSecp256r1:
		return "secp256r1"
	case zdata.GroupX25519MLKEM768:
		return "X25519MLKEM768"
	}
	return "x25519"
}
