package ces

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2017, 12, 4, 12, 0, 0, 0, time.UTC)

// cluster returns n nodes named n00, n01, …, the first `powered` on, the
// first `busy` of those busy.
func cluster(n, powered, busy int) []Node {
	out := make([]Node, n)
	for i := range out {
		out[i] = Node{Name: fmt.Sprintf("n%02d", i), Powered: i < powered, Busy: i < busy && i < powered}
	}
	return out
}

// fc returns a forecast issued at `at` whose upper bound is upper.
func fc(at time.Time, upper float64) Forecast {
	return Forecast{Issued: at, Horizon: 20 * time.Minute, Point: upper * 0.9, Max: upper * 0.95, Upper: upper, Quantile: DefaultQuantile}
}

// lowFor returns a State in which the target has been `target` (below the
// powered count) for d before now.
func lowFor(now time.Time, d time.Duration, target int) State {
	return State{LowSince: now.Add(-d), Peaks: []Mark{{At: now.Add(-d), Target: target}}}
}

func names(as []Action) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.Node)
	}
	return out
}

func TestPlan(t *testing.T) {
	def := DefaultConfig()
	noDelay := def
	noDelay.DownDelay = 0
	capped := def
	capped.MaxTransitionsPerHour = 5
	margin := def
	margin.DownMargin = 3
	buffered := def
	buffered.Buffer = 2
	min4 := noDelay
	min4.MinPowered = 4

	incoming := cluster(10, 10, 2)
	incoming[5].Incoming = true
	heldOff := cluster(10, 3, 3)
	heldOff[8].Incoming = true
	waking := cluster(10, 10, 0)
	for i := 6; i < 10; i++ {
		waking[i].WakingUntil = t0.Add(5 * time.Minute)
	}
	// wanted: n06 and n08 are what a pending job asks for (n08 also
	// bound for one); n02 and n03, powered and idle, are not.
	wanted := cluster(10, 4, 1)
	wanted[6].Wanted, wanted[8].Wanted, wanted[8].Incoming = true, true, true
	wantedOn := cluster(8, 8, 0)
	wantedOn[2].Wanted, wantedOn[3].Wanted = true, true
	// needed: n05 (off) and n01 (on, idle) are counted for pending jobs
	// that only nodes like them can run; the count target is already met.
	needed := cluster(8, 4, 0)
	needed[5].Needed, needed[5].Wanted, needed[1].Needed, needed[1].Wanted = true, true, true, true
	aged := cluster(10, 5, 0)
	for i := range aged {
		aged[i].LastTransition = t0.Add(-time.Duration(10-i) * time.Hour) // n00 oldest
	}
	aged[3].LastTransition = time.Time{} // unknown: oldest of all
	manyRecent := make([]time.Time, 4)
	for i := range manyRecent {
		manyRecent[i] = t0.Add(-time.Duration(10*i+5) * time.Minute)
	}
	stale := []time.Time{t0.Add(-2 * time.Hour), t0.Add(-61 * time.Minute)}
	// fixed returns nodes with those named Fixed (outside the allowlist, or
	// excluded from power saving by the scheduler).
	fixed := func(nodes []Node, which ...int) []Node {
		nodes = slices.Clone(nodes)
		for _, i := range which {
			nodes[i].Fixed = true
		}
		return nodes
	}

	// twoKinds: n00-n05 are A100 nodes, n06-n09 V100 nodes.
	twoKinds := func(nodes []Node) []Node {
		nodes = slices.Clone(nodes)
		for i := range nodes {
			nodes[i].Kind = "a100×8"
			if i >= 6 {
				nodes[i].Kind = "v100×8"
			}
		}
		return nodes
	}
	// wantedKinds: twoKinds, all off but n00 (busy) and n06 (idle); n09
	// is what a pending job asks for.
	wantedKinds := twoKinds(cluster(10, 1, 1))
	wantedKinds[6].Powered, wantedKinds[9].Wanted = true, true

	tests := []struct {
		name     string
		c        Config
		in       Input
		target   int
		up, down []string
		reason   string // a substring of Plan.Reason
	}{
		{
			name:   "busy nodes are never powered down, whatever the forecast",
			c:      noDelay,
			in:     Input{Now: t0, Nodes: cluster(6, 6, 4), Demand: 0, Forecast: fc(t0, 0)},
			target: 4, down: []string{"n04", "n05"},
		},
		{
			name:   "incoming nodes are never powered down",
			c:      noDelay,
			in:     Input{Now: t0, Nodes: incoming, Demand: 2, Forecast: fc(t0, 2)},
			target: 3, down: []string{"n02", "n03", "n04", "n06", "n07", "n08", "n09"},
		},
		{
			name:   "an off node a job is bound for is powered up first",
			c:      def,
			in:     Input{Now: t0, Nodes: heldOff, Demand: 3, Forecast: fc(t0, 5)},
			target: 5, up: []string{"n08", "n03"},
		},
		{
			name:   "bound nodes first, then nodes a pending job asks for, then the rest",
			c:      def,
			in:     Input{Now: t0, Nodes: wanted, Demand: 5, Forecast: fc(t0, 7)},
			target: 7, up: []string{"n08", "n06", "n04"},
		},
		{
			name:   "nodes a pending job asks for are powered down last",
			c:      noDelay,
			in:     Input{Now: t0, Nodes: wantedOn, Demand: 0, Forecast: fc(t0, 2)},
			target: 2, down: []string{"n00", "n01", "n04", "n05", "n06", "n07"},
		},
		{
			name:   "a needed node off is powered up though the target is met",
			c:      def,
			in:     Input{Now: t0, Nodes: needed, Demand: 2, Forecast: fc(t0, 2)},
			target: 2, up: []string{"n05"}, reason: "2 busy, incoming or needed",
		},
		{
			name:   "a needed node on is never powered down",
			c:      noDelay,
			in:     Input{Now: t0, Nodes: needed, Demand: 0, Forecast: fc(t0, 0)},
			target: 2, up: []string{"n05"}, down: []string{"n00", "n02", "n03"},
		},
		{
			name:   "never below the minimum",
			c:      min4,
			in:     Input{Now: t0, Nodes: cluster(10, 10, 1), Demand: 1, Forecast: fc(t0, 1)},
			target: 4, down: []string{"n01", "n02", "n03", "n04", "n05", "n06"},
		},
		{
			name:   "the minimum powers nodes up",
			c:      min4,
			in:     Input{Now: t0, Nodes: cluster(10, 2, 0), Demand: 0, Forecast: fc(t0, 0)},
			target: 4, up: []string{"n02", "n03"},
		},
		{
			name:   "target is the forecast's upper bound, rounded up, plus the buffer",
			c:      buffered,
			in:     Input{Now: t0, Nodes: cluster(10, 5, 3), Demand: 3, Forecast: fc(t0, 4.2)},
			target: 7, up: []string{"n05", "n06"},
		},
		{
			name:   "a shortfall powers up at once, past hysteresis and an exhausted cap",
			c:      capped,
			in:     Input{Now: t0, Nodes: cluster(10, 4, 4), Demand: 4, Forecast: fc(t0, 8), State: State{Transitions: slices.Repeat([]time.Time{t0.Add(-time.Minute)}, 5)}},
			target: 8, up: []string{"n04", "n05", "n06", "n07"},
		},
		{
			name:   "current demand above the forecast is covered",
			c:      def,
			in:     Input{Now: t0, Nodes: cluster(10, 3, 3), Demand: 6, Forecast: fc(t0, 2)},
			target: 6, up: []string{"n03", "n04", "n05"},
		},
		{
			name:   "a shortfall with no node left powers up what there is",
			c:      def,
			in:     Input{Now: t0, Nodes: cluster(4, 2, 2), Demand: 2, Forecast: fc(t0, 9)},
			target: 4, up: []string{"n02", "n03"}, reason: "",
		},
		{
			name:   "hysteresis: below for less than the delay, nothing goes down",
			c:      def,
			in:     Input{Now: t0, Nodes: cluster(10, 10, 2), Demand: 2, Forecast: fc(t0, 3), State: lowFor(t0, 20*time.Minute, 3)},
			target: 3, reason: "nothing powered down yet",
		},
		{
			name:   "hysteresis: below for the delay, down to the highest target of the window",
			c:      def,
			in:     Input{Now: t0, Nodes: cluster(10, 10, 2), Demand: 2, Forecast: fc(t0, 3), State: lowFor(t0, 30*time.Minute, 6)},
			target: 3, down: []string{"n02", "n03", "n04", "n05"},
		},
		{
			name: "hysteresis: a target older than the window no longer counts",
			c:    def,
			in: Input{Now: t0, Nodes: cluster(10, 10, 2), Demand: 2, Forecast: fc(t0, 3),
				State: State{LowSince: t0.Add(-2 * time.Hour), Peaks: []Mark{{At: t0.Add(-31 * time.Minute), Target: 9}, {At: t0.Add(-20 * time.Minute), Target: 5}}}},
			target: 3, down: []string{"n02", "n03", "n04", "n05", "n06"},
		},
		{
			name:   "margin: freeing no more than the margin, nothing goes down",
			c:      margin,
			in:     Input{Now: t0, Nodes: cluster(10, 10, 2), Demand: 2, Forecast: fc(t0, 7), State: lowFor(t0, time.Hour, 7)},
			target: 7, reason: "3 surplus nodes ≤ 3 margin",
		},
		{
			name:   "margin: freeing more than the margin powers down",
			c:      margin,
			in:     Input{Now: t0, Nodes: cluster(10, 10, 2), Demand: 2, Forecast: fc(t0, 6), State: lowFor(t0, time.Hour, 6)},
			target: 6, down: []string{"n02", "n03", "n04", "n05"},
		},
		{
			name:   "cap: transitions of the last hour leave room for one",
			c:      capped,
			in:     Input{Now: t0, Nodes: cluster(10, 10, 2), Demand: 2, Forecast: fc(t0, 2), State: State{LowSince: t0.Add(-time.Hour), Transitions: manyRecent}},
			target: 2, down: []string{"n02"}, reason: "transition cap",
		},
		{
			name:   "cap: transitions older than an hour do not count",
			c:      capped,
			in:     Input{Now: t0, Nodes: cluster(10, 10, 2), Demand: 2, Forecast: fc(t0, 2), State: State{LowSince: t0.Add(-time.Hour), Transitions: stale}},
			target: 2, down: []string{"n02", "n03", "n04", "n05", "n06"},
		},
		{
			name:   "waking nodes count as powered and are not powered down",
			c:      noDelay,
			in:     Input{Now: t0, Nodes: waking, Demand: 0, Forecast: fc(t0, 1)},
			target: 1, down: []string{"n00", "n01", "n02", "n03", "n04", "n05"}, reason: "9 surplus nodes but only 6 idle and ready",
		},
		{
			name:   "waking nodes cover a shortfall: none powered up twice",
			c:      def,
			in:     Input{Now: t0, Nodes: waking, Demand: 0, Forecast: fc(t0, 10)},
			target: 10,
		},
		{
			name:   "no forecast: nothing goes down",
			c:      noDelay,
			in:     Input{Now: t0, Nodes: cluster(10, 10, 2), Demand: 2},
			target: 2, reason: "no current forecast",
		},
		{
			name:   "a stale forecast is no forecast",
			c:      noDelay,
			in:     Input{Now: t0, Nodes: cluster(10, 10, 2), Demand: 2, Forecast: fc(t0.Add(-time.Hour), 2)},
			target: 2, reason: "no current forecast",
		},
		{
			name:   "no forecast: a shortfall still powers up, to demand plus buffer",
			c:      buffered,
			in:     Input{Now: t0, Nodes: cluster(10, 2, 2), Demand: 3},
			target: 5, up: []string{"n02", "n03", "n04"},
		},
		{
			name:   "nodes off longest are powered up first, on longest powered down first",
			c:      noDelay,
			in:     Input{Now: t0, Nodes: aged, Demand: 0, Forecast: fc(t0, 3)},
			target: 3, down: []string{"n03", "n00"},
		},
		{
			name:   "fixed nodes off are never powered up: the others are",
			c:      def,
			in:     Input{Now: t0, Nodes: fixed(cluster(6, 2, 2), 2, 3), Demand: 4, Forecast: fc(t0, 4)},
			target: 4, up: []string{"n04", "n05"}, reason: "2 nodes fixed as they stand",
		},
		{
			name:   "fixed nodes off only: the shortfall stays",
			c:      def,
			in:     Input{Now: t0, Nodes: fixed(cluster(4, 2, 2), 2, 3), Demand: 4, Forecast: fc(t0, 4)},
			target: 4, reason: "short of 2 nodes: none left to power up",
		},
		{
			name:   "a fixed node off that a job is bound for is left to the scheduler",
			c:      def,
			in:     Input{Now: t0, Nodes: fixed(heldOff, 8), Demand: 3, Forecast: fc(t0, 5)},
			target: 5, up: []string{"n03", "n04"},
		},
		{
			name:   "fixed nodes on count as powered and are never powered down",
			c:      noDelay,
			in:     Input{Now: t0, Nodes: fixed(cluster(6, 6, 0), 0, 1), Demand: 0, Forecast: fc(t0, 2)},
			target: 2, down: []string{"n02", "n03", "n04", "n05"},
		},
		{
			name:   "fixed nodes on: a surplus among them stays",
			c:      noDelay,
			in:     Input{Now: t0, Nodes: fixed(cluster(6, 6, 0), 0, 1, 2, 3), Demand: 0, Forecast: fc(t0, 1)},
			target: 1, down: []string{"n04", "n05"}, reason: "5 surplus nodes but only 2 idle and ready",
		},
		{
			// Spare shares A100 6/6 and V100 4/4 (a tie: n00 first), then
			// 5/6 and 4/4 (n06), 5/6 and 3/4 (n01), 4/6 and 3/4 (n07),
			// 4/6 and 2/4 (n02), 3/6 and 2/4 (a tie: n03); two of each
			// stay powered, where the order of age alone (n00-n05) would
			// keep four V100 nodes and no A100.
			name:   "kinds: the spare nodes kept are spread over the kinds, in proportion to their nodes",
			c:      noDelay,
			in:     Input{Now: t0, Nodes: twoKinds(cluster(10, 10, 0)), Demand: 0, Forecast: fc(t0, 4)},
			target: 4, down: []string{"n00", "n06", "n01", "n07", "n02", "n03"}, reason: "",
		},
		{
			// Spare shares 0/6 and 0/4 (n02 first by age), then 1/6 and
			// 0/4 (n06), 1/6 and 1/4 (n03), 2/6 and 1/4 (n07).
			name:   "kinds: nodes woken for the target are spread over the kinds",
			c:      def,
			in:     Input{Now: t0, Nodes: twoKinds(cluster(10, 2, 2)), Demand: 2, Forecast: fc(t0, 6)},
			target: 6, up: []string{"n02", "n06", "n03", "n07"},
		},
		{
			// n09 though V100 has 1/4 spare and A100 0/6; then n01 (0/6
			// against 2/4).
			name:   "kinds: a node a pending job asks for comes before the spread",
			c:      def,
			in:     Input{Now: t0, Nodes: wantedKinds, Demand: 1, Forecast: fc(t0, 4)},
			target: 4, up: []string{"n09", "n01"},
		},
		{
			// The A100 nodes were in use 5.4 on average, the V100 nodes
			// 0: weights 5.4 + 6/10 = 6 and 0 + 4/10 = 0.4. Spare
			// for weight A100 6/6 and V100 4/0.4 (n06, n07, n08, n09
			// first: 10, 7.5, 5, 2.5 against 1), then 1 against 0 (n00,
			// n01): four A100 nodes stay ready, none of the V100 nodes.
			name:   "kinds: the spare nodes kept follow the kinds' recent use",
			c:      noDelay,
			in:     Input{Now: t0, Nodes: twoKinds(cluster(10, 10, 0)), Demand: 0, Forecast: fc(t0, 4), KindUse: map[string]float64{"a100×8": 5.4}},
			target: 4, down: []string{"n06", "n07", "n08", "n09", "n00", "n01"},
		},
		{
			// With no use recorded the weights are the node shares: the
			// same spread as node counts give.
			name:   "kinds: no use recorded spreads by node counts",
			c:      noDelay,
			in:     Input{Now: t0, Nodes: twoKinds(cluster(10, 10, 0)), Demand: 0, Forecast: fc(t0, 4), KindUse: map[string]float64{}},
			target: 4, down: []string{"n00", "n06", "n01", "n07", "n02", "n03"},
		},
		{
			// Weights A100 0 + 0.6, V100 3 + 0.4 = 3.4. Spare for
			// weight 0 and 0 (n01 first by age), then 1/0.6 against 0
			// (n06), then 1/0.6 against 1/3.4 (n07): two of the three
			// woken are V100 nodes, where node counts give n01, n06, n02.
			name:   "kinds: nodes woken for the target follow the kinds' recent use",
			c:      def,
			in:     Input{Now: t0, Nodes: twoKinds(cluster(10, 1, 1)), Demand: 1, Forecast: fc(t0, 4), KindUse: map[string]float64{"v100×8": 3}},
			target: 4, up: []string{"n01", "n06", "n07"},
		},
		{
			name:   "kinds: nodes woken for the target, without use figures",
			c:      def,
			in:     Input{Now: t0, Nodes: twoKinds(cluster(10, 1, 1)), Demand: 1, Forecast: fc(t0, 4)},
			target: 4, up: []string{"n01", "n06", "n02"},
		},
		{
			name:   "up: off longest first",
			c:      def,
			in:     Input{Now: t0, Nodes: aged, Demand: 0, Forecast: fc(t0, 7)},
			target: 7, up: []string{"n05", "n06"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := tt.c.Plan(tt.in)
			if err != nil {
				t.Fatalf("Plan error %v", err)
			}
			if p.Target != tt.target || !slices.Equal(names(p.PowerUp), tt.up) || !slices.Equal(names(p.PowerDown), tt.down) {
				t.Errorf("Plan = target %d, up %v, down %v; want %d, %v, %v\n%s", p.Target, names(p.PowerUp), names(p.PowerDown), tt.target, tt.up, tt.down, p.Reason)
			}
			if !strings.Contains(p.Reason, tt.reason) {
				t.Errorf("Plan reason %q; want it to contain %q", p.Reason, tt.reason)
			}
			wanted := map[string]bool{}
			for _, n := range tt.in.Nodes {
				wanted[n.Name] = n.Wanted && !n.held()
			}
			for _, a := range append(slices.Clone(p.PowerUp), p.PowerDown...) {
				if a.Reason == "" {
					t.Errorf("action on %s has no reason", a.Node)
				}
				// A wanted node woken for the target says so.
				if says := strings.Contains(a.Reason, "a pending job asks for nodes like it"); says != (wanted[a.Node] && strings.HasPrefix(a.Reason, "power up")) {
					t.Errorf("%s: reason %q", a.Node, a.Reason)
				}
			}
			for _, a := range p.PowerUp {
				if !a.ReadyAt.Equal(tt.in.Now.Add(tt.c.WakeLatency)) {
					t.Errorf("%s ready at %v; want now + %v", a.Node, a.ReadyAt, tt.c.WakeLatency)
				}
			}
			if p.PoweredAfter != p.Powered+len(p.PowerUp)-len(p.PowerDown) {
				t.Errorf("PoweredAfter %d; want %d + %d − %d", p.PoweredAfter, p.Powered, len(p.PowerUp), len(p.PowerDown))
			}
		})
	}
}

// TestPlanReasonNamesKind: where a partition's nodes are of several kinds,
// each action's reason says its node's kind and how many of its nodes were
// spare before it; with one kind, none does.
func TestPlanReasonNamesKind(t *testing.T) {
	c := DefaultConfig()
	c.DownDelay = 0
	nodes := cluster(5, 5, 0)
	for i := range nodes {
		nodes[i].Kind = "a100×8"
	}
	p, err := c.Plan(Input{Now: t0, Nodes: nodes, Demand: 0, Forecast: fc(t0, 2)})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.PowerDown) != 3 || strings.Contains(p.PowerDown[0].Reason, "kind") {
		t.Errorf("one kind: down %v, first reason %q; want 3, no kind", names(p.PowerDown), p.PowerDown[0].Reason)
	}
	nodes[4].Kind = "v100×8"
	if p, err = c.Plan(Input{Now: t0, Nodes: nodes, Demand: 0, Forecast: fc(t0, 2)}); err != nil {
		t.Fatal(err)
	}
	want := []string{"(kind a100×8: 4 of its 4 nodes spare)", "(kind v100×8: 1 of its 1 nodes spare)", "(kind a100×8: 3 of its 4 nodes spare)"}
	if len(p.PowerDown) != len(want) {
		t.Fatalf("two kinds: down %v; want %d nodes", names(p.PowerDown), len(want))
	}
	for i, a := range p.PowerDown {
		if !strings.Contains(a.Reason, want[i]) {
			t.Errorf("%s: reason %q; want it to contain %q", a.Node, a.Reason, want[i])
		}
	}
	// With use figures the reason gives the kind's as well.
	if p, err = c.Plan(Input{Now: t0, Nodes: nodes, Demand: 0, Forecast: fc(t0, 2), KindUse: map[string]float64{"a100×8": 2.25}}); err != nil {
		t.Fatal(err)
	}
	if len(p.PowerDown) == 0 || !strings.Contains(p.PowerDown[0].Reason, "(kind v100×8: 1 of its 1 nodes spare, 0.0 in use recently)") {
		t.Errorf("with use: down %v, first reason %q; want v100×8 first, with its use", names(p.PowerDown), p.PowerDown[0].Reason)
	}
}

// TestPlanReasonNamesForecast: the reasons carry the forecast's figures.
func TestPlanReasonNamesForecast(t *testing.T) {
	c := DefaultConfig()
	f := Forecast{Issued: t0, Horizon: 20 * time.Minute, Point: 281.5, Max: 290.25, Upper: 301.5, Quantile: 0.995}
	p, err := c.Plan(Input{Now: t0, Nodes: cluster(400, 290, 280), Demand: 280, Forecast: f})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.PowerUp) != 12 {
		t.Fatalf("Plan powered up %d nodes; want 12 (302 − 290)", len(p.PowerUp))
	}
	for _, want := range []string{"target 302", "point 281.5", "max 290.2", "p99.5 upper 301.5", "demand 280", "over 20m0s"} {
		if !strings.Contains(p.PowerUp[0].Reason, want) {
			t.Errorf("reason %q lacks %q", p.PowerUp[0].Reason, want)
		}
	}
}

// TestPlanNoFlapping: demand that swings every step does not make nodes
// swing with it; the down-delay holds them until the swings stop.
func TestPlanNoFlapping(t *testing.T) {
	c := DefaultConfig()
	c.MaxTransitionsPerHour = 0
	nodes := cluster(20, 20, 0)
	var st State
	transitions := 0
	for i := range 36 { // six hours of 10-minute decisions
		now := t0.Add(time.Duration(i) * 10 * time.Minute)
		d := 8.0
		if i%2 == 1 {
			d = 14
		}
		if i >= 24 {
			d = 8 // the swings stop
		}
		for j := range nodes {
			nodes[j].Busy = j < int(d) && nodes[j].Powered
		}
		p2, err := c.Plan(Input{Now: now, Nodes: nodes, Demand: d, Forecast: fc(now, d), State: st})
		if err != nil {
			t.Fatal(err)
		}
		st = p2.Next
		apply(nodes, p2, now)
		transitions += len(p2.PowerUp) + len(p2.PowerDown)
		if i < 24 && len(p2.PowerUp) > 0 && i > 0 {
			t.Errorf("step %d: powered up %v while swinging between 8 and 14 with 14 powered", i, names(p2.PowerUp))
		}
	}
	// One descent to 14 within the first half hour, one to 8 half an hour
	// after the swings stop.
	if transitions != 12 {
		t.Errorf("%d transitions; want 12 (20 → 14 → 8)", transitions)
	}
	if n := countPowered(nodes); n != 8 {
		t.Errorf("%d nodes powered at the end; want 8", n)
	}
}

// TestPlanCarried checks the State handed on when only some of a plan's
// actions were carried out. A plan none of whose actions happen (a dry run)
// is made again, whole, at every step: its power-downs neither use up the
// transition cap nor restart the down-side clock. With every action
// carried out, Carried is Next.
func TestPlanCarried(t *testing.T) {
	c := DefaultConfig()
	c.DownDelay, c.MaxTransitionsPerHour = 20*time.Minute, 12
	nodes := cluster(12, 12, 3)
	none := func(Action) bool { return false }
	var st State
	for i := range 9 { // 90 minutes of 10-minute decisions
		now := t0.Add(time.Duration(i) * 10 * time.Minute)
		p, err := c.Plan(Input{Now: now, Nodes: nodes, Demand: 3, Forecast: fc(now, 3), State: st})
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{false: 0, true: 9}[i >= 2]; len(p.PowerDown) != want {
			t.Errorf("step %d: %d power-downs (%s); want %d", i, len(p.PowerDown), p.Reason, want)
		}
		st = p.Carried(none)
		if len(st.Transitions) != 0 {
			t.Errorf("step %d: %d transitions carried with none carried out", i, len(st.Transitions))
		}
		if !st.LowSince.Equal(t0) {
			t.Errorf("step %d: low since %v; want %v, the clock going on", i, st.LowSince, t0)
		}
		if all := p.Carried(func(Action) bool { return true }); !reflect.DeepEqual(all, p.Next) {
			t.Errorf("step %d: Carried(all) = %+v; want Next %+v", i, all, p.Next)
		}
	}

	// One of nine power-downs carried out: one transition, and the clock
	// goes on for the other eight.
	now := t0.Add(90 * time.Minute)
	p, err := c.Plan(Input{Now: now, Nodes: nodes, Demand: 3, Forecast: fc(now, 3), State: st})
	if err != nil {
		t.Fatal(err)
	}
	first := p.PowerDown[0].Node
	one := p.Carried(func(a Action) bool { return a.Node == first })
	if len(one.Transitions) != 1 || !one.LowSince.Equal(t0) {
		t.Errorf("one power-down carried out: %d transitions, low since %v; want 1 and %v", len(one.Transitions), one.LowSince, t0)
	}
	if len(p.Next.Transitions) != 9 || !p.Next.LowSince.IsZero() {
		t.Errorf("Next counts %d transitions, low since %v; want the plan's 9 and the clock restarted", len(p.Next.Transitions), p.Next.LowSince)
	}
}

func apply(nodes []Node, p Plan, now time.Time) {
	for i := range nodes {
		if slices.Contains(names(p.PowerUp), nodes[i].Name) {
			nodes[i].Powered, nodes[i].LastTransition = true, now
		}
		if slices.Contains(names(p.PowerDown), nodes[i].Name) {
			nodes[i].Powered, nodes[i].LastTransition = false, now
		}
	}
}

func countPowered(nodes []Node) int {
	n := 0
	for _, x := range nodes {
		if x.Powered {
			n++
		}
	}
	return n
}

// TestPlanInvariants drives Plan with random clusters, forecasts and
// configs, feeding each plan's state and actions into the next, and checks
// the rules on every plan.
func TestPlanInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var downs, ups, capped int
	defer func() {
		// The test has teeth only if the rules were exercised.
		if downs == 0 || ups == 0 || capped == 0 {
			t.Errorf("%d plans with power-downs, %d with power-ups, %d capped; want some of each", downs, ups, capped)
		}
	}()
	for run := range 200 {
		c := Config{
			Quantile: 0.99, Buffer: rng.IntN(3), DownDelay: time.Duration(rng.IntN(4)) * 10 * time.Minute,
			DownMargin: rng.IntN(3), MinPowered: rng.IntN(5), MaxTransitionsPerHour: rng.IntN(30),
			WakeLatency: time.Duration(rng.IntN(2)) * 10 * time.Minute,
		}
		nodes := cluster(5+rng.IntN(40), 0, 0)
		kinds := 1 + rng.IntN(3) // spares spread over up to three kinds
		for i := range nodes {
			nodes[i].Powered = rng.IntN(2) == 0
			nodes[i].Fixed = rng.IntN(8) == 0
			nodes[i].Kind = fmt.Sprint("k", rng.IntN(kinds))
		}
		var st State
		var history []time.Time
		for i := range 60 {
			now := t0.Add(time.Duration(i) * 10 * time.Minute)
			for j := range nodes {
				nodes[j].Busy = nodes[j].Powered && rng.IntN(3) == 0
				nodes[j].Incoming = !nodes[j].Busy && rng.IntN(10) == 0
			}
			d := float64(rng.IntN(len(nodes) + 1))
			f := Forecast{}
			if rng.IntN(5) > 0 {
				u := rng.Float64() * float64(len(nodes)+5)
				f = Forecast{Issued: now, Horizon: c.WakeLatency + 10*time.Minute, Point: u / 2, Max: u / 2, Upper: u, Quantile: 0.99}
			}
			in := Input{Now: now, Nodes: slices.Clone(nodes), Demand: d, Forecast: f, State: st}
			if run%2 == 0 { // spares spread by the kinds' use
				in.KindUse = map[string]float64{}
				for k := range kinds {
					in.KindUse[fmt.Sprint("k", k)] = rng.Float64() * float64(len(nodes)/kinds)
				}
			}
			p, err := c.Plan(in)
			if err != nil {
				t.Fatalf("run %d step %d: %v", run, i, err)
			}
			byName := map[string]Node{}
			for _, n := range nodes {
				byName[n.Name] = n
			}
			seen := map[string]bool{}
			for _, a := range p.PowerDown {
				n := byName[a.Node]
				if n.Busy || n.Incoming || !n.Powered || n.waking(now) || n.Fixed {
					t.Fatalf("run %d step %d: powered down %+v", run, i, n)
				}
				seen[a.Node] = true
			}
			for _, a := range p.PowerUp {
				if n := byName[a.Node]; n.Powered || n.Fixed || seen[a.Node] {
					t.Fatalf("run %d step %d: powered up %+v (or also down)", run, i, n)
				}
			}
			if len(p.PowerDown) > 0 {
				if p.PoweredAfter < c.MinPowered || p.PoweredAfter < p.Target {
					t.Fatalf("run %d step %d: powered down to %d (min %d, target %d)", run, i, p.PoweredAfter, c.MinPowered, p.Target)
				}
				for _, a := range p.PowerUp {
					if n := byName[a.Node]; !n.held() {
						t.Fatalf("run %d step %d: powered up idle %s and down %v at once", run, i, a.Node, names(p.PowerDown))
					}
				}
				if !f.usable(now) {
					t.Fatalf("run %d step %d: powered down without a forecast", run, i)
				}
			}
			// Shortfalls are met as far as nodes allow.
			if want := min(p.Target, len(nodes)) - p.Powered; want > 0 && len(p.PowerUp) < want {
				off := 0
				for _, n := range nodes {
					if !n.Powered && !n.Fixed {
						off++
					}
				}
				if len(p.PowerUp) < off {
					t.Fatalf("run %d step %d: target %d, %d powered, only %d powered up of %d off", run, i, p.Target, p.Powered, len(p.PowerUp), off)
				}
			}
			// The cap binds power-downs.
			for range len(p.PowerUp) + len(p.PowerDown) {
				history = append(history, now)
			}
			if c.MaxTransitionsPerHour > 0 && len(p.PowerDown) > 0 {
				n := 0
				for _, h := range history {
					if h.After(now.Add(-time.Hour)) {
						n++
					}
				}
				if n > c.MaxTransitionsPerHour {
					t.Fatalf("run %d step %d: %d transitions in the last hour, cap %d", run, i, n, c.MaxTransitionsPerHour)
				}
			}
			if len(p.PowerDown) > 0 {
				downs++
			}
			if len(p.PowerUp) > 0 {
				ups++
			}
			if strings.Contains(p.Reason, "transition cap") {
				capped++
			}
			st = p.Next
			apply(nodes, p, now)
			for j := range nodes {
				if slices.Contains(names(p.PowerUp), nodes[j].Name) {
					nodes[j].WakingUntil = now.Add(c.WakeLatency)
				}
			}
		}
	}
}

// TestPlanPure: the same input gives the same plan, and the input is not
// modified.
func TestPlanPure(t *testing.T) {
	c := DefaultConfig()
	nodes := cluster(30, 20, 5)
	st := State{LowSince: t0.Add(-time.Hour), Peaks: []Mark{{At: t0.Add(-20 * time.Minute), Target: 12}}, Transitions: []time.Time{t0.Add(-time.Minute)}}
	in := Input{Now: t0, Nodes: nodes, Demand: 5, Forecast: fc(t0, 9), State: st}
	before, _ := json.Marshal(in)
	a, err := c.Plan(in)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := c.Plan(in)
	after, _ := json.Marshal(in)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Errorf("two plans of one input differ:\n%s\n%s", ja, jb)
	}
	if string(before) != string(after) {
		t.Errorf("Plan modified its input:\n%s\n%s", before, after)
	}
	if len(a.PowerDown) != 8 {
		t.Errorf("powered down %d; want 8 (20 powered, highest target 12)", len(a.PowerDown))
	}
}

func TestPlanRejects(t *testing.T) {
	c := DefaultConfig()
	good := Input{Now: t0, Nodes: cluster(3, 3, 0), Demand: 1, Forecast: fc(t0, 2)}
	tests := []struct {
		name string
		mod  func(*Input)
		want string
	}{
		{"zero now", func(in *Input) { in.Now = time.Time{} }, "now is zero"},
		{"NaN demand", func(in *Input) { in.Demand = math.NaN() }, "demand NaN"},
		{"negative demand", func(in *Input) { in.Demand = -1 }, "demand -1"},
		{"NaN upper", func(in *Input) { in.Forecast.Upper = math.NaN() }, "forecast upper NaN"},
		{"infinite max", func(in *Input) { in.Forecast.Max = math.Inf(1) }, "forecast max +Inf"},
		{"negative horizon", func(in *Input) { in.Forecast.Horizon = -time.Minute }, "horizon -1m0s is negative"},
		{"other quantile", func(in *Input) { in.Forecast.Quantile = 0.9 }, "0.9 quantile; the policy wants 0.995"},
		{"horizon shorter than wake-up", func(in *Input) { in.Forecast.Horizon = 5 * time.Minute }, "shorter than the 10m0s wake-up latency"},
		{"unnamed node", func(in *Input) { in.Nodes = append(in.Nodes, Node{}) }, "node 3 has no name"},
		{"duplicate node", func(in *Input) { in.Nodes = append(in.Nodes, Node{Name: "n01"}) }, `node "n01" is both node 1 and node 3`},
		{"negative kind use", func(in *Input) { in.KindUse = map[string]float64{"a100×8": -1} }, `use -1 of node kind "a100×8"`},
		{"NaN kind use", func(in *Input) { in.KindUse = map[string]float64{"": math.NaN()} }, `use NaN of node kind ""`},
	}
	for _, tt := range tests {
		in := good
		in.Nodes = slices.Clone(good.Nodes)
		tt.mod(&in)
		_, err := c.Plan(in)
		if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Plan error %v; want ErrInput with %q", tt.name, err, tt.want)
		}
	}
	bad := c
	bad.Quantile = 1
	if _, err := bad.Plan(good); err == nil || !strings.Contains(err.Error(), "--ces.quantile") {
		t.Errorf("Plan with quantile 1: error %v; want --ces.quantile", err)
	}
}

func TestForecastJSON(t *testing.T) {
	f := fc(t0, 12.5)
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"horizon_s":1200`) {
		t.Errorf("Forecast JSON %s lacks horizon_s", b)
	}
	var g Forecast
	if err := json.Unmarshal(b, &g); err != nil || g != f {
		t.Errorf("round trip = %+v, %v; want %+v", g, err, f)
	}
	// No forecast was issued at no time: issued is left out rather than
	// written as year 1.
	if b, err := json.Marshal(Forecast{}); err != nil || strings.Contains(string(b), "issued") {
		t.Errorf("Forecast{} JSON = %s, %v; want no issued", b, err)
	}
	for _, bad := range []string{`{"horizon_s":1e300}`, `{"horizon_s":"x"}`, `[`} {
		if err := json.Unmarshal([]byte(bad), &g); err == nil {
			t.Errorf("Unmarshal(%s) accepted", bad)
		}
	}
}

// FuzzForecastJSON: the forecast decoder (the advisory API takes forecasts
// as JSON) never panics and what it accepts survives a round trip.
func FuzzForecastJSON(f *testing.F) {
	f.Add([]byte(`{"issued":"2017-12-01T00:00:00Z","point":1,"max":2,"upper":3,"quantile":0.995,"horizon_s":600}`))
	f.Add([]byte(`{"horizon_s":-1}`))
	f.Add([]byte(`{"horizon_s":1e308}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var g Forecast
		if err := json.Unmarshal(b, &g); err != nil {
			return
		}
		out, err := json.Marshal(g)
		if err != nil {
			return // e.g. a NaN cannot be written: refused, not dropped
		}
		var h Forecast
		if err := json.Unmarshal(out, &h); err != nil {
			t.Fatalf("re-decoding %s: %v", out, err)
		}
	})
}
