package redisreg

import (
	"errors"
	"net"
	"strconv"
	"testing"
	"time"
)

// Ready sorts what would refuse early data by what the operator must do,
// against real Redis servers: nothing, a wrong password (ErrAuth), an
// evicting policy (ErrEvictionPolicy), or an unreachable Redis.
func TestReady(t *testing.T) {
	ok := startRedis(t, 0)
	evicting := startRedis(t, 0, "--maxmemory-policy", "allkeys-lru")
	locked := startRedis(t, 0, "--requirepass", "right")
	for _, tc := range []struct {
		name     string
		opts     Options
		wantErr  bool
		sentinel error
	}{
		{"noeviction", Options{Addr: ok.addr}, false, nil},
		{"evicting", Options{Addr: evicting.addr}, true, ErrEvictionPolicy},
		{"wrong password", Options{Addr: locked.addr, Password: "wrong"}, true, ErrAuth},
		{"no password", Options{Addr: locked.addr}, true, ErrAuth},
		{"right password", Options{Addr: locked.addr, Password: "right"}, false, nil},
		{"down", Options{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))}, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Timeout = 2 * time.Second
			r, err := New(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			err = r.Ready()
			if (err != nil) != tc.wantErr || (tc.sentinel != nil && !errors.Is(err, tc.sentinel)) {
				t.Fatalf("Ready() = %v, want error %v (%v)", err, tc.wantErr, tc.sentinel)
			}
			if tc.name == "down" && (errors.Is(err, ErrAuth) || errors.Is(err, ErrEvictionPolicy)) {
				t.Fatalf("Ready() = %v: an unreachable Redis is neither a login nor a policy problem", err)
			}
		})
	}
}
