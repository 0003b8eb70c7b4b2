// Package redisreg is a ZTLS strike register shared by a fleet, kept in
// Redis (ZTLS-SPEC.md, Section 5). Each accepted early-data ClientHello's
// transcript hash is stored with SET key 1 NX PX ttl, so a ClientHello
// replayed to any server using the same Redis is refused.
//
// It fails closed: when Redis is unreachable, slow (past Options.Timeout)
// or answers oddly, CheckAndInsert returns an error and the TLS server
// rejects early data while still completing the handshake. For one
// window W after the register is created, and after it finds that Redis
// lost its data (a restart without persistence, a flush), it refuses
// everything with ErrStartupWindow, because ClientHellos accepted before
// may be missing from the register.
//
//	reg, err := redisreg.New(redisreg.Options{Addr: "127.0.0.1:6379", Window: 10 * time.Second})
//	cfg := &tls13.Config{ZData: keyring, StrikeRegister: reg, EarlyDataWindow: 10 * time.Second}
//
// The client speaks RESP2 itself over net.Conn (no Redis module) and keeps
// a few idle connections; it is safe for concurrent use. Run Redis with a
// noeviction memory policy so entries are not dropped under pressure.
package redisreg
