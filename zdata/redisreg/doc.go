// Package redisreg is a ZTLS strike register shared by a fleet, kept in
// Redis (docs/ztls-spec.md, Section 5). Every server holding the same
// Z-data keys (or ticket keys) points a Register at the same Redis, so a
// ClientHello accepted by one of them is refused as a replay by all.
//
//	reg, err := redisreg.New(redisreg.Options{Addr: "10.0.0.5:6379", MaxClockSkew: time.Second})
//	cfg := &tls13.Config{ZData: keyring, StrikeRegister: reg, EarlyDataWindow: 10 * time.Second}
//
// # How it works
//
// The TLS server calls CheckAndInsert(key, now, notBefore, expires): the
// ClientHello named by key is acceptable, by the server's clock, from
// notBefore until expires. Each call is one Lua script (EVALSHA), atomic
// in Redis, that reads a marker key (Prefix+"marker") and then stores the
// entry with SET NX PX. The marker records since when Redis's memory is
// complete ("since") and for which Redis process (its run_id, from INFO
// server). It is missing after FLUSHALL, FLUSHDB or a restart without
// persistence, and names another run_id after any restart (also one that
// reloaded an older snapshot, which lacks recent entries but may hold the
// marker) and after a failover to a replica. Either way the script takes
// it as a loss of data: it refuses, and the server that found the loss
// sets "since" to a reading of its clock (Options.Now) taken after Redis
// recorded the loss. From then on a ClientHello is refused, with an error
// wrapping tls13.ErrRegisterTooYoung, when
//
//	notBefore < since + MaxClockSkew
//
// because it may have been accepted before the loss. Nothing else is
// refused: a fleet server that restarts while Redis keeps its data needs
// no quiet period, and after a loss early data returns as soon as
// ClientHellos made after it arrive (about W + MaxClockSkew later). A new
// Redis is a loss like any other.
//
// An entry lives for expires - now + MaxClockSkew (PX, relative), so an
// entry made by a server whose clock runs ahead still exists when a
// server whose clock is right receives the replay at its last acceptable
// moment. Expiry is relative on purpose: PXAT from Redis TIME plus the
// same duration is what Redis does with PX anyway, and PXAT from the
// server's clock would add Redis's clock to those that must agree.
//
// # Guarantees
//
// Assume the operator's duties below hold and the caller passes
// notBefore <= now <= expires, with notBefore and expires derived from
// the ClientHello alone (as package tls13 does, given one EarlyDataWindow
// across the fleet). Once CheckAndInsert returned fresh=true for a key
// on any server using the register, every later call for that key on
// any of them with now before expires returns fresh=false: as a replay
// (nil error) or with an error. This holds across FLUSHALL, FLUSHDB,
// Redis restarts with or without persistence, restarts from an older
// RDB or AOF file, failovers, and clock differences between servers up
// to MaxClockSkew. The register fails closed: when Redis is unreachable,
// slow (past Options.Timeout), answers an error or oddly, or runs with an
// evicting maxmemory-policy, CheckAndInsert returns (false, err) and the
// TLS server rejects early data but completes the handshake.
//
// Not covered: entries deleted one by one (DEL, UNLINK) or a marker
// rewritten by hand; evictions in the PolicyCheckInterval after the
// policy is switched at runtime; DEBUG RELOAD of an older file (same
// run_id); a Redis whose clock steps forward (it expires entries by its
// own wall clock); a proxy that hides a backend restart. Redis Cluster
// is not supported (the script touches two keys); use one primary,
// directly.
//
// # Operator's duties
//
//   - Redis on a trusted network (loopback, or one only the fleet
//     reaches) or behind a tunnel: the client speaks plaintext RESP and
//     has no TLS, so the password and every answer travel in the clear,
//     and whoever is on the path can answer "fresh" for a replay.
//   - A password, and a Redis user that may run only what is listed
//     below, on the register's keys; no other client deletes or rewrites
//     them (see "Not covered").
//   - maxmemory-policy noeviction (Redis's default). Any other policy
//     may drop entries (volatile-* ones drop exactly the keys with an
//     expiry, which all entries have); then every CheckAndInsert fails
//     with ErrEvictionPolicy. The register reads the policy with CONFIG
//     GET, or INFO memory where CONFIG is renamed or denied, on first use
//     and every PolicyCheckInterval. A full noeviction Redis refuses
//     writes, which fails closed: size maxmemory for peak accepted
//     handshakes per second times (2W + MaxClockSkew).
//   - Clocks of all fleet servers within MaxClockSkew of each other (NTP),
//     and Redis's host clock slewed, not stepped.
//   - Persistence is optional: a restart that loses data costs early data
//     for about W + MaxClockSkew, not safety.
//   - All servers holding the same keys use the same Redis and Prefix.
//   - The Redis user may run EVAL, EVALSHA, GET, SET, INFO and CONFIG GET
//     (or INFO memory); Redis 5 or later.
//
// The client speaks RESP2 itself over net.Conn (no Redis module) and keeps
// a few idle connections; it is safe for concurrent use.
package redisreg
