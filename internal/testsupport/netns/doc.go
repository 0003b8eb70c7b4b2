// Package netns starts programs in, and dials from inside, a network
// namespace of their own, for tests that run a peer there (a server that
// binds every address, such as gnutls-serv or openssl ocsp, so it cannot
// take a free loopback port beside others).
package netns
