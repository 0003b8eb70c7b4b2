package zdata

import "errors"

// ServingLockFile is the file ClaimServing locks in a Z-data directory.
const ServingLockFile = "serving.lock"

// ErrDirServed is ClaimServing's error when another live process serves
// the directory.
var ErrDirServed = errors.New("zdata: another server already serves this Z-data directory")

// Fleet reports whether other servers may hold this directory's keys by
// construction: a fleet seed derives the same keys on every member.
func (d *Dir) Fleet() bool { return d.Service.Seed != nil }
