// Package layering holds no code, only tests of the module's shape. The
// first (layering_test.go) is the
// import rule of docs/architecture.md, checked. Every package of the
// module is named there with the packages of the module it may import
// from its non-test files, so a package that reaches up a layer (tls13
// importing dial or DNS, the product importing test scaffolding or the
// testbed) fails the test, and a new package fails it until it is given
// a place in the table.
//
// The second (size_test.go) keeps the functions on a connection's path
// (dial, prevalidate, turbo, tls13, dns/resolver) under 80 lines and 6
// parameters. The third (examples_test.go) holds the examples to what a user
// can copy: each Example of the module, made a main package in a module
// outside the repository, must build there, importing no internal
// package.
package layering
