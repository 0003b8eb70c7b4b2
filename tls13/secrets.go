package tls13

import "github.com/ztls-project/ztls/tls13/internal/keyschedule"

// The key schedule's steps that both roles take (RFC 8446, Section 7.1),
// each secret written to the key log (Config.KeyLogWriter) as it is made.

// trafficSecrets are one stage's client and server traffic secrets.
type trafficSecrets struct{ client, server []byte }

// clientEarlyTrafficSecret derives client_early_traffic_secret over the
// hash of the ClientHello, the key of 0-RTT data.
func (e *engine) clientEarlyTrafficSecret(es keyschedule.EarlySecret, th, clientRandom []byte) []byte {
	s := es.ClientEarlyTrafficSecret(th)
	e.keyLog("CLIENT_EARLY_TRAFFIC_SECRET", clientRandom, s)
	return s
}

// deriveHandshakeSecrets derives the handshake secret from the early
// secret and the (EC)DHE shared secret (zeros with psk_ke: nil), and the
// handshake traffic secrets over the transcript through ServerHello.
func (e *engine) deriveHandshakeSecrets(es keyschedule.EarlySecret, shared, th, clientRandom []byte) (keyschedule.HandshakeSecret, trafficSecrets) {
	if shared == nil {
		shared = make([]byte, es.Hash().Size())
	}
	hs := es.HandshakeSecret(shared)
	ts := trafficSecrets{client: hs.ClientHandshakeTrafficSecret(th), server: hs.ServerHandshakeTrafficSecret(th)}
	e.keyLog("CLIENT_HANDSHAKE_TRAFFIC_SECRET", clientRandom, ts.client)
	e.keyLog("SERVER_HANDSHAKE_TRAFFIC_SECRET", clientRandom, ts.server)
	return hs, ts
}

// deriveApplicationSecrets derives the master secret and, over the
// transcript through the server's Finished, the application traffic
// secrets and the exporter secret (kept for ExportKeyingMaterial).
func (e *engine) deriveApplicationSecrets(hs keyschedule.HandshakeSecret, th, clientRandom []byte) (keyschedule.MasterSecret, trafficSecrets) {
	ms := hs.MasterSecret()
	ts := trafficSecrets{client: ms.ClientApplicationTrafficSecret(th), server: ms.ServerApplicationTrafficSecret(th)}
	e.exporter = ms.ExporterMasterSecret(th)
	e.keyLog("CLIENT_TRAFFIC_SECRET_0", clientRandom, ts.client)
	e.keyLog("SERVER_TRAFFIC_SECRET_0", clientRandom, ts.server)
	e.keyLog("EXPORTER_SECRET", clientRandom, e.exporter)
	return ms, ts
}
