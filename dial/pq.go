package dial

// Post-quantum Z-data on the client (docs/ztls-spec.md, Section 9.6):
// the downgrade policy (Options.PostQuantum), the announcement carried
// by classical records (bit 30 of their Zdata_id), the 24-hour pin kept
// in Memory, and what the report says about it.

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/zdata"
)

// PostQuantum is a client's post-quantum policy (Options.PostQuantum;
// docs/ztls-spec.md, Section 9.6). Whatever it is, a valid v3 record is
// used before any classical one.
type PostQuantum string

const (
	// PQPrefer (the default; "" means the same) sends classical early
	// data only to a service that does not announce v3 records in its
	// classical ones (Zdata_id bit 30) and was not seen with a valid v3
	// record in the last 24 hours (Memory's pin): a path that strips,
	// truncates or delays a v3 answer can only cause TLS 1.3.
	PQPrefer PostQuantum = "prefer"
	// PQOnly never sends classical early data: without a valid v3
	// record the connection is TLS 1.3.
	PQOnly PostQuantum = "only"
	// PQClassical is the user's explicit opt-in to classical early data:
	// under a classical record even when the service announces v3 records
	// or is pinned (the report says it was forced,
	// EarlyReport.ClassicalForced). A valid v3 record among the records
	// read still wins, but the TXT record is not asked for one when the
	// HTTPS record carries (classical) Z-data.
	PQClassical PostQuantum = "classical"
)

// String returns the policy's name; the zero value is "prefer".
func (p PostQuantum) String() string {
	if p == "" {
		return string(PQPrefer)
	}
	return string(p)
}

// ParsePostQuantum parses "prefer", "only" or "classical" ("" is prefer).
func ParsePostQuantum(s string) (PostQuantum, error) {
	switch p := PostQuantum(s); p {
	case "", PQPrefer, PQOnly, PQClassical:
		return p, nil
	}
	return "", fmt.Errorf("dial: unknown post-quantum policy %q (want prefer, only or classical)", s)
}

// pqGate is an attempt's post-quantum policy with what it knows of the
// service before its lookups: whether it is pinned.
type pqGate struct {
	policy PostQuantum
	pinned bool
}

// pqGate returns the attempt's gate, reading the pin from Memory.
func (a *attempt) pqGate() pqGate {
	return pqGate{policy: a.o.PostQuantum, pinned: a.mem.PQPinned(a.host, a.port, a.now())}
}

// wantsPQ is Prevalidation's prevalidate.Options.WantPQ: whether a
// connection with o to host:port wants v3 records before any answer.
func (o Options) wantsPQ(host string, port int) bool {
	mem := o.Memory
	if mem == nil {
		mem = defaultMemory
	}
	return pqGate{policy: o.PostQuantum, pinned: mem.PQPinned(host, port, o.clock()())}.wantsTXT()
}

// wantsTXT reports whether the client knows before any answer that it
// wants v3 records, which come in the TXT RRset only (Section 9.8).
func (g pqGate) wantsTXT() bool {
	return g.policy == PQOnly || (g.pinned && g.policy != PQClassical)
}

// refusesAnnounced reports whether a classical record that announces v3
// records is refused.
func (g pqGate) refusesAnnounced() bool { return g.policy != PQClassical }

// check says whether early data may go under rec: nil, with forced when
// only the user's opt-in (PQClassical) allows it, or why not.
func (g pqGate) check(rec *zdata.Record) (forced bool, err error) {
	if rec == nil || rec.V3 {
		return false, nil
	}
	announced := rec.AnnouncesPQ()
	switch {
	case g.policy == PQOnly:
		err = errors.New("the post-quantum policy is only, and no valid v3 record arrived")
	case !announced && !g.pinned:
		return false, nil
	case g.policy == PQClassical:
		return true, nil
	case announced:
		err = errors.New("the service's classical records announce v3 records (Zdata_id bit 30), and no valid v3 record arrived (stripped, truncated or late?)")
	default:
		err = errors.New("the service was seen with a valid v3 record within 24 hours (pinned), and no valid v3 record arrived (stripped, truncated or late?)")
	}
	return false, &zdata.Error{Reason: zdata.ReasonNoPQZData, Err: err}
}

// pqPinKey is a pin's key in Memory's map, apart from the aborts'.
func pqPinKey(host string, port int) string { return "pq " + leafKey(host, port) }

// PinPQ notes that host:port was seen with a valid v3 record at now
// (docs/ztls-spec.md, Section 9.6): for RememberFor, no classical early
// data is sent to it unless the user opts in (PQClassical). It is kept
// and cleared with the aborts (Clear; the file of OpenMemory).
func (m *Memory) PinPQ(host string, port int, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.m[pqPinKey(host, port)] = now.Add(RememberFor)
	m.saveLocked(now)
}

// PQPinned reports whether host:port is pinned to v3 records at now.
func (m *Memory) PQPinned(host string, port int, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := pqPinKey(host, port)
	until, ok := m.m[k]
	if ok && !now.Before(until) {
		delete(m.m, k)
		return false
	}
	return ok
}

// notePQ takes the verdict's post-quantum side: a v3 offer pins the
// service; a forced classical one is reported.
func (a *attempt) notePQ(z zresult) {
	if z.offer != nil && z.offer.Group == tls13.X25519MLKEM768 {
		a.mem.PinPQ(a.host, a.port, a.now())
	}
	a.pqForced = z.forced
}

// reportPQ fills the report's post-quantum fields from the handshake.
func (a *attempt) reportPQ(st tls13.ConnectionState) {
	a.r.PostQuantum = a.o.PostQuantum.String()
	e := &a.r.EarlyData
	e.PostQuantum = st.EarlyDataOffered && a.offer != nil && a.offer.Group == tls13.X25519MLKEM768
	e.ClassicalForced = st.EarlyDataOffered && a.offer != nil && a.pqForced
}

// writePQ prints whether the early data was post-quantum.
func (r *Report) writePQ(w io.Writer) {
	e := r.EarlyData
	switch {
	case !e.Offered || r.Mode != "ztls" && !e.PostQuantum && !e.ClassicalForced:
	case e.PostQuantum:
		fmt.Fprintln(w, "  early data post-quantum: yes (a v3 record, X25519MLKEM768)")
	case e.ClassicalForced:
		fmt.Fprintln(w, "  early data post-quantum: no, classical early data FORCED by --pq classical (the service publishes v3 records)")
	default:
		fmt.Fprintln(w, "  early data post-quantum: no (classical Z-data; the service announces no v3 records)")
	}
}

// allows reports whether check lets early data go under rec (TurboTLS's
// early flight is made with the likeliest record before the verdict).
func (g pqGate) allows(rec *zdata.Record) bool {
	_, err := g.check(rec)
	return err == nil
}
