package main

// ECH keys kept from the Z-data directory (docs/ztls-spec.md, Section
// 10.3): serve loads DIR/ech into one tls13.ECHKeySet, swapped at each
// tick (rotation, another process's rotation, a reload), and rotates
// them with the Z-data when it holds the rotation claim.

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/zdata"
)

// echKeeper is the server's ECH key set and what it last loaded.
type echKeeper struct {
	set    tls13.ECHKeySet
	loaded string // the config ids and periods last loaded: a change is logged
	stamp  string // DIR/ech's modification time when last looked at (changed)
}

// changed reports whether DIR/ech changed since the last call (another
// process rotated the ECH keys): the keeper then ticks within zdataPoll.
// A nil keeper has nothing to watch.
func (e *echKeeper) changed(d *zdata.Dir) bool {
	if e == nil {
		return false
	}
	st := "-"
	if fi, err := os.Stat(filepath.Join(d.Path, zdata.ECHDir)); err == nil {
		st = fmt.Sprint(fi.ModTime().UnixNano())
	}
	was := e.stamp
	e.stamp = st
	return was != "" && was != st
}

// keep rotates the directory's ECH keys (rotate: this process holds the
// claim; a fleet member always, since its keys are derived from the seed
// and every member writes the same ones; only a directory that has ECH
// keys, made by 'ztls zdata new --ech-public-name', is rotated) and
// loads those a server accepts at now into the set.
func (e *echKeeper) keep(log *slog.Logger, d *zdata.Dir, rotate bool, now time.Time) {
	if rotate || d.Fleet() {
		rotateECH(d, log, now)
	}
	keys, err := d.ECHKeys()
	if err != nil {
		log.Error("ECH: reading the keys, keeping those loaded", "dir", d.Path, "err", err)
		return
	}
	w := d.Service.Options.Window
	srv := zdata.ECHServerKeys(keys, now, w)
	if err := e.set.Set(srv); err != nil {
		log.Error("ECH: loading the keys, keeping those loaded", "dir", d.Path, "err", err)
		return
	}
	var sum string
	for _, k := range keys {
		if !now.After(k.NotAfter.Add(w)) {
			sum += fmt.Sprintf("%d@%d ", k.ConfigID, k.NotBefore.Unix()) // config id @ period start
		}
	}
	if sum != e.loaded {
		e.loaded = sum
		log.Info("ECH: keys loaded", "dir", d.Path, "keys", len(srv), "public_name", echPublicName(keys), "configs", strings.TrimSpace(sum))
	}
}

// rotateECH rotates d's ECH keys, if it has any (the process holding
// the rotation claim does: serve or dns serve), and logs what changed.
func rotateECH(d *zdata.Dir, log *slog.Logger, now time.Time) {
	added, removed, err := d.RotateECH("", now)
	if err != nil {
		log.Error("ECH: rotating the keys", "dir", d.Path, "err", err)
	} else if added+removed > 0 {
		log.Info("ECH: rotated the keys", "dir", d.Path, "added", added, "removed", removed)
	}
}

// echPublicName is the public name of the newest key ("" without keys).
func echPublicName(keys []*zdata.ECHKey) string {
	if len(keys) == 0 {
		return ""
	}
	return keys[len(keys)-1].PublicName
}

// addECHKeys makes or rotates d's ECH keys for publicName ("" with no
// keys: nothing; "" with keys: rotate them) and says what it did on w.
func addECHKeys(d *zdata.Dir, publicName string, now time.Time, w io.Writer) error {
	if publicName != "" {
		if _, ok := dns.IsDomainName(publicName); !ok || strings.Contains(publicName, "..") || net.ParseIP(publicName) != nil {
			return fmt.Errorf("--ech-public-name %q: want a DNS name for which the server has a certificate (clients whose ECH is rejected check it)", publicName)
		}
	}
	added, removed, err := d.RotateECH(publicName, now)
	if err != nil {
		return err
	}
	if added+removed > 0 {
		fmt.Fprintf(w, "ztls: ECH: %d key(s) added, %d removed (DIR/%s)\n", added, removed, zdata.ECHDir)
	}
	return nil
}

// echRow is one ECH key as 'zdata show' lists it.
type echRow struct {
	ConfigID   uint8     `json:"config_id"`
	PublicName string    `json:"public_name"`
	NotBefore  time.Time `json:"not_before"`
	NotAfter   time.Time `json:"not_after"`
	State      string    `json:"state"`
}

// showECH lists d's ECH keys with their state at now.
func showECH(d *zdata.Dir, now time.Time) ([]echRow, error) {
	keys, err := d.ECHKeys()
	if err != nil {
		return nil, err
	}
	var rows []echRow
	for _, k := range keys {
		state := "published (current)"
		switch {
		case now.Before(k.NotBefore):
			state = "published (next)"
		case !now.Before(k.NotAfter):
			state = "accepted, no longer published (cached answers)"
		}
		rows = append(rows, echRow{k.ConfigID, k.PublicName, k.NotBefore, k.NotAfter, state})
	}
	return rows, nil
}

func writeECHRows(w io.Writer, rows []echRow) {
	for _, r := range rows {
		fmt.Fprintf(w, "  ECH config %-3d public name %s, %s .. %s  %s\n", r.ConfigID, r.PublicName,
			r.NotBefore.UTC().Format("2006-01-02 15:04:05"), r.NotAfter.UTC().Format("15:04:05Z"), r.State)
	}
}

// echCheck is what 'zdata check' found in the HTTPS record's ech.
type echCheck struct {
	Configs     int    `json:"configs"`
	Usable      int    `json:"usable"`
	PublicNames string `json:"public_names,omitempty"`
	Bytes       int    `json:"bytes"`
	Problem     string `json:"problem,omitempty"`
}

// checkECH reads the ech SvcParam of the first ServiceMode record with
// one; nil when none has it.
func checkECH(rrs []*dns.HTTPS) *echCheck {
	for _, rr := range rrs {
		for _, kv := range rr.Value {
			e, ok := kv.(*dns.SVCBECHConfig)
			if !ok {
				continue
			}
			c := &echCheck{Bytes: len(e.ECH)}
			infos, err := tls13.ParseECHConfigList(e.ECH)
			if err != nil {
				c.Problem = err.Error()
				return c
			}
			var names []string
			for _, i := range infos {
				c.Configs++
				if i.Usable {
					c.Usable++
				}
				names = append(names, i.PublicName)
			}
			c.PublicNames = strings.Join(slices.Compact(names), ",")
			if c.Usable == 0 {
				c.Problem = "no ECH config a client can use"
			}
			return c
		}
	}
	return nil
}

func (c *echCheck) writeText(w io.Writer) {
	if c == nil {
		return
	}
	if c.Problem != "" {
		fmt.Fprintf(w, "HTTPS record: ech (%d bytes) NOT usable: %s\n", c.Bytes, c.Problem)
		return
	}
	fmt.Fprintf(w, "HTTPS record: ech: %d config(s), %d usable, public name %s, %d bytes\n", c.Configs, c.Usable, c.PublicNames, c.Bytes)
}
