package redisreg

import (
	"strings"
	"testing"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want Options
		tls  bool
	}{
		{raw: "redis://127.0.0.1:6379", want: Options{Mode: ModeSingle, Addr: "127.0.0.1:6379"}},
		{raw: "redis://:p%40ss@h:1/3", want: Options{Mode: ModeSingle, Addr: "h:1", Password: "p@ss", DB: 3}},
		{raw: "rediss://ztls:pw@[::1]:6380", want: Options{Mode: ModeSingle, Addr: "[::1]:6380", Username: "ztls", Password: "pw"}, tls: true},
		{raw: "redis-sentinel://ztls@a:26379,b:26379/fleet", want: Options{Mode: ModeSentinel, Addrs: []string{"a:26379", "b:26379"}, MasterName: "fleet", Username: "ztls"}},
		{raw: "rediss-sentinel://a:1/m/2", want: Options{Mode: ModeSentinel, Addrs: []string{"a:1"}, MasterName: "m", DB: 2}, tls: true},
		{raw: "redis-cluster://u:p@a:7000,b:7001,c:7002", want: Options{Mode: ModeCluster, Addrs: []string{"a:7000", "b:7001", "c:7002"}, Username: "u", Password: "p"}},
	} {
		got, err := ParseURL(tc.raw)
		if err != nil {
			t.Errorf("%s: %v", tc.raw, err)
			continue
		}
		if (got.TLS != nil) != tc.tls {
			t.Errorf("%s: TLS %v", tc.raw, got.TLS != nil)
		}
		got.TLS = nil
		if got.Mode != tc.want.Mode || got.Addr != tc.want.Addr || strings.Join(got.Addrs, " ") != strings.Join(tc.want.Addrs, " ") ||
			got.MasterName != tc.want.MasterName || got.Username != tc.want.Username || got.Password != tc.want.Password || got.DB != tc.want.DB {
			t.Errorf("%s: %+v, want %+v", tc.raw, got, tc.want)
		}
	}
	const secret = "Kq9f3"
	for _, raw := range []string{
		"127.0.0.1:6379", "http://:Kq9f3@h:1", "redis://:Kq9f3@", "redis://:Kq9f3@h", "redis://:Kq9f3@h:1,g:2",
		"redis://:Kq9f3/x@h:1", "redis://:Kq9f3@h:1/x", "redis-sentinel://:Kq9f3@h:1", "redis-cluster://:Kq9f3@h:1/0",
		"redis://:Kq9f3@h:99999", "redis://:Kq9f3?@h:1", "redis://:Kq9f3@[::1",
	} {
		_, err := ParseURL(raw)
		if err == nil {
			t.Errorf("%s: accepted", raw)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: the error shows the password: %v", raw, err)
		}
	}
}
