// Package redisreg is a ZTLS strike register shared by a fleet, kept in
// Redis (docs/ztls-spec.md, Section 5). Every server holding the same
// Z-data keys (or ticket keys) points a Register at the same Redis, so a
// ClientHello accepted by one of them is refused as a replay by all.
//
//	opts, err := redisreg.ParseURL("rediss://ztls@redis.internal:6380") // or Options{Addr: ...}
//	opts.TLS.RootCAs, opts.Password, opts.MaxClockSkew = redisCA, password, time.Second
//	reg, err := redisreg.New(opts)
//	cfg := &tls13.Config{ZData: keyring, StrikeRegister: reg, EarlyDataWindow: 10 * time.Second}
//
// Redis is one primary (ModeSingle), the primary a set of Sentinels names
// (ModeSentinel, which follows failovers) or a Redis Cluster
// (ModeCluster), reached in plaintext or over TLS (Options.TLS), as an
// ACL user or the default one. The client is go-redis
// (github.com/redis/go-redis/v9).
//
// # How it works
//
// The TLS server calls CheckAndInsert(key, now, notBefore, expires): the
// ClientHello named by key is acceptable, by the server's clock, from
// notBefore until expires. Each call is one Lua script (EVALSHA), atomic
// in Redis, that reads a marker key and then stores the entry with SET NX
// PX. Keys carry one of 16 hash tags ({s0}..{s15}, from the ClientHello's
// key), each tag with its own marker (Prefix+"{sN}marker"), so a script
// touches one Cluster slot. The marker records since when Redis's memory
// is complete ("since") and for which Redis process (its run_id, from
// INFO server, and its master_replid, from INFO replication, read by each
// connection when dialled). It is missing after FLUSHALL, FLUSHDB or a
// restart without persistence, and names another process after any
// restart (also one that reloaded an older snapshot, which lacks recent
// entries but may hold the marker), after a failover to a replica
// (Sentinel, or a Cluster replica taking over its primary's slots), after
// a failover and back (a new replid), and on the node a Cluster slot
// migrated to. Either way the script takes
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
// Redis is a loss like any other. A loss found under one tag is recorded
// at once under every tag that lost its memory too (a sweep), so one loss
// costs early data once, not once per tag.
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
// RDB or AOF file, Sentinel failovers (and back) and Cluster failovers,
// Cluster slot migrations (refused while in progress: TRYAGAIN, ASK),
// and clock differences between servers up to MaxClockSkew. The tests
// try each attack, with the same assertions, on each mode against real
// servers on loopback: a plaintext primary, one over mutual TLS, a
// Sentinel-managed primary and a Cluster of three primaries with
// replicas (TestModes; the failovers and migrations: TestSentinelFailover,
// TestClusterFailover). The register fails closed: when Redis is unreachable,
// slow (past Options.Timeout), answers an error or oddly, or runs with an
// evicting maxmemory-policy, CheckAndInsert returns (false, err) and the
// TLS server rejects early data but completes the handshake.
//
// Not covered: entries deleted one by one (DEL, UNLINK) or a marker
// rewritten by hand; evictions in the PolicyCheckInterval after the
// policy is switched at runtime; DEBUG RELOAD of an older file (same
// process); a Redis whose clock steps forward (it expires entries by its
// own wall clock); a proxy that hides a backend restart; a failover and
// back within one second in which no call was made (a pooled connection
// idle for less than a second is reused without reading the id again);
// a split brain: an old primary cut off from the Sentinels that keeps
// taking writes after its replica was promoted (bound it with
// min-replicas-to-write and min-replicas-max-lag below W +
// MaxClockSkew).
//
// # Operator's duties
//
//   - TLS (Options.TLS, rediss:// URLs) on any network the operator does
//     not own: without it the password and every answer travel in the
//     clear, and whoever is on the path can answer "fresh" for a replay.
//   - A Redis user that may run only what is listed below, on the
//     register's keys; no other client deletes or rewrites them (see "Not
//     covered").
//   - maxmemory-policy noeviction (Redis's default). Any other policy
//     may drop entries (volatile-* ones drop exactly the keys with an
//     expiry, which all entries have); then every CheckAndInsert fails
//     with ErrEvictionPolicy. The register reads the policy with CONFIG
//     GET, or INFO memory where CONFIG is renamed or denied, on first use
//     and every PolicyCheckInterval (on every Cluster node). A full
//     noeviction Redis refuses writes, which fails closed: size maxmemory
//     for peak accepted handshakes per second times (2W + MaxClockSkew).
//   - Clocks of all fleet servers within MaxClockSkew of each other (NTP),
//     and Redis's host clock slewed, not stepped.
//   - Persistence is optional: a restart that loses data costs early data
//     for about W + MaxClockSkew, not safety.
//   - All servers holding the same keys use the same Redis and Prefix,
//     and the same key layout: a register from before the hash tags
//     (issue 28) does not see this one's entries, nor this one its.
//   - The Redis user may run EVAL, EVALSHA, GET, SET, SETBIT, PEXPIRE,
//     INFO, CONFIG GET (or INFO memory) and PING; Redis 5 or later (7 for
//     the tests' TLS and Cluster setups). A user without EVAL gets
//     ErrScriptDenied.
//
// Calls share pooled connections (go-redis Conn, one per call at a time);
// the register is safe for concurrent use.
package redisreg
