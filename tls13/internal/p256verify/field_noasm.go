//go:build !amd64 || !gc || purego

package p256verify

// Without the amd64 assembly the field is the Go code.

func fieldMul(z, x, y *element) { mulGeneric(z, x, y) }
func fieldSqr(z, x *element)    { sqrGeneric(z, x) }
func ordMul(z, x, y *element)   { ordMulGeneric(z, x, y) }
func ordSqr(z, x *element)      { ordMulGeneric(z, x, x) }

// Accelerated reports whether the field arithmetic runs the generated
// MULX/ADCX/ADOX assembly.
func Accelerated() bool { return false }

func double(q, a *jacobian)                   { doubleGeneric(q, a) }
func addMixed(q, a *jacobian, b *affinePoint) { addMixedGeneric(q, a, b) }
func add(q, a, b *jacobian)                   { addGeneric(q, a, b) }
