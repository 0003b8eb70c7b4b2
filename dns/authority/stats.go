package authority

import "sync/atomic"

// Stats counts what a Server did under load and abuse. The counters only
// grow, from the server's start; read them with Server.Stats.
type Stats struct {
	// UDP traffic: queries read and answers sent, and their bytes.
	UDPQueries, UDPBytesIn    uint64
	UDPResponses, UDPBytesOut uint64
	// RRLDropped answers were not sent; RRLSlipped were sent as empty
	// TC=1 replies; RRLTableFull answers found no room in the rate table
	// and were sent as empty TC=1 replies too.
	RRLDropped, RRLSlipped, RRLTableFull uint64
	// AmplificationTruncated UDP answers were cut to MaxUDPAmplification
	// times the query's size (TC=1) because the client had no valid
	// server cookie.
	AmplificationTruncated uint64
	// Cookies: queries with a valid server cookie, with only a client
	// cookie or an invalid server cookie (a fresh one was sent), and
	// with a malformed COOKIE option (FORMERR).
	CookiesValid, CookiesIssued, CookiesMalformed uint64
	// Stream connections: accepted, refused for their address, their
	// network or a full table of busy connections, closed to make room
	// for a newcomer, and closed for sending no query in
	// FirstQueryTimeout.
	ConnsAccepted                                          uint64
	ConnsRefusedAddr, ConnsRefusedPrefix, ConnsRefusedFull uint64
	ConnsEvicted, ConnsFirstQueryTimeout                   uint64
	// CacheHits counts answers sent from the answer cache
	// (Server.AnswerCacheSize), on every transport.
	CacheHits uint64
	// ConnsOpen is the number of stream connections open now.
	ConnsOpen int
}

// counters are the live Stats, updated atomically.
type counters struct {
	udpQueries, udpBytesIn, udpResponses, udpBytesOut atomic.Uint64
	rrlDropped, rrlSlipped                            atomic.Uint64
	amplificationTruncated                            atomic.Uint64
	cookiesValid, cookiesIssued, cookiesMalformed     atomic.Uint64
	connsAccepted, connsRefusedAddr                   atomic.Uint64
	connsRefusedPrefix, connsRefusedFull              atomic.Uint64
	connsEvicted, connsFirstQueryTimeout              atomic.Uint64
	cacheHits                                         atomic.Uint64
}

// Stats returns the server's counters. Safe for concurrent use.
func (s *Server) Stats() Stats {
	s.init()
	c := &s.counters
	st := Stats{
		UDPQueries: c.udpQueries.Load(), UDPBytesIn: c.udpBytesIn.Load(),
		UDPResponses: c.udpResponses.Load(), UDPBytesOut: c.udpBytesOut.Load(),
		RRLDropped: c.rrlDropped.Load(), RRLSlipped: c.rrlSlipped.Load(),
		AmplificationTruncated: c.amplificationTruncated.Load(),
		CookiesValid:           c.cookiesValid.Load(), CookiesIssued: c.cookiesIssued.Load(),
		CookiesMalformed: c.cookiesMalformed.Load(),
		ConnsAccepted:    c.connsAccepted.Load(), ConnsRefusedAddr: c.connsRefusedAddr.Load(),
		ConnsRefusedPrefix: c.connsRefusedPrefix.Load(), ConnsRefusedFull: c.connsRefusedFull.Load(),
		ConnsEvicted: c.connsEvicted.Load(), ConnsFirstQueryTimeout: c.connsFirstQueryTimeout.Load(),
		CacheHits: c.cacheHits.Load(),
		ConnsOpen: s.conns.open(),
	}
	if s.rrl != nil {
		s.rrl.mu.Lock()
		st.RRLTableFull = s.rrl.tableFulls
		s.rrl.mu.Unlock()
	}
	return st
}
