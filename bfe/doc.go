// Package bfe is the Bloom filter encryption KEM of Derler, Jager, Slamanig
// and Striecks (EUROCRYPT 2018) over BLS12-381: a key that can be punctured
// on each ciphertext it decapsulates.
package bfe
