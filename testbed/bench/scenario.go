package bench

import (
	"fmt"
	"sort"
	"time"
)

// Scenario is where the client's DNS answer comes from (the paper's
// Figure 4): its own stub cache, a local resolver or a public one, with the
// resolver's cache warm or cold (then it asks the authority).
type Scenario struct {
	Name string
	// StubCache: the answer is in the client's own cache (no DNS traffic).
	StubCache bool
	// ResolverRTT is the client–resolver round trip.
	ResolverRTT time.Duration
	// Cold: the resolver's cache is empty, so it asks the authority.
	Cold bool
	// About says it in words.
	About string
}

// Paper's resolver distances: a local resolver about 6 ms away and a public
// one about 40 ms away.
const (
	LocalResolverRTT  = 6 * time.Millisecond
	PublicResolverRTT = 40 * time.Millisecond
	// DefaultAuthRTT is our choice for the resolver–authority round trip
	// (the paper does not fix it); the --auth-rtt flag changes it.
	DefaultAuthRTT = 20 * time.Millisecond
)

// Scenarios lists the DNS scenarios by name.
var Scenarios = map[string]Scenario{
	"stub":        {Name: "stub", StubCache: true, ResolverRTT: LocalResolverRTT, About: "answer in the client's stub cache"},
	"local-warm":  {Name: "local-warm", ResolverRTT: LocalResolverRTT, About: "local resolver (6 ms RTT), answer cached"},
	"local-cold":  {Name: "local-cold", ResolverRTT: LocalResolverRTT, Cold: true, About: "local resolver (6 ms RTT), asks the authority"},
	"public-warm": {Name: "public-warm", ResolverRTT: PublicResolverRTT, About: "public resolver (40 ms RTT), answer cached"},
	"public-cold": {Name: "public-cold", ResolverRTT: PublicResolverRTT, Cold: true, About: "public resolver (40 ms RTT), asks the authority"},
}

// ScenarioNames returns the scenario names, sorted.
func ScenarioNames() []string {
	var s []string
	for k := range Scenarios {
		s = append(s, k)
	}
	sort.Strings(s)
	return s
}

// LookupScenario returns the scenario called name.
func LookupScenario(name string) (Scenario, error) {
	s, ok := Scenarios[name]
	if !ok {
		return s, fmt.Errorf("bench: unknown scenario %q (have %v)", name, ScenarioNames())
	}
	return s, nil
}

// PaperRTTs are the client–server round trips of the paper's Table 3:
// Seoul, Tokyo and Ohio.
var PaperRTTs = []time.Duration{8200 * time.Microsecond, 39800 * time.Microsecond, 180600 * time.Microsecond}
