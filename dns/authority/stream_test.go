package authority

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/ztls-project/ztls/dns/dnsstream"
)

// chunkConn is a net.Conn reading r in pieces of at most chunk bytes.
type chunkConn struct {
	net.Conn
	r     io.Reader
	chunk int
}

func (c *chunkConn) Read(b []byte) (int, error) {
	if len(b) > c.chunk {
		b = b[:c.chunk]
	}
	return c.r.Read(b)
}

// FuzzFrameReader: the pooled frame reader yields the frames, and the
// error, that dnsstream.ReadFrame yields on the same bytes, however the
// bytes arrive.
func FuzzFrameReader(f *testing.F) {
	f.Add([]byte{0, 3, 1, 2, 3, 0, 1, 9}, uint8(1), uint16(512))
	f.Add([]byte{0, 0}, uint8(7), uint16(512))
	f.Add(append([]byte{0x13, 0x88}, make([]byte, 5000)...), uint8(200), uint16(65535))
	f.Add([]byte{0xff, 0xff, 1}, uint8(3), uint16(100))
	f.Fuzz(func(t *testing.T, in []byte, chunk uint8, max uint16) {
		limit := int(max)%dnsstream.MaxMessageSize + 1
		fr := newFrameReader(&chunkConn{r: bytes.NewReader(in), chunk: int(chunk)%64 + 1}, limit)
		defer fr.close()
		ref := bufio.NewReader(bytes.NewReader(in))
		buf := make([]byte, limit)
		for {
			want, werr := dnsstream.ReadFrame(ref, buf)
			got, gerr := fr.next()
			if !bytes.Equal(got, want) || (werr == nil) != (gerr == nil) {
				t.Fatalf("frame %x, %v; want %x, %v", got, gerr, want, werr)
			}
			if werr != nil {
				for _, e := range []error{io.EOF, io.ErrUnexpectedEOF, dnsstream.ErrEmptyFrame, dnsstream.ErrFrameTooLarge} {
					if errors.Is(werr, e) != errors.Is(gerr, e) {
						t.Fatalf("error %v, want %v", gerr, werr)
					}
				}
				return
			}
		}
	})
}
