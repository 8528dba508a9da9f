package ces

import (
	"context"
	"errors"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/predictor/demand"
)

const phillyPath = "../../../shared/data/philly/philly_node_sequence.csv"

// philly reads the Philly node sequence, skipping the test where the shared
// data is absent (failing in CI).
func philly(tb testing.TB) demand.Series {
	tb.Helper()
	f, err := os.Open(phillyPath)
	if os.IsNotExist(err) {
		if os.Getenv("CI") != "" {
			tb.Fatalf("%s is missing: %v", phillyPath, err)
		}
		tb.Skipf("%s is missing; skipping the real-series test", phillyPath)
	}
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	s, err := demand.ReadSeries(f)
	if err != nil {
		tb.Fatalf("ReadSeries(%s) error %v", phillyPath, err)
	}
	return s
}

// tiny returns a 10-minute series: two steps of history, then the test
// steps, starting at t0 − 20m.
func tiny(test ...float64) demand.Series {
	return demand.Series{Start: t0.Add(-20 * time.Minute), Step: 10 * time.Minute, Values: append([]float64{60, 50}, test...)}
}

// TestReplayHandChecked replays a three-step series on 100 nodes with the
// oracle forecast, figures worked out by hand.
func TestReplayHandChecked(t *testing.T) {
	s := tiny(45, 80, 90)
	noDelay := DefaultConfig()
	noDelay.DownDelay = 0
	noDelay.MaxTransitionsPerHour = 0
	day := 24.0 / 0.5 // three 10-minute decisions span half an hour
	tests := []struct {
		name   string
		policy string
		lat    time.Duration
		want   Result
	}{
		{
			// t0: 50 < 60 falling, oracle 45 < 50 agrees: down to 70.
			// t1: 80 ahead, no shortfall yet: step 1 is short (80 > 70).
			// t2: shortfall, up to 80 + 20 = 100, ready at once.
			name: "helios, no wake-up delay", policy: PolicyHelios, lat: 0,
			want: Result{UnmetDemandEvents: 1, PoweredNodeUtil: (45.0/70 + 80.0/70 + 90.0/100) / 3,
				NodeHoursOff: (30 + 30 + 0) / 6.0, TransitionsPerDay: 60 * day},
		},
		{
			// The horizon is two steps: at t0 the oracle's point is 80, at
			// t1 90: demand is never seen to fall, nothing is powered down.
			name: "helios, 10-minute wake-up", policy: PolicyHelios, lat: 10 * time.Minute,
			want: Result{UnmetDemandEvents: 0, PoweredNodeUtil: (45.0 + 80 + 90) / 300},
		},
		{
			// t0: target max(demand 50, oracle 45) = 50: down 50.
			// t1: oracle 80: up 30. t2: oracle 90: up 10.
			name: "heliostat, no wake-up delay", policy: PolicyHeliostat, lat: 0,
			want: Result{UnmetDemandEvents: 0, PoweredNodeUtil: (45.0/50 + 80.0/80 + 90.0/90) / 3,
				NodeHoursOff: (50 + 20 + 10) / 6.0, TransitionsPerDay: 90 * day},
		},
		{
			// Horizon two steps: t0 covers max(45, 80): down 20; t1 covers
			// max(80, 90): up 10, ready at t2; t2 covers 90.
			name: "heliostat, 10-minute wake-up", policy: PolicyHeliostat, lat: 10 * time.Minute,
			want: Result{UnmetDemandEvents: 0, PoweredNodeUtil: (45.0/80 + 80.0/90 + 90.0/90) / 3,
				NodeHoursOff: (20 + 10 + 10) / 6.0, TransitionsPerDay: 30 * day},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := noDelay
			p.WakeLatency = tt.lat
			got, err := Replay(context.Background(), s, ReplayConfig{
				Policy: p, PolicyName: tt.policy, Source: ForecastOracle, Nodes: 100,
				TestFrom: t0, TestUntil: t0.Add(30 * time.Minute),
			})
			if err != nil {
				t.Fatal(err)
			}
			near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
			if got.UnmetDemandEvents != tt.want.UnmetDemandEvents || !near(got.PoweredNodeUtil, tt.want.PoweredNodeUtil) ||
				!near(got.NodeHoursOff, tt.want.NodeHoursOff) || !near(got.TransitionsPerDay, tt.want.TransitionsPerDay) {
				t.Errorf("Replay = unmet %d util %.6f off %.4f transitions/day %.1f; want %d %.6f %.4f %.1f",
					got.UnmetDemandEvents, got.PoweredNodeUtil, got.NodeHoursOff, got.TransitionsPerDay,
					tt.want.UnmetDemandEvents, tt.want.PoweredNodeUtil, tt.want.NodeHoursOff, tt.want.TransitionsPerDay)
			}
			if want := (45.0 + 80 + 90) / 300; !near(got.BaselineNodeUtil, want) || got.Steps != 3 || got.WakeLatencyS != tt.lat.Seconds() {
				t.Errorf("Replay = baseline %.6f steps %d wake %v; want %.6f, 3, %v", got.BaselineNodeUtil, got.Steps, got.WakeLatencyS, want, tt.lat.Seconds())
			}
		})
	}
}

func TestReplayRejects(t *testing.T) {
	s := tiny(45, 80, 90)
	ok := ReplayConfig{Source: ForecastOracle, Nodes: 100, TestFrom: t0, TestUntil: t0.Add(30 * time.Minute)}
	start := t0.Add(-20 * time.Minute).Format(time.DateTime)
	tests := []struct {
		name string
		mod  func(*ReplayConfig)
		want string // in the error; "": any error
	}{
		{"unknown policy", func(rc *ReplayConfig) { rc.PolicyName = "greedy" }, ""},
		{"unknown forecast", func(rc *ReplayConfig) { rc.Source = "crystal-ball" }, ""},
		{"empty window", func(rc *ReplayConfig) { rc.TestUntil = rc.TestFrom }, ""},
		{"off the grid", func(rc *ReplayConfig) { rc.TestFrom = t0.Add(time.Minute) }, "is not on the 10m0s grid"},
		// On the grid, but nothing to train on: say that, not "off the grid".
		{"window at the series start", func(rc *ReplayConfig) { rc.TestFrom = t0.Add(-20 * time.Minute) },
			"test-from " + start + " is not after the series start " + start + ": no demand before it"},
		{"window before the series start", func(rc *ReplayConfig) { rc.TestFrom = t0.Add(-30 * time.Minute) }, "is not after the series start"},
		{"no cluster size", func(rc *ReplayConfig) { rc.Nodes = 0 }, ""},
		{"negative nodes", func(rc *ReplayConfig) { rc.Nodes = -1 }, ""},
		{"cluster below the demand", func(rc *ReplayConfig) { rc.Nodes = 89 }, ""},
		{"window after the data", func(rc *ReplayConfig) {
			rc.TestFrom, rc.TestUntil = t0.Add(24*time.Hour), t0.Add(48*time.Hour)
		}, ""},
	}
	for _, tt := range tests {
		rc := ok
		tt.mod(&rc)
		_, err := Replay(context.Background(), s, rc)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Replay(test-from %s) error %v; want one containing %q", tt.name, rc.TestFrom.Format(time.DateTime), err, tt.want)
		}
		if tt.want != "" && !strings.Contains(tt.want, "grid") && strings.Contains(err.Error(), "grid") {
			t.Errorf("%s: Replay error %v; the time is on the grid", tt.name, err)
		}
	}
	if _, err := Replay(context.Background(), s, ok); err != nil {
		t.Errorf("Replay(good config) error %v", err)
	}
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Replay(cancelled, s, ok); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "replay stopped at "+t0.Format(time.DateTime)) {
		t.Errorf("Replay(cancelled context) error %v; want it stopped at the window's first step, %s, with the context's cause", err, t0.Format(time.DateTime))
	}
}

// TestReplayCausal: every decision up to T — forecast, target, actions —
// is the same whatever the series says from T on; the forecaster and the
// policy never read data after the decision time. With the model source the
// forecaster refits daily and calibrates online, so this covers both.
func TestReplayCausal(t *testing.T) {
	s := philly(t)
	from := demand.DefaultConfig().TestFrom
	T := from.Add(26*time.Hour + 30*time.Minute) // after the second daily refit
	rc := ReplayConfig{TestFrom: from, TestUntil: T.Add(3 * time.Hour)}
	run := func(s demand.Series) []Step {
		var steps []Step
		rc := rc
		rc.OnStep = func(st Step) { steps = append(steps, st) }
		if _, err := Replay(context.Background(), s, rc); err != nil {
			t.Fatal(err)
		}
		return steps
	}
	clean := run(s)
	for _, bad := range []float64{0, 420, math.NaN()} {
		c := s
		c.Values = slices.Clone(s.Values)
		for i := range c.Values {
			if !c.Time(i).Before(T) {
				c.Values[i] = bad
			}
		}
		got := run(c)
		differs := false
		for i, st := range got {
			want := clean[i]
			if st.At.After(T) {
				differs = differs || st.Target != want.Target || st.Forecast != want.Forecast
				continue
			}
			// The step's own demand is the outcome, not an input.
			st.Demand, want.Demand, st.Unmet, want.Unmet = 0, 0, false, false
			if st != want {
				t.Fatalf("future set to %v: decision at %s = %+v; want %+v", bad, st.At.Format(time.DateTime), st, want)
			}
		}
		if !differs {
			t.Errorf("future set to %v: no decision after %s changed; the check has no teeth", bad, T.Format(time.DateTime))
		}
	}
}

// TestReplayPhilly is ANCHORS.md's CES protocol on the Philly series: 10-
// minute steps, the test window 2017-12-01 .. 14, strictly causal forecasts.
// Goal: powered-node utilization ≥ 0.91 with ≤ 6 unmet-demand events. The
// floors are a little below what the defaults reach (0.937 and 6 events
// with no wake-up delay, 0.912 and 5 with 10 minutes).
func TestReplayPhilly(t *testing.T) {
	s := philly(t)
	for _, tt := range []struct {
		lat       time.Duration
		util      float64
		unmet     int
		transDays float64
	}{
		{0, 0.93, 6, 200},
		{10 * time.Minute, 0.91, 6, 200},
	} {
		p := DefaultConfig()
		p.WakeLatency = tt.lat
		r, err := Replay(context.Background(), s, ReplayConfig{Policy: p})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("wake %v: powered_node_util %.4f (baseline %.4f) unmet %d node_hours_off %.0f transitions/day %.1f (max %d in an hour) refits %d",
			tt.lat, r.PoweredNodeUtil, r.BaselineNodeUtil, r.UnmetDemandEvents, r.NodeHoursOff, r.TransitionsPerDay, r.MaxTransitionsInHour, r.Refits)
		if r.PoweredNodeUtil < tt.util || r.UnmetDemandEvents > tt.unmet {
			t.Errorf("wake %v: powered_node_util %.4f, unmet %d; want ≥ %.2f, ≤ %d", tt.lat, r.PoweredNodeUtil, r.UnmetDemandEvents, tt.util, tt.unmet)
		}
		if r.Nodes != 420 || r.Steps != 2016 || math.Abs(r.BaselineNodeUtil-0.6898) > 0.0001 {
			t.Errorf("wake %v: %d nodes, %d steps, baseline %.4f; want ANCHORS.md's 420, 2016, 0.6898", tt.lat, r.Nodes, r.Steps, r.BaselineNodeUtil)
		}
		if r.TransitionsPerDay > tt.transDays || r.MaxTransitionsInHour > p.MaxTransitionsPerHour+420 {
			t.Errorf("wake %v: %.1f transitions a day; want ≤ %v", tt.lat, r.TransitionsPerDay, tt.transDays)
		}
		if r.NodeHoursOff <= 0 {
			t.Errorf("wake %v: %.0f node-hours off", tt.lat, r.NodeHoursOff)
		}
	}
}
