//go:build amd64 && gc && !purego

package field25519

import "golang.org/x/sys/cpu"

// useADX selects the generated assembly; tests turn it off to run the Go
// code on the same machine.
var useADX = cpu.X86.HasBMI2 && cpu.X86.HasADX

func mul(out, a, b *[4]uint64) {
	if useADX {
		feMul(out, a, b)
		return
	}
	mulGeneric(out, a, b)
}

func square(out, a *[4]uint64) {
	if useADX {
		feSquare(out, a)
		return
	}
	mulGeneric(out, a, a)
}

func add(out, a, b *[4]uint64) {
	if useADX {
		feAdd(out, a, b)
		return
	}
	addGeneric(out, a, b)
}

func sub(out, a, b *[4]uint64) {
	if useADX {
		feSub(out, a, b)
		return
	}
	subGeneric(out, a, b)
}

func mul121666(out, a *[4]uint64) {
	if useADX {
		feMul121666(out, a)
		return
	}
	mul121666Generic(out, a)
}

func cswap(a, b *[4]uint64, swap uint64) {
	if useADX {
		feCSwap(a, b, swap)
		return
	}
	cswapGeneric(a, b, swap)
}

func step(s *ladderState, swap uint64) {
	if useADX {
		ladderStep((*[stateLen][4]uint64)(s), swap)
		return
	}
	stepGeneric(s, swap)
}
