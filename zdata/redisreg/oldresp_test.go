package redisreg

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Limits on replies: this client only ever needs short ones, and a
// misbehaving peer must not make it allocate without bound.
const (
	maxLine  = 4096
	maxBulk  = 64 << 10
	maxArray = 1024
	maxDepth = 4
)

// reply is one RESP2 reply (Redis protocol specification: simple string
// '+', error '-', integer ':', bulk string '$', array '*').
type reply struct {
	kind  byte
	str   string // simple string, error text or bulk string
	num   int64
	null  bool // null bulk string or null array
	array []reply
}

// errProtocol marks replies that break RESP.
var errProtocol = errors.New("redisreg: protocol error")

func protoErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errProtocol}, args...)...)
}

// appendCommand encodes a command as a RESP array of bulk strings.
func appendCommand(b []byte, args ...[]byte) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	return b
}

// readLine reads one CRLF-terminated line without the CRLF.
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > maxLine {
			return nil, protoErr("line longer than %d bytes", maxLine)
		}
		line = append(line, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		break
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, protoErr("line not ended by CRLF")
	}
	return line[:len(line)-2], nil
}

// parseInt parses a RESP integer: optional '-', decimal digits.
func parseInt(b []byte) (int64, error) {
	if len(b) == 0 || len(b) > 20 {
		return 0, protoErr("bad integer %q", b)
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || (b[0] == '+') {
		return 0, protoErr("bad integer %q", b)
	}
	return n, nil
}

// readReply reads one reply.
func readReply(r *bufio.Reader) (reply, error) { return readDepth(r, 0) }

func readDepth(r *bufio.Reader, depth int) (reply, error) {
	line, err := readLine(r)
	if err != nil {
		return reply{}, err
	}
	if len(line) == 0 {
		return reply{}, protoErr("empty line")
	}
	kind, body := line[0], line[1:]
	switch kind {
	case '+', '-':
		return reply{kind: kind, str: string(body)}, nil
	case ':':
		n, err := parseInt(body)
		return reply{kind: kind, num: n}, err
	case '$':
		n, err := parseInt(body)
		if err != nil {
			return reply{}, err
		}
		if n == -1 {
			return reply{kind: kind, null: true}, nil
		}
		if n < 0 || n > maxBulk {
			return reply{}, protoErr("bulk length %d", n)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return reply{}, err
		}
		if buf[n] != '\r' || buf[n+1] != '\n' {
			return reply{}, protoErr("bulk string not ended by CRLF")
		}
		return reply{kind: kind, str: string(buf[:n])}, nil
	case '*':
		n, err := parseInt(body)
		if err != nil {
			return reply{}, err
		}
		if n == -1 {
			return reply{kind: kind, null: true}, nil
		}
		if n < 0 || n > maxArray {
			return reply{}, protoErr("array length %d", n)
		}
		if depth >= maxDepth {
			return reply{}, protoErr("arrays nested deeper than %d", maxDepth)
		}
		arr := make([]reply, 0, n)
		for i := int64(0); i < n; i++ {
			e, err := readDepth(r, depth+1)
			if err != nil {
				return reply{}, err
			}
			arr = append(arr, e)
		}
		return reply{kind: kind, array: arr}, nil
	}
	return reply{}, protoErr("unknown reply type %q", kind)
}
