//go:build !amd64 || !gc || purego

package field25519

// baseAddStep is one addition of ScalarBaseMult, in Go on this build.
func baseAddStep(s *baseState, row *[8][3][4]uint64, abs, neg uint64) {
	baseAddGeneric(s, row, abs, neg)
}
