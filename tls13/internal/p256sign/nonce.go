package p256sign

import "crypto/sha256"

// hmacDRBG is RFC 6979, Section 3.2's generator of k with HMAC-SHA-256
// (qlen = hlen = 256, so one V is one candidate), with Section 3.6's
// additional data k' appended to the seed in steps d and f: 32 fresh random
// bytes in the hedged mode of Sign, none in the pure deterministic mode the
// Appendix A.2.5 vectors check.
type hmacDRBG struct {
	k, v [32]byte
	// buf holds key XOR ipad (64 bytes) followed by the message:
	// at most V || 0x00 || int2octets(x) || bits2octets(h1) || k'.
	buf [64 + 32 + 1 + 32 + 32 + 32]byte
}

// mac sets out = HMAC-SHA-256(d.k, d.buf[64:64+mlen]) (RFC 2104), the
// message already in place. out may be &d.k: the key is read before it is
// written.
func (d *hmacDRBG) mac(out *[32]byte, mlen int) {
	for i := range 32 {
		d.buf[i] = d.k[i] ^ 0x36
	}
	for i := 32; i < 64; i++ {
		d.buf[i] = 0x36
	}
	inner := sha256.Sum256(d.buf[:64+mlen])
	var o [64 + 32]byte
	for i := range 32 {
		o[i] = d.k[i] ^ 0x5c
	}
	for i := 32; i < 64; i++ {
		o[i] = 0x5c
	}
	copy(o[64:], inner[:])
	*out = sha256.Sum256(o[:])
}

// macV sets out = HMAC_K(V || sep...) with sep empty or one byte.
func (d *hmacDRBG) macV(out *[32]byte, sep ...byte) {
	copy(d.buf[64:], d.v[:])
	copy(d.buf[96:], sep)
	d.mac(out, 32+len(sep))
}

// seed runs RFC 6979, Section 3.2 steps b to g: x is int2octets of the
// private key, h is bits2octets of the message hash, extra is k' (nil or 32
// bytes).
func (d *hmacDRBG) seed(x, h *[32]byte, extra []byte) {
	for i := range d.v {
		d.v[i] = 0x01
		d.k[i] = 0x00
	}
	for _, sep := range []byte{0x00, 0x01} { // steps d-e, then f-g
		copy(d.buf[64:], d.v[:])
		d.buf[96] = sep
		copy(d.buf[97:], x[:])
		copy(d.buf[129:], h[:])
		copy(d.buf[161:], extra)
		d.mac(&d.k, 97+len(extra))
		d.macV(&d.v)
	}
}

// generate runs step h.2 for one block: V = HMAC_K(V), returned as T.
func (d *hmacDRBG) generate() [32]byte {
	d.macV(&d.v)
	return d.v
}

// reseed is step h.3, run when a candidate is refused: K = HMAC_K(V || 0x00),
// V = HMAC_K(V).
func (d *hmacDRBG) reseed() {
	d.macV(&d.k, 0x00)
	d.macV(&d.v)
}

// wipe clears the key material the generator copied.
func (d *hmacDRBG) wipe() {
	clear(d.buf[:])
	clear(d.k[:])
	clear(d.v[:])
}
