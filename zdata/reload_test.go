package zdata

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
)

// replaceCert writes next's certificate and key over the files the
// directory's service.json names, as a renewal does.
func replaceCert(t *testing.T, d *Dir, next *testpki.Leaf) {
	t.Helper()
	certFile, keyFile := next.WritePEM(t, t.TempDir())
	for src, dst := range map[string]string{certFile: d.file(d.Config.Cert), keyFile: d.file(d.Config.Key)} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := writeFileAtomic(dst, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// signedBy reports whether every key of d is signed by leaf (and there is
// at least one).
func signedBy(d *Dir, leaf []byte) bool {
	h := sha256.Sum256(leaf)
	keys := d.Keyring.All()
	for _, k := range keys {
		if k.Record.LeafHash != h {
			return false
		}
	}
	return len(keys) > 0
}

// A replaced certificate reaches the Z-data: the rotating process's
// Reload takes it and issues keys signed for its leaf at once (saved, the
// old ones erased); a process that only reads the directory notices the
// writes (Changed) and follows (Refresh) to the certificate that signed
// them, without a reload of its own.
func TestDirReloadCertificate(t *testing.T) {
	ca := testpki.NewCA(t, "ecdsa-p256")
	old := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{testHost}})
	rotator, path := newRotatingDir(t, ca, old)
	reader, err := LoadDir(path)
	if err != nil {
		t.Fatal(err)
	}
	if !signedBy(reader, old.Chain[0]) {
		t.Fatal("the reader has no keys of the first certificate")
	}
	if changed, err := rotator.Reload(); err != nil || changed {
		t.Fatalf("reload without a change: %v, %v", changed, err)
	}
	reader.Changed()

	next := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{testHost}})
	replaceCert(t, rotator, next)
	changed, err := rotator.Reload()
	if err != nil || !changed {
		t.Fatalf("reload after the certificate changed: %v, %v", changed, err)
	}
	if !signedBy(rotator, next.Chain[0]) || !rotator.Leaf().Equal(next.Cert) {
		t.Fatal("the rotating directory kept keys of the old certificate")
	}
	if rrs := rotator.RRs(clock.Now(), time.Minute); len(rrs) == 0 {
		t.Fatal("no records after the reload")
	}
	again, err := LoadDir(path)
	if err != nil || !signedBy(again, next.Chain[0]) || len(again.Skipped) != 0 {
		t.Fatalf("after a restart: %v, skipped %v", err, again.Skipped)
	}

	if !reader.Changed() {
		t.Fatal("the reader does not see the directory change")
	}
	if changed, err := reader.Refresh(clock.Now()); err != nil || !changed {
		t.Fatalf("refresh: %v, %v", changed, err)
	}
	if !signedBy(reader, next.Chain[0]) || !reader.Leaf().Equal(next.Cert) || len(reader.SkippedFiles()) != 0 {
		t.Fatalf("the reader did not follow the new certificate: skipped %v", reader.SkippedFiles())
	}
	if reader.Changed() {
		t.Fatal("changed again without a write")
	}
}

// A reader reloaded before the rotating process keeps the certificate
// and keys it serves (clients can still use them; publishing nothing
// would send them all to TLS 1.3 in between), then takes the new
// certificate and its keys once they are written.
func TestDirReloadReaderFirst(t *testing.T) {
	ca := testpki.NewCA(t, "ecdsa-p256")
	old := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{testHost}})
	rotator, path := newRotatingDir(t, ca, old)
	reader, err := LoadDir(path)
	if err != nil {
		t.Fatal(err)
	}
	next := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{testHost}})
	replaceCert(t, rotator, next)
	if changed, err := reader.Reload(); err != nil || changed {
		t.Fatalf("reload before the rotating process: %v, %v", changed, err)
	}
	if !signedBy(reader, old.Chain[0]) || !reader.Leaf().Equal(old.Cert) {
		t.Fatal("the reader dropped the keys it serves before the new ones exist")
	}
	if rrs := reader.RRs(clock.Now(), time.Minute); len(rrs) == 0 {
		t.Fatal("the reader publishes nothing between the two reloads")
	}
	if _, err := rotator.Reload(); err != nil {
		t.Fatal(err)
	}
	if !reader.Changed() {
		t.Fatal("the reader does not see the rotating process's write")
	}
	if changed, err := reader.Refresh(clock.Now()); err != nil || !changed || !signedBy(reader, next.Chain[0]) || !reader.Leaf().Equal(next.Cert) {
		t.Fatalf("refresh: %v, %v", changed, err)
	}
	// The reader's own reload now takes the new certificate as well (a
	// no-op: it has it).
	if changed, err := reader.Reload(); err != nil || changed {
		t.Fatalf("reload after the refresh: %v, %v", changed, err)
	}
}

// A certificate the Z-data cannot use (another name) is refused by
// Reload, which keeps everything as it was.
func TestDirReloadRefusesWrongCertificate(t *testing.T) {
	ca := testpki.NewCA(t, "ecdsa-p256")
	old := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{testHost}})
	d, _ := newDir(t, ca, old, nil)
	d.SetRotating(true)
	if _, err := d.Rotate(clock.Now()); err != nil {
		t.Fatal(err)
	}
	replaceCert(t, d, ca.Issue(t, testpki.LeafOpts{DNSNames: []string{"elsewhere.test"}}))
	if _, err := d.Reload(); err == nil {
		t.Fatal("a certificate for another name was taken")
	}
	if !signedBy(d, old.Chain[0]) || !d.Leaf().Equal(old.Cert) {
		t.Fatal("a refused reload changed the keys")
	}
	ents, _ := os.ReadDir(filepath.Join(d.Path, KeysDir))
	if len(ents) == 0 {
		t.Fatal("a refused reload erased the key files")
	}
}

// A fleet member re-derives its keys for a new certificate at once.
func TestDirReloadFleet(t *testing.T) {
	ca := testpki.NewCA(t, "ecdsa-p256")
	old := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{testHost}})
	d, _ := newDir(t, ca, old, []byte("0123456789abcdef0123456789abcdef"))
	if _, err := d.Refresh(clock.Now()); err != nil {
		t.Fatal(err)
	}
	ids := map[uint32]bool{}
	for _, k := range d.Keyring.All() {
		ids[k.Record.ID] = true
	}
	next := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{testHost}})
	replaceCert(t, d, next)
	if changed, err := d.Reload(); err != nil || !changed || !signedBy(d, next.Chain[0]) {
		t.Fatalf("fleet reload: %v, %v", changed, err)
	}
	for _, k := range d.Keyring.All() {
		if !ids[k.Record.ID] {
			t.Fatalf("key %d: a fleet's epochs keep their ids across certificates", k.Record.ID)
		}
	}
}

// A process that rotates may write while another loads the directory
// (a server and its DNS started together). What it writes after the
// loader has read the files shows as a change at the loader's next
// Changed, so the loader picks it up at once instead of at its next
// periodic refresh.
func TestLoadDirSeesWritesDuringTheLoad(t *testing.T) {
	ca := testpki.NewCA(t, "ecdsa-p256")
	old := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{testHost}})
	rotator, path := newRotatingDir(t, ca, old)
	next := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{testHost}})
	testHookLoaded = func(*Dir) {
		// Between the loader's reads and the end of LoadDir: a new
		// certificate and the rotating process's keys for it.
		replaceCert(t, rotator, next)
		if _, err := rotator.Reload(); err != nil {
			t.Fatal(err)
		}
	}
	reader, err := LoadDir(path)
	testHookLoaded = nil
	if err != nil {
		t.Fatal(err)
	}
	if signedBy(reader, next.Chain[0]) {
		t.Fatal("the hook ran before the reads: the test tests nothing")
	}
	if !reader.Changed() {
		t.Fatal("a write made while the directory was loaded does not show as a change")
	}
	if _, err := reader.Refresh(clock.Now()); err != nil || !signedBy(reader, next.Chain[0]) {
		t.Fatalf("refresh after the change: %v; keys of the new certificate: %v", err, signedBy(reader, next.Chain[0]))
	}
}

// newRotatingDir is newDir for leaf, made the directory's rotating
// process, with its keys for now written.
func newRotatingDir(t *testing.T, ca *testpki.CA, leaf *testpki.Leaf) (*Dir, string) {
	t.Helper()
	d, path := newDir(t, ca, leaf, nil)
	d.SetRotating(true)
	if _, err := d.Rotate(clock.Now()); err != nil {
		t.Fatal(err)
	}
	return d, path
}
