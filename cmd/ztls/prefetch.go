package main

// ztls prefetch, and get --prefetch-links: fetch and prevalidate what a
// connection checks before its first flight (package dial's Cache).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/net/html"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/prevalidate"
)

type prefetchFlags struct {
	c           connectFlags // resolver, DNS transport, TLS policy, OCSP
	concurrency int
	noHandshake bool
	clear       bool
}

func init() {
	var f prefetchFlags
	cmd := &cobra.Command{
		Use:   "prefetch HOST[:PORT]...",
		Short: "Fetch and prevalidate servers ahead of need (DNS, Z-data, certificate, revocation)",
		Long: `Fetch and check, for each HOST[:PORT] (port 443 by default), what a connection
checks before its first flight, and print what was fetched and validated
and when it expires:

  - the addresses, the HTTPS record (TurboTLS's port, and the Z-data it
    carries, its AliasMode records followed), the Z-data TXT, TLSA and CERT
    records (all at once);
  - the Z-data record connect would use (from the HTTPS record when it
    carries usable Z-data, else the TXT record; --zdata-from), with its
    signature, validity, chain, name and revocation (--crl, and OCSP with
    --ocsp) checked, and the key share and Z-data ECDH for the next
    connection made;
  - for a host without Z-data, its certificate, by a truncated TLS 1.3
    handshake (ClientHello, the server's flight up to its Certificate,
    close), checked the same way (--no-handshake: not).

Each entry expires at the earliest of its DNS TTLs, the Z-data's
not_after, the certificates' NotAfter and the CRL's or OCSP answer's
nextUpdate.

A program that prefetches and then connects in one process (the dial
package, its net/http transport) sends its first flight with no DNS lookup
and no certificate verification. Between processes only the DNS answers
are kept (in the user cache dir, ztls/prefetch.json, which connect and get
read): a later 'ztls get' skips the lookups and verifies the certificate
itself, since a file is no verifier. --clear forgets them.

Privacy and load: the resolver sees every name prefetched (use
--dns-transport tls to hide them from the path), and a truncated
handshake contacts the server (a TLS handshake's work on its side);
Z-data comes from DNS alone and costs the server nothing.`,
		Example: `  ztls prefetch www.example.test example.org:8443 --resolver 127.0.0.1:5353 --ca ca.pem
  ztls prefetch www.example.test --ocsp hard --json
  # the names prefetched hidden from the path: DNS over TLS, the resolver checked by name
  ztls prefetch www.example.test --resolver 9.9.9.9 --dns-transport tls --dns-servername dns.quad9.net
  ztls prefetch --clear`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPrefetch(&f, args)
		},
	}
	fs := cmd.Flags()
	fs.BoolVar(&f.c.json, "json", false, "print what was fetched as JSON, one object per target in a list")
	fs.DurationVar(&f.c.timeout, "timeout", 15*time.Second, "give up after this long")
	f.c.registerDNS(fs) // --dns-transport tls hides the names prefetched from the path
	fs.StringVar(&f.c.ocsp, "ocsp", "off", "ask the certificate's OCSP responder: off, soft (no answer passes, as browsers do) or hard (only a good answer passes)")
	fs.IntVar(&f.concurrency, "concurrency", prevalidate.DefaultConcurrency, "prefetch at most N targets at once")
	fs.StringVar(&f.c.zdataFrom, "zdata-from", "https", "which DNS record Z-data is taken from, as 'ztls connect --zdata-from' takes it: https (the HTTPS record's key65370 when it carries usable Z-data, its AliasMode records followed; else the TXT record), both (the same: a prefetch asks every record at once) or txt (the TXT record only); the output says which record it came from")
	fs.BoolVar(&f.noHandshake, "no-handshake", false, "for hosts without Z-data, fetch no certificate (no truncated handshake: the server is not contacted)")
	fs.BoolVar(&f.clear, "clear", false, "forget everything prefetched (the file in the user cache dir), then prefetch the targets given, if any")
	f.c.tls.register(fs, false)
	f.c.mode, f.c.name = "auto", "prefetch"
	rootCmd.AddCommand(cmd)
}

func runPrefetch(f *prefetchFlags, args []string) error {
	cache := cliCache()
	if f.clear {
		if err := cache.Clear(); err != nil {
			return fmt.Errorf("--clear: %w", err)
		}
		if len(args) == 0 {
			fmt.Fprintln(os.Stderr, "ztls: prefetch cache cleared")
			return nil
		}
	}
	if len(args) == 0 {
		return fmt.Errorf("prefetch takes one or more HOST[:PORT], e.g. 'ztls prefetch example.com'; see 'ztls prefetch --help'")
	}
	if f.concurrency < 1 {
		return fmt.Errorf("--concurrency %d: want at least 1", f.concurrency)
	}
	if f.c.timeout <= 0 {
		return fmt.Errorf("--timeout %v: want a duration above zero, e.g. 15s", f.c.timeout)
	}
	targets := make([]string, len(args))
	for i, a := range args {
		t, err := prevalidate.ParseTarget(a)
		if err != nil {
			return err
		}
		targets[i] = t
	}
	cfg, err := f.c.tls.config(false)
	if err != nil {
		return err
	}
	opts, closeRes, err := f.c.dialOptions(cfg)
	if err != nil {
		return err
	}
	defer closeRes()
	opts.Cache = cache
	po := opts.Prevalidation()
	po.Concurrency, po.NoHandshake = f.concurrency, f.noHandshake
	ctx, cancel := context.WithTimeout(context.Background(), f.c.timeout)
	defer cancel()
	results := prevalidate.Prefetch(ctx, po, targets...)
	failed := 0
	for _, p := range results {
		if p.Err != nil {
			failed++
		}
	}
	if f.c.json {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetIndent("", "  ")
		enc.Encode(results)
		os.Stdout.Write(buf.Bytes())
	} else {
		for _, p := range results {
			writePrefetched(os.Stdout, p, clock.Now())
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d targets not prefetched", failed, len(results))
	}
	return nil
}

// cliCache is the CLI's prefetch cache: in the user cache dir when there
// is one (its DNS answers outlive the process), else in memory.
func cliCache() *prevalidate.Cache {
	return prevalidate.OpenCache(prevalidate.CacheOptions{Path: prevalidate.DefaultCachePath()})
}

// writePrefetched prints one target's prefetch for people.
func writePrefetched(w io.Writer, p *prevalidate.Prefetched, now time.Time) {
	if p.Err != nil {
		fmt.Fprintf(w, "%s: not prefetched: %v\n", p.Target, p.Err)
		return
	}
	fmt.Fprintf(w, "%s: fetched and validated in %.1f ms; expires %s (in %s: %s)\n", p.Target, p.TookMS,
		p.Expires.Local().Format(time.DateTime), p.Expires.Sub(now).Round(time.Second), p.ExpiresBy)
	line := "  addresses " + strings.Join(p.Addresses, ", ")
	if p.TurboPort != 0 {
		line += fmt.Sprintf("; TurboTLS on UDP port %d", p.TurboPort)
	}
	if p.DNSQuestions > 0 {
		line += fmt.Sprintf(" (%d DNS questions)", p.DNSQuestions)
	}
	fmt.Fprintln(w, line)
	if z := p.ZData; z != nil {
		pre := ""
		if p.Precomputed {
			pre = "; key share and ECDH for the next connection made"
		}
		fmt.Fprintf(w, "  Z-data id %d (%s) from the %s record, valid until %s: signature, validity, chain, name and revocation verified%s\n",
			z.ID, z.Group, strings.ToUpper(z.From), z.NotAfter.Local().Format(time.DateTime), pre)
	} else {
		fmt.Fprintf(w, "  no ZTLS: %s\n", p.ZDataReason) // the reason says what of the Z-data
	}
	if p.HTTPSZDataSkipped != "" {
		fmt.Fprintf(w, "  the HTTPS record's Z-data not used: %s\n", p.HTTPSZDataSkipped)
	}
	switch {
	case len(p.Chain) > 0:
		from := map[string]string{"zdata": "the TLSA record", "handshake": "a truncated handshake with the server"}[p.ChainFrom]
		fmt.Fprintf(w, "  verified chain (from %s): %s\n", from, strings.Join(p.Chain, " <- "))
	case p.ChainError != "":
		fmt.Fprintf(w, "  certificate NOT validated (a connection will fail the same way): %s\n", p.ChainError)
	case p.ZData == nil:
		fmt.Fprintln(w, "  no certificate fetched: it is verified on connecting")
	}
	if p.OCSP != "" {
		fmt.Fprintf(w, "  OCSP: %s\n", p.OCSP)
	}
}

// linkedHosts returns the https hosts (HOST:PORT) an HTML page links to
// (a, link, area, form, and the src of script, img, iframe, source,
// video, audio), other than self, each once, in page order.
func linkedHosts(page io.Reader, self string) []string {
	var hosts []string
	seen := map[string]bool{strings.ToLower(self): true}
	z := html.NewTokenizer(page)
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			return hosts
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		for {
			k, v, more := z.TagAttr()
			switch string(k) {
			case "href", "src", "action":
				if h := httpsHost(string(v)); h != "" && !seen[strings.ToLower(h)] {
					seen[strings.ToLower(h)] = true
					hosts = append(hosts, h)
				}
			}
			if !more {
				break
			}
		}
	}
}

// httpsHost is the HOST:PORT of an absolute https:// (or
// protocol-relative, on an https page) link, or "".
func httpsHost(ref string) string {
	ref = strings.TrimSpace(ref)
	if strings.HasPrefix(ref, "//") {
		ref = "https:" + ref
	}
	u, err := url.Parse(ref)
	if err != nil || !strings.EqualFold(u.Scheme, "https") || u.Hostname() == "" {
		return ""
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// teeForLinks has opts.Out copy the response into the returned buffer,
// for --prefetch-links (nil without it).
func (f *connectFlags) teeForLinks(opts *dial.Options) *bytes.Buffer {
	if !f.prefetchLinks {
		return nil
	}
	var page bytes.Buffer
	opts.Out = io.MultiWriter(opts.Out, &page)
	return &page
}

// prefetchLinked prefetches the https hosts the fetched page links to, at
// most --prefetch-concurrency at once, into opts.Cache, and says what it
// did on standard error.
func (f *connectFlags) prefetchLinked(opts dial.Options, addr string, response *bytes.Buffer) {
	if response == nil {
		return
	}
	_, body, ok := bytes.Cut(response.Bytes(), []byte("\r\n\r\n"))
	if !ok {
		return
	}
	hosts := linkedHosts(bytes.NewReader(body), addr)
	if len(hosts) == 0 {
		fmt.Fprintln(os.Stderr, "ztls: --prefetch-links: the page links to no other https host")
		return
	}
	po := opts.Prevalidation()
	po.Concurrency = f.linkConcurrency
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	done := 0
	for _, p := range prevalidate.Prefetch(ctx, po, hosts...) {
		if p.Err != nil {
			fmt.Fprintf(os.Stderr, "ztls: --prefetch-links: %s: %v\n", p.Target, p.Err)
			continue
		}
		done++
		fmt.Fprintf(os.Stderr, "ztls: --prefetch-links: %s prefetched, expires in %s (%s)\n", p.Target,
			clock.Until(p.Expires).Round(time.Second), p.ExpiresBy)
	}
	fmt.Fprintf(os.Stderr, "ztls: --prefetch-links: %d of %d linked hosts prefetched\n", done, len(hosts))
}
