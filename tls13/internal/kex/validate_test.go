package kex

// ValidateShare is the tests' statement of which key_exchange values are
// well formed: ServerShare and Shared must refuse, with
// illegal_parameter, every share it refuses (TestInvalidShares,
// FuzzValidateShare). The handshake itself checks shares in those two.

import "crypto/mlkem"

// ValidateShare checks that share is a well-formed key_exchange value for
// group: its length, and for NIST curves an uncompressed point 0x04 || X || Y
// that lies on the curve (RFC 8446, Section 4.2.8.2). For X25519MLKEM768,
// fromServer selects the server's form (ciphertext || x25519) over the
// client's (encapsulation key || x25519); the client's encapsulation key is
// also checked (FIPS 203 modulus check). It does not detect low-order x25519
// points; Shared does, from the result.
func ValidateShare(group uint16, share []byte, fromServer bool) error {
	if !Supported(group) {
		return illegal("key share for unsupported group %s", Name(group))
	}
	if group != X25519MLKEM768 {
		_, err := parseECDHPublic(group, share)
		return err
	}
	if want := shareLen(group, fromServer); len(share) != want {
		return illegal("%s key share is %d bytes, want %d", Name(group), len(share), want)
	}
	if !fromServer {
		if _, err := mlkem.NewEncapsulationKey768(share[:mlkemEKLen]); err != nil {
			return illegal("X25519MLKEM768 key share holds an invalid ML-KEM-768 encapsulation key")
		}
	}
	return nil
}
