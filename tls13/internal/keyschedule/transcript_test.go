package keyschedule

import (
	"bytes"
	"crypto"
	"testing"

	"github.com/ztls-project/ztls/tls13/internal/rfc8448"
)

func sum(h crypto.Hash, parts ...[]byte) []byte {
	d := h.New()
	for _, p := range parts {
		d.Write(p)
	}
	return d.Sum(nil)
}

func TestTranscriptBasics(t *testing.T) {
	for _, h := range []crypto.Hash{crypto.SHA256, crypto.SHA384} {
		tr := NewTranscript(h)
		if tr.Pending() || tr.Hash() != h {
			t.Fatalf("%v: new transcript pending=%v hash=%v", h, tr.Pending(), tr.Hash())
		}
		if !bytes.Equal(tr.Sum(), sum(h)) {
			t.Errorf("%v: empty Sum is not Hash(\"\")", h)
		}
		m1, m2, m3 := []byte{1, 0, 0, 1, 9}, []byte{2, 0, 0, 0}, []byte{8, 0, 0, 2, 0, 0}
		tr.Write(m1)
		tr.Write(m2)
		if got := tr.Sum(); !bytes.Equal(got, sum(h, m1, m2)) {
			t.Errorf("%v: Sum = %x", h, got)
		}
		// Sum does not reset.
		if got := tr.Sum(); !bytes.Equal(got, sum(h, m1, m2)) {
			t.Errorf("%v: second Sum differs", h)
		}
		if got := tr.HashOf(m3); !bytes.Equal(got, sum(h, m1, m2, m3)) {
			t.Errorf("%v: HashOf = %x", h, got)
		}
		if got := tr.Sum(); !bytes.Equal(got, sum(h, m1, m2)) {
			t.Errorf("%v: HashOf changed the transcript", h)
		}
		c := tr.Clone()
		c.Write(m3)
		if !bytes.Equal(c.Sum(), sum(h, m1, m2, m3)) || !bytes.Equal(tr.Sum(), sum(h, m1, m2)) {
			t.Errorf("%v: Clone is not independent", h)
		}
	}
}

func TestTranscriptRestartWithMessageHash(t *testing.T) {
	h := crypto.SHA256
	ch1 := []byte{1, 0, 0, 3, 'c', 'h', '1'}
	hrr := []byte{2, 0, 0, 3, 'h', 'r', 'r'}
	ch2 := []byte{1, 0, 0, 3, 'c', 'h', '2'}
	// RFC 8446, Section 4.4.1: message_hash || 00 00 Hash.length || Hash(ClientHello1)
	synthetic := append([]byte{254, 0, 0, 32}, sum(h, ch1)...)
	want := sum(h, synthetic, hrr, ch2)

	tr := NewTranscript(h)
	tr.Write(ch1)
	tr.RestartWithMessageHash()
	tr.Write(hrr)
	tr.Write(ch2)
	if got := tr.Sum(); !bytes.Equal(got, want) {
		t.Errorf("known hash: %x, want %x", got, want)
	}

	// The same on a transcript that learns its hash only afterwards.
	p := NewPendingTranscript()
	if !p.Pending() || p.Sum() != nil || p.HashOf(nil) != nil || p.Hash() != 0 {
		t.Fatal("pending transcript returned a hash")
	}
	p.Write(ch1)
	p.RestartWithMessageHash()
	p.Write(hrr)
	c := p.Clone()
	p.SetHash(h)
	p.Write(ch2)
	if got := p.Sum(); !bytes.Equal(got, want) {
		t.Errorf("pending: %x, want %x", got, want)
	}
	c.Write(ch2)
	c.SetHash(h)
	if got := c.Sum(); !bytes.Equal(got, want) {
		t.Errorf("clone of pending: %x, want %x", got, want)
	}

	// SHA-384 uses a 48-byte hash in the synthetic message.
	tr = NewTranscript(crypto.SHA384)
	tr.Write(ch1)
	tr.RestartWithMessageHash()
	if got, want := tr.Sum(), sum(crypto.SHA384, append([]byte{254, 0, 0, 48}, sum(crypto.SHA384, ch1)...)); !bytes.Equal(got, want) {
		t.Errorf("SHA-384 restart = %x, want %x", got, want)
	}
}

// TestPendingTranscriptRFC8448 buffers RFC 8448's ClientHello and
// ServerHello before the hash is known and checks the handshake transcript
// hash.
func TestPendingTranscriptRFC8448(t *testing.T) {
	tr := NewPendingTranscript()
	tr.Write(rfc8448.Must(t, "3/client.hello"))
	tr.Write(rfc8448.Must(t, "3/server.hello"))
	tr.SetHash(crypto.SHA256)
	if got, want := tr.Sum(), rfc8448.Must(t, "3/client.hs_traffic_secret.hash"); !bytes.Equal(got, want) {
		t.Errorf("Sum = %x, want %x", got, want)
	}
	// A second SetHash is ignored.
	tr.SetHash(crypto.SHA384)
	if tr.Hash() != crypto.SHA256 {
		t.Error("SetHash changed the hash of a running transcript")
	}
	// Messages split across writes hash the same.
	ch := rfc8448.Must(t, "3/client.hello")
	tr2 := NewTranscript(crypto.SHA256)
	tr2.Write(ch[:5])
	tr2.Write(ch[5:])
	tr2.Write(rfc8448.Must(t, "3/server.hello"))
	if !bytes.Equal(tr2.Sum(), tr.Sum()) {
		t.Error("split writes changed the hash")
	}
	// An unlinked hash leaves the transcript pending.
	p := NewPendingTranscript()
	p.SetHash(crypto.MD4)
	if !p.Pending() {
		t.Error("SetHash with an unlinked hash left the pending state")
	}
}

func TestZeroTranscriptIsPending(t *testing.T) {
	var tr Transcript
	tr.Write([]byte{1, 2, 3})
	tr.SetHash(crypto.SHA256)
	if !bytes.Equal(tr.Sum(), sum(crypto.SHA256, []byte{1, 2, 3})) {
		t.Error("zero Transcript does not buffer")
	}
}
