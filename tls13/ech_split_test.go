package tls13

import (
	"bytes"
	"errors"
	"testing"

	"github.com/ztls-project/ztls/tls13/internal/ech"
	"github.com/ztls-project/ztls/tls13/internal/wire"
)

// splitFront is a client-facing server in split mode between two
// engines: it replaces each ClientHello record of the client's flights by
// the ClientHelloInner and passes every other record unchanged.
type splitFront struct {
	t    *testing.T
	keys *ECHKeySet
	f    *ECHForward
	seen [][]byte // what it forwarded
}

func (p *splitFront) forward(flight []byte) []byte {
	var out []byte
	for len(flight) >= 5 {
		n := 5 + (int(flight[3])<<8 | int(flight[4]))
		rec := flight[:n]
		flight = flight[n:]
		if rec[0] != 22 || rec[5] != 1 {
			out = append(out, rec...)
			continue
		}
		var err error
		if p.f == nil {
			p.f, err = p.keys.OpenECHClientHello(rec[5:])
		} else {
			err = p.f.OpenSecond(rec[5:])
		}
		if err != nil {
			p.t.Fatalf("client-facing server: %v", err)
		}
		m := len(p.f.Inner)
		out = append(out, 22, 3, 3, byte(m>>8), byte(m))
		out = append(out, p.f.Inner...)
	}
	p.seen = append(p.seen, out)
	return out
}

// splitRun is earlyRun's exchange through a client-facing server.
func splitRun(t *testing.T, ccfg, front *Config, back *Config, z *ZDataOffer, request []byte) (c, s *engine, p *splitFront, read []byte, cerr, serr error) {
	t.Helper()
	p = &splitFront{t: t, keys: front.ECHKeySet}
	c, s = newEngine(ccfg, true), newEngine(back, false)
	if err := c.startClient(nil, z, request); err != nil {
		t.Fatal(err)
	}
	s.startServer()
	buf := make([]byte, 4096)
	out := c.takeOutput()
	for i := 0; i < 6 && !(c.done && s.done); i++ {
		if serr = s.feed(p.forward(out)); serr != nil {
			return
		}
		if n := s.readEarly(buf); n > 0 {
			read = append(read, buf[:n]...)
		}
		if cerr = c.feed(s.takeOutput()); cerr != nil {
			return
		}
		out = c.takeOutput()
	}
	read = append(read, buf[:s.readApp(buf)]...)
	return
}

// Split mode: the client-facing server holds the ECH keys and no
// certificate of the inner name; the backend holds the certificate and
// the Z-data key, no ECH key. ZTLS inside ECH runs end to end, the
// request arrives once at the backend, and the client sees ECH accepted,
// also after a HelloRetryRequest from the backend.
func TestECHSplitMode(t *testing.T) {
	for _, hrr := range []bool{false, true} {
		x := newECHZTLS(t)
		set, err := NewECHKeySet([]ECHKey{x.key})
		if err != nil {
			t.Fatal(err)
		}
		front := &Config{ECHKeySet: set}
		back := x.scfg.Clone()
		back.ECHKeys, back.ECHBackend = nil, true
		var z *ZDataOffer
		request := []byte("GET /split")
		if hrr {
			back.Groups = []CurveID{P256}
			z, request = nil, nil // ztls is not taken after a HelloRetryRequest
		} else {
			z = x.z.offer
		}
		c, s, p, read, cerr, serr := splitRun(t, x.ccfg, front, back, z, request)
		if cerr != nil || serr != nil {
			t.Fatalf("hrr %v: client %v, backend %v", hrr, cerr, serr)
		}
		if c.info.ECH != ECHAccepted || s.info.ECH != ECHAccepted || s.info.ServerName != echInnerName || p.f.ServerName != echInnerName {
			t.Fatalf("hrr %v: ECH client %q backend %q, backend SNI %q, routed by %q", hrr, c.info.ECH, s.info.ECH, s.info.ServerName, p.f.ServerName)
		}
		if hrr {
			if c.info.Group != P256 || !hasEventOrder(c.events, EventClientHelloSent, EventHelloRetryRequest) {
				t.Fatalf("no HelloRetryRequest: group %v", c.info.Group)
			}
			continue
		}
		if !c.info.ZTLS || !c.info.EarlyDataAccepted || !bytes.Equal(read, request) {
			t.Fatalf("ZTLS %v, early data %v, backend read %q", c.info.ZTLS, c.info.EarlyDataAccepted, read)
		}
	}
}

// The client-facing server forwards nothing it cannot open: a stale
// config and a GREASE extension are ErrECHNotOpened (it then serves the
// public name itself); a ClientHello without ECH too. A backend without
// ECHBackend refuses an inner ClientHello, as any server must.
func TestECHSplitNotOpened(t *testing.T) {
	e := newECHSetup(t)
	set, err := NewECHKeySet([]ECHKey{e.key})
	if err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*Config){
		"stale":  func(c *Config) { c.ECHConfigList = echList(t, newECHKey(t, 1)) },
		"grease": func(c *Config) { c.ECHConfigList, c.ECHGrease = nil, true },
		"none":   func(c *Config) { c.ECHConfigList = nil },
	} {
		ccfg := e.ccfg.Clone()
		mutate(ccfg)
		c := newEngine(ccfg, true)
		if err := c.startClient(nil, nil, nil); err != nil {
			t.Fatal(err)
		}
		out := c.takeOutput()
		if _, err := set.OpenECHClientHello(out[5:]); !errors.Is(err, ErrECHNotOpened) {
			t.Fatalf("%s: %v, want ErrECHNotOpened", name, err)
		}
	}
	c := newEngine(e.ccfg, true)
	if err := c.startClient(nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	out := c.takeOutput()
	f, err := set.OpenECHClientHello(out[5:])
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(out, []byte(echInnerName)) || !bytes.Contains(f.Inner, []byte(echInnerName)) {
		t.Fatal("the inner name is in the outer, or not in the forwarded inner")
	}
	m := len(f.Inner)
	s := newEngine(e.scfg, false) // not a backend
	s.startServer()
	err = s.feed(append([]byte{22, 3, 3, byte(m >> 8), byte(m)}, f.Inner...))
	if alertOf(err) != int(AlertIllegalParameter) {
		t.Fatalf("a server that is no backend took an inner ClientHello: %v", err)
	}
	if x, ok := findExtension(outerHello(t, out).Extra, ech.ExtEncryptedClientHello); !ok || x.Data[0] != ech.TypeOuter {
		t.Fatal("the client's ClientHello is not an outer one")
	}
}

// FuzzOpenECHClientHello: a client-facing server fed arbitrary
// ClientHellos never panics, and what it forwards is a ClientHello that
// parses, second ClientHellos included.
func FuzzOpenECHClientHello(f *testing.F) {
	e := newECHSetup(f)
	set, err := NewECHKeySet([]ECHKey{e.key})
	if err != nil {
		f.Fatal(err)
	}
	c := newEngine(e.ccfg, true)
	if err := c.startClient(nil, nil, nil); err != nil {
		f.Fatal(err)
	}
	f.Add(c.takeOutput()[5:], []byte{})
	f.Fuzz(func(t *testing.T, msg, second []byte) {
		fw, err := set.OpenECHClientHello(msg)
		if err != nil {
			return
		}
		if _, err := wireParse(fw.Inner); err != nil {
			t.Fatalf("forwarded an inner ClientHello that does not parse: %v", err)
		}
		if fw.OpenSecond(second) == nil {
			if _, err := wireParse(fw.Inner); err != nil {
				t.Fatalf("forwarded a second inner ClientHello that does not parse: %v", err)
			}
		}
	})
}

func wireParse(msg []byte) (*wire.ClientHello, error) { return wire.ParseClientHello(msg) }
