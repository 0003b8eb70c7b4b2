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
// notBefore until expires. One Lua script (EVALSHA), atomic in Redis,
// reads a marker key (Prefix+"marker") recording since when Redis's
// memory is complete and the Redis process it holds for (its run_id), and
// then stores the entry with SET NX PX. The marker is missing after
// FLUSHALL, FLUSHDB or a restart without persistence; it names another
// run_id after a restart (even one that reloaded an older snapshot, which
// lacks recent entries but may have the marker) and after a failover to
// a replica. In both cases the script takes it as a loss of data: it
// refuses, and the server that found the loss sets the marker to a
// reading of its clock taken after Redis recorded the loss ("since").
// From then on a ClientHello is refused with an error wrapping
// tls13.ErrRegisterTooYoung when notBefore < since + MaxClockSkew: it
// might have been accepted before the loss. Nothing else is refused, so a
// fleet server that restarts while Redis keeps its data needs no quiet
// period, and after a loss early data comes back once ClientHellos made
// after it arrive (about one freshness window W plus MaxClockSkew).
//
// An entry lives for expires - now + MaxClockSkew (PX, relative), so an
// entry made by a server whose clock runs ahead still exists when a
// server whose clock is right receives the replay at its last acceptable
// moment. Expiry is relative on purpose: an absolute PXAT, whether from
// the server's clock or from Redis TIME plus the same duration, adds
// nothing (Redis turns PX into an absolute time on its own clock
// anyway), while PXAT from the server's clock would also make Redis's
// clock one of those that must agree.
//
// # Guarantees
//
// Provided the operator's duties below hold, a ClientHello for which any
// server using this register returned fresh=true is answered fresh=false
// (a replay, or an error) by every server using it, at least until its
// expires + MaxClockSkew as read on Redis's clock: whatever happened to Redis's data in between
// (flush, restart, restore from a snapshot, failover), and however the
// servers' clocks differ within MaxClockSkew. The register fails closed:
// when Redis is unreachable, slow (past Options.Timeout), misconfigured
// (an evicting maxmemory-policy, an error reply) or answers oddly,
// CheckAndInsert returns (false, err) and the TLS server rejects early
// data but completes the handshake.
//
// Not covered: keys deleted one by one (DEL, UNLINK), a Redis whose clock
// steps forward (it expires entries by its own wall clock), evictions
// within PolicyCheckInterval of switching to an evicting policy at
// runtime, DEBUG RELOAD of an older snapshot (same run_id), Redis Cluster
// (the script touches two keys), and proxies that hide a backend restart
// are not; connect to one Redis primary directly.
//
// # Operator's duties
//
//   - maxmemory-policy noeviction (Redis's default): with any other policy
//     every CheckAndInsert fails with ErrEvictionPolicy. The register
//     reads the policy with CONFIG GET, or INFO memory where CONFIG is
//     renamed or denied, on first use and every PolicyCheckInterval.
//     With noeviction a full Redis refuses writes, which fails closed.
//   - Clocks of all fleet servers within MaxClockSkew of each other (NTP),
//     and Redis's host clock slewed, never stepped.
//   - Persistence is optional: a restart that loses data, or reloads an
//     older snapshot, costs early data for about W + MaxClockSkew, not
//     safety. A fleet with one Redis per site must not spread one set of
//     keys over several Redis servers.
//   - The user needs EVAL/EVALSHA, GET, SET and INFO, plus CONFIG GET or
//     INFO memory; scripts must be allowed (Redis 5 or later).
//
// The client speaks RESP2 itself over net.Conn (no Redis module) and keeps
// a few idle connections; it is safe for concurrent use.
package redisreg
