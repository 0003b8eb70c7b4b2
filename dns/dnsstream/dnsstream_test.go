package dnsstream

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/quick"
)

func TestAppendReadRoundTrip(t *testing.T) {
	check := func(msgs [][]byte) bool {
		var stream []byte
		var want [][]byte
		for _, m := range msgs {
			if len(m) == 0 {
				continue
			}
			var err error
			stream, err = AppendFrame(stream, m)
			if err != nil {
				t.Errorf("AppendFrame: %v", err)
				return false
			}
			want = append(want, m)
		}
		r := bytes.NewReader(stream)
		buf := make([]byte, MaxMessageSize)
		for _, w := range want {
			got, err := ReadFrame(r, buf)
			if err != nil || !bytes.Equal(got, w) {
				t.Errorf("ReadFrame = %x, %v; want %x", got, err, w)
				return false
			}
		}
		_, err := ReadFrame(r, buf)
		return err == io.EOF
	}
	if err := quick.Check(check, nil); err != nil {
		t.Fatal(err)
	}
}

func TestAppendFrameLimits(t *testing.T) {
	tests := []struct {
		name    string
		size    int
		wantErr error
	}{
		{"empty", 0, ErrEmptyFrame},
		{"one", 1, nil},
		{"max", MaxMessageSize, nil},
		{"over", MaxMessageSize + 1, ErrMessageTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prefix := []byte{0xAA}
			out, err := AppendFrame(prefix, make([]byte, tc.size))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				if !bytes.Equal(out, prefix) {
					t.Fatalf("dst changed on error: %x", out)
				}
				return
			}
			if len(out) != 1+2+tc.size || out[0] != 0xAA ||
				int(out[1])<<8|int(out[2]) != tc.size {
				t.Fatalf("bad frame header %x (len %d)", out[:3], len(out))
			}
		})
	}
}

func TestReadFrameErrors(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		bufSize int
		wantErr error
	}{
		{"clean eof", nil, 512, io.EOF},
		{"half prefix", []byte{0x00}, 512, io.ErrUnexpectedEOF},
		{"zero length", []byte{0, 0}, 512, ErrEmptyFrame},
		{"truncated body", []byte{0, 5, 1, 2}, 512, io.ErrUnexpectedEOF},
		{"prefix only", []byte{0, 5}, 512, io.ErrUnexpectedEOF},
		{"giant length small buffer", []byte{0xff, 0xff}, 512, ErrFrameTooLarge},
		{"one over buffer", []byte{0x02, 0x01}, 512, ErrFrameTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadFrame(bytes.NewReader(tc.in), make([]byte, tc.bufSize))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
		})
	}
}

// The body of an oversized frame is never read, so a hostile length costs
// the reader nothing beyond the prefix.
func TestReadFrameTooLargeDoesNotConsumeBody(t *testing.T) {
	r := bytes.NewReader([]byte{0x10, 0x00, 1, 2, 3})
	if _, err := ReadFrame(r, make([]byte, 16)); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("err = %v", err)
	}
	if r.Len() != 3 {
		t.Fatalf("reader consumed body: %d bytes left", r.Len())
	}
}

// No strict prefix of a valid frame stream parses as that stream.
func TestReadFrameTruncatedPrefixes(t *testing.T) {
	frame, err := AppendFrame(nil, []byte("a dns message"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(frame); i++ {
		if _, err := ReadFrame(bytes.NewReader(frame[:i]), make([]byte, 512)); err == nil {
			t.Fatalf("prefix of %d bytes parsed", i)
		}
	}
}

func FuzzReadFrame(f *testing.F) {
	f.Add([]byte{}, uint16(512))
	f.Add([]byte{0, 3, 'a', 'b', 'c'}, uint16(512))
	f.Add([]byte{0, 3, 'a', 'b', 'c', 0, 1, 'x'}, uint16(2))
	f.Add([]byte{0xff, 0xff}, uint16(65535))
	f.Add([]byte{0, 0, 0, 1}, uint16(1))
	f.Fuzz(func(t *testing.T, in []byte, bufSize uint16) {
		r := bytes.NewReader(in)
		buf := make([]byte, bufSize)
		var rebuilt []byte
		for {
			msg, err := ReadFrame(r, buf)
			if err != nil {
				break
			}
			if len(msg) == 0 || len(msg) > len(buf) {
				t.Fatalf("frame of %d bytes from a %d-byte buffer", len(msg), len(buf))
			}
			rebuilt, err = AppendFrame(rebuilt, msg)
			if err != nil {
				t.Fatalf("AppendFrame of a read frame: %v", err)
			}
		}
		// Every frame read re-encodes to exactly the bytes consumed.
		if !bytes.HasPrefix(in, rebuilt) {
			t.Fatalf("re-encoded frames %x are not a prefix of input %x", rebuilt, in)
		}
	})
}

func BenchmarkReadFrame(b *testing.B) {
	frame, _ := AppendFrame(nil, make([]byte, 100))
	buf := make([]byte, MaxMessageSize)
	r := bytes.NewReader(frame)
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		r.Reset(frame)
		if _, err := ReadFrame(r, buf); err != nil {
			b.Fatal(err)
		}
	}
}
