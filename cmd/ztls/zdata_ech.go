package main

// ECH keys kept from the Z-data directory (docs/ztls-spec.md, Section
// 10.3): serve loads DIR/ech into one tls13.ECHKeySet, swapped at each
// tick (rotation, another process's rotation, a reload), and rotates
// them with the Z-data when it holds the rotation claim.

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/zdata"
)

// echKeeper is the server's ECH key set and what it last loaded.
type echKeeper struct {
	set    tls13.ECHKeySet
	loaded string // the config ids and periods last loaded: a change is logged
}

// keep rotates the directory's ECH keys (rotate: this process holds the
// claim; only a directory that has ECH keys, made by 'ztls zdata new
// --ech-public-name', is rotated) and loads those a server accepts at
// now into the set.
func (e *echKeeper) keep(log *slog.Logger, d *zdata.Dir, rotate bool, now time.Time) {
	if rotate {
		added, removed, err := d.RotateECH("", now)
		if err != nil {
			log.Error("ECH: rotating the keys", "dir", d.Path, "err", err)
		} else if added+removed > 0 {
			log.Info("ECH: rotated the keys", "dir", d.Path, "added", added, "removed", removed)
		}
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
			sum += fmt.Sprintf("%d@%d ", k.ConfigID, k.NotBefore.Unix())
		}
	}
	if sum != e.loaded {
		e.loaded = sum
		log.Info("ECH: keys loaded", "dir", d.Path, "keys", len(srv), "public_name", echPublicName(keys))
	}
}

// echPublicName is the public name of the newest key ("" without keys).
func echPublicName(keys []*zdata.ECHKey) string {
	if len(keys) == 0 {
		return ""
	}
	return keys[len(keys)-1].PublicName
}
