// Package dnsname canonicalises and compares domain names as DNS does:
// ASCII letters without regard to case (RFC 4343), every other byte as
// it is.
//
// strings.ToLower, strings.EqualFold and miekg/dns's CanonicalName read
// a name as UTF-8 and turn every byte that is not UTF-8 into U+FFFD:
// two names that differ only in such bytes then compare equal (one
// cache key for both), and a 63-byte label grows past the limit, so the
// answer that carries it no longer packs.
package dnsname

import (
	"strconv"
	"strings"
)

// Canonical returns name fully qualified (a trailing dot) with ASCII
// letters in lower case; every other byte is kept.
func Canonical(name string) string {
	if !strings.HasSuffix(name, ".") {
		name += "."
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; 'A' <= c && c <= 'Z' {
			b := []byte(name)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return name
}

// Equal reports whether a and b are the same name up to the case of
// ASCII letters (a trailing dot counts: use Canonical for both to
// ignore it).
func Equal(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// HTTPSOwner returns the owner name of the HTTPS record of host's
// service on port (RFC 9460, Section 9.1): host itself for port 443,
// else "_PORT._https.host", canonical as Canonical makes it.
func HTTPSOwner(host string, port int) string {
	if port == 443 {
		return Canonical(host)
	}
	return "_" + strconv.Itoa(port) + "._https." + Canonical(host)
}
