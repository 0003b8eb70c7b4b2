//go:build !amd64 || purego

package mlkem768

// fast is nil: this build has only crypto/mlkem.
var fast impl
