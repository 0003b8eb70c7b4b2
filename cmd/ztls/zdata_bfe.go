package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/ztls-project/ztls/bfe"
	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/zdata"
)

// Bloom filter encryption keys of a Z-data directory (docs/ztls-spec.md,
// Section 7): generated a period ahead in the background by the process
// that rotates the directory (every member, in a fleet), attached to the
// keys as v2 twin records, punctured by the serving process.

// bfeFlags are --bfe-connections, --bfe-fp-rate and --bfe-sizing of zdata
// new/rotate.
type bfeFlags struct {
	connections int
	fpRate      float64
	sizingName  string
	sizing      bfe.Sizing // sizingName parsed by check
}

func (b *bfeFlags) add(cmd interface {
	IntVar(*int, string, int, string)
	Float64Var(*float64, string, float64, string)
	StringVar(*string, string, string, string)
}) {
	cmd.IntVar(&b.connections, "bfe-connections", 0, "give each period's key a Bloom filter encryption key for this many early-data connections (replay-proof, forward-secret first flights for clients that support it; 0: none). Key generation takes about a minute of one core per period at 16384")
	cmd.Float64Var(&b.fpRate, "bfe-fp-rate", 0, "false-positive rate of a full BFE filter: the share of honest early data refused at capacity (0: 1/1024)")
	cmd.StringVar(&b.sizingName, "bfe-sizing", bfe.FewestHashes.String(), "how BFE filters trade key size for handshake CPU at the same false-positive rate: "+
		"fewest-hashes (the fewest pairings whose secret key stays within 960 bytes per connection: k=5, 13.7 MB at 16384 connections and 1/1024) "+
		"or smallest-key (the optimal Bloom filter: k=10, 11.3 MB, about 1.7 times the CPU per early-data handshake)")
}

func (b *bfeFlags) check() error {
	if err := b.sizing.UnmarshalText([]byte(b.sizingName)); err != nil {
		return fmt.Errorf("--bfe-sizing %q: want %v or %v", b.sizingName, bfe.FewestHashes, bfe.SmallestKey)
	}
	if b.connections < 0 {
		return fmt.Errorf("--bfe-connections %d: want a positive number of connections, or 0 for none", b.connections)
	}
	if b.fpRate != 0 && !(b.fpRate > 0 && b.fpRate < 1) {
		return fmt.Errorf("--bfe-fp-rate %g: want a rate between 0 and 1", b.fpRate)
	}
	if b.connections > 0 {
		p := b.fpRate
		if p == 0 {
			p = bfe.DefaultFalsePositiveRate
		}
		if _, err := bfe.NewParamsSized(b.connections, p, b.sizing); err != nil {
			return fmt.Errorf("--bfe-connections %d --bfe-fp-rate %g: %w", b.connections, p, err)
		}
	}
	return nil
}

// generateBFE makes the BFE key files d still needs (the current period and
// the two after it) and attaches them; progress goes to w.
func generateBFE(ctx context.Context, d *zdata.Dir, now time.Time, w io.Writer) error {
	if d.Config.BFEConnections <= 0 {
		return nil
	}
	start := time.Now() // real time: elapsed
	made, err := d.Service.GenerateBFE(ctx, now)
	for _, p := range made {
		fmt.Fprintf(w, "ztls: BFE key %s generated\n", filepath.Base(p))
	}
	if err != nil {
		return err
	}
	if len(made) > 0 {
		fmt.Fprintf(w, "ztls: %d BFE key(s) in %v\n", len(made), time.Since(start).Round(time.Millisecond))
	}
	_, err = d.Rotate(now)
	return err
}

// bfeRow is what zdata show says of one key's BFE filter.
type bfeRow struct {
	File       string  `json:"file"`
	Slots      int     `json:"slots"`  // m
	Hashes     int     `json:"hashes"` // k
	Punctured  int     `json:"punctured"`
	Fill       float64 `json:"fill"`                // punctured / m
	FullFill   float64 `json:"full_fill"`           // fill at which early data is refused
	FPRate     float64 `json:"false_positive_rate"` // of a fresh ciphertext now
	FullFPRate float64 `json:"full_false_positive_rate"`
	Capacity   int     `json:"capacity"` // connections until full, about
	Full       bool    `json:"full"`
	Err        string  `json:"error,omitempty"`
}

// showBFE reads a key's filter without locking it (a server may hold it);
// p is the directory's false-positive rate (0: the default).
func showBFE(k *zdata.Key, p float64) *bfeRow {
	if k.BFE == nil {
		return nil
	}
	row := &bfeRow{File: filepath.Base(k.BFE.Path)}
	pk, punctured, err := bfe.Inspect(k.BFE.Path)
	if err != nil {
		row.Err = err.Error()
		return row
	}
	params := pk.Params()
	row.Slots, row.Hashes, row.Punctured = int(params.M), int(params.K), punctured
	row.Fill = float64(punctured) / float64(params.M)
	row.FullFill = zdata.BFEFullFill(params, p)
	row.FPRate = math.Pow(row.Fill, float64(params.K))
	row.FullFPRate = math.Pow(row.FullFill, float64(params.K))
	// After c connections about 1 - e^(-kc/m) of the slots are punctured,
	// so a fill f has taken -m/k ln(1 - f) of them.
	connections := func(f float64) float64 {
		return -float64(params.M) / float64(params.K) * math.Log(1-math.Min(f, 0.999999))
	}
	row.Capacity = int(math.Max(0, connections(row.FullFill)-connections(row.Fill)))
	row.Full = row.Fill >= row.FullFill
	return row
}

func (r *bfeRow) text() string {
	if r.Err != "" {
		return "BFE " + r.File + ": " + r.Err
	}
	state := fmt.Sprintf("about %d connections left", r.Capacity)
	if r.Full {
		state = "FULL: early data refused"
	}
	return fmt.Sprintf("BFE m=%d k=%d: %d punctured (%.1f%% full of %.0f%%), false-positive rate now %.2g (at capacity %.2g), %s",
		r.Slots, r.Hashes, r.Punctured, 100*r.Fill, 100*r.FullFill, r.FPRate, r.FullFPRate, state)
}

// bfeFilesAhead lists the BFE key files in d's keys directory no key uses
// yet: the periods generated ahead.
func bfeFilesAhead(d *zdata.Dir) []string {
	used := map[string]bool{}
	for _, k := range d.Keyring.All() {
		if k.BFE != nil {
			used[filepath.Base(k.BFE.Path)] = true
		}
	}
	ents, _ := os.ReadDir(filepath.Join(d.Path, zdata.KeysDir))
	var out []string
	for _, e := range ents {
		n := e.Name()
		if filepath.Ext(n) == ".bfe" && !used[n] {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// serveBFE sets up a serving process's BFE keys: it opens their states
// (this process punctures them), shares punctures through the fleet's
// Redis when there is one, logs punctures and fill, and when this process
// rotates the directory (or derives a fleet's keys) generates the coming
// periods' keys in the background.
func (s *serving) serveBFE(ctx context.Context, keeper *zdataKeeper) {
	d := s.zdir
	if d == nil || d.Config.BFEConnections <= 0 {
		return
	}
	d.Service.BFEServe = true
	if s.reg != nil {
		d.Service.BFELog = s.reg.PunctureLog(d.Service.Host, d.Service.Port, d.Service.Options.Validity)
	}
	s.undo = append(s.undo, d.Service.CloseBFE)
	d.Keyring.OnBFE(newBFELogger(s.log).observe)
	if keeper.claim == nil && !d.Fleet() {
		return // never rotates (--rotate=false)
	}
	gen := func() {
		start := time.Now() // real time: elapsed
		made, err := d.Service.GenerateBFE(ctx, clock.Now())
		for _, p := range made {
			s.log.Info("BFE: key generated", "file", filepath.Base(p), "connections", d.Config.BFEConnections, "took", time.Since(start).Round(time.Millisecond))
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			s.log.Error("BFE: key generation failed: early data stays ECDH-only (v1) until it succeeds", "err", err)
		}
		if len(made) > 0 {
			keeper.tick(ctx, clock.Now()) // attach the new keys
		}
	}
	generate := func() {
		go func() {
			gen()
			every(ctx, time.Minute, gen)
		}()
	}
	if d.Fleet() {
		generate()
		return
	}
	// When this process rotates: from its first tick if it holds the
	// claim, else once it takes the rotation over.
	keeper.onRotate = generate
}

// bfeLogger logs decapsulations: each at debug level, the fill of a key
// each time it crosses another tenth, and a full filter once.
type bfeLogger struct {
	log  *slog.Logger
	mu   sync.Mutex
	seen map[uint32]int // tenths of fill already said, per Zdata_id
}

func newBFELogger(log *slog.Logger) *bfeLogger {
	return &bfeLogger{log: log, seen: map[uint32]int{}}
}

func (l *bfeLogger) observe(e zdata.BFEEvent) {
	fill := float64(e.Punctured) / float64(e.Slots)
	if e.Err != nil {
		l.log.Debug("BFE: early data refused", "id", e.ID, "punctured", e.Punctured, "fill", fmt.Sprintf("%.3f", fill), "reason", e.Err.Error())
	} else {
		l.log.Debug("BFE: punctured", "id", e.ID, "punctured", e.Punctured, "fill", fmt.Sprintf("%.3f", fill), "false_positive_rate", e.FPRate)
	}
	tenths := int(fill * 10)
	l.mu.Lock()
	last, ok := l.seen[e.ID]
	l.seen[e.ID] = max(last, tenths)
	l.mu.Unlock()
	switch {
	case errors.Is(e.Err, zdata.ErrBFEFull) && last <= 10:
		l.mu.Lock()
		l.seen[e.ID] = 11
		l.mu.Unlock()
		l.log.Warn("BFE: filter full: early data under this key is refused until the next period's key", "id", e.ID, "punctured", e.Punctured, "slots", e.Slots)
	case !ok || tenths > last:
		l.log.Info("BFE: fill", "id", e.ID, "punctured", e.Punctured, "slots", e.Slots, "fill", fmt.Sprintf("%.1f%%", 100*fill), "false_positive_rate", e.FPRate)
	}
}
