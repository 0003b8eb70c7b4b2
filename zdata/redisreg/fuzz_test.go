package redisreg

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzRESP feeds the reply parser arbitrary bytes: it must return
// replies or errors, never panic or read without bound.
func FuzzRESP(f *testing.F) {
	for _, s := range []string{
		"+OK\r\n", "$-1\r\n", "-ERR wrong\r\n", ":42\r\n", "$5\r\nhello\r\n",
		"*2\r\n$3\r\nfoo\r\n:1\r\n", "*-1\r\n", "*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n",
		"$99999999999\r\n", "*3\r\n:1\r\n:0\r\n:1\r\n", "*2\r\n:2\r\n$3\r\n123\r\n", "+OK\n", ":+1\r\n", "$3\r\nabcde", "?\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		br := bufio.NewReader(bytes.NewReader(data))
		for i := 0; i < 64; i++ {
			rep, err := readReply(br)
			if err != nil {
				if !errors.Is(err, errProtocol) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
					t.Fatalf("unexpected error kind %v", err)
				}
				return
			}
			if rep.kind == '$' && len(rep.str) > maxBulk {
				t.Fatal("bulk over the limit")
			}
			// The script replies' decoders take whatever Redis sends.
			_, _, _ = insertResult(rep)
			if code, was, err := punctureResult(rep, 2); err == nil && code == resInserted && len(was) != 2 {
				t.Fatalf("puncture result of %d bits for 2 positions", len(was))
			}
		}
	})
}

func TestRESPParser(t *testing.T) {
	ok := map[string]reply{
		"+OK\r\n":          {kind: '+', str: "OK"},
		"-ERR x\r\n":       {kind: '-', str: "ERR x"},
		":-7\r\n":          {kind: ':', num: -7},
		"$-1\r\n":          {kind: '$', null: true},
		"$0\r\n\r\n":       {kind: '$', str: ""},
		"$4\r\na\r\nb\r\n": {kind: '$', str: "a\r\nb"},
		"*-1\r\n":          {kind: '*', null: true},
		"*1\r\n+x\r\n":     {kind: '*', array: []reply{{kind: '+', str: "x"}}},
	}
	for in, want := range ok {
		got, err := readReply(bufio.NewReader(bytes.NewReader([]byte(in))))
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		if got.kind != want.kind || got.str != want.str || got.num != want.num || got.null != want.null || len(got.array) != len(want.array) {
			t.Errorf("%q: got %+v, want %+v", in, got, want)
		}
	}
	for _, in := range []string{
		"", "+OK", "+OK\n", ":abc\r\n", ":+1\r\n", "$-2\r\n", "$3\r\nab\r\n", "$3\r\nabcd\r\n",
		"$70000\r\n", "*2000\r\n", "*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n", "?x\r\n", "\r\n",
		"+" + string(bytes.Repeat([]byte("a"), 5000)) + "\r\n",
	} {
		if _, err := readReply(bufio.NewReader(bytes.NewReader([]byte(in)))); err == nil {
			t.Errorf("%q parsed", in)
		}
	}
	got := appendCommand(nil, []byte("SET"), []byte("k"), []byte(""))
	if string(got) != "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n" {
		t.Errorf("appendCommand = %q", got)
	}
}
