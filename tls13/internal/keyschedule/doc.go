// Package keyschedule implements the TLS 1.3 key schedule of RFC 8446,
// Section 7, and the handshake transcript hash of RFC 8446, Section 4.4.1.
//
// The three stages of the schedule are distinct types, so a secret can only be
// derived from the stage that owns it, in order:
//
//	es := keyschedule.NewEarlySecret(s.Hash, psk)          // psk nil: no PSK
//	binderKey := es.ResumptionBinderKey()
//	cets := es.ClientEarlyTrafficSecret(tr.Sum())          // after ClientHello
//	hs := es.HandshakeSecret(ecdheShared)
//	chts := hs.ClientHandshakeTrafficSecret(tr.Sum())      // after ServerHello
//	ms := hs.MasterSecret()
//	cats := ms.ClientApplicationTrafficSecret(tr.Sum())    // after server Finished
//
// Functions that take a transcript hash take the hash value (Transcript.Sum or
// Transcript.HashOf), never the messages. TrafficKeys turns a traffic secret
// into the record key and IV; FinishedMAC and VerifyFinished compute and check
// Finished verify_data and PSK binders.
//
// A Transcript is a running hash of the handshake messages. It can start
// before the cipher suite, and hence the hash, is known (NewPendingTranscript)
// and handles the HelloRetryRequest rewrite (RestartWithMessageHash).
//
// Secrets are plain byte slices inside unexported fields; the stage types
// print as "<secret>" under every fmt verb so logging them by mistake does not
// leak key material. Each stage also keeps its secret's HMAC states (the
// SHA-256 or SHA-384 chaining values after the ipad and opad blocks), so
// its derivations hash two blocks each instead of four; they are as secret
// as the secret, live in the same allocation and are never printed, and
// TrafficKeysInto's are cleared before it returns. Without a PSK the early
// secret is a public constant, computed once per hash. None of the types here is safe for concurrent mutation;
// the secret stages are immutable values and may be shared.
package keyschedule
