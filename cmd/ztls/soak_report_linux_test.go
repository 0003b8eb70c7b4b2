//go:build linux

package main

// The soak's figures (TestSoak): counts from the clients' reports, the
// proxy's flights and the members' log lines, and the report.

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/zdata"
)

// soakTally is the running count the progress lines print.
type soakTally struct {
	conns, accepted, bfeAccepted, fallbacks, errors int
	replays, replaysAccepted, replaysNoVerdict      int
	replaysTested                                   int // reached a member and judged there, inside the freshness window
	twice                                           int // flights whose early data reached an application twice or more
	twiceFlights                                    []*soakFlight
}

func (s *soak) flights() []*soakFlight {
	s.proxy.mu.Lock()
	defer s.proxy.mu.Unlock()
	return append([]*soakFlight(nil), s.proxy.all...)
}

func (s *soak) tally(final bool) soakTally {
	fs := s.flights()
	s.mu.Lock()
	defer s.mu.Unlock()
	var t soakTally
	for _, c := range s.all {
		t.conns++
		switch {
		case c.err != "" && c.rep.Mode == "":
			t.errors++
		case c.rep.EarlyData.Accepted:
			t.accepted++
			if c.rep.EarlyData.BFE {
				t.bfeAccepted++
			}
		default:
			t.fallbacks++
		}
	}
	for _, f := range fs {
		n := 0
		if f.honest != nil && f.honest.accepted() {
			n++
		}
		for _, r := range f.replays {
			t.replays++
			switch {
			case r.accepted():
				t.replaysAccepted++
				n++
			case r.dialErr == "" && !r.verdict:
				t.replaysNoVerdict++
			}
			if r.verdict && r.state != "" && !strings.Contains(r.state, "client clock") {
				t.replaysTested++
			}
		}
		if n >= 2 {
			t.twice++
			t.twiceFlights = append(t.twiceFlights, f)
		}
	}
	return t
}

// serverReason is the reason in a member's "ZTLS offered, rejected
// (REASON), SUITE, GROUP" ("" when the state is something else).
func serverReason(state string) string {
	r, ok := strings.CutPrefix(state, "ZTLS offered, rejected (")
	if !ok {
		return ""
	}
	if i := strings.LastIndex(r, "), TLS_"); i >= 0 {
		return r[:i]
	}
	return r
}

// Kinds of refusal, by what caused them.
const (
	causeSafety = "safety" // a register or puncture log that cannot vouch (kill, Redis lost or down)
	causeReplay = "replay" // the flight was seen before: a replay refused, or an honest flight that lost a race
	causeWindow = "window" // the client's clock outside the freshness window
	causeOther  = "other"
)

// reasonBucket names a member's rejection reason without its numbers, and
// says what caused it.
func reasonBucket(r string) (string, string) {
	switch {
	case strings.Contains(r, "punctured"):
		return "BFE: ciphertext already decapsulated (punctured)", causeReplay
	case strings.HasPrefix(r, "replayed ClientHello"):
		return "replayed ClientHello (strike register)", causeReplay
	case strings.Contains(r, "does not cover epoch"):
		return "BFE: Redis's puncture memory began after the key's epoch (Redis lost data)", causeSafety
	case strings.Contains(r, "another server is recording") || strings.Contains(r, "while recording a loss") || strings.Contains(r, "recording was overtaken"):
		return "Redis lost data, loss being recorded", causeSafety
	case strings.Contains(r, "memory is complete only since") || strings.Contains(r, "started after this ClientHello"):
		return "strike register too young (Redis lost data)", causeSafety
	case strings.Contains(r, "refused") || strings.Contains(r, "EOF") || strings.Contains(r, "broken pipe") ||
		strings.Contains(r, "reset by peer") || strings.Contains(r, "i/o timeout") || strings.Contains(r, "closed"):
		if strings.HasPrefix(r, "BFE") {
			return "BFE: Redis unreachable", causeSafety
		}
		return "strike register unreachable (Redis down)", causeSafety
	case strings.Contains(r, "BFE filter full"):
		return "BFE filter full", causeOther
	case strings.Contains(r, "decapsulations busy"):
		return "BFE: decapsulations busy", causeOther
	case strings.HasPrefix(r, "client clock"):
		return "client clock outside the freshness window", causeWindow
	}
	return soakShorten(r), causeOther
}

// outcome classifies an honest connection: "ztls-bfe", "ztls", "fallback"
// or "error", with the fallback's reason and cause.
func (s *soak) outcome(c *soakClient) (kind, reason, cause string) {
	switch {
	case c.err != "" && c.rep.Mode == "":
		return "error", soakShorten(c.err), causeOther
	case c.rep.EarlyData.Accepted && c.rep.EarlyData.BFE:
		return "ztls-bfe", "", ""
	case c.rep.EarlyData.Accepted:
		return "ztls", "", ""
	}
	reason = c.rep.FallbackReason
	if reason == dial.ReasonRejected {
		if c.flight == nil || c.flight.honest == nil || !c.flight.honest.verdict {
			return "fallback", "rejected by the member (its log line lost)", causeOther
		}
		r, cause := reasonBucket(serverReason(c.flight.honest.state))
		if cause == causeReplay && c.flight.race {
			r = "lost the race to the attacker's copy: " + r
		}
		return "fallback", "rejected: " + r, cause
	}
	if reason == dial.ReasonServerAborted {
		return "fallback", reason, causeSafety // a member killed during the handshake
	}
	return "fallback", soakShorten(reason), causeOther
}

// eventAt is the kill or Redis restart (redis) whose effects an instant
// (ztls clock) may show: a kill from the event until 15 s of real time
// after all was back up (a restarted member's first ticks are 10 s
// apart); a Redis loss until a minute into the period after the one in
// which its memory began (BFE early data returns with the next epoch's
// key, docs/ztls-spec.md, Section 7.6).
func (s *soak) eventAt(at time.Time, redis bool) *soakEvent {
	var hit *soakEvent
	for _, e := range s.events {
		if e.redis != redis || e.did.IsZero() || at.Before(e.did) {
			continue
		}
		until := e.back.Add(time.Duration(15 * float64(time.Second) * s.cfg.rate))
		if e.redis {
			until = e.back.Add(time.Second).Truncate(zdata.EpochLength).Add(zdata.EpochLength + time.Minute)
		}
		if e.back.IsZero() || at.Before(until) {
			hit = e
		}
	}
	return hit
}

// eventFor is the event a fallback is put down to: a Redis loss for a
// reason that names Redis, else a kill, else a Redis loss.
func (s *soak) eventFor(at time.Time, reason string) *soakEvent {
	if strings.Contains(reason, "lost the race") {
		return nil // the attacker's doing
	}
	r, k := s.eventAt(at, true), s.eventAt(at, false)
	switch {
	case r != nil && (k == nil || strings.Contains(reason, "Redis") || strings.Contains(reason, "strike register")):
		return r
	case k != nil:
		return k
	}
	return nil
}

// nearRollover reports whether at is within 2 minutes of a period's start.
func nearRollover(at time.Time) bool {
	into := at.Sub(at.Truncate(zdata.EpochLength))
	return into < 2*time.Minute || into > zdata.EpochLength-2*time.Minute
}

type counter map[string]int

func (c counter) sorted() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return c[keys[i]] > c[keys[j]] || c[keys[i]] == c[keys[j]] && keys[i] < keys[j] })
	return keys
}

// report is the soak's report, as docs/soak.md quotes it.
func (s *soak) report(stops, left []string) string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	tl := s.tally(true)
	fs := s.flights()
	s.mu.Lock()
	defer s.mu.Unlock()

	cpu, cores := cpuModel()
	w("ztls soak: %d periods of %v at clock rate %g (%v real per period), %g connections/s, 3 members, BFE keys for %d connections per period\n",
		s.cfg.periods, zdata.EpochLength, s.cfg.rate, clockReal(zdata.EpochLength, s.cfg.rate), s.cfg.cps, s.cfg.bfeConns)
	w("machine: %s, %d CPUs; %s; ran %v real from %s (the clock from %s to %s)\n\n",
		cpu, cores, runtime.Version(), time.Since(s.started).Round(time.Second), s.started.UTC().Format(time.RFC3339),
		s.e0.Add(-time.Duration(float64(soakLead)*s.cfg.rate)).UTC().Format("2006-01-02 15:04"), s.end.UTC().Format("2006-01-02 15:04"))

	// Honest connections, measured periods only.
	kinds := map[bool]counter{true: {}, false: {}}
	fallbacks := map[string]counter{}
	byPeriod := make([]counter, s.cfg.periods)
	for i := range byPeriod {
		byPeriod[i] = counter{}
	}
	rollover := counter{}
	unexplained := map[string][]string{}   // reason → where each happened
	unexplainedMin := map[string]counter{} // reason → minute of the period → count
	firstReason := map[string]string{}     // reason → the first one, numbers unmasked
	v1Minutes := counter{}                 // BFE clients that used a v1 record: minute of the period
	raced, racedAcc := 0, 0
	lostTo := map[*soakEvent]counter{}
	warm := counter{}
	measured := 0
	for _, c := range s.all {
		kind, reason, cause := s.outcome(c)
		if c.at.Before(s.e0) || !c.at.Before(s.end) {
			warm[kind]++
			continue
		}
		measured++
		kinds[c.bfe][kind]++
		if c.flight != nil && c.flight.race {
			raced++
			if kind == "ztls" || kind == "ztls-bfe" {
				racedAcc++
			}
		}
		if c.bfe && kind == "ztls" {
			v1Minutes[fmtInto(c.at)[:2]]++
		}
		p := int(c.at.Sub(s.e0) / zdata.EpochLength)
		byPeriod[p]["conns"]++
		byPeriod[p][kind]++
		if c.bfe {
			byPeriod[p]["bfe clients"]++
		}
		if kind != "fallback" && kind != "error" {
			continue
		}
		ev := s.eventFor(c.at, reason)
		where := "no kill or Redis loss near"
		if ev != nil {
			where = "after a kill"
			if ev.redis {
				where = "after a Redis loss"
			}
		}
		if fallbacks[reason] == nil {
			fallbacks[reason] = counter{}
		}
		fallbacks[reason][where]++
		fallbacks[reason]["total"]++
		if ev != nil && lostTo[ev] == nil {
			lostTo[ev] = counter{}
		}
		if cause == causeSafety {
			byPeriod[p]["safety"]++
			if ev != nil {
				lostTo[ev][map[bool]string{true: "BFE", false: "v1"}[c.bfe]]++
			}
		} else if ev != nil && cause == causeOther {
			lostTo[ev]["other"]++
		}
		if nearRollover(c.at) && ev == nil {
			rollover[reason]++
		}
		if cause == causeOther {
			if len(unexplained[reason]) == 0 {
				firstReason[reason] = c.rep.FallbackReason + c.err
				if c.flight != nil && c.flight.honest != nil && c.flight.honest.state != "" {
					firstReason[reason] += " (member's log: " + c.flight.honest.state + ")"
				}
			}
			unexplained[reason] = append(unexplained[reason], s.where(c))
			if unexplainedMin[reason] == nil {
				unexplainedMin[reason] = counter{}
			}
			unexplainedMin[reason][fmtInto(c.at)[:2]]++
		}
	}
	acc := kinds[true]["ztls"] + kinds[true]["ztls-bfe"] + kinds[false]["ztls"] + kinds[false]["ztls-bfe"]
	w("Honest connections in the measured periods: %d (warm-up before them: %d, not counted)\n", measured, warm["ztls"]+warm["ztls-bfe"]+warm["fallback"]+warm["error"])
	w("  ZTLS share (early data accepted / attempts): %d / %d = %.2f%%; of the %d connections not raced by a replay %.2f%%\n",
		acc, measured, pct(acc, measured), measured-raced, pct(acc-racedAcc, measured-raced))
	for _, bfe := range []bool{true, false} {
		k := kinds[bfe]
		n := k["ztls"] + k["ztls-bfe"] + k["fallback"] + k["error"]
		name := "v1 clients (--no-bfe)"
		if bfe {
			name = "BFE clients"
		}
		w("  %-22s %5d: early data accepted with BFE %d, without %d (%.2f%%), TLS 1.3 fallback %d, failed %d\n",
			name, n, k["ztls-bfe"], k["ztls"], pct(k["ztls"]+k["ztls-bfe"], n), k["fallback"], k["error"])
	}
	if len(v1Minutes) > 0 {
		var ms []string
		for _, m := range v1Minutes.sorted() {
			ms = append(ms, fmt.Sprintf("%s: %d", m, v1Minutes[m]))
		}
		sort.Strings(ms)
		w("  BFE clients that used a v1 record (no v2 twin in their DNS answer), by minute of the period: %s\n", strings.Join(ms, ", "))
	}
	w("\nFallbacks and failures by reason (measured periods):\n")
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  reason\ttotal\tafter a kill\tafter a Redis loss\tneither\n")
	keys := make([]string, 0, len(fallbacks))
	for k := range fallbacks {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return fallbacks[keys[i]]["total"] > fallbacks[keys[j]]["total"] })
	for _, k := range keys {
		c := fallbacks[k]
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%d\n", k, c["total"], c["after a kill"], c["after a Redis loss"], c["no kill or Redis loss near"])
	}
	tw.Flush()
	if len(rollover) > 0 {
		w("  within 2 minutes of a rollover with no kill or Redis loss near:\n")
		for _, k := range rollover.sorted() {
			w("    %d  %s\n", rollover[k], k)
		}
	} else {
		w("  none within 2 minutes of a rollover without a kill or Redis loss near\n")
	}

	w("\nFallbacks no safety rule, replay or clock explains (each: period and minute, member, time since that member's restart):\n")
	if len(unexplained) == 0 {
		w("  none\n")
	}
	for _, k := range sortedKeys(unexplained) {
		xs := unexplained[k]
		w("  %d  %s\n", len(xs), k)
		w("      first: %s\n", firstReason[k])
		var ms []string
		for _, m := range sortedKeys(unexplainedMin[k]) {
			ms = append(ms, fmt.Sprintf("%s: %d", m, unexplainedMin[k][m]))
		}
		w("      by minute of the period: %s\n", strings.Join(ms, ", "))
		if len(xs) > 12 {
			xs = append(xs[:12:12], "…")
		}
		w("      %s\n", strings.Join(xs, "; "))
	}

	w("\nKills and Redis losses, and the early data refused for safety after each (honest connections):\n")
	for _, e := range s.events {
		if e.did.IsZero() {
			continue
		}
		c := lostTo[e]
		w("  %s: back after %v; refused for safety v1 %d, BFE %d; other fallbacks %d%s\n", e, e.back.Sub(e.did).Round(time.Second), c["v1"], c["BFE"], c["other"], s.recovery(e))
		if e.err != "" {
			w("    error: %s\n", e.err)
		}
	}

	// Replays.
	flights, early, incomplete := 0, 0, 0
	res := counter{}
	raceWon := 0
	for _, f := range fs {
		flights++
		if !f.complete {
			incomplete++
		}
		if f.early > 0 {
			early++
		}
		honestOK := f.honest != nil && f.honest.accepted()
		for _, r := range f.replays {
			var k string
			switch {
			case r.dialErr != "":
				k = "member down (not delivered)"
			case r.accepted():
				k = "ACCEPTED"
				if !honestOK {
					k = "accepted, the honest copy was not (once in all)"
					if r.kind == "race" {
						raceWon++
					}
				}
			case !r.verdict:
				k = "no verdict (member killed meanwhile)"
			case r.ended != "":
				k = "handshake ended before the first flight"
			default:
				k, _ = reasonBucket(serverReason(r.state))
				k = "rejected: " + k
			}
			res[r.kind+": "+k]++
		}
	}
	w("\nFirst flights recorded by the proxy: %d, with early data %d (incomplete records: %d)\n", flights, early, incomplete)
	w("Replays: %d (raced with the honest flight: one connection in %d, drawn, to the two other members; after it: to every member)\n", tl.replays, s.cfg.raceEvery)
	for _, k := range res.sorted() {
		w("  %6d  %s\n", res[k], k)
	}
	w("  judged inside the freshness window: %d\n", tl.replaysTested)
	w("  flights whose early data reached an application twice or more: %d\n", tl.twice)
	for _, f := range tl.twiceFlights {
		w("    flight %d (member %d, race %v): honest %q;", f.id, f.member, f.race, f.honest.state)
		for _, r := range f.replays {
			if r.accepted() {
				w(" %s to member %d from %s accepted;", r.kind, r.member, r.remote)
			}
		}
		w("\n")
	}

	w("\nPer period (measured): connections, early data accepted, BFE clients accepted with BFE, fallbacks, refused for safety, events\n")
	tw = tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  period\tconns\taccepted\tBFE\tfallbacks\tsafety\tevents\n")
	for p, c := range byPeriod {
		var evs []string
		for _, e := range s.events {
			if e.period == p {
				what := "kill m" + strings.Trim(strings.Join(strings.Fields(fmt.Sprint(e.members)), "+m"), "[]")
				if e.redis {
					what = "Redis"
				}
				evs = append(evs, what+" @"+fmtInto(e.at))
			}
		}
		fmt.Fprintf(tw, "  %d\t%d\t%.1f%%\t%.1f%%\t%d\t%d\t%s\n", p, c["conns"], pct(c["ztls"]+c["ztls-bfe"], c["conns"]), pct(c["ztls-bfe"], c["bfe clients"]),
			c["fallback"]+c["error"], c["safety"], strings.Join(evs, ", "))
	}
	tw.Flush()

	w("\nProcesses (resident memory and goroutines from --metrics; dns serve's memory from /proc):\n")
	for i := range soakMembers + 1 {
		name := "dns serve"
		lives := s.dns.lives
		if i < soakMembers {
			name, lives = fmt.Sprintf("member %d", i), s.members[i].lives
		}
		first, last, ok := s.span(i)
		if !ok {
			w("  %s: no samples\n", name)
			continue
		}
		g := func(x soakSample) string {
			if i == soakMembers {
				return "" // dns serve runs without --metrics
			}
			return fmt.Sprintf(", %.0f goroutines", x.goroutines)
		}
		w("  %-9s %d lives; %s: %.1f MB%s at %s -> %.1f MB%s at %s\n", name, lives,
			map[bool]string{true: "one life throughout", false: "its last life"}[first.life == 1 && last.life == 1],
			first.rss/1e6, g(first), first.sim.UTC().Format("15:04"), last.rss/1e6, g(last), last.sim.UTC().Format("15:04"))
	}
	for _, l := range stops {
		w("  stop: %s\n", l)
	}
	if len(left) > 0 {
		w("  STILL RUNNING: %v\n", left)
	} else {
		w("  every process the soak started has exited\n")
	}

	w("\nZ-data directories after the run:\n")
	for i := range soakMembers {
		files, size, tmp := dirFiles(filepath.Join(s.zdataDir(i), zdata.KeysDir))
		w("  zd%d/keys: %d files, %.1f MB", i, files, float64(size)/1e6)
		if len(tmp) > 0 {
			w("; left-over temporary files: %s", strings.Join(tmp, ", "))
		}
		w("\n")
	}

	w("\nWarnings and errors in the logs (numbers masked; logs in %s):\n", s.dir)
	ws := counter(s.warnings)
	if len(ws) == 0 {
		w("  none\n")
	}
	for _, k := range ws.sorted() {
		w("  %6d  %s\n", ws[k], k)
	}
	return b.String()
}

// recovery says how long after an event's return early data was accepted
// again, v1 and with BFE (ztls clock).
func (s *soak) recovery(e *soakEvent) string {
	var v1, bfe time.Time
	for _, c := range s.all {
		if c.at.Before(e.back) || !c.rep.EarlyData.Accepted {
			continue
		}
		if c.rep.EarlyData.BFE {
			if bfe.IsZero() || c.at.Before(bfe) {
				bfe = c.at
			}
		} else if v1.IsZero() || c.at.Before(v1) {
			v1 = c.at
		}
	}
	say := func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return t.Sub(e.back).Round(time.Second).String()
	}
	return fmt.Sprintf("; first accepted after it: v1 %s, BFE %s later", say(v1), say(bfe))
}

// span is the first sample of the measured run (of the last life, for a
// member killed meanwhile) and the last sample.
func (s *soak) span(i int) (first, last soakSample, ok bool) {
	xs := s.samples[i]
	if len(xs) == 0 {
		return first, last, false
	}
	last = xs[len(xs)-1]
	for _, x := range xs {
		if x.life == last.life && !x.sim.Before(s.e0) {
			return x, last, true
		}
	}
	return last, last, true
}

func fmtInto(t time.Time) string {
	d := t.Sub(t.Truncate(zdata.EpochLength))
	return fmt.Sprintf("%02d:%02d", int(d.Minutes()), int(d.Seconds())%60)
}

// cpuModel is the first model name in /proc/cpuinfo and the CPU count.
func cpuModel() (string, int) {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU", runtime.NumCPU()
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v), runtime.NumCPU()
		}
	}
	return "unknown CPU", runtime.NumCPU()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// where says when and where an honest connection ran: its period and
// minute, its member, and how long (real time) after that member's last
// restart.
func (s *soak) where(c *soakClient) string {
	p := int(c.at.Sub(s.e0) / zdata.EpochLength)
	out := fmt.Sprintf("p%d %s %s", p, fmtInto(c.at), map[bool]string{true: "BFE", false: "v1"}[c.bfe])
	if c.flight == nil || c.flight.member < 0 {
		return out
	}
	m := c.flight.member
	out += fmt.Sprintf(" m%d", m)
	var last time.Time
	for _, e := range s.events {
		for _, em := range e.members {
			if em == m && !e.back.IsZero() && !e.back.After(c.at) && e.back.After(last) {
				last = e.back
			}
		}
	}
	if !last.IsZero() {
		out += fmt.Sprintf(" +%.1fs", clockReal(c.at.Sub(last), s.cfg.rate).Seconds())
	}
	return out
}

// dirFiles counts the files in dir and their bytes, and names the
// temporary ones (a write cut short).
func dirFiles(dir string) (n int, size int64, tmp []string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if info, err := e.Info(); err == nil {
			n++
			size += info.Size()
		}
		if strings.Contains(e.Name(), ".tmp") {
			tmp = append(tmp, e.Name())
		}
	}
	return n, size, tmp
}

// writeClients writes every honest connection's outcome to clients.tsv in
// the soak's directory, for a closer look than the report's.
func (s *soak) writeClients() error {
	var b strings.Builder
	b.WriteString("id\tclient\tclock\tperiod\tminute\toutcome\treason\tmember\traced\tserver_state\n")
	s.mu.Lock()
	for _, c := range s.all {
		kind, reason, _ := s.outcome(c)
		m, raced, state := -1, false, ""
		if c.flight != nil {
			m, raced = c.flight.member, c.flight.race
			if c.flight.honest != nil {
				state = c.flight.honest.state
			}
		}
		fmt.Fprintf(&b, "%d\t%s\t%s\t%d\t%s\t%s\t%s\t%d\t%v\t%s\n", c.id, map[bool]string{true: "BFE", false: "v1"}[c.bfe],
			c.at.UTC().Format("15:04:05.000"), soakPeriod(c.at, s.e0), fmtInto(c.at), kind, reason, m, raced, state)
	}
	s.mu.Unlock()
	return os.WriteFile(filepath.Join(s.dir, "clients.tsv"), []byte(b.String()), 0o644)
}

// soakPeriod is the measured period at is in (-1: the warm-up).
func soakPeriod(at, e0 time.Time) int {
	if at.Before(e0) {
		return -1
	}
	return int(at.Sub(e0) / zdata.EpochLength)
}
