// Package rfc8448 loads the RFC 8448 example handshake traces (TLS 1.3
// known-answer values) from tls13/testdata/rfc8448.txt for tests.
//
// The file holds one value per line, "[section] label = hex"; lines starting
// with '#' and blank lines are comments. Values are keyed "section/label":
//
//	v, err := rfc8448.Load()
//	ch := v["3/client.hello"]
//
// or, inside a test, failing the test when the value is missing:
//
//	ch := rfc8448.Must(t, "3/client.hello")
//
// Must returns a fresh copy on every call, so tests may decrypt or modify the
// bytes in place.
package rfc8448
