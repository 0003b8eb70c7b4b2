package zdata

import (
	"context"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ztls-project/ztls/bfe"
)

// Bloom filter encryption keys (docs/ztls-spec.md, Section 7). A Z-data
// key of a service configured with BFE gets, once its BFE key file exists,
// a v2 twin of its record carrying bfe=; both are published, so v1 clients
// keep using the v1 record. A v3 key's twin is its v3 record with bfe=
// (Section 9.2), published in place of the record without it (a client
// configured without BFE then has no v3 record of the service). The period's one BFE key file serves the
// v2 twin and the v3 record of a service issuing both. Key files are
// generated in the background (an epoch ahead, GenerateBFE) and never on
// a handshake's path: a key whose file is not ready yet is published
// without a twin until it is.

// BFEKey is the Bloom filter encryption side of a Z-data key: the signed
// v2 twin of its record and its key file, punctured on every
// decapsulation. Its state is open only in a serving process (OpenBFE).
type BFEKey struct {
	Record *Record // the v2 twin, with bfe=
	Path   string  // the bfe key file
	state  atomic.Pointer[openBFE]
}

// openBFE is a BFE key's state in a serving process.
type openBFE struct {
	ks       *bfe.KeyState
	fullFill float64 // BFEFullFill of the key at the service's rate
}

// State returns the open key state, or nil outside a serving process.
func (b *BFEKey) State() *bfe.KeyState {
	if o := b.state.Load(); o != nil {
		return o.ks
	}
	return nil
}

// BFEFullFill is the share of punctured slots at which a key of params is
// full for false-positive rate p (0: bfe.DefaultFalsePositiveRate): the
// fill at which a fresh ciphertext finds all k of its positions punctured
// with probability p, p^(1/k) (docs/ztls-spec.md, Section 7.5). A filter
// sized by bfe.NewParamsSized(n, p, s) reaches it after its n
// decapsulations, with either Sizing: half full at k = 10, a quarter at
// k = 5. Early data is refused from then on rather than accepted at a
// growing false-positive rate.
func BFEFullFill(params bfe.Params, p float64) float64 {
	if p == 0 {
		p = bfe.DefaultFalsePositiveRate
	}
	return params.FillAt(p)
}

// ErrBFEFull refuses early data on a full filter.
var ErrBFEFull = errors.New("zdata: BFE filter full")

// ErrBFEBusy refuses early data when as many decapsulations as
// BFEConcurrency returns are under way: each costs milliseconds of CPU
// (k pairings) and any ClientHello naming a BFE record asks for one, so
// they are bounded, and the handshakes beyond continue as TLS 1.3.
var ErrBFEBusy = errors.New("zdata: BFE decapsulations busy")

// bfeSlots holds a token per decapsulation under way: half the CPUs the
// process started with (at least one), leaving the rest to the
// handshakes.
var bfeSlots = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2))

// BFEConcurrency returns how many decapsulations the process runs at
// once: half the CPUs it started with, at least one.
func BFEConcurrency() int { return cap(bfeSlots) }

// bfeFileName is the key file of the period starting at start, in the
// keys directory: "bfe-<Unix seconds>.bfe".
func bfeFileName(start time.Time) string {
	return "bfe-" + strconv.FormatInt(start.Unix(), 10) + ".bfe"
}

// bfeFileStart parses a bfeFileName (without its ".points" table).
func bfeFileStart(name string) (time.Time, bool) {
	s, ok := strings.CutPrefix(name, "bfe-")
	if !ok {
		return time.Time{}, false
	}
	s, ok = strings.CutSuffix(s, ".bfe")
	if !ok {
		return time.Time{}, false
	}
	u, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(u, 0).UTC(), true
}

// bfeParams sizes the service's filters, or reports that it has none.
func (o Options) bfeParams() (bfe.Params, bool, error) {
	if o.BFEConnections <= 0 {
		return bfe.Params{}, false, nil
	}
	p := o.BFEFalsePositiveRate
	if p == 0 {
		p = bfe.DefaultFalsePositiveRate
	}
	params, err := bfe.NewParamsSized(o.BFEConnections, p, o.BFESizing)
	return params, err == nil, err
}

// bfeRand is the randomness of the BFE master secret of the period
// starting at start: crypto/rand, or in fleet mode HKDF-SHA256 of the
// seed bound to the service and the period, so every member generates the
// same key (docs/ztls-spec.md, Section 7.6).
func (s *Service) bfeRand(start time.Time) (io.Reader, error) {
	if len(s.Seed) == 0 {
		if s.Rand != nil {
			return s.Rand, nil
		}
		return rand.Reader, nil
	}
	info := []byte("ztls v2 fleet bfe")
	info = binary.BigEndian.AppendUint16(info, uint16(len(s.Host)))
	info = append(info, s.Host...)
	info = binary.BigEndian.AppendUint16(info, uint16(s.Port))
	info = binary.BigEndian.AppendUint64(info, uint64(start.Unix()))
	// The scalar sampler reads a few dozen bytes; 1 KiB leaves room for
	// rejection sampling.
	b, err := hkdf.Key(sha256.New, s.Seed, []byte("ztls v2 fleet bfe"), string(info), 1024)
	if err != nil {
		return nil, fmt.Errorf("zdata: hkdf: %v", err)
	}
	return &byteReader{b: b}, nil
}

type byteReader struct{ b []byte }

func (r *byteReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	clear(r.b[:n])
	r.b = r.b[n:]
	return n, nil
}

// GenerateBFE makes the BFE key files of the period holding now and of the
// two after it that do not exist yet, in BFEDir, and returns their paths.
// It takes about a minute of one core per file at n = 2^14: run it in the
// background, never on a handshake's path (ctx cancels it, leaving no
// file). Without BFE configured it does nothing.
func (s *Service) GenerateBFE(ctx context.Context, now time.Time) ([]string, error) {
	params, ok, err := s.Options.bfeParams()
	if !ok {
		return nil, err
	}
	if s.BFEDir == "" {
		return nil, errors.New("zdata: BFE configured without a directory for its key files")
	}
	if err := os.MkdirAll(s.BFEDir, 0o700); err != nil {
		return nil, fmt.Errorf("zdata: %v", err)
	}
	// One generation at a time in the directory; holding the lock, any
	// temporary file is a killed generation's and goes first.
	release, locked, err := lockBFEGeneration(s.BFEDir, true)
	if err != nil {
		return nil, err
	}
	defer release()
	if locked {
		if err := removeBFETemps(s.BFEDir); err != nil {
			return nil, err
		}
	}
	var made []string
	start := s.slot(now)
	for i := 0; i < 3; i++ {
		path := filepath.Join(s.BFEDir, bfeFileName(start))
		start = start.Add(s.Options.Validity)
		if _, err := os.Stat(path); err == nil {
			continue
		}
		rnd, err := s.bfeRand(start.Add(-s.Options.Validity))
		if err != nil {
			return made, err
		}
		epoch := uint64(start.Add(-s.Options.Validity).Unix())
		if _, err := bfe.GenerateKey(ctx, path, bfe.KeyGenConfig{Epoch: epoch, Params: params, Rand: rnd}); err != nil {
			return made, fmt.Errorf("zdata: BFE key for %s: %w", formatTime(time.Unix(int64(epoch), 0)), err)
		}
		made = append(made, path)
	}
	return made, nil
}

// withBFE returns k with the BFE twin of its period attached when the
// period's key file exists and k has none yet (nil: nothing to do). In a
// serving process (BFEServe) the key state is opened too.
func (s *Service) withBFE(k *Key) (*Key, error) {
	if _, ok, _ := s.Options.bfeParams(); !ok || s.BFEDir == "" || !k.hasPrivate() {
		return nil, nil
	}
	if k.BFE != nil {
		if s.BFEServe && k.BFE.State() == nil {
			return nil, s.openBFE(k.BFE)
		}
		return nil, nil
	}
	path := filepath.Join(s.BFEDir, bfeFileName(k.Record.NotBefore))
	pk, _, err := bfe.Inspect(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil // not generated yet: published without a twin
	}
	if err != nil {
		return nil, err
	}
	if pk.Epoch() != uint64(k.Record.NotBefore.Unix()) {
		return nil, fmt.Errorf("zdata: %s is the BFE key of epoch %d, not %d", path, pk.Epoch(), k.Record.NotBefore.Unix())
	}
	twin := k.Record.Clone()
	twin.pub = nil
	// A v1 record's twin is a v2 record; a v3 record's is the v3 record
	// with bfe= (docs/ztls-spec.md, Section 9.2).
	twin.V2, twin.BFE = !k.Record.V3, pk.Bytes()
	if err := twin.Sign(s.Cert.PrivateKey, s.Cert.Chain[0]); err != nil {
		return nil, err
	}
	nk := &Key{Record: k.Record, Private: k.Private, KEM: k.KEM, BFE: &BFEKey{Record: twin, Path: path}}
	if s.BFEServe {
		if err := s.openBFE(nk.BFE); err != nil {
			return nil, err
		}
	}
	return nk, nil
}

// bfeStates are the key states a serving Service has open, by path: one
// per key file (bfe.OpenKeyState locks it), shared by the copies of the
// Service a Dir makes while it reloads.
type bfeStates struct {
	mu     sync.Mutex
	byPath map[string]*bfe.KeyState
}

func (s *Service) openBFE(b *BFEKey) error {
	st := s.bfeStates
	st.mu.Lock()
	defer st.mu.Unlock()
	ks := st.byPath[b.Path]
	if ks == nil {
		var err error
		if ks, err = bfe.OpenKeyState(b.Path, &bfe.Options{Log: s.BFELog}); err != nil {
			return fmt.Errorf("zdata: %w", err)
		}
		if !ks.PublicKey().Equal(mustParseBFE(b.Record.BFE)) {
			ks.Close()
			return fmt.Errorf("zdata: %s is not the BFE key its record publishes", b.Path)
		}
		st.byPath[b.Path] = ks
	}
	b.state.Store(&openBFE{ks: ks, fullFill: BFEFullFill(ks.PublicKey().Params(), s.Options.BFEFalsePositiveRate)})
	return nil
}

func mustParseBFE(enc []byte) *bfe.PublicKey {
	pk, err := bfe.ParsePublicKey(enc)
	if err != nil {
		return nil
	}
	return pk
}

// AttachBFE gives every key in the keyring whose period's BFE key file
// exists its v2 twin, and in a serving process opens the key states; it
// reports whether the keyring changed.
func (s *Service) AttachBFE() (bool, error) {
	changed := false
	var first error
	for _, k := range s.Keyring.All() {
		// One key's failure (an old key whose BFE file is gone) does not
		// keep the others, the live ones among them, without their twins.
		nk, err := s.withBFE(k)
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		if nk != nil {
			s.Keyring.Add(nk)
			changed = true
		}
	}
	return changed, first
}

// bfeGenerationLock is the lock file a BFE key generation holds in the
// service's BFE directory.
const bfeGenerationLock = "generate.lock"

// isBFETemp reports whether e is a BFE key generation's temporary file.
func isBFETemp(e os.DirEntry) bool {
	n := e.Name()
	return strings.HasPrefix(n, "bfe-") && strings.Contains(n, ".tmp-")
}

// removeBFETemps removes the temporary files of BFE key generations in dir
// (bfe.GenerateKey's "<key>.tmp-*" and "<key>.points.tmp-*"). Call it only
// holding lockBFEGeneration: then they belong to a generation that was
// killed, and in a fleet they hold the very slots of the key the seed
// derives again, which punctures never erase: left, they would undo the
// forward secrecy of the flights accepted under that key
// (docs/ztls-spec.md, Section 7).
func removeBFETemps(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("zdata: %v", err)
	}
	for _, e := range ents {
		if isBFETemp(e) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("zdata: removing a killed BFE key generation's file: %v", err)
			}
		}
	}
	return nil
}

// closeBFE closes the key states of pruned keys and removes key files of
// periods past not-after plus the window (their keys are gone from the
// keyring; docs/ztls-spec.md, Section 1 erases Z-data keys then, and the
// BFE key with them).
func (s *Service) closeBFE(gone []*Key, now time.Time) error {
	for _, k := range gone {
		if k.BFE != nil {
			k.BFE.state.Store(nil)
		}
	}
	if s.BFEDir == "" {
		return nil
	}
	st := s.bfeStates
	st.mu.Lock()
	for path, ks := range st.byPath {
		if start, ok := bfeFileStart(filepath.Base(path)); ok && now.After(start.Add(s.Options.Validity+s.Keyring.Window())) {
			ks.Close()
			delete(st.byPath, path)
		}
	}
	st.mu.Unlock()
	ents, err := os.ReadDir(s.BFEDir)
	// A killed generation's temporary files, unless a generation runs.
	if err == nil && slices.ContainsFunc(ents, isBFETemp) {
		if release, ok, err := lockBFEGeneration(s.BFEDir, false); err == nil && ok {
			err := removeBFETemps(s.BFEDir)
			release()
			if err != nil {
				return err
			}
		}
	}
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("zdata: %v", err)
	}
	for _, e := range ents {
		start, ok := bfeFileStart(strings.TrimSuffix(e.Name(), ".points"))
		if !ok || !now.After(start.Add(s.Options.Validity+s.Keyring.Window())) {
			continue
		}
		if err := os.Remove(filepath.Join(s.BFEDir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("zdata: %v", err)
		}
	}
	return nil
}

// decapsulator is a BFE key's tls13.ZDataKey.Decapsulate: it refuses a
// full filter (docs/ztls-spec.md, Section 7.5) and, without waiting, a
// decapsulation beyond BFEConcurrency (ErrBFEBusy), then decapsulates,
// which punctures first and asks the fleet's puncture log, failing
// closed.
func (k *Keyring) decapsulator(r *Record, o *openBFE) func([]byte) ([]byte, error) {
	ks := o.ks
	return func(ct []byte) ([]byte, error) {
		m := int(ks.PublicKey().Params().M)
		if float64(ks.Punctured()) >= o.fullFill*float64(m) {
			k.observe(r, ks, ErrBFEFull)
			return nil, ErrBFEFull
		}
		select {
		case bfeSlots <- struct{}{}:
			defer func() { <-bfeSlots }()
		default:
			k.observe(r, ks, ErrBFEBusy)
			return nil, ErrBFEBusy // nothing punctured
		}
		ctx, cancel := context.WithTimeout(context.Background(), bfeTimeout)
		defer cancel()
		key, err := ks.Decapsulate(ctx, ct)
		k.observe(r, ks, err)
		return key, err
	}
}

// bfeTimeout bounds a decapsulation's wait for the fleet's puncture log.
const bfeTimeout = 2 * time.Second

// BFEEvent is one decapsulation attempt, for logs and metrics: never a
// secret, only the record, the outcome and the filter's fill.
type BFEEvent struct {
	ID        uint32
	Punctured int     // slots punctured after the attempt
	Slots     int     // m
	FPRate    float64 // false-positive rate of a fresh ciphertext now
	Err       error   // nil: decapsulated
}

func (k *Keyring) observe(r *Record, ks *bfe.KeyState, err error) {
	fn := k.onBFE.Load()
	if fn == nil {
		return
	}
	(*fn)(BFEEvent{ID: r.ID, Punctured: ks.Punctured(), Slots: int(ks.PublicKey().Params().M), FPRate: ks.FalsePositiveRate(), Err: err})
}

// OnBFE sets a function called after every decapsulation attempt (from
// handshakes, concurrently); nil removes it.
func (k *Keyring) OnBFE(fn func(BFEEvent)) {
	if fn == nil {
		k.onBFE.Store(nil)
		return
	}
	k.onBFE.Store(&fn)
}
