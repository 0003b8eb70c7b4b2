// Package netem is a userspace WAN link emulator for hosts that live in
// network namespaces on one machine.
//
// The kernel on the project's machines has no netem qdisc, so the delay is
// added in userspace: every host gets a TUN device, and one relay reads the
// IPv4 packets each host sends, looks up the destination host and writes the
// packet to that host's TUN when its due time comes. Real kernel TCP and UDP,
// SYN and SYN-ACK included, therefore pay the configured one-way delay.
//
// Each direction between two ports is a Link with a one-way Delay, a Jitter
// (uniform in ±Jitter, never reordering packets), a random Loss and an
// optional Rate. The relay runs as a child process (the running binary
// re-executed, see StartRelay) with a single event loop on one locked,
// real-time OS thread: epoll_pwait2 with a nanosecond timeout wakes it shortly
// before the next due time (the lead is learned from how late the kernel
// wakes it up) and it spins for the rest; packet buffers are reused, so the
// loop makes no garbage.
//
// Typical use goes through package testbed/hosts, which creates namespaces
// and TUN devices and hands them to StartRelay:
//
//	r, err := netem.StartRelay([]netem.Port{{File: tunA, Addr: a}, {File: tunB, Addr: b}}, netem.Options{})
//	defer r.Close()
//	r.SetLink(0, 1, netem.Link{Delay: 20 * time.Millisecond})
//	r.SetLink(1, 0, netem.Link{Delay: 20 * time.Millisecond})
//
// StartRelay runs the calling executable again as the relay, with
// RelayRole's name as its first argument: the program must dispatch that
// role (cmd/ztls-bench has it as a hidden subcommand; a test binary calls
// child.Dispatch(netem.RelayRole) in its TestMain).
package netem
