package turbo

import "io"

// ReadClientHelloForFuzz exposes the client proxy's first-flight reader
// to the external fuzz target.
func ReadClientHelloForFuzz(r io.Reader) ([]byte, error) { return readClientHello(r) }
