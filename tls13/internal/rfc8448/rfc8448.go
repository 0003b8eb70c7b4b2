package rfc8448

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// relPath is where the vectors live relative to this package's directory.
const relPath = "../../testdata/rfc8448.txt"

// Path returns the location of rfc8448.txt: next to this package's source
// (found with runtime.Caller), or, when the binary was built with -trimpath,
// by walking up from the working directory to a tls13/testdata folder.
func Path() (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		p := filepath.Join(filepath.Dir(file), filepath.FromSlash(relPath))
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("rfc8448: %w", err)
	}
	for {
		for _, rel := range []string{"testdata/rfc8448.txt", "tls13/testdata/rfc8448.txt"} {
			p := filepath.Join(dir, filepath.FromSlash(rel))
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("rfc8448: rfc8448.txt not found next to the package or above the working directory")
		}
		dir = parent
	}
}

// Load reads and parses the RFC 8448 vectors. Each call returns a new map.
func Load() (map[string][]byte, error) {
	p, err := Path()
	if err != nil {
		return nil, err
	}
	return LoadFile(p)
}

// LoadFile reads and parses a vector file at path.
func LoadFile(path string) (map[string][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("rfc8448: %w", err)
	}
	defer f.Close()
	return Parse(f)
}

// maxLine bounds one line; the longest value in the file (the server's
// first flight) is under 2 KiB of hex.
const maxLine = 1 << 16

// Parse parses "[section] label = hex" lines into a map keyed
// "section/label". It rejects malformed lines, odd or non-hex values and
// duplicate keys, naming the line.
func Parse(r io.Reader) (map[string][]byte, error) {
	out := make(map[string][]byte)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		key, val, err := parseLine(line)
		if err != nil {
			return nil, fmt.Errorf("rfc8448: line %d: %w", n, err)
		}
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("rfc8448: line %d: duplicate key %q", n, key)
		}
		out[key] = val
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("rfc8448: line %d: %w", n+1, err)
	}
	return out, nil
}

func parseLine(line string) (key string, val []byte, err error) {
	if line[0] != '[' {
		return "", nil, errors.New(`want "[section] label = hex"`)
	}
	end := strings.IndexByte(line, ']')
	if end < 0 {
		return "", nil, errors.New("unterminated section")
	}
	sect := line[1:end]
	if sect == "" || strings.Trim(sect, "0123456789") != "" {
		return "", nil, fmt.Errorf("section %q is not a number", sect)
	}
	label, hexval, ok := strings.Cut(line[end+1:], "=")
	if !ok {
		return "", nil, errors.New(`missing "="`)
	}
	label = strings.TrimSpace(label)
	if label == "" || strings.ContainsAny(label, " \t/") {
		return "", nil, fmt.Errorf("bad label %q", label)
	}
	hexval = strings.TrimSpace(hexval)
	val, err = hex.DecodeString(hexval)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", label, err)
	}
	if len(val) == 0 {
		return "", nil, fmt.Errorf("%s: empty value", label)
	}
	return sect + "/" + label, val, nil
}

var (
	loadOnce sync.Once
	loaded   map[string][]byte
	loadErr  error
)

// Must returns a copy of the value stored under key ("3/client.hello"),
// failing the test if the file cannot be loaded or has no such key.
func Must(t testing.TB, key string) []byte {
	t.Helper()
	loadOnce.Do(func() { loaded, loadErr = Load() })
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	v, ok := loaded[key]
	if !ok {
		t.Fatalf("rfc8448: no value %q", key)
	}
	return bytes.Clone(v)
}
