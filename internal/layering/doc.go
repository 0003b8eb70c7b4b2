// Package layering holds no code: its test (layering_test.go) is the
// import rule of docs/architecture.md, checked. Every package of the
// module is named there with the packages of the module it may import
// from its non-test files, so a package that reaches up a layer (tls13
// importing dial or DNS, the product importing test scaffolding or the
// testbed) fails the test, and a new package fails it until it is given
// a place in the table.
//
// Its second test (examples_test.go) holds the examples to what a user
// can copy: each Example of the module, made a main package in a module
// outside the repository, must build there, importing no internal
// package.
package layering
