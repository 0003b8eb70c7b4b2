package authority

import (
	"hash/maphash"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// Response Rate Limiting for UDP, on the model of BIND 9's RRL
// (Vixie and Schryver, 2012): a spoofed-source flood asks the same
// question over and over "from" its victim, so identical answers to one
// client network are counted, and past the rate they are dropped, except
// that every Slip-th dropped answer is sent as an empty TC=1 reply. A real
// client behind the victim's address then retries over TCP, which cannot
// be spoofed; the victim receives no more than the query's own size.

// Defaults of a RateLimit's zero fields, and of a Server without one.
const (
	DefaultRRLResponsesPerSecond = 10
	DefaultRRLSlip               = 2
	DefaultRRLWindow             = 15 * time.Second
	DefaultRRLIPv4PrefixLen      = 24
	DefaultRRLIPv6PrefixLen      = 56
	DefaultRRLTableSize          = 100_000
)

// RateLimit configures Response Rate Limiting on UDP. Answers over TCP
// and TLS, and answers to clients presenting a valid DNS server cookie
// (RFC 7873), are never limited.
//
// Answers are counted per client network (the source address cut to
// IPv4PrefixLen or IPv6PrefixLen bits) and per kind of answer, as BIND
// does: the same name and type for answers and NODATA, the zone for
// NXDOMAIN (so random names share one count), the delegation for
// referrals, the RCODE for errors.
type RateLimit struct {
	// ResponsesPerSecond is the rate of identical answers one client
	// network gets; 0 or less turns rate limiting off.
	ResponsesPerSecond int
	// Slip: every Slip-th limited answer is sent as an empty TC=1 reply
	// instead of being dropped. 0 drops them all, 1 sends all truncated.
	Slip int
	// Window is how far a flooding client's count may go into debt,
	// in seconds of its rate: it must keep quiet that long before it
	// is answered again. 0 means DefaultRRLWindow.
	Window time.Duration
	// IPv4PrefixLen and IPv6PrefixLen group clients into networks;
	// 0 means 24 and 56.
	IPv4PrefixLen, IPv6PrefixLen int
	// TableSize bounds the number of counts kept; when full, counts that
	// have recovered are swept, and an answer that finds no room goes out
	// as an empty TC=1 reply (Stats.RRLTableFull): a spoofer who keeps the
	// table full gets no amplification, a real client retries over TCP.
	// 0 means DefaultRRLTableSize.
	TableSize int
}

// DefaultRateLimit is the rate limit of a Server whose RateLimit is nil.
var DefaultRateLimit = RateLimit{
	ResponsesPerSecond: DefaultRRLResponsesPerSecond,
	Slip:               DefaultRRLSlip,
	Window:             DefaultRRLWindow,
}

// rrlVerdict is what the limiter decides for one answer.
type rrlVerdict uint8

const (
	rrlSend rrlVerdict = iota
	rrlDrop
	rrlSlip
)

// rrlKind separates the counts of different kinds of answers.
type rrlKind uint8

const (
	rrlAnswer rrlKind = iota + 1
	rrlNXDomain
	rrlReferral
	rrlError
)

type rrlKey struct {
	net   netip.Prefix
	kind  rrlKind
	qtype uint16
	name  uint64 // maphash of the lower-case name
}

type rrlAccount struct {
	balance float64 // answers still allowed; negative is debt
	last    int64   // when balance was last credited, Unix ns
	limited uint64  // limited answers so far, for slip
}

type rrl struct {
	rate       float64
	slip       uint64
	floor      float64 // the deepest debt: -rate × window
	v4, v6     int
	size       int
	seed       maphash.Seed
	mu         sync.Mutex
	table      map[rrlKey]*rrlAccount
	lastSweep  int64
	tableFulls uint64 // guarded by mu; copied into Stats
}

// newRRL returns the limiter of cfg, or nil when it is off.
func newRRL(cfg *RateLimit) *rrl {
	if cfg == nil {
		cfg = &DefaultRateLimit
	}
	if cfg.ResponsesPerSecond <= 0 {
		return nil
	}
	l := &rrl{
		rate:  float64(cfg.ResponsesPerSecond),
		slip:  uint64(max(cfg.Slip, 0)),
		v4:    orDefault(cfg.IPv4PrefixLen, DefaultRRLIPv4PrefixLen),
		v6:    orDefault(cfg.IPv6PrefixLen, DefaultRRLIPv6PrefixLen),
		size:  orDefault(cfg.TableSize, DefaultRRLTableSize),
		seed:  maphash.MakeSeed(),
		table: make(map[rrlKey]*rrlAccount),
	}
	l.v4, l.v6 = min(l.v4, 32), min(l.v6, 128)
	l.floor = -l.rate * orDefault(cfg.Window, DefaultRRLWindow).Seconds()
	return l
}

// errorKey returns the count of error answers with rcode to ip.
func (l *rrl) errorKey(ip netip.Addr, rcode int) rrlKey {
	ip = ip.Unmap()
	bitsLen := l.v6
	if ip.Is4() {
		bitsLen = l.v4
	}
	k := rrlKey{kind: rrlError, qtype: uint16(rcode)}
	k.net, _ = ip.Prefix(bitsLen)
	return k
}

// key returns the count the answer m to a client at ip falls in.
func (l *rrl) key(ip netip.Addr, m *dns.Msg) rrlKey {
	k := l.errorKey(ip, m.Rcode)
	var name string
	switch {
	case m.Rcode == dns.RcodeNameError:
		k.kind, k.qtype = rrlNXDomain, 0
		name = soaOwner(m)
	case m.Rcode != dns.RcodeSuccess:
		return k
	case !m.Authoritative && len(m.Answer) == 0 && len(m.Ns) > 0:
		k.kind, k.qtype = rrlReferral, 0
		name = m.Ns[0].Header().Name
	default:
		k.kind = rrlAnswer
		if len(m.Question) == 1 {
			name, k.qtype = m.Question[0].Name, m.Question[0].Qtype
		}
	}
	k.name = maphash.String(l.seed, strings.ToLower(name))
	return k
}

// soaOwner is the zone of a negative answer: the owner of its SOA.
func soaOwner(m *dns.Msg) string {
	for _, rr := range m.Ns {
		if rr.Header().Rrtype == dns.TypeSOA {
			return rr.Header().Name
		}
	}
	return ""
}

// decide counts one answer under k at now (Unix ns).
func (l *rrl) decide(k rrlKey, now int64) rrlVerdict {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.table[k]
	if a == nil {
		if len(l.table) >= l.size && !l.sweep(now) {
			l.tableFulls++
			return rrlSlip // fail closed: never amplify for an uncounted client
		}
		a = &rrlAccount{balance: l.rate, last: now}
		l.table[k] = a
	}
	if now > a.last {
		a.balance = min(l.rate, a.balance+l.rate*float64(now-a.last)/1e9)
		a.last = now
	}
	if a.balance >= 1 {
		a.balance--
		return rrlSend
	}
	a.balance = max(a.balance-1, l.floor)
	a.limited++
	if l.slip > 0 && a.limited%l.slip == 0 {
		return rrlSlip
	}
	return rrlDrop
}

// sweep deletes the counts that have fully recovered (they hold nothing a
// new count would not) and reports whether there is room. It runs at most
// once a second, so a table full of live counts is not scanned per query.
func (l *rrl) sweep(now int64) bool {
	if now-l.lastSweep < int64(time.Second) && now >= l.lastSweep {
		return false
	}
	l.lastSweep = now
	for k, a := range l.table {
		if a.balance+l.rate*float64(now-a.last)/1e9 >= l.rate {
			delete(l.table, k)
		}
	}
	return len(l.table) < l.size
}
