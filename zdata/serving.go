package zdata

import "errors"

// ServingLockFile is the file ClaimServing (exclusive) and ShareServing
// (shared) lock in a Z-data directory.
const ServingLockFile = "serving.lock"

// StrikeStateFile is where ServeAlone keeps the strike register between
// two runs of the server that claims the directory.
const StrikeStateFile = "strike.state"

// ErrDirServed is the error of ClaimServing and ShareServing when a live
// process serves the directory in a way that excludes the caller's: a
// server with a private strike register excludes every other server.
var ErrDirServed = errors.New("zdata: another server already serves this Z-data directory")

// Fleet reports whether other servers may hold this directory's keys by
// construction: a fleet seed derives the same keys on every member.
func (d *Dir) Fleet() bool { return d.Service.Seed != nil }
