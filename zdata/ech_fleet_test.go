package zdata

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/tls13"
)

// echFleet is a CA with the service's and the public name's
// certificates, for fleet members' directories.
type echFleet struct {
	ca           *testpki.CA
	leaf, public *testpki.Leaf
	now          time.Time
}

func newECHFleet(t *testing.T) *echFleet {
	ca := testpki.NewCA(t, "ecdsa-p256")
	return &echFleet{ca: ca, leaf: ca.Issue(t, testpki.LeafOpts{DNSNames: []string{testHost}}),
		public: ca.Issue(t, testpki.LeafOpts{DNSNames: []string{echTestPublicName}}), now: clock.Now().UTC()}
}

// member makes a fleet member's own directory from seed and rotates its
// ECH keys at f.now.
func (f *echFleet) member(t *testing.T, seed []byte) *Dir {
	t.Helper()
	d, _ := newDir(t, f.ca, f.leaf, seed)
	if _, _, err := d.RotateECH(echTestPublicName, f.now); err != nil {
		t.Fatal(err)
	}
	return d
}

// handshake runs a client with the ECHConfigList list against a server
// holding d's ECH keys, over a pipe.
func (f *echFleet) handshake(t *testing.T, d *Dir, list []byte) (tls13.ConnectionState, error) {
	t.Helper()
	keys, err := d.ECHKeys()
	if err != nil {
		t.Fatal(err)
	}
	set, err := tls13.NewECHKeySet(ECHServerKeys(keys, f.now, d.Service.Options.Window))
	if err != nil {
		t.Fatal(err)
	}
	cert := func(l *testpki.Leaf) tls13.Certificate {
		return tls13.Certificate{Chain: l.Chain, PrivateKey: l.Key, Leaf: l.Cert}
	}
	scfg := &tls13.Config{Certificates: []tls13.Certificate{cert(f.leaf), cert(f.public)}, ECHKeySet: set}
	ccfg := &tls13.Config{RootCAs: f.ca.Pool(), ServerName: testHost, ECHConfigList: list}
	cEnd, sEnd := net.Pipe()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // real time: a deadline for a stuck test
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s := tls13.Server(sEnd, scfg)
		s.HandshakeContext(ctx)
		s.Close()
	}()
	c := tls13.Client(cEnd, ccfg)
	err = c.HandshakeContext(ctx)
	c.Close()
	<-done
	return c.ConnectionState(), err
}

func echList(t *testing.T, d *Dir, at time.Time) []byte {
	t.Helper()
	keys, err := d.ECHKeys()
	if err != nil {
		t.Fatal(err)
	}
	l, err := ECHConfigList(keys, at)
	if err != nil || len(l) == 0 {
		t.Fatalf("ECHConfigList: %d bytes, %v", len(l), err)
	}
	return l
}

// TestECHFleetMembersAcceptEachOther: two members of one fleet, each with
// its own directory and nothing shared but the seed, derive the same ECH
// keys, so a client with the configs one member's DNS published is
// accepted by the other; a server of another seed rejects it and sends
// its own configs for the retry, which it then accepts.
func TestECHFleetMembersAcceptEachOther(t *testing.T) {
	f := newECHFleet(t)
	seed := []byte("0123456789abcdef0123456789abcdef")
	a, b := f.member(t, seed), f.member(t, seed)
	la, lb := echList(t, a, f.now), echList(t, b, f.now)
	if string(la) != string(lb) {
		t.Fatal("two members of one fleet publish different ECH configs")
	}
	for _, pair := range [][2]*Dir{{a, b}, {b, a}} {
		st, err := f.handshake(t, pair[1], echList(t, pair[0], f.now))
		if err != nil || st.ECH != tls13.ECHAccepted || !st.PeerCertificates[0].Equal(f.leaf.Cert) {
			t.Fatalf("a member's config at another member: %v, ECH %q", err, st.ECH)
		}
	}
	other := f.member(t, []byte("fedcba9876543210fedcba9876543210"))
	_, err := f.handshake(t, other, la)
	var rej *tls13.ECHRejectedError
	if !errors.As(err, &rej) || len(rej.RetryConfigList) == 0 {
		t.Fatalf("another fleet's server: %v, want ECH rejected with retry configs", err)
	}
	if st, err := f.handshake(t, other, rej.RetryConfigList); err != nil || st.ECH != tls13.ECHAccepted {
		t.Fatalf("retry with the retry configs: %v, ECH %q", err, st.ECH)
	}
}

// TestECHFleetConfigIDs: the derivation is a function of the seed, the
// service, the public name and the period; adjacent periods never share
// a config_id; a random key left in a fleet directory is replaced.
func TestECHFleetConfigIDs(t *testing.T) {
	f := newECHFleet(t)
	d := f.member(t, []byte("0123456789abcdef0123456789abcdef"))
	v := d.Service.Options.Validity
	start := d.Service.slot(f.now)
	var prev *ECHKey
	for i := range 64 {
		nb := start.Add(time.Duration(i) * v)
		k, err := d.deriveECHKey(echTestPublicName, nb, nb.Add(v))
		if err != nil {
			t.Fatal(err)
		}
		again, _ := d.deriveECHKey(echTestPublicName, nb, nb.Add(v))
		if string(again.PrivateKey) != string(k.PrivateKey) || again.ConfigID != k.ConfigID {
			t.Fatal("the derivation is not deterministic")
		}
		if prev != nil && (prev.ConfigID == k.ConfigID || string(prev.PrivateKey) == string(k.PrivateKey)) {
			t.Fatalf("periods %d and %d: config ids %d and %d", i-1, i, prev.ConfigID, k.ConfigID)
		}
		prev = k
	}
	k1, _ := d.deriveECHKey(echTestPublicName, start, start.Add(v))
	k2, _ := d.deriveECHKey("other."+echTestPublicName, start, start.Add(v))
	if string(k1.PrivateKey) == string(k2.PrivateKey) {
		t.Fatal("two public names derive one key")
	}

	// A key drawn at random for the current period (as before the
	// directory joined the fleet) is not the fleet's: rotation removes it
	// and writes the derived one.
	drawn, err := newECHKey(echTestPublicName, start, start.Add(v), nil)
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := d.ECHKeys()
	for _, k := range keys {
		if k.NotBefore.Equal(start) {
			drawn.ConfigID = k.ConfigID // the same file name
		}
	}
	if err := writeECHKey(filepath.Join(d.Path, ECHDir), drawn); err != nil {
		t.Fatal(err)
	}
	if _, removed, err := d.RotateECH("", f.now); err != nil || removed != 1 {
		t.Fatalf("rotation over a drawn key: removed %d, %v", removed, err)
	}
	keys, _ = d.ECHKeys()
	for _, k := range keys {
		if k.NotBefore.Equal(start) && string(k.Config) != string(k1.Config) {
			t.Fatal("the current period's key is not the derived one")
		}
	}
}
