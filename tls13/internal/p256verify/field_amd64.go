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

func ordSqr(z, x *element) {
	if useADX {
		p256OrdSqr(z, x)
		return
	}
	ordMulGeneric(z, x, x)
}

// double, addMixed and add run the assembly's point formulas, each one call
// with every field operation inlined, on the usual inputs, and the Go code
// (which handles them all) on the infinity and, when the assembly's result
// says a = ±b (its Z3 is 0: H = 0), on that.
func double(q, a *jacobian) {
	if useADX && !isZero(&a[2]) {
		p256PointDouble((*[3][4]uint64)(q), (*[3][4]uint64)(a))
		return
	}
	doubleGeneric(q, a)
}

func addMixed(q, a *jacobian, b *affinePoint) {
	if useADX && !isZero(&a[2]) {
		var r jacobian
		p256PointAddMixed((*[3][4]uint64)(&r), (*[3][4]uint64)(a), (*[2][4]uint64)(b))
		if !isZero(&r[2]) {
			*q = r
			return
		}
	}
	addMixedGeneric(q, a, b)
}

func add(q, a, b *jacobian) {
	if useADX && !isZero(&a[2]) && !isZero(&b[2]) {
		var r jacobian
		p256PointAdd((*[3][4]uint64)(&r), (*[3][4]uint64)(a), (*[3][4]uint64)(b))
		if !isZero(&r[2]) {
			*q = r
			return
		}
	}
	addGeneric(q, a, b)
}

// Accelerated reports whether the field arithmetic runs the generated
// MULX/ADCX/ADOX assembly.
func Accelerated() bool { return useADX }
