package netem

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// OpenTUN creates a TUN device called name in the calling thread's network
// namespace and returns its descriptor as a file. The device carries bare
// IPv4/IPv6 packets (IFF_NO_PI); configure its address and bring it up
// with ip(8). Call it on a thread locked into the target namespace: the
// returned file keeps working from any namespace afterwards.
func OpenTUN(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("netem: open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netem: TUN name %q: %w", name, err)
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netem: TUNSETIFF %s: %w", name, err)
	}
	return os.NewFile(uintptr(fd), "/dev/net/tun:"+name), nil
}
