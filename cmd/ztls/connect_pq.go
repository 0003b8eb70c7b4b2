package main

import "github.com/spf13/pflag"

// registerPQ adds --pq, the post-quantum policy of connect and get
// (dial.Options.PostQuantum; docs/ztls-spec.md, Section 9.6).
func (f *connectFlags) registerPQ(fs *pflag.FlagSet) {
	fs.StringVar(&f.pq, "pq", "prefer", "post-quantum policy for early data: prefer (a v3 record when valid; classical Z-data only from a service that does not announce v3 records and was not seen with one in 24 h), only (never classical early data) or classical (opt in to classical early data even where the service publishes v3 records: the report says it was forced); the report says whether the early data was post-quantum")
}
