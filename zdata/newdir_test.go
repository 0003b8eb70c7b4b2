package zdata

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
)

// entries lists a directory's names, sorted.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// NewDir refuses what clients would refuse and what cannot load, before
// it writes anything: neither the directory nor a staging directory is
// left behind.
func TestNewDirAllOrNothing(t *testing.T) {
	ca := testpki.NewCA(t, "ecdsa-p256")
	now := clock.Now()
	good := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{testHost}})
	other := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{"other.test"}})
	expired := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{testHost},
		NotBefore: now.Add(-72 * time.Hour), NotAfter: now.Add(-time.Hour)})
	future := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{testHost},
		NotBefore: now.Add(time.Hour), NotAfter: now.Add(72 * time.Hour)})

	pems := t.TempDir()
	write := func(l *testpki.Leaf, name string) (string, string) {
		d := filepath.Join(pems, name)
		os.MkdirAll(d, 0o700)
		return l.WritePEM(t, d)
	}
	goodCert, goodKey := write(good, "good")
	otherCert, otherKey := write(other, "other")
	expiredCert, expiredKey := write(expired, "expired")
	futureCert, futureKey := write(future, "future")

	for _, tc := range []struct {
		name, cert, key, want string
		port                  int
		seed                  []byte
	}{
		{"name", otherCert, otherKey, "does not cover server.test", testPort, nil},
		{"expired", expiredCert, expiredKey, "expired", testPort, nil},
		{"not yet valid", futureCert, futureKey, "not valid before", testPort, nil},
		{"key of another certificate", goodCert, otherKey, "load certificate", testPort, nil},
		{"missing key", goodCert, filepath.Join(pems, "nope.pem"), "load certificate", testPort, nil},
		{"port", goodCert, goodKey, "port", 70000, nil},
		{"short seed", goodCert, goodKey, "seed", testPort, []byte("short")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			path := filepath.Join(parent, "zd")
			cfg := ServiceConfig{Host: testHost, Port: tc.port, Cert: tc.cert, Key: tc.key}
			_, err := NewDir(path, cfg, tc.seed, now)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewDir: %v, want an error saying %q", err, tc.want)
			}
			if names := entries(t, parent); len(names) != 0 {
				t.Fatalf("left behind: %v", names)
			}
		})
	}

	// A good certificate: the directory holds the current keys and loads.
	parent := t.TempDir()
	path := filepath.Join(parent, "zd")
	d, err := NewDir(path, ServiceConfig{Host: testHost, Port: testPort, Cert: goodCert, Key: goodKey}, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Records(now)) == 0 {
		t.Fatal("no record to publish")
	}
	if names := entries(t, parent); len(names) != 1 || names[0] != "zd" {
		t.Fatalf("parent holds %v", names)
	}
	if _, err := NewDir(path, d.Config, nil, now); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("second NewDir: %v", err)
	}
}

// An existing directory holding the certificate (relative paths): a
// refused certificate leaves it as it was; a good one adds the files.
func TestNewDirIntoExistingDirectory(t *testing.T) {
	ca := testpki.NewCA(t, "ecdsa-p256")
	now := clock.Now()
	path := filepath.Join(t.TempDir(), "zd")
	os.MkdirAll(path, 0o700)
	other := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{"other.test"}})
	cert, key := other.WritePEM(t, path)
	before := entries(t, path)
	cfg := ServiceConfig{Host: testHost, Port: testPort, Cert: filepath.Base(cert), Key: filepath.Base(key)}
	if _, err := NewDir(path, cfg, nil, now); err == nil {
		t.Fatal("certificate for other.test accepted for server.test")
	}
	if after := entries(t, path); strings.Join(after, " ") != strings.Join(before, " ") {
		t.Fatalf("directory was %v, is %v", before, after)
	}
	if names := entries(t, filepath.Dir(path)); len(names) != 1 {
		t.Fatalf("staging left behind: %v", names)
	}

	good := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{testHost}})
	cert, key = good.WritePEM(t, path)
	cfg.Cert, cfg.Key = filepath.Base(cert), filepath.Base(key)
	seed := []byte("0123456789abcdef0123456789abcdef")
	d, err := NewDir(path, cfg, seed, now)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Fleet() || len(d.Keyring.Live(now)) == 0 {
		t.Fatalf("fleet %v, %d live keys", d.Fleet(), len(d.Keyring.Live(now)))
	}
	for _, want := range []string{ServiceFile, KeysDir, SeedFile} {
		if _, err := os.Stat(filepath.Join(path, want)); err != nil {
			t.Errorf("%s: %v", want, err)
		}
	}
	if names := entries(t, filepath.Dir(path)); len(names) != 1 {
		t.Fatalf("staging left behind: %v", names)
	}
}

// CreateDir (no keys yet) is all or nothing too.
func TestCreateDirLeavesNothingOnFailure(t *testing.T) {
	ca := testpki.NewCA(t, "ecdsa-p256")
	a := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{testHost}})
	b := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{testHost}})
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "a"), 0o700)
	os.MkdirAll(filepath.Join(dir, "b"), 0o700)
	cert, _ := a.WritePEM(t, filepath.Join(dir, "a"))
	_, key := b.WritePEM(t, filepath.Join(dir, "b"))
	parent := t.TempDir()
	if _, err := CreateDir(filepath.Join(parent, "zd"), ServiceConfig{Host: testHost, Port: testPort, Cert: cert, Key: key}, nil); err == nil {
		t.Fatal("mismatched key accepted")
	}
	if names := entries(t, parent); len(names) != 0 {
		t.Fatalf("left behind: %v", names)
	}
}

func TestCheckLeaf(t *testing.T) {
	ca := testpki.NewCA(t, "ecdsa-p256")
	now := clock.Now()
	l := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{testHost}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour)})
	if err := CheckLeaf(l.Cert, "SERVER.test", now); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host string
		at   time.Time
		want string
	}{
		{"www.server.test", now, "does not cover www.server.test (it names server.test)"},
		{testHost, now.Add(2 * time.Hour), "expired"},
		{testHost, now.Add(-2 * time.Hour), "not valid before"},
	} {
		if err := CheckLeaf(l.Cert, tc.host, tc.at); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s at %v: %v, want %q", tc.host, tc.at, err, tc.want)
		}
	}
}

// A fleet seed already in the directory is the user's: NewDir with the
// same seed keeps it, with another one refuses and leaves it untouched.
func TestNewDirKeepsExistingSeed(t *testing.T) {
	ca := testpki.NewCA(t, "ecdsa-p256")
	now := clock.Now()
	path := filepath.Join(t.TempDir(), "zd")
	os.MkdirAll(path, 0o700)
	good := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{testHost}})
	cert, key := good.WritePEM(t, path)
	cfg := ServiceConfig{Host: testHost, Port: testPort, Cert: filepath.Base(cert), Key: filepath.Base(key)}
	mine := []byte("0123456789abcdef0123456789abcdef")
	if err := os.WriteFile(filepath.Join(path, SeedFile), mine, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NewDir(path, cfg, []byte("fedcba9876543210fedcba9876543210"), now); err == nil || !strings.Contains(err.Error(), "another fleet seed") {
		t.Fatalf("another seed over the user's: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(path, SeedFile)); string(b) != string(mine) {
		t.Fatalf("the user's seed changed: %q", b)
	}
	if _, err := NewDir(path, cfg, mine, now); err != nil {
		t.Fatalf("the same seed: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(path, SeedFile)); string(b) != string(mine) {
		t.Fatalf("the user's seed changed: %q", b)
	}
}
