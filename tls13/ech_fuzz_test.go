package tls13

// FuzzECHServerEngine: a server with ECH keys fed mutated ClientHellos
// (and whatever follows them) must never panic, and fails only with the
// engine's two error types. Seeds are real first flights: ECH accepted,
// rejected (a stale config), GREASE, ZTLS inside ECH with early data.
//
//	go test -run '^$' -fuzz '^FuzzECHServerEngine$' -fuzztime 30s ./tls13/

import (
	"crypto/ecdh"
	"sync"
	"testing"
)

type echFuzzEnv struct {
	setup *echSetup
	zoff  *ZDataOffer
	stale []byte
}

var (
	echFuzzOnce sync.Once
	echFuzz     *echFuzzEnv
)

func getECHFuzzEnv(t testing.TB) *echFuzzEnv {
	echFuzzOnce.Do(func() {
		e := newECHSetup(t)
		z, zkey := newZData(t, ecdh.X25519(), X25519, echInnerName, "", e.p)
		e.scfg.ZData = &testZKeys{keys: []*ZDataKey{zkey}}
		e.scfg.StrikeRegister, e.scfg.MaxEarlyData = alwaysFresh{}, 4096
		echFuzz = &echFuzzEnv{setup: e, zoff: z, stale: echList(t, newECHKey(t, 1))}
	})
	return echFuzz
}

func FuzzECHServerEngine(f *testing.F) {
	env := getECHFuzzEnv(f)
	e := env.setup
	seeds := []struct {
		list   []byte
		grease bool
		z      *ZDataOffer
		early  []byte
	}{
		{list: e.list}, {list: env.stale}, {grease: true}, {list: e.list, z: env.zoff, early: []byte("GET /")},
	}
	for _, sd := range seeds {
		ccfg := e.ccfg.Clone()
		ccfg.ECHConfigList, ccfg.ECHGrease = sd.list, sd.grease
		c := newEngine(ccfg, true)
		if err := c.startClient(nil, sd.z, sd.early); err != nil {
			f.Fatal(err)
		}
		f.Add(c.takeOutput())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := newEngine(e.scfg, false)
		s.startServer()
		err := s.feed(data)
		checkEngineErr(t, err)
		s.takeOutput()
	})
}

// FuzzECHClientEngine: an ECH client fed arbitrary server flights (the
// ServerHello's and HelloRetryRequest's signals, the retry configs) must
// never panic. Seeds: our server accepting, rejecting (retry configs),
// and asking for a retry.
func FuzzECHClientEngine(f *testing.F) {
	env := getECHFuzzEnv(f)
	e := env.setup
	hrr := e.scfg.Clone()
	hrr.Groups = []CurveID{P256}
	for _, sc := range []*Config{e.scfg, hrr} {
		for v, list := range [][]byte{e.list, env.stale} {
			ccfg := e.ccfg.Clone()
			ccfg.ECHConfigList = list
			c, s := newEngine(ccfg, true), newEngine(sc, false)
			if err := c.startClient(nil, nil, nil); err != nil {
				f.Fatal(err)
			}
			s.startServer()
			s.feed(c.takeOutput())
			f.Add(byte(v), s.takeOutput())
		}
	}
	f.Fuzz(func(t *testing.T, variant byte, data []byte) {
		ccfg := e.ccfg.Clone()
		ccfg.ECHConfigList = e.list // variant 0: the server's config; 1: a stale one
		if variant&1 == 1 {
			ccfg.ECHConfigList = env.stale
		}
		c := newEngine(ccfg, true)
		if err := c.startClient(nil, nil, nil); err != nil {
			t.Fatal(err)
		}
		c.takeOutput()
		checkEngineErr(t, c.feed(data))
		c.takeOutput()
	})
}

func FuzzParseECHConfigList(f *testing.F) {
	k, err := GenerateECHKey(7, "public.example", 32, nil)
	if err != nil {
		f.Fatal(err)
	}
	list, err := MarshalECHConfigList([]ECHKey{k})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(list)
	f.Fuzz(func(t *testing.T, b []byte) {
		infos, err := ParseECHConfigList(b)
		if err == nil && len(infos) > 0 && infos[0].PublicName == "" {
			t.Fatal("a parsed config without a public name")
		}
	})
}
