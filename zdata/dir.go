package zdata

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/bfe"
	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/tls13"
)

// File names inside a Z-data directory.
const (
	ServiceFile = "service.json"
	KeysDir     = "keys"
	SeedFile    = "seed"
)

// ServiceConfig is DIR/service.json: the service, where its certificate
// and key are, and the record options. Durations use Go syntax ("1h",
// "10s"); zero values take the Options defaults.
type ServiceConfig struct {
	Host         string        `json:"host"`
	Port         int           `json:"port"`
	Cert         string        `json:"cert"` // PEM chain, leaf first; relative to DIR or absolute
	Key          string        `json:"key"`  // PEM private key; relative to DIR or absolute
	Group        tls13.CurveID `json:"group,omitempty"`
	MaxEarlyData uint32        `json:"max_early_data,omitempty"`
	ALPN         string        `json:"alpn,omitempty"`
	NSC          []string      `json:"nsc,omitempty"` // 4 hex digits each, e.g. "1303"
	ClientCert   bool          `json:"client_cert,omitempty"`
	Validity     string        `json:"validity,omitempty"`
	LeadTime     string        `json:"lead_time,omitempty"`
	Window       string        `json:"window,omitempty"`
	// BFEConnections, BFEFalsePositiveRate and BFESizing size the BFE key
	// of each period (docs/ztls-spec.md, Section 7); 0 connections: no
	// BFE.
	BFEConnections       int        `json:"bfe_connections,omitempty"`
	BFEFalsePositiveRate float64    `json:"bfe_false_positive_rate,omitempty"`
	BFESizing            bfe.Sizing `json:"bfe_sizing,omitempty"`
	// PostQuantum also issues each period's v3 (X25519MLKEM768) key
	// beside the classical one, whose records then announce it
	// (Options.PostQuantum, docs/ztls-spec.md, Section 9.6).
	PostQuantum bool `json:"post_quantum,omitempty"`
}

func parseDur(name, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("zdata: %s %q: not a duration", name, s)
	}
	return d, nil
}

// Options converts the config's record options.
func (c *ServiceConfig) Options() (Options, error) {
	o := Options{Group: c.Group, MaxEarlyData: c.MaxEarlyData, ALPN: c.ALPN, ClientCert: c.ClientCert,
		BFEConnections: c.BFEConnections, BFEFalsePositiveRate: c.BFEFalsePositiveRate, BFESizing: c.BFESizing,
		PostQuantum: c.PostQuantum}
	for _, s := range c.NSC {
		v, err := strconv.ParseUint(s, 16, 16)
		if err != nil || len(s) != 4 {
			return o, fmt.Errorf("zdata: nsc %q: want 4 hex digits", s)
		}
		o.NSC = append(o.NSC, uint16(v))
	}
	var err error
	if o.Validity, err = parseDur("validity", c.Validity); err != nil {
		return o, err
	}
	if o.LeadTime, err = parseDur("lead_time", c.LeadTime); err != nil {
		return o, err
	}
	if o.Window, err = parseDur("window", c.Window); err != nil {
		return o, err
	}
	return o, nil
}

// keyFile is DIR/keys/<id>.json. It holds a private key: mode 0600.
type keyFile struct {
	Host       string   `json:"host"`
	Port       int      `json:"port"`
	TXT        []string `json:"txt"`         // the record as published
	LeafSHA256 string   `json:"leaf_sha256"` // hex SHA-256 of the TLSA leaf
	PrivateKey string   `json:"private_key"` // base64 raw ECDH private key, or a post-quantum key's 96 bytes (tls13.ZDataKEMKey)
	// BFETXT is the v2 twin with bfe= as published (docs/ztls-spec.md,
	// Section 7.1), or for a v3 record the v3 record with bfe= (9.2);
	// its key file is keys/bfe-<not-before>.bfe.
	BFETXT []string `json:"bfe_txt,omitempty"`
}

// MarshalKey encodes a key as a key file.
func MarshalKey(k *Key) ([]byte, error) {
	if k == nil || k.Record == nil || !k.hasPrivate() {
		return nil, errors.New("zdata: incomplete key")
	}
	kf := keyFile{
		Host:       k.Record.Host,
		Port:       k.Record.Port,
		TXT:        k.Record.TXT(),
		LeafSHA256: hex.EncodeToString(k.Record.LeafHash[:]),
		PrivateKey: base64.StdEncoding.EncodeToString(k.privateBytes()),
	}
	if k.BFE != nil {
		kf.BFETXT = k.BFE.Record.TXT()
	}
	b, err := json.MarshalIndent(kf, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("zdata: %v", err)
	}
	return append(b, '\n'), nil
}

// ParseKey decodes a key file. It checks the record's syntax, that the
// private key belongs to the published share, and the host and port; the
// signature is checked by LoadDir against the service's leaf.
func ParseKey(data []byte) (*Key, error) {
	var kf keyFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&kf); err != nil {
		return nil, fmt.Errorf("zdata: key file: %v", err)
	}
	if dec.More() {
		return nil, errors.New("zdata: key file: trailing data")
	}
	r, err := ParseTXT(kf.TXT)
	if err != nil {
		return nil, err
	}
	if r.Host, err = CanonicalHost(kf.Host); err != nil {
		return nil, err
	}
	if kf.Port <= 0 || kf.Port > 65535 {
		return nil, fmt.Errorf("zdata: key file: port %d out of range", kf.Port)
	}
	r.Port = kf.Port
	lh, err := hex.DecodeString(kf.LeafSHA256)
	if err != nil || len(lh) != 32 {
		return nil, errors.New("zdata: key file: leaf_sha256 is not 32 hex bytes")
	}
	copy(r.LeafHash[:], lh)
	raw, err := base64.StdEncoding.Strict().DecodeString(kf.PrivateKey)
	if err != nil {
		return nil, errors.New("zdata: key file: private_key is not base64")
	}
	k := &Key{Record: r}
	if err := k.setPrivate(r, raw); err != nil {
		return nil, err
	}
	if kf.BFETXT != nil {
		twin, err := ParseTXT(kf.BFETXT)
		if err != nil {
			return nil, fmt.Errorf("zdata: key file: bfe_txt: %w", err)
		}
		if twin.V2 == r.V3 || twin.V3 != r.V3 || len(twin.BFE) == 0 || !sameRecord(r, twin) {
			return nil, errors.New("zdata: key file: bfe_txt is not the record's twin with bfe= (v2 for a v1 record, v3 for a v3 record)")
		}
		twin.Host, twin.Port, twin.LeafHash = r.Host, r.Port, r.LeafHash
		k.BFE = &BFEKey{Record: twin}
	}
	return k, nil
}

// sameRecord reports whether twin has a's fields but for its version,
// bfe= and signature (docs/ztls-spec.md, Section 7.1: a v2 twin).
func sameRecord(a, twin *Record) bool {
	fa, ft := a.canonical(), twin.canonical()
	for i := range fa {
		if i != fVersion && i != fBFE && fa[i] != ft[i] {
			return false
		}
	}
	return true
}

// Dir is a Z-data directory, the state `ztls zdata`, `ztls serve --zdata`
// and `ztls dns serve --zdata` share and that survives restarts:
//
//	DIR/service.json    ServiceConfig
//	DIR/keys/<id>.json  one signed record and its private key each (0600)
//	DIR/seed            optional fleet seed (0600): enables fleet mode
//
// The methods of a Dir may be called concurrently (a server's SIGHUP
// reload, its rotation and its DNS answers); Keyring serves lookups
// concurrently throughout. Read Service's certificate through Leaf and
// RRs while a Reload may run: Reload replaces it in place.
type Dir struct {
	Path    string
	Config  ServiceConfig
	Service *Service
	Keyring *Keyring // Service.Keyring
	// Skipped lists key files the load ignored, with why (for example
	// records signed by a previous certificate); SkippedFiles is its
	// current value once reloads run.
	Skipped []string

	mu       sync.Mutex
	rotating bool   // this process rotates the directory (SetRotating)
	stamp    string // what Changed last saw
}

func (d *Dir) file(name string) string {
	if filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(d.Path, name)
}

// CreateDir makes a Z-data directory for cfg (with seed, if non-nil, for
// fleet mode) and loads it; its keyring is empty until Rotate. It fails if
// service.json already exists. Like NewDir it checks everything before it
// writes and leaves nothing behind when it fails.
func CreateDir(path string, cfg ServiceConfig, seed []byte) (*Dir, error) {
	return createDir(path, cfg, seed, time.Time{})
}

// NewDir makes a Z-data directory for cfg holding the keys to publish at
// now (the first Rotate), all or nothing: the certificate, key, options
// and seed are checked first, the leaf must name cfg.Host and be valid at
// now (CheckLeaf), and the files are written into a directory next to
// path that is renamed into place at the end. When path already exists
// (an empty directory, or one holding the certificate) the new files are
// moved into it, service.json last, and removed again if a step fails.
func NewDir(path string, cfg ServiceConfig, seed []byte, now time.Time) (*Dir, error) {
	if now.IsZero() {
		return nil, errors.New("zdata: NewDir needs the time of the first keys")
	}
	return createDir(path, cfg, seed, now)
}

// CheckLeaf refuses a certificate a ZTLS client would refuse for host at
// now: one that does not name host, or is outside its validity period.
// Records signed with it would only make clients fall back to TLS 1.3.
func CheckLeaf(leaf *x509.Certificate, host string, now time.Time) error {
	if err := leaf.VerifyHostname(host); err != nil {
		var names []string
		names = append(names, leaf.DNSNames...)
		for _, ip := range leaf.IPAddresses {
			names = append(names, ip.String())
		}
		if len(names) == 0 {
			names = []string{"none"}
		}
		return fmt.Errorf("zdata: the certificate does not cover %s (it names %s): clients would refuse the Z-data; use a certificate for %s", host, strings.Join(names, ", "), host)
	}
	if now.After(leaf.NotAfter) {
		return fmt.Errorf("zdata: the certificate expired at %s: clients would refuse the Z-data; renew it first", formatTime(leaf.NotAfter))
	}
	if now.Before(leaf.NotBefore) {
		return fmt.Errorf("zdata: the certificate is not valid before %s: clients would refuse the Z-data until then", formatTime(leaf.NotBefore))
	}
	return nil
}

// createDir checks cfg and seed, issues the first keys when now is set,
// and writes the directory all at once.
func createDir(path string, cfg ServiceConfig, seed []byte, now time.Time) (*Dir, error) {
	if path == "" {
		return nil, errors.New("zdata: no directory given")
	}
	if _, err := os.Stat(filepath.Join(path, ServiceFile)); err == nil {
		return nil, fmt.Errorf("zdata: %s already exists", filepath.Join(path, ServiceFile))
	}
	existed := false
	switch st, err := os.Stat(path); {
	case err == nil && !st.IsDir():
		return nil, fmt.Errorf("zdata: %s exists and is not a directory", path)
	case err == nil:
		existed = true
		if ents, err := os.ReadDir(filepath.Join(path, KeysDir)); err == nil && len(ents) > 0 {
			return nil, fmt.Errorf("zdata: %s holds key files but no %s: remove it or choose another directory", filepath.Join(path, KeysDir), ServiceFile)
		}
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("zdata: %v", err)
	}

	// Everything that can be refused is refused before a file is written.
	d := &Dir{Path: path, Config: cfg}
	opts, err := cfg.Options()
	if err != nil {
		return nil, err
	}
	cert, err := tls13.LoadX509KeyPair(d.file(cfg.Cert), d.file(cfg.Key))
	if err != nil {
		return nil, fmt.Errorf("zdata: load certificate: %v", err)
	}
	if seed != nil && len(bytes.TrimSpace(seed)) < 16 {
		return nil, errors.New("zdata: fleet seed shorter than 16 bytes")
	}
	var svcSeed []byte
	if seed != nil {
		svcSeed = bytes.TrimSpace(seed)
	}
	if d.Service, err = NewService(cfg.Host, cfg.Port, cert, opts, svcSeed); err != nil {
		return nil, err
	}
	d.Keyring = d.Service.Keyring
	if !now.IsZero() {
		if err := CheckLeaf(d.Service.Leaf(), d.Service.Host, now); err != nil {
			return nil, err
		}
		if _, err := d.Service.Rotate(now); err != nil {
			return nil, err
		}
	}

	// Write into a staging directory next to path, then move it in.
	parent := filepath.Dir(filepath.Clean(path))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("zdata: %v", err)
	}
	stage, err := os.MkdirTemp(parent, "."+filepath.Base(filepath.Clean(path))+".new*")
	if err != nil {
		return nil, fmt.Errorf("zdata: %v", err)
	}
	defer os.RemoveAll(stage)
	staged := &Dir{Path: stage, Config: cfg, Service: d.Service, Keyring: d.Keyring}
	if seed != nil {
		if err := writeFileAtomic(filepath.Join(stage, SeedFile), seed, 0o600); err != nil {
			return nil, err
		}
	}
	if err := staged.Save(); err != nil {
		return nil, err
	}
	undo, err := commitStaged(stage, path, existed)
	if err != nil {
		return nil, err
	}
	loaded, err := LoadDir(path)
	if err != nil {
		undo()
		return nil, err
	}
	return loaded, nil
}

// commitStaged moves the staged directory to path: one rename when path
// does not exist, else entry by entry with service.json (which marks a
// complete directory) last. undo removes what it moved.
func commitStaged(stage, path string, existed bool) (undo func(), err error) {
	if !existed {
		if err := os.Rename(stage, path); err != nil {
			return nil, fmt.Errorf("zdata: %v", err)
		}
		return func() { os.RemoveAll(path) }, nil
	}
	var moved []string
	undo = func() {
		for i := len(moved) - 1; i >= 0; i-- {
			os.RemoveAll(moved[i])
		}
	}
	for _, name := range []string{KeysDir, SeedFile, ServiceFile} {
		from, to := filepath.Join(stage, name), filepath.Join(path, name)
		if _, err := os.Lstat(from); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if name == KeysDir {
			// An empty keys directory left by an earlier attempt.
			os.Remove(to)
		}
		if name == SeedFile {
			// A seed already there is the user's: the same one stays as it
			// is (and an undo leaves it), another one is not overwritten.
			if old, err := os.ReadFile(to); err == nil {
				if staged, _ := os.ReadFile(from); !bytes.Equal(old, staged) {
					undo()
					return nil, fmt.Errorf("zdata: %s holds another fleet seed: move it away first", to)
				}
				continue
			}
		}
		if err := os.Rename(from, to); err != nil {
			undo()
			return nil, fmt.Errorf("zdata: %v", err)
		}
		moved = append(moved, to)
	}
	return undo, nil
}

// testHookLoaded, if set, runs in LoadDir once the files are read.
var testHookLoaded func(*Dir)

// LoadDir reads a Z-data directory: the service, its certificate and key,
// the fleet seed if any, and every key file. Key files that are
// malformed, readable by others or not for this service are an error;
// keys signed by another leaf (a replaced certificate) are skipped and
// listed in Skipped.
func LoadDir(path string) (*Dir, error) {
	d := &Dir{Path: path}
	cfg, err := readConfig(path)
	if err != nil {
		return nil, err
	}
	d.Config = cfg
	// Stamped before the files are read, so that a write another process
	// makes while they are read shows as a change (Changed) and is
	// picked up, not taken for what was loaded.
	stamp := d.readStamp()
	opts, err := d.Config.Options()
	if err != nil {
		return nil, err
	}
	cert, err := d.loadCert(cfg)
	if err != nil {
		return nil, err
	}
	seed, err := readSeed(filepath.Join(path, SeedFile))
	if err != nil {
		return nil, err
	}
	if d.Service, err = NewService(d.Config.Host, d.Config.Port, cert, opts, seed); err != nil {
		return nil, err
	}
	d.Keyring = d.Service.Keyring
	d.Service.BFEDir = filepath.Join(path, KeysDir)
	keys, skipped, _, err := d.readKeys(d.Service.Leaf())
	if err != nil {
		return nil, err
	}
	d.Skipped = skipped
	d.Keyring.replace(keys)
	if testHookLoaded != nil {
		testHookLoaded(d)
	}
	d.stamp = stamp
	return d, nil
}

// readConfig reads DIR/service.json.
func readConfig(path string) (ServiceConfig, error) {
	var cfg ServiceConfig
	b, err := os.ReadFile(filepath.Join(path, ServiceFile))
	if err != nil {
		return cfg, fmt.Errorf("zdata: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return cfg, fmt.Errorf("zdata: %s: %v", ServiceFile, err)
	}
	return cfg, nil
}

// loadCert loads the certificate and key cfg names.
func (d *Dir) loadCert(cfg ServiceConfig) (tls13.Certificate, error) {
	cert, err := tls13.LoadX509KeyPair(d.file(cfg.Cert), d.file(cfg.Key))
	if err != nil {
		return cert, fmt.Errorf("zdata: load certificate: %v", err)
	}
	return cert, nil
}

// readSeed reads a fleet seed file; a missing file means no fleet.
func readSeed(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("zdata: %v", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("zdata: %s is readable by others (chmod 600)", path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("zdata: %v", err)
	}
	b = bytes.TrimSpace(b)
	if len(b) < 16 {
		return nil, fmt.Errorf("zdata: %s: seed shorter than 16 bytes", path)
	}
	return b, nil
}

// readKeys loads every keys/<id>.json that belongs to the service and is
// signed by leaf. Keys signed by another leaf are skipped: listed in
// skipped, and counted by that leaf's SHA-256 in others.
func (d *Dir) readKeys(leaf *x509.Certificate) (keys []*Key, skipped []string, others map[[32]byte]int, err error) {
	dir := filepath.Join(d.Path, KeysDir)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil, nil
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("zdata: %v", err)
	}
	leafHash := sha256.Sum256(leaf.Raw)
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, ".json") || e.IsDir() {
			continue
		}
		p := filepath.Join(dir, name)
		info, err := e.Info()
		if errors.Is(err, os.ErrNotExist) {
			continue // erased by a rotation since the listing
		}
		if err != nil {
			return nil, nil, nil, fmt.Errorf("zdata: %v", err)
		}
		if info.Mode().Perm()&0o077 != 0 {
			return nil, nil, nil, fmt.Errorf("zdata: %s is readable by others (chmod 600)", p)
		}
		b, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, nil, nil, fmt.Errorf("zdata: %v", err)
		}
		k, err := ParseKey(b)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%s: %w", p, err)
		}
		r := k.Record
		if name != strconv.FormatUint(uint64(r.ID), 10)+".json" {
			return nil, nil, nil, fmt.Errorf("zdata: %s holds Zdata_id %d", p, r.ID)
		}
		if r.Host != d.Service.Host || r.Port != d.Service.Port {
			return nil, nil, nil, fmt.Errorf("zdata: %s is for %s port %d, not %s port %d", p, r.Host, r.Port, d.Service.Host, d.Service.Port)
		}
		if r.LeafHash != leafHash {
			skipped = append(skipped, filepath.Join(KeysDir, name)+": signed by another certificate")
			if others == nil {
				others = map[[32]byte]int{}
			}
			others[r.LeafHash]++
			continue
		}
		if err := r.Verify(leaf, r.Host, r.Port); err != nil {
			return nil, nil, nil, fmt.Errorf("%s: %w", p, err)
		}
		if k.BFE != nil {
			if err := k.BFE.Record.Verify(leaf, r.Host, r.Port); err != nil {
				return nil, nil, nil, fmt.Errorf("%s: bfe_txt: %w", p, err)
			}
			k.BFE.Path = filepath.Join(dir, bfeFileName(r.NotBefore))
		}
		keys = append(keys, k)
	}
	return keys, skipped, others, nil
}

// Save writes service.json and one file per key in the keyring, and
// deletes key files of keys no longer in it (pruned keys are erased from
// disk too). Files are replaced atomically, and only when they change, so
// readers watching the directory see writes only when there is news.
func (d *Dir) Save() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.save()
}

func (d *Dir) save() error {
	b, err := json.MarshalIndent(d.Config, "", "  ")
	if err != nil {
		return fmt.Errorf("zdata: %v", err)
	}
	if err := writeIfChanged(filepath.Join(d.Path, ServiceFile), append(b, '\n'), 0o644); err != nil {
		return err
	}
	dir := filepath.Join(d.Path, KeysDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("zdata: %v", err)
	}
	keep := map[string]bool{}
	for _, k := range d.Keyring.All() {
		name := strconv.FormatUint(uint64(k.Record.ID), 10) + ".json"
		keep[name] = true
		kb, err := MarshalKey(k)
		if err != nil {
			return err
		}
		if err := writeIfChanged(filepath.Join(dir, name), kb, 0o600); err != nil {
			return err
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("zdata: %v", err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".json") && !keep[e.Name()] {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("zdata: %v", err)
			}
		}
	}
	return nil
}

// writeIfChanged is writeFileAtomic unless path already holds data.
func writeIfChanged(path string, data []byte, mode os.FileMode) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		if st, err := os.Stat(path); err == nil && st.Mode().Perm() == mode {
			return nil
		}
	}
	return writeFileAtomic(path, data, mode)
}

// Rotate runs Service.Rotate at now and saves the directory.
func (d *Dir) Rotate(now time.Time) ([]*Key, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	added, err := d.Service.Rotate(now)
	if err != nil {
		return added, err
	}
	return added, d.save()
}

// SetRotating tells the directory whether this process rotates it (holds
// ClaimRotation's claim): Reload then issues, at once, the keys a new
// certificate needs and saves them, so the processes that only read the
// directory pick them up.
func (d *Dir) SetRotating(on bool) {
	d.mu.Lock()
	d.rotating = on
	d.mu.Unlock()
}

// Leaf returns the leaf certificate the directory's records are signed
// with now.
func (d *Dir) Leaf() *x509.Certificate {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.Service.Leaf()
}

// SkippedFiles is Skipped as of the last load, reload or refresh.
func (d *Dir) SkippedFiles() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.Skipped...)
}

// Reload re-reads the directory: the certificate and key service.json
// names (a replaced certificate is taken, after the checks CheckLeaf
// makes) and the key files, into the same Keyring, so servers holding it
// see the change. Keys signed by another certificate than the one loaded
// are skipped (Skipped). When this process rotates the directory
// (SetRotating) or derives a fleet's keys, the keys the certificate needs
// are made at once: a new certificate gets keys signed for its leaf
// without waiting for the next rotation, and saved for the others. A
// process that does not rotate keeps the certificate and keys it has
// until the rotating one has written keys for the new certificate (its
// Refresh then follows). It reports whether the certificate or the key set changed. The host, port
// and record options are those of the load: changing them takes a
// restart. On error nothing changes.
func (d *Dir) Reload() (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	cfg, err := readConfig(d.Path)
	if err != nil {
		return false, err
	}
	if h, _ := CanonicalHost(cfg.Host); h != d.Service.Host || cfg.Port != d.Service.Port {
		return false, fmt.Errorf("zdata: %s now names %s port %d, not %s port %d: restart to serve another service", filepath.Join(d.Path, ServiceFile), cfg.Host, cfg.Port, d.Service.Host, d.Service.Port)
	}
	cert, err := d.loadCert(cfg)
	if err != nil {
		return false, err
	}
	now := clock.Now()
	if !d.rotating && d.Service.Seed == nil {
		// A process that does not rotate follows the one that does: it
		// takes a new certificate once keys signed by it are on disk
		// (Refresh adopts it then) and until then keeps the certificate
		// and keys it serves, which clients can still use, rather than
		// publish nothing in between.
		leaf, certChanged, err := d.checkCert(cert, now)
		if err != nil {
			return false, err
		}
		if certChanged {
			keys, _, _, err := d.readKeys(leaf)
			if err != nil {
				return false, err
			}
			if len(keys) == 0 && len(d.Keyring.Live(now)) > 0 {
				return false, nil
			}
		}
	}
	return d.adopt(cfg, cert, now)
}

// adopt makes cert the service's certificate (when it differs) and loads
// the keys signed by it. d.mu is held.
func (d *Dir) adopt(cfg ServiceConfig, cert tls13.Certificate, now time.Time) (bool, error) {
	leaf, certChanged, err := d.checkCert(cert, now)
	if err != nil {
		return false, err
	}
	keys, skipped, _, err := d.readKeys(leaf)
	if err != nil {
		return false, err
	}
	fleet := d.Service.Seed != nil
	if d.rotating || fleet {
		// Make the keys this certificate needs on a copy, so that servers
		// never see a keyring without them.
		svc := *d.Service
		svc.Cert, svc.leaf = cert, leaf
		svc.Keyring = NewKeyring(d.Keyring.Window())
		svc.Keyring.replace(keys)
		if _, err := svc.Rotate(now); err != nil {
			return false, err
		}
		keys = svc.Keyring.All()
	}
	if certChanged {
		d.Service.Cert, d.Service.leaf = cert, leaf
		d.Config.Cert, d.Config.Key = cfg.Cert, cfg.Key
	}
	d.Skipped = skipped
	keysChanged := d.Keyring.replace(keys)
	if _, err := d.Service.AttachBFE(); err != nil {
		return true, err
	}
	if d.rotating && !fleet {
		if err := d.save(); err != nil {
			return true, err
		}
	}
	return certChanged || keysChanged, nil
}

// checkCert parses cert's leaf and says whether it differs from the
// service's; a new one must be usable for the service at now.
func (d *Dir) checkCert(cert tls13.Certificate, now time.Time) (*x509.Certificate, bool, error) {
	cur := d.Service.Cert.Chain
	if len(cert.Chain) == len(cur) {
		same := true
		for i := range cur {
			same = same && bytes.Equal(cert.Chain[i], cur[i])
		}
		if same {
			return d.Service.Leaf(), false, nil
		}
	}
	if len(cert.Chain) == 0 || cert.PrivateKey == nil {
		return nil, false, errors.New("zdata: certificate chain and private key required")
	}
	leaf := cert.Leaf
	if leaf == nil {
		var err error
		if leaf, err = x509.ParseCertificate(cert.Chain[0]); err != nil {
			return nil, false, fmt.Errorf("zdata: parse leaf: %v", err)
		}
	}
	if _, err := SchemeFor(leaf.PublicKey); err != nil {
		return nil, false, err
	}
	if err := CheckLeaf(leaf, d.Service.Host, now); err != nil {
		return nil, false, fmt.Errorf("%v (the Z-data keeps the certificate it has)", err)
	}
	return leaf, true, nil
}

// Refresh picks up what other processes changed in the directory, for a
// process that does not rotate it: the key files the rotating process
// wrote, and, when it signed them with the certificate now on disk (it
// reloaded a replaced certificate), that certificate too. A fleet derives
// its keys for now instead. It reports whether anything changed.
func (d *Dir) Refresh(now time.Time) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.Service.Seed != nil {
		added, err := d.Service.Rotate(now)
		return len(added) > 0, err
	}
	keys, skipped, others, err := d.readKeys(d.Service.Leaf())
	if err != nil {
		return false, err
	}
	if len(others) > 0 {
		// Keys signed by another leaf: follow them when it is the
		// certificate on disk now.
		cfg, err := readConfig(d.Path)
		if err == nil && cfg.Host == d.Config.Host && cfg.Port == d.Config.Port {
			if cert, err := d.loadCert(cfg); err == nil && others[sha256.Sum256(cert.Chain[0])] > 0 {
				return d.adopt(cfg, cert, now)
			}
		}
	}
	d.Skipped = skipped
	changed := d.Keyring.replace(keys)
	if _, err := d.Service.AttachBFE(); err != nil {
		return changed, err
	}
	return changed, nil
}

// Changed reports whether the directory's files (service.json, the key
// files, the certificate and key it names) changed since the last call or
// load, by their modification times and sizes: a cheap test to call
// often, to Refresh soon after another process writes.
func (d *Dir) Changed() bool {
	st := d.readStamp()
	d.mu.Lock()
	defer d.mu.Unlock()
	changed := st != d.stamp
	d.stamp = st
	return changed
}

// readStamp sums up the modification times and sizes Changed compares.
func (d *Dir) readStamp() string {
	d.mu.Lock()
	files := []string{filepath.Join(d.Path, ServiceFile), filepath.Join(d.Path, KeysDir), d.file(d.Config.Cert), d.file(d.Config.Key)}
	d.mu.Unlock()
	var b strings.Builder
	for _, f := range files {
		if st, err := os.Stat(f); err == nil {
			fmt.Fprintf(&b, "%d/%d;", st.ModTime().UnixNano(), st.Size())
		} else {
			b.WriteString("-;")
		}
	}
	return b.String()
}

// Watch picks up other processes' changes (Refresh) until ctx is done:
// soon after the directory changes (checked every interval) and at least
// every ten intervals. It calls fn after each refresh that changed the
// keys or failed. It blocks.
func (d *Dir) Watch(ctx context.Context, interval time.Duration, fn func(*Dir, error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if !d.Changed() && n%10 != 0 {
				continue
			}
			changed, err := d.Refresh(clock.Now())
			if (changed || err != nil) && fn != nil {
				fn(d, err)
			}
		}
	}
}

// Records returns the records to publish at now, oldest first.
func (d *Dir) Records(now time.Time) []*Record { return d.Service.Records(now) }

// RRs returns the DNS records to serve at now: the published TXT records,
// CERT intermediates and the TLSA leaf, with a TTL ending before the
// earliest not-after (at most maxTTL). Nil when nothing is published.
func (d *Dir) RRs(now time.Time, maxTTL time.Duration) []dns.RR {
	d.mu.Lock() // the records and the leaf they are signed with, as one
	chain := d.Service.Cert.Chain
	recs := d.Records(now)
	d.mu.Unlock()
	if len(recs) == 0 {
		return nil
	}
	return ZoneRRs(recs, chain[0], chain[1:], TTLFor(recs, now, maxTTL))
}

// ZoneLines returns RRs as zone-file lines.
func (d *Dir) ZoneLines(now time.Time, maxTTL time.Duration) []string {
	rrs := d.RRs(now, maxTTL)
	out := make([]string, len(rrs))
	for i, rr := range rrs {
		out[i] = rr.String()
	}
	return out
}

// writeFileAtomic writes data to a temporary file next to path, syncs it
// and renames it over path, so readers see the old or the new file.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("zdata: %v", err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			os.Remove(tmp)
		}
	}()
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return fmt.Errorf("zdata: %v", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("zdata: %v", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("zdata: %v", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("zdata: %v", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("zdata: %v", err)
	}
	ok = true
	return nil
}
