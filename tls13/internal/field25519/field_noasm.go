//go:build !amd64 || !gc || purego

package field25519

// useADX is false: there is no assembly for this build.
const useADX = false

func mul(out, a, b *[4]uint64)           { mulGeneric(out, a, b) }
func square(out, a *[4]uint64)           { mulGeneric(out, a, a) }
func add(out, a, b *[4]uint64)           { addGeneric(out, a, b) }
func sub(out, a, b *[4]uint64)           { subGeneric(out, a, b) }
func mul121666(out, a *[4]uint64)        { mul121666Generic(out, a) }
func cswap(a, b *[4]uint64, swap uint64) { cswapGeneric(a, b, swap) }
func step(s *ladderState, swap uint64)   { stepGeneric(s, swap) }
