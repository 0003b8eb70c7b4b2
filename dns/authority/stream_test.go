package authority

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"

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
	f.Add(append([]byte{0x01, 0x2c}, make([]byte, 300)...), uint8(200), uint16(65535))
	f.Add([]byte{0xff, 0xff, 1}, uint8(3), uint16(100))
	f.Fuzz(func(t *testing.T, in []byte, chunk uint8, max uint16) {
		if len(in) > 1<<17 {
			return // two frames of the largest size are enough
		}
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

// A kept-open connection wakes from idle for every way queries arrive:
// one at a time, two in one write (one TLS record), and one split over
// two writes with a pause between, on TCP and on TLS.
func TestStreamIdleWakeups(t *testing.T) {
	s := testServer(t)
	a, clientCfg := startServer(t, s)
	for _, tc := range []struct{ network, addr string }{{"tcp", a.tcp}, {"tls", a.tls}} {
		t.Run(tc.network, func(t *testing.T) {
			c, err := net.Dial("tcp", tc.addr)
			if err != nil {
				t.Fatal(err)
			}
			if tc.network == "tls" {
				c = tls.Client(c, clientCfg)
			}
			defer c.Close()
			if err := askOn(c, 1); err != nil {
				t.Fatal(err)
			}
			frame := func(id uint16) []byte {
				q := query("www.example.org.", dns.TypeA)
				q.Id = id
				raw, _ := q.Pack()
				f, _ := dnsstream.AppendFrame(nil, raw)
				return f
			}
			two := append(frame(2), frame(3)...)
			split := frame(4)
			writes := [][]byte{two, split[:5], split[5:]}
			br := bufio.NewReader(c)
			want := map[uint16]bool{2: true, 3: true, 4: true}
			for i, w := range writes {
				if i == 2 {
					time.Sleep(50 * time.Millisecond) // let the server wait mid-frame
				}
				if _, err := c.Write(w); err != nil {
					t.Fatal(err)
				}
			}
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			for len(want) > 0 {
				raw, err := dnsstream.ReadFrame(br, make([]byte, dnsstream.MaxMessageSize))
				if err != nil {
					t.Fatalf("waiting for answers %v: %v", want, err)
				}
				m := new(dns.Msg)
				if err := m.Unpack(raw); err != nil || !want[m.Id] {
					t.Fatalf("unexpected answer %v (%v)", m, err)
				}
				delete(want, m.Id)
			}
		})
	}
}

// A frame longer than the pooled buffer is read into one of its own,
// whatever was buffered of it, and the frames around it are intact.
func TestFrameReaderLargeFrame(t *testing.T) {
	big := bytes.Repeat([]byte{7}, 9000)
	var in []byte
	for _, msg := range [][]byte{{1, 2, 3}, big, {4}, big[:streamReadBuf-2], big[:streamReadBuf-1]} {
		in, _ = dnsstream.AppendFrame(in, msg)
	}
	for _, chunk := range []int{1, 7, 4096, 20000} {
		fr := newFrameReader(&chunkConn{r: bytes.NewReader(in), chunk: chunk}, dnsstream.MaxMessageSize)
		for i, want := range []int{3, 9000, 1, streamReadBuf - 2, streamReadBuf - 1} {
			got, err := fr.next()
			if err != nil || len(got) != want {
				t.Fatalf("chunk %d, frame %d: %d bytes, %v; want %d", chunk, i, len(got), err, want)
			}
		}
		if _, err := fr.next(); err != io.EOF {
			t.Fatalf("chunk %d: after the last frame %v, want EOF", chunk, err)
		}
		fr.close()
	}
}
