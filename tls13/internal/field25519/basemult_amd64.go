//go:build amd64 && gc && !purego

package field25519

// baseAddStep is one addition of ScalarBaseMult: the generated baseAdd
// (lookup and addition in one call) on BMI2/ADX, else the Go code.
func baseAddStep(s *baseState, row *[8][3][4]uint64, abs, neg uint64) {
	if useADX {
		baseAdd((*[bStateLen][4]uint64)(s), row, abs, neg)
		return
	}
	baseAddGeneric(s, row, abs, neg)
}
