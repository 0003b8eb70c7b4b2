package netem

import (
	"strings"
	"testing"
)

func TestParseCommand(t *testing.T) {
	tests := []struct {
		line   string
		nports int
		err    string
	}{
		{`{"op":"init","ports":["10.77.0.1","10.77.0.2"]}`, 0, ""},
		{`{"op":"init","ports":["10.77.0.1"]}`, 2, "twice"},
		{`{"op":"init","ports":[]}`, 0, "ports"},
		{`{"op":"init","ports":["::1"]}`, 0, "not IPv4"},
		{`{"op":"init","ports":["10.0.0.1","10.0.0.1"]}`, 0, "given twice"},
		{`{"op":"init","ports":["10.0.0.1"],"rt_priority":100}`, 0, "priority"},
		{`{"op":"link","src":0,"dst":1,"link":{"delay_ns":1000}}`, 2, ""},
		{`{"op":"link","src":0,"dst":1,"link":{"delay_ns":1000}}`, 0, "before init"},
		{`{"op":"link","src":0,"dst":0,"link":{}}`, 2, "bad link"},
		{`{"op":"link","src":0,"dst":5,"link":{}}`, 2, "bad link"},
		{`{"op":"link","src":0,"dst":1}`, 2, "without link"},
		{`{"op":"link","src":0,"dst":1,"link":{"loss":2}}`, 2, "loss"},
		{`{"op":"compensate","comp_ns":50000}`, 2, ""},
		{`{"op":"compensate","comp_ns":5000000}`, 2, "compensation"},
		{`{"op":"stats"}`, 2, ""},
		{`{"op":"reboot"}`, 2, "unknown"},
		{`not json`, 2, "bad control line"},
	}
	for _, tt := range tests {
		_, err := parseCommand([]byte(tt.line), tt.nports)
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%s: %v", tt.line, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s: error %v, want one containing %q", tt.line, err, tt.err)
		case err != nil && !strings.HasPrefix(err.Error(), "netem: "):
			t.Errorf("%s: error %q lacks the package prefix", tt.line, err)
		}
	}
}

func FuzzParseCommand(f *testing.F) {
	f.Add([]byte(`{"op":"init","ports":["10.77.0.1","10.77.0.2"]}`), 0)
	f.Add([]byte(`{"op":"link","src":0,"dst":1,"link":{"delay_ns":1000,"jitter_ns":10,"loss":0.5,"rate_bps":1000}}`), 2)
	f.Add([]byte(`{"op":"compensate","comp_ns":1}`), 3)
	f.Add([]byte(`{"op":"quit"}`), 1)
	f.Fuzz(func(t *testing.T, line []byte, nports int) {
		c, err := parseCommand(line, nports)
		if err != nil {
			return
		}
		// Whatever parses must be safe to apply.
		if c.Op == "link" && (c.Src < 0 || c.Src >= nports || c.Dst < 0 || c.Dst >= nports || c.Link.Validate() != nil) {
			t.Fatalf("accepted unusable link command %+v", c)
		}
	})
}

func TestRoute(t *testing.T) {
	l, err := newLoop([]int{-1, -1}, []string{"10.77.0.1", "10.77.0.2"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	pkt := make([]byte, 20)
	pkt[0] = 0x45
	copy(pkt[16:], []byte{10, 77, 0, 2})
	if d, ok := l.route(pkt); !ok || d != 1 {
		t.Fatalf("route = %d, %v", d, ok)
	}
	pkt[19] = 9
	if _, ok := l.route(pkt); ok {
		t.Fatal("routed a packet to an unknown address")
	}
	if _, ok := l.route(pkt[:10]); ok {
		t.Fatal("routed a truncated packet")
	}
	pkt[0] = 0x60
	if _, ok := l.route(pkt); ok {
		t.Fatal("routed an IPv6 packet")
	}
}

func FuzzRoute(f *testing.F) {
	f.Add([]byte{0x45, 0, 0, 20, 0, 0, 0, 0, 64, 6, 0, 0, 10, 77, 0, 1, 10, 77, 0, 2})
	f.Add([]byte{0x60})
	l, err := newLoop([]int{-1, -1}, []string{"10.77.0.1", "10.77.0.2"}, 1)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		if d, ok := l.route(p); ok && (d < 0 || d > 1) {
			t.Fatalf("route to port %d", d)
		}
	})
}
