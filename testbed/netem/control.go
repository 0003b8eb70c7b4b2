package netem

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// The parent drives the relay child with one JSON object per line on the
// child's stdin; the child answers each with one JSON line on its stdout.

type command struct {
	Op    string        `json:"op"` // "init", "link", "compensate", "stats", "quit"
	Ports []string      `json:"ports,omitempty"`
	Seed  uint64        `json:"seed,omitempty"`
	RT    int           `json:"rt_priority,omitempty"`
	Src   int           `json:"src"`
	Dst   int           `json:"dst"`
	Link  *Link         `json:"link,omitempty"`
	Comp  time.Duration `json:"comp_ns,omitempty"`
}

type reply struct {
	Error string `json:"error,omitempty"`
	RT    bool   `json:"rt,omitempty"`
	Warn  string `json:"warn,omitempty"`
	Stats *Stats `json:"stats,omitempty"`
}

// maxPorts bounds the number of hosts one relay serves.
const maxPorts = 64

// parseCommand decodes and checks one control line against a relay of
// nports ports (0 before init).
func parseCommand(line []byte, nports int) (command, error) {
	var c command
	if err := json.Unmarshal(line, &c); err != nil {
		return c, fmt.Errorf("netem: bad control line: %w", err)
	}
	switch c.Op {
	case "init":
		if nports != 0 {
			return c, errors.New("netem: init sent twice")
		}
		if len(c.Ports) == 0 || len(c.Ports) > maxPorts {
			return c, fmt.Errorf("netem: init needs 1 to %d ports, got %d", maxPorts, len(c.Ports))
		}
		seen := map[netip.Addr]bool{}
		for _, p := range c.Ports {
			a, err := netip.ParseAddr(p)
			if err != nil || !a.Is4() {
				return c, fmt.Errorf("netem: port address %q is not IPv4", p)
			}
			if seen[a] {
				return c, fmt.Errorf("netem: port address %s given twice", a)
			}
			seen[a] = true
		}
		if c.RT < 0 || c.RT > 99 {
			return c, fmt.Errorf("netem: real-time priority %d out of range [0, 99]", c.RT)
		}
	case "link":
		if nports == 0 {
			return c, errors.New("netem: link before init")
		}
		if c.Src < 0 || c.Src >= nports || c.Dst < 0 || c.Dst >= nports || c.Src == c.Dst {
			return c, fmt.Errorf("netem: bad link %d->%d for %d ports", c.Src, c.Dst, nports)
		}
		if c.Link == nil {
			return c, errors.New("netem: link command without link")
		}
		if err := c.Link.Validate(); err != nil {
			return c, err
		}
	case "compensate":
		if c.Comp < 0 || c.Comp > time.Millisecond {
			return c, fmt.Errorf("netem: compensation %v out of range [0, 1ms]", c.Comp)
		}
	case "stats", "quit":
	default:
		return c, fmt.Errorf("netem: unknown control op %q", c.Op)
	}
	return c, nil
}

// Stats counts what the relay did since it started.
type Stats struct {
	// Links holds one entry per configured or used direction.
	Links []LinkStats `json:"links"`
	// Unroutable counts packets whose destination is no port (or not IPv4).
	Unroutable uint64 `json:"unroutable"`
	// NoBuffer counts packets dropped because the buffer pool was exhausted.
	NoBuffer uint64 `json:"no_buffer"`
	// Late summarises how much later than due packets were written.
	Late Lateness `json:"late"`
	// LeadNs is the current learned wake-up lead in nanoseconds.
	LeadNs int64 `json:"lead_ns"`
	// CompNs is the per-hop latency compensation in nanoseconds.
	CompNs int64 `json:"comp_ns"`
}

// LinkStats counts the packets of one direction.
type LinkStats struct {
	Src      int    `json:"src"`
	Dst      int    `json:"dst"`
	Forward  uint64 `json:"forward"`
	Lost     uint64 `json:"lost"`
	Overflow uint64 `json:"overflow"`
}

// Lateness describes the delivery error of the relay: how long after its
// due time each packet was written to its destination TUN.
type Lateness struct {
	Packets  uint64 `json:"packets"`
	MeanNs   int64  `json:"mean_ns"`
	MaxNs    int64  `json:"max_ns"`
	Over100u uint64 `json:"over_100us"`
	Over1m   uint64 `json:"over_1ms"`
}
