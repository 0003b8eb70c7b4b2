// Package turbohook reaches into package turbo where no user should: the
// testbed's throughput measurement runs a TurboTLS server's UDP flights
// on the worker pool that serves its TCP connections. Package turbo
// installs the setter here when it is initialised, so that turbo.Config
// carries only what users set.
package turbohook

import "context"

// Exec runs work, the computation of one UDP flight, on a server's
// behalf. It either calls work exactly once and returns nil after work
// returned, or returns an error without calling it (ctx ended first, the
// pool is closed); the flight then fails like one that Config.Flight
// refused, and no datagram answers it. It is called from several
// goroutines at the same time.
type Exec func(ctx context.Context, work func()) error

// SetExec makes the server built from cfg, a *turbo.Config, run each
// flight through exec (nil: in the flight's own goroutine, at once).
// Package turbo sets it; it panics when cfg is not a *turbo.Config.
var SetExec func(cfg any, exec Exec)
