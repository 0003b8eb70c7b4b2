// Package dnsburden estimates how much DNS traffic ZTLS adds between a stub
// resolver and its recursive resolver, by simulating a stub cache over a
// trace of visits.
//
// The ZTLS paper (Lim et al., WWW 2023) reports 16.7 % more stub↔resolver
// packets when A records live 5 minutes and Z-data 60 minutes. Each visit
// needs a set of records; a record missing from the stub's cache (or
// expired) costs one query and one response. Simulate counts them:
//
//	trace := dnsburden.Periodic("example.com", 10*time.Second, 10*time.Hour)
//	base := dnsburden.Simulate(trace, dnsburden.PaperBase)
//	with := dnsburden.Simulate(trace, dnsburden.PaperZTLS)
//	fmt.Printf("+%.1f %%\n", dnsburden.Increase(base, with))
//
// Traces can be read from text (ParseTrace: "seconds name" per line) or
// generated (Synthetic: Zipf-popular names, Poisson visits).
//
// Compare runs the table of docs/testbed.md over a trace: each Comparison
// is a client's questions with ZTLS against the same client's without it,
// for Z-data through TXT (Section 1 of docs/ztls-spec.md) and through the
// HTTPS record (Section 8). A browser asks A, AAAA and HTTPS anyway, so
// Z-data in the HTTPS record with a leaf it already holds adds no question
// at all; a client that did not ask for the HTTPS record pays it.
package dnsburden
