package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dns/publish"
	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/metrics"
	"github.com/ztls-project/ztls/turbo"
	"github.com/ztls-project/ztls/zdata"
)

// publishTarget is an RFC 2136 primary the Z-data records are pushed to.
type publishTarget struct {
	server, zone               string
	keyName, keySecret, keyAlg string
	ttl                        time.Duration
	// https is the service's HTTPS record: the Z-data (--zdata-https),
	// --https-alpn and, with --turbo, TurboTLS's key at the service's
	// port, the record 'zdata publish' and 'dns serve' make.
	https httpsAdvert
}

func (p *publishTarget) set() bool { return p.server != "" }

func (p *publishTarget) check() error {
	if !p.set() {
		return nil
	}
	if p.zone == "" || p.keyName == "" || p.keySecret == "" {
		return fmt.Errorf("--publish needs --publish-zone, --tsig-name and --tsig-secret or --tsig-secret-file (the primary must allow updates with that key)")
	}
	return nil
}

// push replaces the service's Z-data sets on the primary in one signed
// UPDATE, with its keys merged into the HTTPS RRset the primary holds
// (publishService, as 'ztls zdata publish' does), and returns how many
// records it published.
func (p *publishTarget) push(ctx context.Context, d *zdata.Dir, now time.Time) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	pub := &publish.Publisher{Server: p.server, Zone: p.zone,
		Key: publish.TSIGKey{Name: p.keyName, Algorithm: p.keyAlg, Secret: p.keySecret}}
	n, _, err := publishService(ctx, pub, d, now, p.ttl, &p.https)
	return n, err
}

// zdataKeeper keeps a served Z-data directory current: the process that
// holds the rotation claim adds the next period's key before it is due
// and drops expired ones (what 'ztls zdata rotate' does from cron), and
// issues keys for a reloaded certificate at once (zdata.Dir.Reload); the
// others pick up what it writes within a second (zdataPoll), and try for
// the claim at each tick, so that one of them takes the rotation over
// when its holder stops; with a publish target the records are pushed
// whenever they change; and a directory without a live key, or with keys
// this process cannot use, is said loudly, since ZTLS clients then fall
// back to TLS 1.3.
//
// tick runs from the server's periodic loop; the first tick also starts
// the watch that ticks as soon as the directory changes.
type zdataKeeper struct {
	dir    *zdata.Dir
	rotate bool                 // this process rotates (holds the claim)
	claim  *zdata.RotationClaim // the claim, tried at each tick until held; nil: never rotates (--rotate=false, a fleet)
	// onRotate, if set, runs once this process rotates: at the first
	// tick when it held the claim from the start, else when it takes it
	// over (serveBFE: the BFE key generation).
	onRotate func()
	pub      publishTarget
	log      *slog.Logger
	ech      *echKeeper // the server's ECH keys; nil: not kept

	mu        sync.Mutex // one tick at a time
	watching  sync.Once
	live      int    // live keys at the last check
	checked   bool   // live is set
	stale     bool   // the last publish failed: try again
	published string // the records last pushed (recordsKey)
	skipped   string // the skipped key files last said
}

// zdataPoll is how often a server looks for another process's changes
// to a Z-data directory (a cheap stat of its files).
const zdataPoll = 250 * time.Millisecond

// tick is one round: rotate or pick up changes, publish if needed, warn.
func (k *zdataKeeper) tick(ctx context.Context, now time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	d := k.dir
	k.watching.Do(func() {
		d.SetRotating(k.rotate)
		if k.rotate {
			k.startRotating()
		}
		go k.watch(ctx)
	})
	if !k.rotate && k.claim != nil {
		k.takeOver(now)
	}
	if k.rotate {
		added, err := d.Rotate(now)
		if err != nil {
			k.log.Error("Z-data: rotating", "dir", d.Path, "err", err)
		}
		for _, key := range added {
			k.log.Info("Z-data: added key", "id", key.Record.ID,
				"not_before", key.Record.NotBefore.UTC().Format(time.RFC3339), "not_after", key.Record.NotAfter.UTC().Format(time.RFC3339))
		}
	} else if err := keepCurrent(d, now); err != nil {
		k.log.Error("Z-data: reloading", "dir", d.Path, "err", err)
	}
	if k.ech != nil {
		k.ech.keep(k.log, d, k.rotate, now)
	}
	d.Keyring.Prune(now)
	k.skipped = sayKeysSkipped(k.log, d, k.rotate, k.skipped)
	live := len(d.Keyring.Live(now))
	switch {
	case live == 0 && (!k.checked || k.live > 0):
		how := "run 'ztls zdata rotate " + d.Path + "' or let this server rotate (--rotate)"
		if k.rotate {
			how = "rotation failed: see above"
		}
		k.log.Warn("0 live Z-data keys: ZTLS clients fall back to TLS 1.3", "dir", d.Path, "fix", how)
	case live > 0 && k.checked && k.live == 0:
		k.log.Info("Z-data: live keys again", "dir", d.Path, "live_keys", live)
	}
	k.live, k.checked = live, true
	if !k.pub.set() {
		return
	}
	if key := recordsKey(d, now); key != k.published || k.stale {
		n, err := k.pub.push(ctx, d, now)
		if err != nil {
			k.stale = true
			k.log.Error("Z-data: publishing failed, retrying", "server", k.pub.server, "err", err)
			return
		}
		k.stale, k.published = false, key
		k.log.Info("Z-data: published", "records", n, "host", d.Config.Host, "port", d.Config.Port, "server", k.pub.server)
	}
}

// watch ticks within a second (zdataPoll) of another process changing the
// directory and, with a publish target, just after each instant the
// records it publishes change (a rollover, a twin's start), so that the
// primary holds no stale set until the next periodic tick (docs/soak.md,
// bug 1).
func (k *zdataKeeper) watch(ctx context.Context) {
	poll := time.NewTicker(zdataPoll)
	defer poll.Stop()
	var wake changeWake
	defer wake.stop()
	for {
		var next time.Time
		if k.pub.set() {
			k.mu.Lock()
			next, _ = nextZDataChange([]*zdata.Dir{k.dir}, clock.Now())
			k.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
			if k.dir.Changed() || k.ech.changed(k.dir) {
				k.tick(ctx, clock.Now())
			}
		case <-wake.wait(next):
			wake.fired()
			if !clock.Now().Before(next) {
				k.tick(ctx, clock.Now())
			}
		}
	}
}

// takeOver takes the rotation over when the process that held the claim
// has stopped (its lock died with it). k.mu is held.
func (k *zdataKeeper) takeOver(now time.Time) {
	took, err := k.claim.Try(now)
	if err != nil {
		k.log.Error("Z-data: taking over the rotation", "dir", k.dir.Path, "err", err)
	}
	if !took {
		return
	}
	k.rotate = true
	k.log.Info("Z-data: took over the rotation: the process that rotated this directory stopped", "dir", k.dir.Path)
	k.startRotating()
}

// startRotating is what a process does once it rotates: say when the keys
// it makes reach no DNS, and start what else rotation needs (onRotate).
// k.mu is held.
func (k *zdataKeeper) startRotating() {
	if !k.pub.set() {
		k.log.Warn("Z-data: this server rotates the keys but publishes none of them (no --publish): each new key must reach DNS through 'ztls dns serve --zdata DIR' on this directory, or 'ztls zdata publish' after each rotation, else ZTLS clients fall back to TLS 1.3 once the published key expires",
			"dir", k.dir.Path)
	}
	if k.onRotate != nil {
		k.onRotate()
	}
}

// recordsKey names the records d publishes at now (TTLs aside, since they
// shrink as a record's end nears), to push them only when they change.
func recordsKey(d *zdata.Dir, now time.Time) string {
	var b strings.Builder
	for _, rr := range d.RRs(now, time.Hour) {
		rr = dns.Copy(rr)
		rr.Header().Ttl = 0
		b.WriteString(rr.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// sayKeysSkipped logs, once for each new set, the key files of d that this
// process cannot use because another certificate signed them, with what
// to do, and returns the set said.
func sayKeysSkipped(log *slog.Logger, d *zdata.Dir, rotating bool, said string) string {
	skipped := d.SkippedFiles()
	now := strings.Join(skipped, "; ")
	if now == said || len(skipped) == 0 {
		return now
	}
	fix := "the process that rotates " + d.Path + " (it holds " + zdata.RotationLockFile + ") still signs with another certificate than " +
		"this one: reload it too (SIGHUP, 'systemctl reload'), or run 'ztls zdata rotate " + d.Path + "' if none rotates"
	if rotating {
		fix = "they are left from a replaced certificate and are erased at this rotation"
	}
	leaf := d.Leaf()
	log.Warn("Z-data: key files signed by another certificate are not used", "dir", d.Path, "files", len(skipped),
		"certificate", leaf.Subject.String(), "not_after", leaf.NotAfter.UTC().Format(time.RFC3339), "fix", fix)
	return now
}

// zdataExpiry is how long until the last live key of d expires.
func zdataExpiry(d *zdata.Dir, now time.Time) time.Duration {
	var last time.Time
	for _, k := range d.Keyring.Live(now) {
		if k.Record.NotAfter.After(last) {
			last = k.Record.NotAfter
		}
	}
	if last.IsZero() {
		return 0
	}
	return last.Sub(now)
}

// turboMetrics exposes a TurboTLS server's running totals.
func turboMetrics(mt *metrics.Registry, s *turbo.Server) {
	for _, c := range []struct {
		name, help string
		get        func(turbo.Stats) int64
	}{
		{"ztls_turbo_datagrams_in_total", "TurboTLS datagrams received.", func(st turbo.Stats) int64 { return st.DatagramsIn }},
		{"ztls_turbo_datagrams_out_total", "TurboTLS datagrams sent.", func(st turbo.Stats) int64 { return st.DatagramsOut }},
		{"ztls_turbo_dropped_total", "TurboTLS datagrams dropped (malformed, over a limit, unknown).", func(st turbo.Stats) int64 { return st.Dropped }},
		{"ztls_turbo_linked_total", "TurboTLS handshakes joined by their TCP connection.", func(st turbo.Stats) int64 { return st.Linked }},
		{"ztls_turbo_fallbacks_total", "TurboTLS table entries that expired unlinked (the client went on over TCP).", func(st turbo.Stats) int64 { return st.Expired }},
	} {
		mt.CounterFunc(c.name, c.help, func() float64 { return float64(c.get(s.Stats())) })
	}
}
