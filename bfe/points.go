package bfe

import (
	"bytes"
	"fmt"
	"io"
	"os"

	bls "github.com/consensys/gnark-crypto/ecc/bls12-381"
	"github.com/consensys/gnark-crypto/ecc/bls12-381/fp"
)

// The point table of an epoch, next to its key file: H_G1(pk, i) for every
// slot i. It is public (anyone can compute it from the public key) and
// never changes; it spares decapsulation's re-encryption k-1 hashes to the
// curve, at 96 bytes per slot in memory and on disk:
//
//	offset 0    "ZTLSBFP1"
//	offset 8    the public key's digest (32 bytes)
//	offset 40   zeros to 64
//	offset 64   m points, x || y big-endian, 48 bytes each
const (
	pointFileHeaderSize = 64
	pointSize           = 2 * fp.Bytes
)

var pointFileMagic = []byte("ZTLSBFP1")

// PointTablePath is where GenerateKey writes, and OpenKeyState looks for,
// the point table of the key file at keyPath.
func PointTablePath(keyPath string) string { return keyPath + ".points" }

func pointOffset(i uint32) int64 { return pointFileHeaderSize + int64(i)*pointSize }

func encodePointFileHeader(pk *PublicKey) []byte {
	h := make([]byte, pointFileHeaderSize)
	n := copy(h, pointFileMagic)
	copy(h[n:], pk.digest[:])
	return h
}

func encodePoint(dst []byte, p *bls.G1Affine) {
	fp.BigEndian.PutElement((*[fp.Bytes]byte)(dst[:fp.Bytes]), p.X)
	fp.BigEndian.PutElement((*[fp.Bytes]byte)(dst[fp.Bytes:pointSize]), p.Y)
}

// loadPointTable reads a point table and checks that it belongs to pk and
// that every entry is a point of the curve. (Entries are not checked to be
// H_G1(pk, i): a wrong one makes valid ciphertexts fail the FO comparison,
// never an invalid one pass it, since the comparison is against what the
// sender could only have made with the true H_G1.)
func loadPointTable(path string, pk *PublicKey) ([]bls.G1Affine, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := pk.params.M
	want := pointOffset(m)
	if st, err := f.Stat(); err != nil || st.Size() != want {
		return nil, fmt.Errorf("bfe: point table %s: size is not %d", path, want)
	}
	h := make([]byte, pointFileHeaderSize)
	if _, err := io.ReadFull(f, h); err != nil {
		return nil, fmt.Errorf("bfe: point table %s: %w", path, err)
	}
	if !bytes.Equal(h, encodePointFileHeader(pk)) {
		return nil, fmt.Errorf("bfe: point table %s is not the table of this key", path)
	}
	points := make([]bls.G1Affine, m)
	const chunk = 4096
	buf := make([]byte, chunk*pointSize)
	for first := uint32(0); first < m; first += chunk {
		n := min(chunk, m-first)
		b := buf[:int(n)*pointSize]
		if _, err := io.ReadFull(f, b); err != nil {
			return nil, fmt.Errorf("bfe: point table %s: %w", path, err)
		}
		for i := range n {
			p := &points[first+i]
			e := b[i*pointSize:]
			if p.X.SetBytesCanonical(e[:fp.Bytes]) != nil || p.Y.SetBytesCanonical(e[fp.Bytes:pointSize]) != nil || !p.IsOnCurve() || p.IsInfinity() {
				return nil, fmt.Errorf("bfe: point table %s: entry %d is not a curve point", path, first+i)
			}
		}
	}
	return points, nil
}
