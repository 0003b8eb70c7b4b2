//go:build amd64 && gc && !purego

package p256verify

import "golang.org/x/sys/cpu"

// useADX selects the generated assembly; tests turn it off to run the Go
// code on the same machine.
var useADX = cpu.X86.HasBMI2 && cpu.X86.HasADX

func fieldMul(z, x, y *element) {
	if useADX {
		p256Mul(z, x, y)
		return
	}
	mulGeneric(z, x, y)
}

func fieldSqr(z, x *element) {
	if useADX {
		p256Sqr(z, x)
		return
	}
	sqrGeneric(z, x)
}

func ordMul(z, x, y *element) {
	if useADX {
		p256OrdMul(z, x, y)
		return
	}
	ordMulGeneric(z, x, y)
}

// Accelerated reports whether the field arithmetic runs the generated
// MULX/ADCX/ADOX assembly.
func Accelerated() bool { return useADX }
