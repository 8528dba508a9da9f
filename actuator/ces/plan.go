package ces

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Node is one node as the planner sees it.
type Node struct {
	// Name is the scheduler's name of the node; unique within an Input.
	Name string `json:"name"`
	// Powered: the node is on, or waking up.
	Powered bool `json:"powered"`
	// Busy: the node runs a job or has one allocated.
	Busy bool `json:"busy"`
	// Incoming: the node is about to receive a job (a pending job is
	// already placed or reserved on it).
	Incoming bool `json:"incoming"`
	// LastTransition is when the node was last powered up or down; zero
	// when unknown. Nodes off (or on) longest are chosen first.
	LastTransition time.Time `json:"last_transition,omitzero"`
	// WakingUntil is when a node powered up becomes ready; zero or past:
	// ready (if powered).
	WakingUntil time.Time `json:"waking_until,omitzero"`
	// Fixed: the node is not the plan's to power (outside the actuator's
	// allowlist, or excluded from power saving by the scheduler). It
	// counts as it stands — powered or not, busy or not — and is never
	// chosen to be powered up or down.
	Fixed bool `json:"fixed,omitempty"`
	// Wanted: a pending job that only some of the nodes can run (its GPUs
	// per node, GPU type or constraint) could run on this one. Among nodes otherwise
	// alike, a wanted node is powered up first and powered down last, so
	// that the nodes a plan wakes are ones the queue can use.
	Wanted bool `json:"wanted,omitempty"`
	// Needed: a pending job can run only on some of the nodes (as for
	// Wanted), too few of which are powered and idle, and this node is one
	// counted for it: like a busy or incoming node it is powered up
	// whatever the target and never powered down.
	Needed bool `json:"needed,omitempty"`
	// Kind names the node's hardware as a job's request sees it (its GPUs
	// by type and its features); "" when the caller does not say. In a
	// partition of several kinds the idle nodes a plan keeps powered are
	// spread over them (spares; Input.KindUse).
	Kind string `json:"kind,omitempty"`
}

// held reports whether the node must stay (or be) powered whatever the
// forecast says.
func (n Node) held() bool { return n.Busy || n.Incoming || n.Needed }

// waking reports whether the node is powered but not yet ready at now.
func (n Node) waking(now time.Time) bool { return n.Powered && now.Before(n.WakingUntil) }

// Forecast is the demand forecast a plan is made from, in nodes.
type Forecast struct {
	// Issued is when the forecast was made; it read only demand known by
	// then. Zero (and left out of the JSON) when there is no forecast.
	Issued time.Time `json:"issued,omitzero"`
	// Horizon is the window (Issued, Issued+Horizon] that Max and Upper
	// cover. A zero Horizon means there is no forecast: the plan then
	// powers nothing down.
	Horizon time.Duration `json:"-"`
	// Point is the expected demand at the end of the window.
	Point float64 `json:"point"`
	// Max is the expected largest demand within the window.
	Max float64 `json:"max"`
	// Upper is the Quantile-quantile of the largest demand within the
	// window: the figure the plan keeps powered.
	Upper float64 `json:"upper"`
	// Quantile is the quantile Upper stands for (calibrated from past
	// forecast errors); 0 when Upper is a bound of unknown coverage.
	Quantile float64 `json:"quantile"`
}

// MarshalJSON writes f with its horizon in seconds (horizon_s).
func (f Forecast) MarshalJSON() ([]byte, error) {
	type plain Forecast // without the methods
	return json.Marshal(struct {
		plain
		HorizonS float64 `json:"horizon_s"`
	}{plain(f), f.Horizon.Seconds()})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (f *Forecast) UnmarshalJSON(b []byte) error {
	type plain Forecast
	var v struct {
		plain
		HorizonS float64 `json:"horizon_s"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	if !finite(v.HorizonS) || math.Abs(v.HorizonS) > 1e9 {
		return fmt.Errorf("ces: forecast horizon_s %v is out of range", v.HorizonS)
	}
	*f = Forecast(v.plain)
	f.Horizon = time.Duration(v.HorizonS * float64(time.Second))
	return nil
}

// usable reports whether f can justify a power-down at now: it exists, was
// issued by now, and its window has not passed.
func (f Forecast) usable(now time.Time) bool {
	return f.Horizon > 0 && !f.Issued.After(now) && now.Sub(f.Issued) < f.Horizon
}

// Input is what a plan is made from.
type Input struct {
	// Now is the decision time.
	Now time.Time
	// Nodes are every node the plan may touch, and the Fixed ones it
	// counts but may not.
	Nodes []Node
	// Demand is the number of nodes needed now (e.g. busy nodes plus the
	// nodes the pending queue's head needs).
	Demand float64
	// Forecast is the latest demand forecast.
	Forecast Forecast
	// State is the previous plan's Next; the zero State at the start.
	State State
	// KindUse is each node kind's recent use, in nodes: how many of its
	// nodes were busy, incoming or needed, on average over the last hours
	// (the control loop keeps it). Where the nodes are of several kinds,
	// the spare nodes a plan keeps are spread over the kinds in proportion
	// to their use plus one node's worth shared by their node counts, so
	// that the kinds the jobs have been asking for find nodes ready, and
	// with no use recorded the spread follows the node counts. Nil: in
	// proportion to the node counts. A kind not in the map has no use.
	KindUse map[string]float64
}

// State is what Plan remembers between calls. Callers hand each Plan's Next
// to the next call and need not look inside.
type State struct {
	// LowSince is when the target went (and stayed) below the powered
	// count; zero when it is not below.
	LowSince time.Time `json:"low_since,omitzero"`
	// Peaks are the targets set in [now−DownDelay, now] that no later
	// target matched or exceeded, oldest (and highest) first: the first is
	// the highest target of the window. The window is closed: with
	// decisions every 10 minutes and a 30-minute delay, four decisions
	// must agree before anything is powered down.
	Peaks []Mark `json:"peaks,omitempty"`
	// Transitions are the times of the power transitions of the last hour,
	// one per node transition, oldest first.
	Transitions []time.Time `json:"transitions,omitempty"`
}

// Mark is a target and when it was set.
type Mark struct {
	At     time.Time `json:"at"`
	Target int       `json:"target"`
}

// peaks returns the sliding-window maximum after adding target at now:
// marks before now−window dropped, and every mark no higher than target.
func peaks(old []Mark, now time.Time, window time.Duration, target int) []Mark {
	out := make([]Mark, 0, len(old)+1)
	for _, m := range old {
		if !m.At.Before(now.Add(-window)) && !m.At.After(now) && m.Target > target {
			out = append(out, m)
		}
	}
	// Keep the deque decreasing even if the caller's marks are not.
	for i := 1; i < len(out); i++ {
		if out[i].Target >= out[i-1].Target {
			out = append(out[:i-1], out[i:]...)
			i = max(i-2, 0)
		}
	}
	return append(out, Mark{At: now, Target: target})
}

// Action is one node to power up or down.
type Action struct {
	Node string `json:"node"`
	// Reason says why, with the forecast figures behind it.
	Reason string `json:"reason"`
	// ReadyAt is when a node powered up is expected to take jobs (Now +
	// WakeLatency); zero for a power-down.
	ReadyAt time.Time `json:"ready_at,omitzero"`
}

// Plan is the outcome of (Config).Plan.
type Plan struct {
	At time.Time `json:"at"`
	// Target is the number of nodes the policy wants powered now.
	Target int `json:"target"`
	// Powered, Ready and Held count the nodes before the plan: powered
	// (ready or waking), ready, and busy, incoming or needed.
	Powered int `json:"powered"`
	Ready   int `json:"ready"`
	Held    int `json:"held"`
	// PoweredAfter is the number of nodes powered once the plan is
	// applied.
	PoweredAfter int      `json:"powered_after"`
	Demand       float64  `json:"demand"`
	Forecast     Forecast `json:"forecast"`
	// PowerDown and PowerUp are the actions, in the order to apply them.
	PowerDown []Action `json:"power_down"`
	PowerUp   []Action `json:"power_up"`
	// Reason explains the plan as a whole, including why nodes above the
	// target stay powered (hysteresis, transition cap, busy nodes).
	Reason string `json:"reason"`
	// Next is the State to hand to the next call when every action was
	// carried out; Carried gives it when some were not.
	Next State `json:"next"`

	// before is the transition history of the last hour before this plan's
	// actions; low is when the target went below the powered count, kept
	// here when Next restarts that clock for this plan's power-downs.
	before []time.Time
	low    time.Time
}

// Carried returns the State to hand to the next Plan when only the actions
// for which done reports true were carried out (sent to the scheduler);
// Next is that State when all were. A plan whose actions were not carried
// out (a dry run, a partition left unmanaged, held back by a guard) is
// made again as it stands: its transitions do not count
// against MaxTransitionsPerHour, and while any of its power-downs was not
// carried out the down-side clock goes on instead of restarting as after a
// round of power-downs, so that a dry run advises what an applied run
// would do.
func (p Plan) Carried(done func(Action) bool) State {
	next := p.Next
	next.Transitions = slices.Clone(p.before)
	for _, list := range [][]Action{p.PowerUp, p.PowerDown} {
		for _, a := range list {
			if done(a) {
				next.Transitions = append(next.Transitions, p.At)
			}
		}
	}
	if len(next.Transitions) == 0 {
		next.Transitions = nil
	}
	if !p.low.IsZero() && slices.ContainsFunc(p.PowerDown, func(a Action) bool { return !done(a) }) {
		next.LowSince = p.low
	}
	return next
}

// ErrInput is wrapped by the errors Plan returns for an Input it cannot
// plan from.
var ErrInput = errors.New("ces: bad plan input")

// Plan makes the power plan for in. It reads nothing but c and in. Errors
// (wrapping ErrInput) name what is wrong with in; c must be valid.
func (c Config) Plan(in Input) (Plan, error) {
	if err := c.Validate(); err != nil {
		return Plan{}, err
	}
	if err := c.check(in); err != nil {
		return Plan{}, err
	}
	now := in.Now
	p := Plan{At: now, Demand: in.Demand, Forecast: in.Forecast}
	for _, n := range in.Nodes {
		if n.Powered {
			p.Powered++
			if !n.waking(now) {
				p.Ready++
			}
		}
		if n.held() {
			p.Held++
		}
	}

	// The target: the forecast's upper bound plus the buffer, never below
	// current demand, the held nodes or the minimum, never above the nodes.
	f := in.Forecast
	haveForecast := f.usable(now)
	why := c.figures(in, haveForecast)
	target := ceil(in.Demand)
	if haveForecast {
		target = max(target, ceil(f.Upper)+c.Buffer)
	} else {
		target = max(target, ceil(in.Demand)+c.Buffer)
	}
	target = min(max(target, p.Held, c.MinPowered), len(in.Nodes))
	p.Target = target

	// Prune the transition history to the last hour.
	hourAgo := now.Add(-time.Hour)
	recent := slices.DeleteFunc(slices.Clone(in.State.Transitions), func(t time.Time) bool {
		return !t.After(hourAgo) || t.After(now)
	})
	p.before = slices.Clone(recent)

	// Power up: held nodes that are off first (a job is bound for them),
	// then enough others, off longest first, to reach the target. Neither
	// hysteresis nor the cap applies.
	var off []Node
	for _, n := range in.Nodes {
		if !n.Powered && !n.Fixed {
			off = append(off, n)
		}
	}
	slices.SortFunc(off, func(a, b Node) int {
		if a.held() != b.held() {
			if a.held() {
				return -1
			}
			return 1
		}
		if a.Wanted != b.Wanted {
			if a.Wanted {
				return -1
			}
			return 1
		}
		return CompareAge(a, b)
	})
	readyAt := now.Add(c.WakeLatency)
	shortfall := max(target-p.Powered, 0)
	sp := countSpares(in.Nodes, in.KindUse)
	free := off // the held ones sort first
	for len(free) > 0 && free[0].held() {
		n := free[0]
		p.PowerUp = append(p.PowerUp, Action{Node: n.Name, ReadyAt: readyAt,
			Reason: fmt.Sprintf("power up: %s is off but %s; %s", n.Name, heldWhat(n), why)})
		free = free[1:]
	}
	sp.pick(free, shortfall-len(p.PowerUp), true, func(n Node, kind string) {
		wanted := ""
		if n.Wanted {
			wanted = " (a pending job asks for nodes like it)"
		}
		p.PowerUp = append(p.PowerUp, Action{Node: n.Name, ReadyAt: readyAt,
			Reason: fmt.Sprintf("power up: target %d > %d powered%s%s; %s", target, p.Powered, wanted, kind, why)})
	})
	poweredAfterUp := p.Powered + len(p.PowerUp)
	for range p.PowerUp {
		recent = append(recent, now)
	}

	// Power down, slowly: only when the target has stayed below the
	// powered count for DownDelay, and only to the highest target of that
	// window.
	p.Next.Peaks = peaks(in.State.Peaks, now, c.DownDelay, target)
	peak := p.Next.Peaks[0].Target
	var notes []string
	if fixed := countFixed(in.Nodes); fixed > 0 {
		notes = append(notes, fmt.Sprintf("%d nodes fixed as they stand (not the plan's to power)", fixed))
	}
	switch {
	case target >= poweredAfterUp:
		// Not below: the hysteresis clock stops.
		if len(p.PowerUp) < shortfall {
			notes = append(notes, fmt.Sprintf("short of %d nodes: none left to power up", shortfall-len(p.PowerUp)))
		}
	case !haveForecast:
		notes = append(notes, "no current forecast: nothing powered down")
	default:
		low := in.State.LowSince
		if low.IsZero() || low.After(now) {
			low = now
		}
		p.Next.LowSince = low
		floor := max(peak, c.MinPowered)
		want := poweredAfterUp - floor
		switch {
		case now.Sub(low) < c.DownDelay:
			notes = append(notes, fmt.Sprintf("target below powered since %s (%v < %v down delay): nothing powered down yet",
				low.Format(time.DateTime), now.Sub(low), c.DownDelay))
		case want <= c.DownMargin:
			notes = append(notes, fmt.Sprintf("highest target of the last %v is %d: %d surplus nodes ≤ %d margin",
				c.DownDelay, peak, max(want, 0), c.DownMargin))
		default:
			if c.MaxTransitionsPerHour > 0 {
				budget := max(c.MaxTransitionsPerHour-len(recent), 0)
				if budget < want {
					notes = append(notes, fmt.Sprintf("transition cap: %d in the last hour of %d allowed, %d of %d surplus nodes powered down",
						len(recent), c.MaxTransitionsPerHour, budget, want))
					want = budget
				}
			}
			var cand []Node
			for _, n := range in.Nodes {
				if n.Powered && !n.held() && !n.waking(now) && !n.Fixed {
					cand = append(cand, n)
				}
			}
			slices.SortFunc(cand, func(a, b Node) int {
				if a.Wanted != b.Wanted {
					if a.Wanted {
						return 1
					}
					return -1
				}
				return CompareAge(a, b)
			})
			if len(cand) < want {
				notes = append(notes, fmt.Sprintf("%d surplus nodes but only %d idle and ready", want, len(cand)))
				want = len(cand)
			}
			sp.pick(cand, want, false, func(n Node, kind string) {
				p.PowerDown = append(p.PowerDown, Action{Node: n.Name,
					Reason: fmt.Sprintf("power down: idle%s; target below powered since %s (≥ %v down delay), highest target of the last %v %d < %d powered; %s",
						kind, low.Format(time.DateTime), c.DownDelay, c.DownDelay, peak, poweredAfterUp, why)})
				recent = append(recent, now)
			})
			if target >= poweredAfterUp-len(p.PowerDown) {
				p.Next.LowSince = time.Time{}
				p.low = low
			}
		}
	}
	p.PoweredAfter = poweredAfterUp - len(p.PowerDown)
	if len(recent) > 0 {
		p.Next.Transitions = recent
	}
	p.Reason = fmt.Sprintf("target %d (%s); %d powered (%d ready), %d busy, incoming or needed; %d up, %d down",
		target, why, p.Powered, p.Ready, p.Held, len(p.PowerUp), len(p.PowerDown))
	if len(notes) > 0 {
		p.Reason += "; " + strings.Join(notes, "; ")
	}
	return p, nil
}

// check validates an Input.
func (c Config) check(in Input) error {
	if in.Now.IsZero() {
		return fmt.Errorf("%w: now is zero", ErrInput)
	}
	if !finite(in.Demand) || in.Demand < 0 {
		return fmt.Errorf("%w: demand %v is not a non-negative number", ErrInput, in.Demand)
	}
	f := in.Forecast
	if f.Horizon < 0 {
		return fmt.Errorf("%w: forecast horizon %v is negative", ErrInput, f.Horizon)
	}
	if f.Horizon > 0 {
		for _, v := range []struct {
			name string
			v    float64
		}{{"point", f.Point}, {"max", f.Max}, {"upper", f.Upper}} {
			if !finite(v.v) || v.v < 0 {
				return fmt.Errorf("%w: forecast %s %v is not a non-negative number", ErrInput, v.name, v.v)
			}
		}
		if f.Quantile != 0 && math.Abs(f.Quantile-c.Quantile) > 1e-9 {
			return fmt.Errorf("%w: forecast upper bound is the %v quantile; the policy wants %v", ErrInput, f.Quantile, c.Quantile)
		}
		if f.Horizon < c.WakeLatency {
			return fmt.Errorf("%w: forecast horizon %v is shorter than the %v wake-up latency", ErrInput, f.Horizon, c.WakeLatency)
		}
	}
	for k, v := range in.KindUse {
		if !finite(v) || v < 0 {
			return fmt.Errorf("%w: use %v of node kind %q is not a non-negative number", ErrInput, v, k)
		}
	}
	seen := make(map[string]int, len(in.Nodes))
	for i, n := range in.Nodes {
		if n.Name == "" {
			return fmt.Errorf("%w: node %d has no name", ErrInput, i)
		}
		if j, ok := seen[n.Name]; ok {
			return fmt.Errorf("%w: node %q is both node %d and node %d", ErrInput, n.Name, j, i)
		}
		seen[n.Name] = i
	}
	return nil
}

// figures describes the numbers a target came from, for reasons.
func (c Config) figures(in Input, haveForecast bool) string {
	f := in.Forecast
	if !haveForecast {
		return fmt.Sprintf("demand %.0f, buffer %d, no current forecast", in.Demand, c.Buffer)
	}
	q := "upper"
	if f.Quantile > 0 {
		q = fmt.Sprintf("p%.4g upper", 100*f.Quantile)
	}
	return fmt.Sprintf("demand %.0f; forecast at %s over %v: point %.1f, max %.1f, %s %.1f; buffer %d",
		in.Demand, f.Issued.Format(time.DateTime), f.Horizon, f.Point, f.Max, q, f.Upper, c.Buffer)
}

// countFixed returns how many of nodes are Fixed.
func countFixed(nodes []Node) int {
	n := 0
	for _, nd := range nodes {
		if nd.Fixed {
			n++
		}
	}
	return n
}

// heldWhat says why a held node is held.
func heldWhat(n Node) string {
	switch {
	case n.Busy:
		return "has a job"
	case n.Incoming:
		return "a job is bound for it"
	}
	return "a pending job can run only on nodes like it, too few of which are powered and idle"
}

// CompareAge orders nodes by their last transition, oldest (or unknown)
// first, then by name: the order in which Plan powers nodes up and down
// among nodes otherwise alike.
func CompareAge(a, b Node) int {
	if c := a.LastTransition.Compare(b.LastTransition); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// spares counts, by node kind (Node.Kind), a plan's nodes and its spare
// ones: powered (ready or waking) and not held, the idle capacity kept
// ready for the jobs to come. Where a partition has nodes of several kinds
// (A100 and V100 nodes, nodes with and without a feature) a plan spreads
// its spare nodes over the kinds by weight: a kind's recent use
// (Input.KindUse) plus its share of all the nodes, or, without use figures,
// its nodes. So a job that only one kind can run finds one ready about as
// often as the kind's jobs have been coming: among nodes otherwise alike
// (held, wanted) a plan powers up first the kind with the fewest spare
// nodes for its weight, and powers down first the kind with the most; with
// one kind the order is unchanged.
type spares struct {
	nodes, spare map[string]int
	weight       map[string]float64
	use          map[string]float64 // nil: weights are node counts
}

func countSpares(nodes []Node, use map[string]float64) spares {
	s := spares{nodes: map[string]int{}, spare: map[string]int{}, weight: map[string]float64{}, use: use}
	for _, n := range nodes {
		s.nodes[n.Kind]++
		if n.Powered && !n.held() {
			s.spare[n.Kind]++
		}
	}
	for k, c := range s.nodes {
		if use == nil {
			s.weight[k] = float64(c)
		} else {
			s.weight[k] = use[k] + float64(c)/float64(len(nodes))
		}
	}
	return s
}

// compare orders kinds a and b by their spare nodes for their weight.
func (s spares) compare(a, b string) int {
	return cmp.Compare(float64(s.spare[a])*s.weight[b], float64(s.spare[b])*s.weight[a])
}

// pick hands act up to n of cand (sorted in the order the plan prefers
// them: wanted nodes first when powering up, last when powering down, then
// by age) to power up (up) or down, each with its kind's note for the
// reason (note, before the node is counted), and counts each in s.spare:
// in cand's order within each kind, and across kinds the next node is the
// preferred one among the kinds' next nodes by Wanted, then by spare share
// (the smallest when powering up, the largest when powering down), then by
// its place in cand.
func (s spares) pick(cand []Node, n int, up bool, act func(n Node, note string)) {
	step := 1
	if !up {
		step = -1
	}
	if len(s.nodes) == 1 {
		for _, c := range cand[:max(min(n, len(cand)), 0)] {
			act(c, "")
			s.spare[c.Kind] += step
		}
		return
	}
	var kinds []string
	queue := map[string][]int{}
	for i, c := range cand {
		if queue[c.Kind] == nil {
			kinds = append(kinds, c.Kind)
		}
		queue[c.Kind] = append(queue[c.Kind], i)
	}
	for range n {
		best := ""
		found := false
		for _, k := range kinds {
			q := queue[k]
			if len(q) == 0 {
				continue
			}
			if !found {
				best, found = k, true
				continue
			}
			a, b := cand[q[0]], cand[queue[best][0]]
			c := 0
			if a.Wanted != b.Wanted {
				c = -1 // the wanted first when powering up
				if a.Wanted != up {
					c = 1
				}
			}
			if c == 0 {
				c = s.compare(k, best)
				if !up {
					c = -c
				}
			}
			if c == 0 {
				c = cmp.Compare(q[0], queue[best][0])
			}
			if c < 0 {
				best = k
			}
		}
		if !found {
			return
		}
		act(cand[queue[best][0]], s.note(best))
		queue[best] = queue[best][1:]
		s.spare[best] += step
	}
}

// note says, for a reason, how many of kind's nodes are spare, where the
// nodes are of several kinds.
func (s spares) note(kind string) string {
	if len(s.nodes) < 2 {
		return ""
	}
	name := kind
	if name == "" {
		name = "(not given)"
	}
	if s.use == nil {
		return fmt.Sprintf(" (kind %s: %d of its %d nodes spare)", name, s.spare[kind], s.nodes[kind])
	}
	return fmt.Sprintf(" (kind %s: %d of its %d nodes spare, %.1f in use recently)", name, s.spare[kind], s.nodes[kind], s.use[kind])
}

// ceil rounds a node count up, forgiving float noise just above a whole
// number.
// Values beyond any cluster are clamped so the conversion cannot overflow.
func ceil(v float64) int { return int(math.Ceil(min(v, 1<<30) - 1e-9)) }

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
