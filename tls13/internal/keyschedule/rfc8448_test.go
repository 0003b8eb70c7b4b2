package keyschedule

import (
	"bytes"
	"crypto"
	"crypto/ecdh"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/ztls-project/ztls/tls13/internal/rfc8448"
)

// The RFC 8448 known-answer tests recompute every secret, key, IV and MAC of
// Sections 3 and 4 from the trace's inputs (private keys, messages, ticket
// nonce) and compare them with the printed values. Transcript hashes come
// from the RFC's message bytes run through Transcript, never from the file's
// printed hashes, which are only compared against.

const sha256 = crypto.SHA256

func v(t *testing.T, key string) []byte {
	t.Helper()
	return rfc8448.Must(t, key)
}

func check(t *testing.T, what string, got []byte, key string) {
	t.Helper()
	want := v(t, key)
	if !bytes.Equal(got, want) {
		t.Errorf("%s:\n got %x\nwant %x (%s)", what, got, want, key)
	}
}

// x25519 computes the ECDHE shared secret from one side's private key and
// the peer's public key, as both RFC 8448 traces do.
func x25519(t *testing.T, sect string) []byte {
	t.Helper()
	priv, err := ecdh.X25519().NewPrivateKey(v(t, sect+"/client.x25519.private"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(priv.PublicKey().Bytes(), v(t, sect+"/client.x25519.public")) {
		t.Fatalf("%s: client public key does not match its private key", sect)
	}
	srv, err := ecdh.X25519().NewPublicKey(v(t, sect+"/server.x25519.public"))
	if err != nil {
		t.Fatal(err)
	}
	shared, err := priv.ECDH(srv)
	if err != nil {
		t.Fatal(err)
	}
	// The server's view must agree.
	spriv, err := ecdh.X25519().NewPrivateKey(v(t, sect+"/server.x25519.private"))
	if err != nil {
		t.Fatal(err)
	}
	cpub, _ := ecdh.X25519().NewPublicKey(v(t, sect+"/client.x25519.public"))
	shared2, err := spriv.ECDH(cpub)
	if err != nil || !bytes.Equal(shared, shared2) {
		t.Fatalf("%s: client and server X25519 disagree", sect)
	}
	return shared
}

// checkKeys compares the key and IV derived from a traffic secret, for
// writer ("client"/"server") and epoch ("hs"/"ap"/"early").
func checkKeys(t *testing.T, sect, writer, epoch string, secret []byte) {
	t.Helper()
	check(t, writer+" "+epoch+" keys prk", secret, sect+"/"+writer+"."+epoch+"_keys.prk")
	key, iv := TrafficKeys(sha256, 16, secret)
	check(t, writer+" "+epoch+" key", key, sect+"/"+writer+"."+epoch+"_key")
	check(t, writer+" "+epoch+" iv", iv, sect+"/"+writer+"."+epoch+"_iv")
}

func handshakeMsg(typ byte, body []byte) []byte {
	return append([]byte{typ, byte(len(body) >> 16), byte(len(body) >> 8), byte(len(body))}, body...)
}

func TestRFC8448Simple1RTT(t *testing.T) {
	const s = "3/"
	ch, sh := v(t, s+"client.hello"), v(t, s+"server.hello")
	ee, cert, cv := v(t, s+"server.encrypted_extensions"), v(t, s+"server.certificate"), v(t, s+"server.certificate_verify")

	tr := NewTranscript(sha256)

	// Early secret without PSK: ikm nil means zeros.
	es := NewEarlySecret(sha256, nil)
	check(t, "early secret", es.k.open().secret, s+"early_secret")
	check(t, "early secret (explicit zeros)", NewEarlySecret(sha256, v(t, s+"early_secret.ikm")).k.open().secret, s+"early_secret")
	if es.Hash() != sha256 {
		t.Errorf("EarlySecret.Hash() = %v", es.Hash())
	}
	check(t, "empty hash", emptyHash(sha256), s+"handshake.derived.hash")
	check(t, "derived (handshake)", DeriveSecret(sha256, es.k.open().secret, "derived", emptyHash(sha256)), s+"handshake.derived")
	check(t, "derived (handshake, client)", DeriveSecret(sha256, es.k.open().secret, "derived", emptyHash(sha256)), s+"client.handshake.derived")

	shared := x25519(t, "3")
	check(t, "ECDHE", shared, s+"ecdhe.shared")

	tr.Write(ch)
	tr.Write(sh)
	th := tr.Sum()
	check(t, "transcript CH..SH", th, s+"client.hs_traffic_secret.hash")
	check(t, "transcript CH..SH", th, s+"server.hs_traffic_secret.hash")

	hs := es.HandshakeSecret(shared)
	check(t, "handshake secret", hs.k.open().secret, s+"handshake_secret")
	chts := hs.ClientHandshakeTrafficSecret(th)
	shts := hs.ServerHandshakeTrafficSecret(th)
	check(t, "c hs traffic", chts, s+"client.hs_traffic_secret")
	check(t, "s hs traffic", shts, s+"server.hs_traffic_secret")
	checkKeys(t, "3", "server", "hs", shts)
	checkKeys(t, "3", "client", "hs", chts)

	check(t, "derived (master)", DeriveSecret(sha256, hs.k.open().secret, "derived", emptyHash(sha256)), s+"master.derived")
	ms := hs.MasterSecret()
	check(t, "master secret", ms.k.open().secret, s+"master_secret")

	// Server Finished over CH..CertificateVerify.
	tr.Write(ee)
	tr.Write(cert)
	tr.Write(cv)
	check(t, "server finished key", FinishedKey(sha256, shts), s+"server.finished_key")
	sfin := FinishedMAC(sha256, shts, tr.Sum())
	check(t, "server verify_data", sfin, s+"server.finished.verify_data")
	check(t, "server Finished message", handshakeMsg(20, sfin), s+"server.finished")
	if !VerifyFinished(sha256, shts, tr.Sum(), v(t, s+"server.finished.verify_data")) {
		t.Error("VerifyFinished rejected the server's Finished")
	}
	tr.Write(v(t, s+"server.finished"))

	flight := bytes.Join([][]byte{ee, cert, cv, v(t, s+"server.finished")}, nil)
	check(t, "server flight = EE||Cert||CV||Fin", flight, s+"server.hs_flight.record.payload")

	th = tr.Sum()
	check(t, "transcript CH..server Fin", th, s+"client.ap_traffic_secret.hash")
	check(t, "transcript CH..server Fin", th, s+"exporter_master_secret.hash")
	cats := ms.ClientApplicationTrafficSecret(th)
	sats := ms.ServerApplicationTrafficSecret(th)
	check(t, "c ap traffic", cats, s+"client.ap_traffic_secret")
	check(t, "s ap traffic", sats, s+"server.ap_traffic_secret")
	check(t, "exp master", ms.ExporterMasterSecret(th), s+"exporter_master_secret")
	checkKeys(t, "3", "server", "ap", sats)
	checkKeys(t, "3", "client", "ap", cats)

	// Client Finished over CH..server Finished.
	check(t, "client finished key", FinishedKey(sha256, chts), s+"client.finished_key")
	cfin := FinishedMAC(sha256, chts, th)
	check(t, "client verify_data", cfin, s+"client.finished.verify_data")
	check(t, "client Finished message", handshakeMsg(20, cfin), s+"client.finished")
	if !VerifyFinished(sha256, chts, th, cfin) {
		t.Error("VerifyFinished rejected the client's Finished")
	}
	tr.Write(v(t, s+"client.finished"))

	th = tr.Sum()
	check(t, "transcript CH..client Fin", th, s+"resumption_master_secret.hash")
	rms := ms.ResumptionMasterSecret(th)
	check(t, "res master", rms, s+"resumption_master_secret")

	// The PSK for the ticket, from the nonce carried in NewSessionTicket.
	nst := v(t, s+"server.new_session_ticket")
	nonce := v(t, s+"server.new_session_ticket.nonce")
	// NewSessionTicket body: lifetime(4) age_add(4) nonce<0..255> ...
	if got := nst[4+8+1 : 4+8+1+int(nst[12])]; !bytes.Equal(got, nonce) {
		t.Fatalf("ticket nonce parsed %x, file says %x", got, nonce)
	}
	check(t, "psk context", nonce, s+"psk.hash")
	check(t, "resumption PSK", ResumptionPSK(sha256, rms, nonce), s+"psk")
}

func TestRFC8448Resumed0RTT(t *testing.T) {
	const s = "4/"
	psk := v(t, "3/psk")
	check(t, "PSK carried over from Section 3", psk, s+"early_secret.ikm")

	es := NewEarlySecret(sha256, psk)
	check(t, "early secret", es.k.open().secret, s+"early_secret")

	// PSK binder over the ClientHello truncated before the binders list
	// (RFC 8446, Section 4.2.11.2).
	ch := v(t, s+"client.hello")
	trunc := v(t, s+"client.hello.truncated")
	check(t, "binder prefix", trunc, s+"binder.client_hello_prefix")
	if !bytes.HasPrefix(ch, trunc) {
		t.Fatal("truncated ClientHello is not a prefix of the ClientHello")
	}
	check(t, "ClientHello = truncated || binders", append(bytes.Clone(trunc), v(t, s+"client.hello.psk.binders")...), s+"client.hello")
	check(t, "ClientHello = record payload", ch, s+"client.hello.record.payload")

	tr := NewTranscript(sha256)
	bh := tr.HashOf(trunc)
	check(t, "binder transcript hash", bh, s+"binder.hash")
	bk := es.ResumptionBinderKey()
	check(t, "binder key", bk, s+"binder_key")
	check(t, "binder key (BinderKey)", es.BinderKey("res binder"), s+"binder_key")
	check(t, "binder finished key", FinishedKey(sha256, bk), s+"binder.finished_key")
	binder := FinishedMAC(sha256, bk, bh)
	check(t, "binder", binder, s+"binder")
	check(t, "binders list", append([]byte{0, 33, 32}, binder...), s+"client.hello.psk.binders")
	if !VerifyFinished(sha256, bk, bh, binder) {
		t.Error("VerifyFinished rejected the binder")
	}
	if VerifyFinished(sha256, es.BinderKey("ext binder"), bh, binder) {
		t.Error("binder verified under the external-PSK binder key")
	}
	if got := tr.Sum(); !bytes.Equal(got, emptyHash(sha256)) {
		t.Fatal("HashOf wrote into the transcript")
	}

	tr.Write(ch)
	th := tr.Sum()
	check(t, "transcript CH", th, s+"client.early_traffic_secret.hash")
	check(t, "transcript CH", th, s+"early_exporter_master_secret.hash")
	cets := es.ClientEarlyTrafficSecret(th)
	check(t, "c e traffic", cets, s+"client.early_traffic_secret")
	check(t, "e exp master", es.EarlyExporterMasterSecret(th), s+"early_exporter_master_secret")
	checkKeys(t, "4", "client", "early", cets)

	check(t, "derived (handshake)", DeriveSecret(sha256, es.k.open().secret, "derived", emptyHash(sha256)), s+"handshake.derived")
	check(t, "derived (handshake, client)", DeriveSecret(sha256, es.k.open().secret, "derived", emptyHash(sha256)), s+"client.handshake.derived")
	shared := x25519(t, "4")
	check(t, "ECDHE", shared, s+"ecdhe.shared")

	tr.Write(v(t, s+"server.hello"))
	th = tr.Sum()
	check(t, "transcript CH..SH", th, s+"client.hs_traffic_secret.hash")
	hs := es.HandshakeSecret(shared)
	check(t, "handshake secret", hs.k.open().secret, s+"handshake_secret")
	chts := hs.ClientHandshakeTrafficSecret(th)
	shts := hs.ServerHandshakeTrafficSecret(th)
	check(t, "c hs traffic", chts, s+"client.hs_traffic_secret")
	check(t, "s hs traffic", shts, s+"server.hs_traffic_secret")
	checkKeys(t, "4", "server", "hs", shts)
	checkKeys(t, "4", "client", "hs", chts)
	check(t, "derived (master)", DeriveSecret(sha256, hs.k.open().secret, "derived", emptyHash(sha256)), s+"master.derived")
	ms := hs.MasterSecret()
	check(t, "master secret", ms.k.open().secret, s+"master_secret")

	tr.Write(v(t, s+"server.encrypted_extensions"))
	check(t, "server finished key", FinishedKey(sha256, shts), s+"server.finished_key")
	sfin := FinishedMAC(sha256, shts, tr.Sum())
	check(t, "server verify_data", sfin, s+"server.finished.verify_data")
	check(t, "server Finished", handshakeMsg(20, sfin), s+"server.finished")
	tr.Write(v(t, s+"server.finished"))

	th = tr.Sum()
	check(t, "transcript CH..server Fin", th, s+"client.ap_traffic_secret.hash")
	cats := ms.ClientApplicationTrafficSecret(th)
	sats := ms.ServerApplicationTrafficSecret(th)
	check(t, "c ap traffic", cats, s+"client.ap_traffic_secret")
	check(t, "s ap traffic", sats, s+"server.ap_traffic_secret")
	check(t, "exp master", ms.ExporterMasterSecret(th), s+"exporter_master_secret")
	checkKeys(t, "4", "server", "ap", sats)
	checkKeys(t, "4", "client", "ap", cats)

	// The client's Finished covers EndOfEarlyData (RFC 8446, Section 4.4.1).
	tr.Write(v(t, s+"client.end_of_early_data"))
	check(t, "client finished key", FinishedKey(sha256, chts), s+"client.finished_key")
	cfin := FinishedMAC(sha256, chts, tr.Sum())
	check(t, "client verify_data", cfin, s+"client.finished.verify_data")
	check(t, "client Finished", handshakeMsg(20, cfin), s+"client.finished")
	tr.Write(v(t, s+"client.finished"))

	th = tr.Sum()
	check(t, "transcript CH..client Fin", th, s+"resumption_master_secret.hash")
	check(t, "res master", ms.ResumptionMasterSecret(th), s+"resumption_master_secret")
}

// TestRFC8448HkdfLabels checks every HkdfLabel ("X.info") printed in the
// trace: it is decoded into (length, label, context), re-encoded by
// hkdfLabel, and where the trace prints the PRK and output the expansion is
// recomputed with ExpandLabel.
func TestRFC8448HkdfLabels(t *testing.T) {
	all, err := rfc8448.Load()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for key, info := range all {
		base, ok := strings.CutSuffix(key, ".info")
		if !ok {
			continue
		}
		n++
		if len(info) < 4 {
			t.Fatalf("%s too short", key)
		}
		length := int(binary.BigEndian.Uint16(info))
		ll := int(info[2])
		full := string(info[3 : 3+ll])
		label, ok := strings.CutPrefix(full, "tls13 ")
		if !ok {
			t.Errorf("%s: label %q lacks the tls13 prefix", key, full)
			continue
		}
		cl := int(info[3+ll])
		context := info[4+ll:]
		if len(context) != cl {
			t.Errorf("%s: context length %d, have %d bytes", key, cl, len(context))
		}
		got, err := hkdfLabel(label, context, length)
		if err != nil || !bytes.Equal(got, info) {
			t.Errorf("%s: hkdfLabel = %x, %v; want %x", key, got, err, info)
		}
		// The PRK sits at base.prk, or for traffic keys at <writer>.<epoch>_keys.prk.
		prk := all[base+".prk"]
		if prk == nil {
			if i := strings.LastIndexByte(base, '_'); i > 0 {
				prk = all[base[:i]+"_keys.prk"]
			}
		}
		if prk == nil {
			prk = all[strings.TrimSuffix(base, ".finished_key")+"_key"] // 4/binder.finished_key from 4/binder_key
		}
		out := all[base]
		if prk == nil || out == nil {
			t.Errorf("%s: no PRK or output to recompute", key)
			continue
		}
		if got := ExpandLabel(sha256, prk, label, context, length); !bytes.Equal(got, out) {
			t.Errorf("%s: ExpandLabel = %x, want %x", base, got, out)
		}
	}
	if n < 40 {
		t.Errorf("only %d HkdfLabels found", n)
	}
}
