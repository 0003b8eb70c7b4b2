//go:build linux || freebsd || darwin || netbsd || openbsd || dragonfly

package authority

import "golang.org/x/sys/unix"

const reusePortSupported = true

func reusePort(fd uintptr) error {
	return unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
}
