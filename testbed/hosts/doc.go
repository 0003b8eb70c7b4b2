// Package hosts builds a small emulated network on one Linux machine: each
// host is a network namespace with a TUN device, and a netem relay joins
// them with links of chosen delay, jitter, loss and rate.
//
//	n, err := hosts.New(hosts.Options{Hosts: []string{"client", "server"}})
//	if err != nil { ... }        // hosts.Available explains missing privileges
//	defer n.Close()              // deletes the namespaces and stops the relay
//	n.SetRTT(n.Host("client"), n.Host("server"), 40*time.Millisecond, 0)
//	ln, _ := n.Host("server").Listen("tcp", ":443")
//	c, _ := n.Host("client").DialContext(ctx, "tcp", n.Host("server").Addr.String()+":443")
//
// Host addresses are 10.77.0.1, 10.77.0.2, … on a /24 that exists only on
// the TUN devices inside these namespaces: nothing leaves them. Sockets made
// through Host (Listen, ListenPacket, DialContext, Do) live in the host's
// namespace, so in-process servers and clients sit behind the emulated
// links; Command runs external programs (openssl) there.
//
// Namespaces are named "ztlsN-<pid>-<n>-<host>". Close deletes them; New
// first removes leftovers of processes that died without closing.
// Creating namespaces needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN),
// /dev/net/tun and ip(8) from iproute2.
package hosts
