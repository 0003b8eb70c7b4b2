// Package netns dials from inside another network namespace, for tests
// that start a peer in a namespace of its own (a server that binds every
// address, such as gnutls-serv or openssl ocsp, so it cannot take a free
// loopback port beside others).
package netns
