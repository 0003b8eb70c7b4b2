package zdata

// ECH keys in the Z-data directory (docs/ztls-spec.md, Section 10.3):
// DIR/ech/<not-before unix>-<config id>.json, one per validity period,
// each a tls13 ECH key (private key: mode 0600). They rotate on the
// Z-data periods (multiples of Validity since the Unix epoch), with the
// overlap of Section 8.4: the next period's config is published a whole
// period before the current one's not-after, and a server keeps a key
// for Window past its not-after, until every cached answer that carried
// it has expired. A fleet (a directory with a seed) derives each
// period's key from the seed (deriveECHKey), so every member writes the
// same files and accepts the configs any member's DNS answer carried.

import (
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ztls-project/ztls/tls13"
)

// ECHDir is the subdirectory of a Z-data directory holding its ECH keys.
const ECHDir = "ech"

// echMaxNameLength is the maximum_name_length of the configs made: the
// longest inner server name padded to (RFC 9849, Section 6.1.3).
const echMaxNameLength = 64

// ECHKey is one ECH key of a directory with the period it is published
// for.
type ECHKey struct {
	ConfigID   uint8     `json:"config_id"`
	PublicName string    `json:"public_name"`
	NotBefore  time.Time `json:"not_before"`
	NotAfter   time.Time `json:"not_after"`
	Config     []byte    `json:"config"`      // the ECHConfig
	PrivateKey []byte    `json:"private_key"` // secret: never logged
	file       string
}

func (k *ECHKey) fileName() string {
	return fmt.Sprintf("%d-%03d.json", k.NotBefore.Unix(), k.ConfigID)
}

// ECHKeys reads the directory's ECH keys, oldest first; none (nil, nil)
// when the directory has no ECH subdirectory.
func (d *Dir) ECHKeys() ([]*ECHKey, error) {
	dir := filepath.Join(d.Path, ECHDir)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("zdata: ECH keys: %w", err)
	}
	var keys []*ECHKey
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("zdata: ECH key: %w", err)
		}
		k := &ECHKey{file: e.Name()}
		if err := json.Unmarshal(data, k); err != nil {
			return nil, fmt.Errorf("zdata: ECH key %s: %v (remove the file and run zdata rotate)", e.Name(), err)
		}
		if _, err := tls13.MarshalECHConfigList([]tls13.ECHKey{{Config: k.Config}}); err != nil {
			return nil, fmt.Errorf("zdata: ECH key %s: %v (remove the file and run zdata rotate)", e.Name(), err)
		}
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b *ECHKey) int { return a.NotBefore.Compare(b.NotBefore) })
	return keys, nil
}

// RotateECH makes sure the directory holds the ECH keys of the period
// containing now and of the next one (published a whole period ahead),
// for publicName ("" keeps the public name of the keys there: with no
// keys and no name, the directory has no ECH and nothing is done), and
// removes the keys past not-after plus Window. It returns how many keys
// it added and removed.
func (d *Dir) RotateECH(publicName string, now time.Time) (added, removed int, err error) {
	keys, err := d.ECHKeys()
	if err != nil {
		return 0, 0, err
	}
	if publicName == "" && len(keys) > 0 {
		publicName = keys[len(keys)-1].PublicName
	}
	if publicName == "" {
		return 0, 0, nil
	}
	opts := d.Service.Options
	dir := filepath.Join(d.Path, ECHDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, 0, fmt.Errorf("zdata: ECH keys: %w", err)
	}
	var live []*ECHKey
	for _, k := range keys {
		if now.After(k.NotAfter.Add(opts.Window)) || d.notFleetKey(k) {
			if err := os.Remove(filepath.Join(dir, k.file)); err != nil {
				return added, removed, fmt.Errorf("zdata: ECH keys: %w", err)
			}
			removed++
			continue
		}
		live = append(live, k)
	}
	cur := d.Service.slot(now)
	for _, start := range []time.Time{cur, cur.Add(opts.Validity)} {
		if slices.ContainsFunc(live, func(k *ECHKey) bool { return k.NotBefore.Equal(start) && k.PublicName == publicName }) {
			continue
		}
		k, err := d.makeECHKey(publicName, start, start.Add(opts.Validity), live)
		if err != nil {
			return added, removed, err
		}
		if err := writeECHKey(dir, k); err != nil {
			return added, removed, err
		}
		live = append(live, k)
		added++
	}
	return added, removed, nil
}

func writeECHKey(dir string, k *ECHKey) error {
	data, err := json.MarshalIndent(k, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(dir, k.fileName()), append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("zdata: ECH key: %w", err)
	}
	k.file = k.fileName()
	return nil
}

// makeECHKey is the key of a period: derived from the seed in a fleet,
// drawn at random otherwise.
func (d *Dir) makeECHKey(publicName string, notBefore, notAfter time.Time, live []*ECHKey) (*ECHKey, error) {
	if d.Fleet() {
		return d.deriveECHKey(publicName, notBefore, notAfter)
	}
	return newECHKey(publicName, notBefore, notAfter, live)
}

// notFleetKey reports whether a fleet directory holds a key its seed
// does not derive (drawn before the directory joined the fleet, or under
// another seed): the other members do not have it, so a client given its
// config by this member's DNS would be rejected by them. Rotation
// replaces it with the derived one.
func (d *Dir) notFleetKey(k *ECHKey) bool {
	if !d.Fleet() {
		return false
	}
	want, err := d.deriveECHKey(k.PublicName, k.NotBefore, k.NotAfter)
	return err != nil || string(want.Config) != string(k.Config)
}

// Labels of the fleet's ECH key derivation (docs/ztls-spec.md, Section
// 10.3), distinct from the Z-data keys' ("ztls v1 fleet") and the BFE
// keys' ("ztls v2 fleet bfe"), so no seed-derived bytes serve two uses.
const (
	echFleetSalt = "ztls ech fleet"
	echFleetInfo = "ztls ech fleet key"
)

// deriveECHKey derives a fleet's ECH key for the period [notBefore,
// notAfter): 33 bytes of HKDF-SHA256 (RFC 5869) with the seed as input
// keying material, salt echFleetSalt and info echFleetInfo ‖ uint16
// len(host) ‖ host ‖ uint16 port ‖ uint16 len(public_name) ‖
// public_name ‖ uint64 not_before ‖ uint64 not_after (Unix seconds).
// The first 32 are the X25519 private key; the last gives the config_id
// its upper seven bits and the period's index (not_before / its length)
// its lowest, so adjacent periods, whose configs are published and
// accepted together, never share a config_id, and an id reveals nothing
// beyond the period's parity to whoever lacks the seed.
func (d *Dir) deriveECHKey(publicName string, notBefore, notAfter time.Time) (*ECHKey, error) {
	s := d.Service
	length := int64(notAfter.Sub(notBefore) / time.Second)
	if length <= 0 {
		return nil, fmt.Errorf("zdata: ECH key period %v..%v is empty", notBefore, notAfter)
	}
	h := hostOrLower(s.Host)
	info := []byte(echFleetInfo)
	info = binary.BigEndian.AppendUint16(info, uint16(len(h)))
	info = append(info, h...)
	info = binary.BigEndian.AppendUint16(info, uint16(s.Port))
	info = binary.BigEndian.AppendUint16(info, uint16(len(publicName)))
	info = append(info, publicName...)
	info = binary.BigEndian.AppendUint64(info, uint64(notBefore.Unix()))
	info = binary.BigEndian.AppendUint64(info, uint64(notAfter.Unix()))
	b, err := hkdf.Key(sha256.New, s.Seed, []byte(echFleetSalt), string(info), 33)
	if err != nil {
		return nil, fmt.Errorf("zdata: hkdf: %v", err)
	}
	id := b[32]&0xfe | byte(notBefore.Unix()/length)&1
	tk, err := tls13.NewECHKey(id, publicName, echMaxNameLength, b[:32])
	clear(b)
	if err != nil {
		return nil, fmt.Errorf("zdata: ECH key for %q: %w", publicName, err)
	}
	return &ECHKey{ConfigID: id, PublicName: publicName, NotBefore: notBefore.UTC(), NotAfter: notAfter.UTC(),
		Config: tk.Config, PrivateKey: tk.PrivateKey}, nil
}

// newECHKey makes a key whose config id no key in live uses (a client
// names the config by its id: two live keys with one id would make the
// server try both).
func newECHKey(publicName string, notBefore, notAfter time.Time, live []*ECHKey) (*ECHKey, error) {
	var b [1]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(live, func(k *ECHKey) bool { return k.ConfigID == b[0] }) {
			break
		}
	}
	tk, err := tls13.GenerateECHKey(b[0], publicName, echMaxNameLength, rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("zdata: ECH key for %q: %w", publicName, err)
	}
	return &ECHKey{ConfigID: b[0], PublicName: publicName, NotBefore: notBefore.UTC(), NotAfter: notAfter.UTC(),
		Config: tk.Config, PrivateKey: tk.PrivateKey}, nil
}

// ECHPublished is the keys a DNS answer at now carries: those not yet at
// their not-after (the current period's and the next one's), oldest
// first, so a client uses the current config.
func ECHPublished(keys []*ECHKey, now time.Time) []*ECHKey {
	var out []*ECHKey
	for _, k := range keys {
		if now.Before(k.NotAfter) {
			out = append(out, k)
		}
	}
	return out
}

// ECHConfigList is the ECHConfigList of the keys published at now (the
// `ech` SvcParam's value, RFC 9848); nil without any.
func ECHConfigList(keys []*ECHKey, now time.Time) ([]byte, error) {
	pub := ECHPublished(keys, now)
	if len(pub) == 0 {
		return nil, nil
	}
	var tk []tls13.ECHKey
	for _, k := range pub {
		tk = append(tk, tls13.ECHKey{Config: k.Config})
	}
	return tls13.MarshalECHConfigList(tk)
}

// ECHServerKeys is what a server accepts at now (for a tls13.ECHKeySet):
// every key not past not-after plus window, the published ones also sent
// as retry configs to a client whose config the server no longer has.
func ECHServerKeys(keys []*ECHKey, now time.Time, window time.Duration) []tls13.ECHKey {
	var out []tls13.ECHKey
	for _, k := range keys {
		if now.After(k.NotAfter.Add(window)) {
			continue
		}
		out = append(out, tls13.ECHKey{Config: k.Config, PrivateKey: k.PrivateKey, SendAsRetry: now.Before(k.NotAfter)})
	}
	return out
}
