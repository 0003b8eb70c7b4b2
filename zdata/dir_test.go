package zdata

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
)

func newDir(t *testing.T, ca *testpki.CA, leaf *testpki.Leaf, seed []byte) (*Dir, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "zdata")
	if err := os.MkdirAll(path, 0o700); err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := leaf.WritePEM(t, path)
	cfg := ServiceConfig{Host: testHost, Port: testPort, Cert: filepath.Base(certFile), Key: filepath.Base(keyFile),
		ALPN: "h2", NSC: []string{"1303"}, Window: "10s"}
	d, err := CreateDir(path, cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	return d, path
}

func TestDirSurvivesRestart(t *testing.T) {
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{testHost}, Intermediate: true})
	d, path := newDir(t, ca, leaf, nil)
	now := clock.Now().UTC()
	added, err := d.Rotate(now)
	if err != nil {
		t.Fatal(err)
	}
	if len(added) != 2 {
		t.Fatalf("first rotation added %d keys, want current and next", len(added))
	}
	ents, err := os.ReadDir(filepath.Join(path, KeysDir))
	if err != nil || len(ents) != 2 {
		t.Fatalf("keys dir: %v, %d files", err, len(ents))
	}
	for _, e := range ents {
		info, _ := e.Info()
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v", e.Name(), info.Mode().Perm())
		}
	}
	if _, err := CreateDir(path, d.Config, nil); err == nil {
		t.Fatal("CreateDir overwrote an existing directory")
	}

	// A restarted server loads the same keys.
	d2, err := LoadDir(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(d2.Skipped) != 0 {
		t.Fatalf("skipped %v", d2.Skipped)
	}
	for _, k := range added {
		zk := d2.Keyring.LookupZData(k.Record.ID, k.Record.ZDataHash(), k.Record.NotBefore)
		if zk == nil {
			t.Fatalf("restarted keyring lacks key %d", k.Record.ID)
		}
		ours, want := clientSecret(t, k.Record.Group, k.Record.KeyShare)
		if got, err := zk.ECDH(ours); err != nil || !bytes.Equal(got, want) {
			t.Fatal("restarted key computes another secret")
		}
	}
	if d2.Service.Options.ALPN != "h2" || len(d2.Service.Options.NSC) != 1 || d2.Keyring.Window() != 10*time.Second {
		t.Fatalf("options not restored: %+v", d2.Service.Options)
	}
	// Rotating again at the same time adds nothing.
	if again, err := d2.Rotate(now); err != nil || len(again) != 0 {
		t.Fatalf("second rotation: %d keys, %v", len(again), err)
	}

	// What the DNS serves selects with the CERT intermediate.
	rrs := d2.RRs(now, 5*time.Minute)
	var txt [][]string
	var tlsa []*dns.TLSA
	var certs []*dns.CERT
	for _, rr := range rrs {
		if rr.Header().Ttl > 300 {
			t.Errorf("TTL %d over the maximum", rr.Header().Ttl)
		}
		switch v := rr.(type) {
		case *dns.TXT:
			txt = append(txt, v.Txt)
		case *dns.TLSA:
			tlsa = append(tlsa, v)
		case *dns.CERT:
			certs = append(certs, v)
		}
	}
	if len(txt) != 2 || len(tlsa) != 1 || len(certs) != 1 {
		t.Fatalf("RRs: %d TXT, %d TLSA, %d CERT", len(txt), len(tlsa), len(certs))
	}
	r, _, err := selectOne(txt, tlsa, certs, testHost, testPort, ca.Pool(), now)
	if err != nil {
		t.Fatal(err)
	}
	if d2.Keyring.LookupZData(r.ID, r.ZDataHash(), now) == nil {
		t.Fatal("server refuses the record its DNS serves")
	}
	if lines := d2.ZoneLines(now, time.Minute); len(lines) != 4 || !strings.HasPrefix(lines[0], "_ztls._443._tcp.server.test.") {
		t.Fatalf("zone lines %q", lines)
	}
}

func TestDirReloadAndWatch(t *testing.T) {
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{testHost}})
	rotator, path := newDir(t, ca, leaf, nil)
	now := clock.Now().UTC()
	if _, err := rotator.Rotate(now); err != nil {
		t.Fatal(err)
	}
	server, err := LoadDir(path)
	if err != nil {
		t.Fatal(err)
	}
	if changed, err := server.Reload(); err != nil || changed {
		t.Fatalf("reload without change: %v %v", changed, err)
	}
	// Three hours later the rotator adds keys and erases the old ones.
	later := now.Add(3 * time.Hour)
	added, err := rotator.Rotate(later)
	if err != nil || len(added) != 2 {
		t.Fatalf("rotate: %d keys, %v", len(added), err)
	}
	ents, _ := os.ReadDir(filepath.Join(path, KeysDir))
	if len(ents) != 2 {
		t.Fatalf("%d key files after pruning, want 2", len(ents))
	}
	changed, err := server.Reload()
	if err != nil || !changed {
		t.Fatalf("reload: %v %v", changed, err)
	}
	for _, k := range added {
		if server.Keyring.LookupZData(k.Record.ID, k.Record.ZDataHash(), k.Record.NotBefore) == nil {
			t.Fatal("reloaded keyring lacks a new key")
		}
	}
	if len(server.Keyring.All()) != 2 {
		t.Fatal("reloaded keyring kept erased keys")
	}

	// Watch notices the next rotation.
	ctx, cancel := context.WithCancel(context.Background())
	events := make(chan error, 4)
	done := make(chan struct{})
	go func() {
		server.Watch(ctx, 10*time.Millisecond, func(_ *Dir, err error) { events <- err })
		close(done)
	}()
	t.Cleanup(func() { cancel(); <-done })
	if _, err := rotator.Rotate(later.Add(2 * time.Hour)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-events:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Watch never reported the rotation")
	}
	if len(server.Keyring.Live(later.Add(2*time.Hour))) == 0 {
		t.Fatal("watched keyring has no live key")
	}
}

func TestDirFleetSeed(t *testing.T) {
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{testHost}})
	seed := []byte("0123456789abcdef0123456789abcdef\n")
	a, pa := newDir(t, ca, leaf, seed)
	b, pb := newDir(t, ca, leaf, seed)
	now := clock.Now().UTC()
	if _, err := a.Rotate(now); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Rotate(now); err != nil {
		t.Fatal(err)
	}
	ea, _ := os.ReadDir(filepath.Join(pa, KeysDir))
	eb, _ := os.ReadDir(filepath.Join(pb, KeysDir))
	if len(ea) != 2 || len(eb) != 2 {
		t.Fatalf("%d and %d key files", len(ea), len(eb))
	}
	for i := range ea {
		fa, _ := os.ReadFile(filepath.Join(pa, KeysDir, ea[i].Name()))
		fb, _ := os.ReadFile(filepath.Join(pb, KeysDir, eb[i].Name()))
		if ea[i].Name() != eb[i].Name() || !bytes.Equal(fa, fb) {
			t.Fatalf("fleet members wrote different key files %s and %s", ea[i].Name(), eb[i].Name())
		}
	}
	if !reflect.DeepEqual(a.ZoneLines(now, time.Minute), b.ZoneLines(now, time.Minute)) {
		t.Fatal("fleet members publish different zone lines")
	}
	// A world-readable seed is refused.
	if err := os.Chmod(filepath.Join(pa, SeedFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadDir(pa); err == nil {
		t.Fatal("loaded a world-readable seed")
	}
}

func TestDirRejectsAndSkips(t *testing.T) {
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{testHost}})
	d, path := newDir(t, ca, leaf, nil)
	now := clock.Now().UTC()
	added, err := d.Rotate(now)
	if err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(path, KeysDir, ents(t, path)[0])
	orig, _ := os.ReadFile(keyPath)

	// A world-readable key file.
	os.Chmod(keyPath, 0o644)
	if _, err := LoadDir(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("world-readable key: %v", err)
	}
	os.Chmod(keyPath, 0o600)

	// Corrupt and tampered key files.
	var kf keyFile
	if err := json.Unmarshal(orig, &kf); err != nil {
		t.Fatal(err)
	}
	tamper := func(mut func(*keyFile)) []byte {
		c := kf
		c.TXT = append([]string(nil), kf.TXT...)
		mut(&c)
		b, _ := json.Marshal(c)
		return b
	}
	other, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_ = added
	for name, data := range map[string][]byte{
		"garbage":       []byte("{not json"),
		"unknown field": []byte(`{"host":"server.test","extra":1}`),
		"other host":    tamper(func(c *keyFile) { c.Host = "other.test" }),
		"other key":     tamper(func(c *keyFile) { c.PrivateKey = mustB64(other.Bytes()) }),
		"changed id":    tamper(func(c *keyFile) { c.TXT[4] = "1" }),
		"changed med":   tamper(func(c *keyFile) { c.TXT[3] = "1" }),
	} {
		if err := os.WriteFile(keyPath, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadDir(path); err == nil {
			t.Errorf("%s: loaded", name)
		} else if !strings.HasPrefix(err.Error(), "zdata: ") && !strings.Contains(err.Error(), keyPath) {
			t.Errorf("%s: error %v names neither the package nor the file", name, err)
		}
	}
	os.WriteFile(keyPath, orig, 0o600)

	// A new certificate: the old keys are skipped, not used.
	leaf2 := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{testHost}})
	c2, k2 := leaf2.WritePEM(t, path)
	d.Config.Cert, d.Config.Key = filepath.Base(c2), filepath.Base(k2)
	if err := writeFileAtomic(filepath.Join(path, ServiceFile), mustJSON(t, d.Config), 0o644); err != nil {
		t.Fatal(err)
	}
	d3, err := LoadDir(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(d3.Skipped) != 2 || len(d3.Keyring.All()) != 0 {
		t.Fatalf("skipped %v, kept %d", d3.Skipped, len(d3.Keyring.All()))
	}
	if added, err := d3.Rotate(now); err != nil || len(added) != 2 {
		t.Fatalf("rotation after a certificate change: %d, %v", len(added), err)
	}
	if _, err := LoadDir(filepath.Join(path, "missing")); err == nil {
		t.Fatal("loaded a missing directory")
	}
}

func ents(t *testing.T, path string) []string {
	es, err := os.ReadDir(filepath.Join(path, KeysDir))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ClaimServing: a second claim on one directory fails with the holder's
// pid while the first holds it, and succeeds after the first is released.
func TestClaimServing(t *testing.T) {
	d := &Dir{Path: t.TempDir()}
	release, err := d.ClaimServing()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.ClaimServing(); !errors.Is(err, ErrDirServed) || !strings.Contains(err.Error(), strconv.Itoa(os.Getpid())) {
		t.Fatalf("second claim: %v", err)
	}
	release()
	release2, err := d.ClaimServing()
	if err != nil {
		t.Fatalf("claim after release: %v", err)
	}
	release2()
}
