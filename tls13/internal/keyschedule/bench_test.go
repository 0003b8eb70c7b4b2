package keyschedule

import (
	"bytes"
	"crypto"
	"testing"
)

// benchSchedule runs one side's key schedule of a full handshake without
// PSK: the stages, the four traffic secrets and their keys, both Finished
// MACs, the exporter and resumption master secrets.
func benchSchedule(b *testing.B, h crypto.Hash, shared []byte) {
	th := bytes.Repeat([]byte{2}, h.Size())
	var key [16]byte
	var iv [12]byte
	b.ReportAllocs()
	for b.Loop() {
		hs := NewEarlySecret(h, nil).HandshakeSecret(shared)
		c, s := hs.ClientHandshakeTrafficSecret(th), hs.ServerHandshakeTrafficSecret(th)
		TrafficKeysInto(key[:], iv[:], h, c)
		TrafficKeysInto(key[:], iv[:], h, s)
		mac := FinishedMAC(h, s, th)
		if !VerifyFinished(h, s, th, mac) {
			b.Fatal("Finished rejected")
		}
		FinishedMAC(h, c, th)
		ms := hs.MasterSecret()
		TrafficKeysInto(key[:], iv[:], h, ms.ClientApplicationTrafficSecret(th))
		TrafficKeysInto(key[:], iv[:], h, ms.ServerApplicationTrafficSecret(th))
		ms.ExporterMasterSecret(th)
		ms.ResumptionMasterSecret(th)
	}
}

func BenchmarkScheduleSHA256X25519(b *testing.B) {
	benchSchedule(b, crypto.SHA256, bytes.Repeat([]byte{1}, 32))
}

func BenchmarkScheduleSHA256Hybrid(b *testing.B) {
	benchSchedule(b, crypto.SHA256, bytes.Repeat([]byte{1}, 64))
}

func BenchmarkScheduleSHA384(b *testing.B) {
	benchSchedule(b, crypto.SHA384, bytes.Repeat([]byte{1}, 48))
}

func BenchmarkTrafficKeysInto(b *testing.B) {
	secret := bytes.Repeat([]byte{1}, 32)
	var key [16]byte
	var iv [12]byte
	for b.Loop() {
		TrafficKeysInto(key[:], iv[:], crypto.SHA256, secret)
	}
}

func BenchmarkFinishedMAC(b *testing.B) {
	secret, th := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	for b.Loop() {
		FinishedMAC(crypto.SHA256, secret, th)
	}
}
