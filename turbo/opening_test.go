package turbo

import (
	"net/netip"
	"testing"
)

// testHello is a flight that passes the opening check once padded
// (a handshake record starting a ClientHello).
func testHello(size int) []byte {
	b := make([]byte, size)
	b[0], b[1], b[2] = 22 /* handshake */, 3, 3
	b[3], b[4] = byte((size-5)>>8), byte(size-5)
	b[5] = 1 // client_hello
	b[6], b[7], b[8] = byte((size-9)>>16), byte((size-9)>>8), byte(size-9)
	b[9], b[10] = 3, 3
	return b
}

func TestSourcePrefix(t *testing.T) {
	for _, tt := range []struct{ addr, want string }{
		{"192.0.2.77", "192.0.2.0/24"},
		{"::ffff:192.0.2.77", "192.0.2.0/24"},
		{"2001:db8:aa:bbcc:1::1", "2001:db8:aa:bb00::/56"},
		{"fe80::1%eth0", "fe80::/56"},
		{"127.1.2.3", "127.1.2.0/24"},
	} {
		if got := sourcePrefix(netip.MustParseAddr(tt.addr)); got != netip.MustParsePrefix(tt.want) {
			t.Errorf("sourcePrefix(%s) = %s, want %s", tt.addr, got, tt.want)
		}
	}
}
