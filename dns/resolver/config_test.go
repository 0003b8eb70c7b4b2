package resolver

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseResolvConf(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		servers   []string
		transport Transport
		timeout   time.Duration
		wantErr   string
	}{
		{
			name:      "servers and comments",
			in:        "# comment\nsearch example.com\nnameserver 192.0.2.1 ; trailing\nnameserver 2001:db8::53\n",
			servers:   []string{"192.0.2.1:53", "[2001:db8::53]:53"},
			transport: UDP,
			timeout:   10 * time.Second,
		},
		{
			name:      "options",
			in:        "nameserver 127.0.0.53\noptions edns0 timeout:1 attempts:3 use-vc trust-ad",
			servers:   []string{"127.0.0.53:53"},
			transport: TCP,
			timeout:   3 * time.Second,
		},
		{
			name:      "empty falls back to the local host",
			in:        "",
			servers:   []string{"127.0.0.1:53", "[::1]:53"},
			transport: UDP,
			timeout:   10 * time.Second,
		},
		{name: "bad address", in: "nameserver dns.example\n", wantErr: "line 1: bad nameserver"},
		{name: "missing address", in: "\nnameserver\n", wantErr: "line 2: nameserver without address"},
		{name: "bad timeout", in: "options timeout:x", wantErr: "bad option"},
		{name: "huge attempts", in: "options attempts:99999", wantErr: "bad option"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseResolvConf([]byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.HasPrefix(err.Error(), "resolver: ") {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cfg.Servers, tc.servers) || cfg.Transport != tc.transport || cfg.Timeout != tc.timeout {
				t.Fatalf("got %v %v %v, want %v %v %v", cfg.Servers, cfg.Transport, cfg.Timeout, tc.servers, tc.transport, tc.timeout)
			}
		})
	}
}

func TestFromResolvConfFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(path, []byte("nameserver 127.0.0.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := FromResolvConf(path)
	if err != nil || !slices.Equal(cfg.Servers, []string{"127.0.0.1:53"}) {
		t.Fatalf("FromResolvConf = %v, %v", cfg.Servers, err)
	}
	if _, err := FromResolvConf(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("missing file: no error")
	}
}

func TestNormalizeServer(t *testing.T) {
	tests := []struct {
		in   string
		tr   Transport
		want string
		bad  bool
	}{
		{"127.0.0.1", UDP, "127.0.0.1:53", false},
		{"127.0.0.1", TLS, "127.0.0.1:853", false},
		{"::1", TCP, "[::1]:53", false},
		{"[::1]", TLS, "[::1]:853", false},
		{"[::1]:5353", UDP, "[::1]:5353", false},
		{"dns.test", TLS, "dns.test:853", false},
		{"dns.test:8853", TLS, "dns.test:8853", false},
		{"", UDP, "", true},
		{"127.0.0.1:0", UDP, "", true},
		{"127.0.0.1:99999", UDP, "", true},
		{"a b", UDP, "", true},
	}
	for _, tc := range tests {
		got, err := normalizeServer(tc.in, tc.tr)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("normalizeServer(%q, %s) = %q, %v", tc.in, tc.tr, got, err)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{},
		{Servers: []string{"127.0.0.1"}, Transport: "quic"},
		{Servers: []string{"not a server"}},
	} {
		if r, err := New(cfg); err == nil {
			r.Close()
			t.Errorf("New(%+v) accepted", cfg)
		} else if !strings.HasPrefix(err.Error(), "resolver: ") {
			t.Errorf("error without prefix: %v", err)
		}
	}
}

// FuzzResolvConf: any file either parses into a usable Config or returns a
// clear error; never a panic.
func FuzzResolvConf(f *testing.F) {
	f.Add([]byte("nameserver 127.0.0.1\nnameserver ::1\noptions timeout:2 attempts:1 use-vc\n"))
	f.Add([]byte("# c\n; c\nsearch a b\nnameserver fe80::1%eth0\n"))
	f.Add([]byte("options timeout:\nnameserver"))
	f.Add([]byte{0, '\n', 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := parseResolvConf(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "resolver: ") {
				t.Fatalf("error without prefix: %v", err)
			}
			return
		}
		if len(cfg.Servers) == 0 || cfg.Timeout <= 0 {
			t.Fatalf("unusable config %+v", cfg)
		}
		for _, s := range cfg.Servers {
			if _, err := normalizeServer(s, cfg.Transport); err != nil {
				t.Fatalf("server %q does not normalise: %v", s, err)
			}
		}
	})
}
