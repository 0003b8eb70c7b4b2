package tls13

import "testing"

// TestP521: secp521r1 is supported both ways but no client sends a share
// for it unless configured to: a client offering only P-521 connects to a
// default server, and a server that takes only P-521 gets it from a
// default client through a HelloRetryRequest.
func TestP521(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	c := newEngine(clientConfig(p), true)
	if err := c.startClient(nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	ch := c.st.(*clientExpectServerHello).p.hello
	if !contains(ch.SupportedGroups, uint16(P521)) {
		t.Fatalf("default supported_groups %v lack secp521r1", ch.SupportedGroups)
	}
	for _, ks := range ch.KeyShares {
		if ks.Group == uint16(P521) {
			t.Fatal("a default ClientHello carries a secp521r1 share")
		}
	}

	ccfg := clientConfig(p)
	ccfg.Groups = []CurveID{P521}
	cli, srv, cerr, serr := pair(t, ccfg, serverConfig(p))
	if cerr != nil || serr != nil {
		t.Fatalf("client: %v; server: %v", cerr, serr)
	}
	if cli.ConnectionState().Group != P521 || srv.ConnectionState().Group != P521 {
		t.Fatalf("negotiated %s", cli.ConnectionState().Group.String())
	}

	scfg := serverConfig(p)
	scfg.Groups = []CurveID{P521}
	cli, _, cerr, serr = pair(t, clientConfig(p), scfg)
	if cerr != nil || serr != nil {
		t.Fatalf("client: %v; server: %v", cerr, serr)
	}
	if cli.ConnectionState().Group != P521 || !hasEvent(cli.Trace(), EventHelloRetryRequest) {
		t.Fatalf("negotiated %s, trace %v", cli.ConnectionState().Group.String(), cli.Trace())
	}
}
