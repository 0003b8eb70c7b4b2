package zdata

// Post-quantum Z-data (docs/ztls-spec.md, Section 9): v3 records whose
// key is X25519MLKEM768. The key itself is tls13.ZDataKEMKey (the
// engine's one X25519MLKEM768 implementation); this file holds what
// package zdata adds around it: the share's checks, its fleet
// derivation, and a Key's private side whichever group it has.

import (
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/mlkem"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/ztls-project/ztls/tls13"
)

// pqShareLen is an X25519MLKEM768 Z-data share's length: the ML-KEM-768
// encapsulation key then the x25519 public key (Section 9.1).
const pqShareLen = mlkem.EncapsulationKeySize768 + 32

// PQEpochIDBit is set in the Zdata_id of a fleet's post-quantum key
// (docs/ztls-spec.md, Section 9.2), so that it never names the same
// epoch's classical key.
const PQEpochIDBit = 1 << 31

// validatePQShare checks an X25519MLKEM768 share before a client uses it
// (Section 9.1): its length, FIPS 203's modulus check of the
// encapsulation key, and an x25519 half not of small order.
func validatePQShare(share []byte) error {
	if len(share) != pqShareLen {
		return reasonErr(ReasonInvalidShare, fmt.Errorf("%w: X25519MLKEM768 share of %d bytes, want %d", ErrInvalidShare, len(share), pqShareLen))
	}
	ek, x := share[:mlkem.EncapsulationKeySize768], share[mlkem.EncapsulationKeySize768:]
	if !mlkemModulusOK(ek) {
		return reasonErr(ReasonInvalidShare, fmt.Errorf("%w: ML-KEM-768 encapsulation key fails FIPS 203's modulus check (a coefficient not below q)", ErrInvalidShare))
	}
	if _, err := ecdh.X25519().NewPublicKey(x); err != nil || x25519LowOrder(x) {
		return reasonErr(ReasonInvalidShare, fmt.Errorf("%w: small-order x25519 half", ErrInvalidShare))
	}
	return nil
}

// mlkemQ is ML-KEM's modulus q (FIPS 203, Section 2.4).
const mlkemQ = 3329

// mlkemModulusOK is FIPS 203's modulus check of an ML-KEM-768
// encapsulation key (Section 7.2, input checking): the key's first 384·k
// bytes (k = 3) are 256·k 12-bit integers, two in every three bytes
// (ByteDecode_12, least significant bits first), and each must be below
// q; the last 32 bytes, the seed ρ, are not checked. crypto/mlkem makes
// the same check when it parses a key, but also expands the key's matrix
// from ρ (most of its cost): a client checks every v3 record of an
// answer, the next period's too, and encapsulates (parsing the key
// again) only to the one it selects.
func mlkemModulusOK(ek []byte) bool {
	if len(ek) != mlkem.EncapsulationKeySize768 {
		return false
	}
	t := ek[:len(ek)-32]
	for i := 0; i+3 <= len(t); i += 3 {
		lo := uint16(t[i]) | uint16(t[i+1]&0x0f)<<8
		hi := uint16(t[i+1]>>4) | uint16(t[i+2])<<4
		if lo >= mlkemQ || hi >= mlkemQ {
			return false
		}
	}
	return true
}

// DeriveKEMKey is DeriveKey for a post-quantum key: the same HKDF-SHA256
// (salt "ztls v1 fleet", the info binding host, port, epoch and group
// X25519MLKEM768), whose first tls13.ZDataKEMKeySize bytes are the key's
// private bytes (the ML-KEM-768 seed d || z, then the x25519 scalar).
func DeriveKEMKey(seed []byte, host string, port int, epoch int64) (*tls13.ZDataKEMKey, error) {
	if len(seed) == 0 {
		return nil, errors.New("zdata: empty fleet seed")
	}
	info := fleetKeyInfo(host, port, epoch, GroupX25519MLKEM768)
	b, err := hkdf.Key(sha256.New, seed, []byte("ztls v1 fleet"), string(append(info, 0)), tls13.ZDataKEMKeySize)
	if err != nil {
		return nil, fmt.Errorf("zdata: hkdf: %v", err)
	}
	defer clear(b)
	return tls13.NewZDataKEMKey(b)
}

// hasPrivate reports whether k holds its private key, of either kind.
func (k *Key) hasPrivate() bool { return k.Private != nil || k.KEM != nil }

// privateBytes is the key file's private_key: the ECDH scalar, or a
// post-quantum key's tls13.ZDataKEMKeySize bytes.
func (k *Key) privateBytes() []byte {
	if k.KEM != nil {
		return k.KEM.Bytes()
	}
	return k.Private.Bytes()
}

// publicShare is the key share the private side makes.
func (k *Key) publicShare() []byte {
	if k.KEM != nil {
		return k.KEM.Public()
	}
	return k.Private.PublicKey().Bytes()
}

// setPrivate loads raw, a key file's private bytes, as the private side
// of r's group and checks it makes r's share.
func (k *Key) setPrivate(r *Record, raw []byte) error {
	if r.Group == GroupX25519MLKEM768 {
		kem, err := tls13.NewZDataKEMKey(raw)
		if err != nil {
			return fmt.Errorf("zdata: key file: private key: %v", err)
		}
		k.KEM = kem
	} else {
		curve, err := Curve(r.Group)
		if err != nil {
			return err
		}
		if k.Private, err = curve.NewPrivateKey(raw); err != nil {
			return fmt.Errorf("zdata: key file: private key: %v", err)
		}
	}
	if string(k.publicShare()) != string(r.KeyShare) {
		return errors.New("zdata: key file: private key does not match the published share")
	}
	return nil
}

// shared is ZS for a client's bytes (docs/ztls-spec.md, Sections 3 and
// 9.4): ECDH with its key share, or for a post-quantum key the
// decapsulation of its ztls_kem value.
func (k *Key) shared(peer []byte) ([]byte, error) {
	if k.KEM != nil {
		return k.KEM.Shared(peer)
	}
	return SharedSecret(k.Private, peer)
}
