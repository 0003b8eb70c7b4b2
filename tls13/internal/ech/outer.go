package ech

import (
	"bytes"
	"errors"
)

// Compressible returns the extensions of a ClientHelloInner body that
// EncodeInner may replace by one ech_outer_extensions for this
// ClientHelloOuter body: the longest run of consecutive inner extensions
// that the outer carries byte for byte, in the same order (never
// encrypted_client_hello or ech_outer_extensions). The run must be
// consecutive in the inner, or the inner the server rebuilds would list
// them in another order than the one the client's transcript has.
func Compressible(innerBody, outerBody []byte) ([]uint16, error) {
	in, err := parseHelloBody(innerBody)
	if err != nil {
		return nil, err
	}
	out, err := parseHelloBody(outerBody)
	if err != nil {
		return nil, err
	}
	var best, run []uint16
	next := 0 // the outer is searched forward only, as DecodeInner does
	for _, e := range in.exts {
		j := -1
		if e.typ != ExtEncryptedClientHello && e.typ != ExtOuterExtensions {
			for k := next; k < len(out.exts); k++ {
				if out.exts[k].typ == e.typ && bytes.Equal(out.exts[k].data, e.data) {
					j = k
					break
				}
			}
		}
		if j < 0 {
			run, next = nil, 0
			continue
		}
		run, next = append(run, e.typ), j+1
		if len(run) > len(best) {
			best = append([]uint16(nil), run...)
		}
	}
	return best, nil
}

// OuterAAD returns the ClientHelloOuterAAD of an outer ClientHello body
// (RFC 9849, Section 5.2): the body with its encrypted_client_hello
// payload's bytes zeroed, and where the payload starts.
func OuterAAD(outerBody []byte) (aad []byte, payloadAt int, ext *ClientExtension, err error) {
	h, err := parseHelloBody(outerBody)
	if err != nil {
		return nil, 0, nil, err
	}
	e, ok := h.ext(ExtEncryptedClientHello)
	if !ok {
		return nil, 0, nil, errors.New("ech: ClientHello without encrypted_client_hello")
	}
	ext, err = ParseClientExtension(e.data)
	if err != nil {
		return nil, 0, nil, err
	}
	if ext.Type != TypeOuter {
		return nil, 0, ext, ErrIllegal
	}
	// e.data is a slice of outerBody: the payload is its last bytes.
	end := cap(outerBody) - cap(e.data) + len(e.data)
	at := end - len(ext.Payload)
	aad = append([]byte(nil), outerBody...)
	clear(aad[at:end])
	return aad, at, ext, nil
}
