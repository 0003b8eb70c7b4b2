package turbo

import "io"

// ReadClientHelloForFuzz exposes the client proxy's first-flight reader
// to the external fuzz target.
func ReadClientHelloForFuzz(r io.Reader) ([]byte, error) { return readClientHello(r) }

// ReadLink exposes the link record reader to the external tests.
var ReadLink = readLink

// AbortedFlight exposes the abort test on a refused flight.
var AbortedFlight = abortedFlight
