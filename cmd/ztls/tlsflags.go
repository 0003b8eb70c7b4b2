package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/ztls-project/ztls/revocation"
	"github.com/ztls-project/ztls/tls13"
)

// tlsFlags are the TLS options shared by serve, connect and get.
type tlsFlags struct {
	cert, key  string
	ca         string
	servername string
	insecure   bool
	alpn       []string
	groups     string
	ciphers    string
	padTo      int
	middlebox  bool
	pskKE      bool
	ztlsExt    string
	certComp   string
	crls       []string
	// misplacedCA is --ca given to a server, which has no TLS server to
	// verify: refused with the flag it meant.
	misplacedCA string
}

func (f *tlsFlags) register(fs *pflag.FlagSet, server bool) {
	if server {
		fs.StringVar(&f.cert, "cert", "", "PEM certificate chain, leaf first (required, unless --zdata DIR names one)")
		fs.StringVar(&f.key, "key", "", "PEM private key of the leaf (required, unless --zdata DIR names one)")
		fs.StringVar(&f.ca, "client-ca", "", "PEM roots that client certificates must chain to")
		fs.StringVar(&f.misplacedCA, "ca", "", "not a server flag: client certificates are checked against --client-ca")
		fs.MarkHidden("ca")
	} else {
		fs.StringVar(&f.cert, "cert", "", "PEM client certificate chain, for servers that ask for one")
		fs.StringVar(&f.key, "key", "", "PEM private key of the client certificate")
		fs.StringVar(&f.ca, "ca", "", "PEM file of trusted roots (default: the system's)")
		fs.StringVar(&f.servername, "servername", "", "name to send as SNI and verify (default: the host)")
		fs.BoolVar(&f.insecure, "insecure", false, "skip certificate verification (DANGEROUS: tests only)")
		fs.BoolVar(&f.middlebox, "middlebox-compat", false, "send the middlebox compatibility records of RFC 8446, Appendix D.4")
	}
	fs.StringSliceVar(&f.alpn, "alpn", nil, "ALPN protocols, preference order (e.g. h2,http/1.1)")
	fs.StringVar(&f.groups, "groups", "", "key exchange groups, preference order, from X25519MLKEM768,x25519,secp256r1,secp384r1,secp521r1")
	fs.StringVar(&f.ciphers, "ciphers", "", "cipher suites, preference order, from TLS_AES_128_GCM_SHA256,TLS_AES_256_GCM_SHA384,TLS_CHACHA20_POLY1305_SHA256")
	fs.IntVar(&f.padTo, "pad", 0, "pad every record's plaintext to a multiple of N bytes, 0 to 16384 (RFC 8446, Section 5.4)")
	fs.BoolVar(&f.pskKE, "psk-ke", false, "also allow resumption without a fresh key exchange (psk_ke: no forward secrecy)")
	fs.StringSliceVar(&f.crls, "crl", nil, "certificate revocation list file (PEM or DER; repeatable): a revoked peer certificate fails the handshake, a revoked Z-data leaf means no ZTLS")
	if server {
		fs.StringVar(&f.certComp, "cert-compression", "", "compress the certificate chain the server sends (RFC 8879) with the first of these, in preference order, that the client offers: zlib, brotli, zstd (e.g. brotli,zstd,zlib: Chromium offers brotli). A client that offers none gets it uncompressed. It shrinks the server's first flight (names and URLs repeated across a chain compress best), which can keep that flight within TCP's initial window and save a round trip; each chain is compressed once per process, so it costs the server almost nothing. Default: off")
	} else {
		fs.StringVar(&f.certComp, "cert-compression", "", "offer certificate compression (RFC 8879) for the server's chain: zlib, brotli, zstd, in preference order; a server that takes one sends a smaller first flight, which is decompressed here (the handshake's report says which was used). Default: off")
	}
	fs.StringVar(&f.ztlsExt, "ztls-codepoint", "", "TLS extension codepoint of ztls, e.g. 0xff5a (the default, private use); clients and servers must agree, and it must differ from every other extension's (ztls_bfe is 0xff5b)")
}

var groupNames = map[string]tls13.CurveID{
	"x25519mlkem768": tls13.X25519MLKEM768, "x25519": tls13.X25519,
	"secp256r1": tls13.P256, "p-256": tls13.P256, "p256": tls13.P256,
	"secp384r1": tls13.P384, "p-384": tls13.P384, "p384": tls13.P384,
	"secp521r1": tls13.P521, "p-521": tls13.P521, "p521": tls13.P521,
}

// groupHelp and suiteHelp are the valid values, as errors list them.
const (
	groupHelp = "X25519MLKEM768, x25519, secp256r1 (p-256), secp384r1 (p-384), secp521r1 (p-521), or a codepoint in hex such as 0x001d"
	suiteHelp = "TLS_AES_128_GCM_SHA256 (aes128), TLS_AES_256_GCM_SHA384 (aes256), TLS_CHACHA20_POLY1305_SHA256 (chacha20), or a codepoint in hex such as 0x1301"
)

// certCompNames are the certificate compression algorithms (RFC 8879)
// by their IANA names, as --cert-compression takes them.
var certCompNames = map[string]tls13.CertCompressionAlgorithm{
	"zlib": tls13.CertCompressionZlib, "brotli": tls13.CertCompressionBrotli, "zstd": tls13.CertCompressionZstd,
}

const certCompHelp = "zlib, brotli, zstd (a comma-separated list, preference order)"

var suiteNames = map[string]tls13.CipherSuite{
	"tls_aes_128_gcm_sha256": tls13.TLS_AES_128_GCM_SHA256, "aes128": tls13.TLS_AES_128_GCM_SHA256,
	"tls_aes_256_gcm_sha384": tls13.TLS_AES_256_GCM_SHA384, "aes256": tls13.TLS_AES_256_GCM_SHA384,
	"tls_chacha20_poly1305_sha256": tls13.TLS_CHACHA20_POLY1305_SHA256, "chacha20": tls13.TLS_CHACHA20_POLY1305_SHA256,
}

// maxPad is the largest --pad: a record's plaintext is at most 2^14
// bytes (RFC 8446, Section 5.1).
const maxPad = 1 << 14

// parseList parses a comma-separated list of names (case-insensitive)
// or hex codepoints written 0xNNNN; flag, what and valid are for its
// errors.
func parseList[T ~uint16](s string, names map[string]T, flag, what, valid string) ([]T, error) {
	if s == "" {
		return nil, nil
	}
	var out []T
	seen := map[T]bool{}
	for _, n := range strings.Split(s, ",") {
		n = strings.ToLower(strings.TrimSpace(n))
		if n == "" {
			return nil, fmt.Errorf("%s %q: an empty entry; give a comma-separated list of %s", flag, s, valid)
		}
		id, ok := names[n]
		if !ok {
			hex, isHex := strings.CutPrefix(n, "0x")
			v, err := strconv.ParseUint(hex, 16, 16)
			if !isHex || err != nil {
				return nil, fmt.Errorf("%s: unknown %s %q; valid: %s", flag, what, n, valid)
			}
			id = T(v)
		}
		if seen[id] {
			return nil, fmt.Errorf("%s: %q is listed twice", flag, n)
		}
		seen[id] = true
		out = append(out, id)
	}
	return out, nil
}

// check refuses values no TLS connection can use, saying which work.
func (f *tlsFlags) check() error {
	if f.misplacedCA != "" {
		return fmt.Errorf("--ca is the roots a client checks the server against; a server checks client certificates against --client-ca %s (with --client-auth request or require)", f.misplacedCA)
	}
	if f.padTo < 0 || f.padTo > maxPad {
		return fmt.Errorf("--pad %d: want a block size from 0 (no padding) to %d bytes, e.g. 256", f.padTo, maxPad)
	}
	for _, p := range f.alpn {
		if p == "" || len(p) > 255 {
			return fmt.Errorf("--alpn: protocol names are 1 to 255 bytes long, e.g. h2,http/1.1")
		}
	}
	return nil
}

// config builds a tls13.Config from the flags.
func (f *tlsFlags) config(server bool) (*tls13.Config, error) {
	cfg := &tls13.Config{NextProtos: f.alpn, PadTo: f.padTo, ServerName: f.servername,
		InsecureSkipVerify: f.insecure, MiddleboxCompat: f.middlebox}
	if err := f.check(); err != nil {
		return nil, err
	}
	var err error
	if cfg.Groups, err = parseList(f.groups, groupNames, "--groups", "group", groupHelp); err != nil {
		return nil, err
	}
	if cfg.CipherSuites, err = parseList(f.ciphers, suiteNames, "--ciphers", "cipher suite", suiteHelp); err != nil {
		return nil, err
	}
	if cfg.CertificateCompression, err = parseList(f.certComp, certCompNames, "--cert-compression", "algorithm", certCompHelp); err != nil {
		return nil, err
	}
	for _, a := range cfg.CertificateCompression {
		if _, ok := certCompNames[a.String()]; !ok {
			return nil, fmt.Errorf("--cert-compression: %v is not an algorithm ztls implements; valid: %s", a, certCompHelp)
		}
	}
	if len(cfg.Groups) > 0 {
		cfg.KeyShareGroups = cfg.Groups[:1]
	}
	if f.pskKE {
		cfg.PSKModes = []tls13.PSKMode{tls13.PSKModeDHEKE, tls13.PSKModeKE}
	}
	if len(f.crls) > 0 {
		rev, err := revocation.Load(f.crls...)
		if err != nil {
			return nil, fmt.Errorf("--crl: %w", err)
		}
		cfg.Revocation = rev
	}
	if f.ztlsExt != "" {
		v, err := strconv.ParseUint(f.ztlsExt, 0, 16)
		if err != nil || v == 0 {
			return nil, fmt.Errorf("--ztls-codepoint %q: want a TLS extension number from 1 to 65535, e.g. 0xff5a", f.ztlsExt)
		}
		// Another extension's codepoint (ztls_bfe's 0xff5b, key_share's)
		// would fail every handshake: refused now, naming both.
		if err := (&tls13.Config{ZTLSExtension: tls13.ExtensionType(v)}).Check(); err != nil {
			return nil, fmt.Errorf("--ztls-codepoint %s: %w", f.ztlsExt, err)
		}
		cfg.ZTLSExtension = tls13.ExtensionType(v)
	}
	if f.cert != "" || f.key != "" {
		if f.cert == "" || f.key == "" {
			return nil, fmt.Errorf("--cert and --key go together")
		}
		c, err := tls13.LoadX509KeyPair(f.cert, f.key)
		if err != nil {
			return nil, fmt.Errorf("--cert/--key: %w", err)
		}
		cfg.Certificates = []tls13.Certificate{c}
	} else if server {
		return nil, fmt.Errorf("a server needs --cert and --key (make a test pair with: openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=localhost -addext subjectAltName=DNS:localhost -keyout key.pem -out cert.pem)")
	}
	if f.ca != "" {
		pool, err := tls13.LoadCertPool(f.ca)
		if err != nil {
			return nil, fmt.Errorf("--ca: %w", err)
		}
		if server {
			cfg.ClientCAs = pool
		} else {
			cfg.RootCAs = pool
		}
	}
	if path := os.Getenv("SSLKEYLOGFILE"); path != "" {
		w, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, fmt.Errorf("SSLKEYLOGFILE: %w", err)
		}
		cfg.KeyLogWriter = w
		fmt.Fprintf(os.Stderr, "ztls: writing TLS secrets to %s (SSLKEYLOGFILE): anyone with this file can decrypt the traffic\n", path)
	}
	return cfg, nil
}
