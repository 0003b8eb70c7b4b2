//go:build !(linux || freebsd || darwin || netbsd || openbsd || dragonfly)

package authority

import "errors"

const reusePortSupported = false

func reusePort(uintptr) error { return errors.New("authority: SO_REUSEPORT is not supported here") }
