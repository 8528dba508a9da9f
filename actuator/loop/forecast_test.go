package loop

import (
	"log/slog"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// forecastLoop returns a Loop with only what forecast needs.
func forecastLoop(t *testing.T, c Config) *Loop {
	t.Helper()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	m, err := newMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &Loop{cfg: c.withDefaults(), m: m, logger: slog.New(slog.DiscardHandler)}
}

// daily is a demand of 2–18 nodes with a daily cycle, 0 at midnight.
func daily(at time.Time) float64 {
	h := float64(at.Hour()) + float64(at.Minute())/60
	return math.Round(10 - 8*math.Cos(2*math.Pi*h/24))
}

var day0 = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC) // a Monday

func TestForecastModelTakesOver(t *testing.T) {
	l := forecastLoop(t, Config{})
	ps := &poolState{first: day0}
	const pass = 5 * time.Minute
	var modelAt time.Time
	var covered, decisions, peakCovered int
	var slack, peakSlack float64 // Σ (upper − actual): nodes kept up beyond need
	peakLoop := forecastLoop(t, Config{Forecast: ForecastPeak})
	pps := &poolState{first: day0}
	for now := day0; now.Before(day0.Add(5 * 24 * time.Hour)); now = now.Add(pass) {
		f, kind := l.forecast(ps, now, daily(now))
		pf, pkind := peakLoop.forecast(pps, now, daily(now))
		if !strings.HasPrefix(pkind, "peak of the last 1h0m0s") || strings.Contains(pkind, "model") {
			t.Fatalf("peak loop at %v: kind %q", now, pkind)
		}
		if now.Sub(day0) < 24*time.Hour {
			if !strings.HasPrefix(kind, "peak of the last 1h0m0s; model after 24h0m0s of demand history") {
				t.Fatalf("at %v (before a day of history): kind %q", now, kind)
			}
			continue
		}
		if !strings.HasPrefix(kind, "demand model (10m0s steps, 1h0m0s ahead, upper = q0.995") {
			t.Fatalf("at %v: kind %q, want the demand model", now, kind)
		}
		if modelAt.IsZero() {
			modelAt = now
		}
		if want := now.Truncate(10 * time.Minute); !f.Issued.Equal(want) || f.Horizon != time.Hour || f.Quantile != 0.995 {
			t.Fatalf("at %v: forecast issued %v horizon %v quantile %g, want %v, 1h, 0.995", now, f.Issued, f.Horizon, f.Quantile, want)
		}
		if f.Upper < f.Max || f.Max < 0 || math.IsNaN(f.Upper) {
			t.Fatalf("at %v: upper %g max %g", now, f.Upper, f.Max)
		}
		if now.Sub(day0) < 3*24*time.Hour || now != f.Issued {
			continue
		}
		// Coverage of the next hour's largest demand, one decision a step.
		actual := 0.0
		for s := f.Issued.Add(pass); !s.After(f.Issued.Add(time.Hour)); s = s.Add(pass) {
			actual = max(actual, daily(s))
		}
		decisions++
		if f.Upper >= actual {
			covered++
		}
		slack += f.Upper - actual
		if pf.Upper >= actual {
			peakCovered++
		}
		peakSlack += max(pf.Upper-actual, 0)
	}
	if !modelAt.Equal(day0.Add(24 * time.Hour)) {
		t.Errorf("model forecast first used at %v, want %v", modelAt, day0.Add(24*time.Hour))
	}
	// The peak of the past hour misses every rising hour; the model
	// sees the cycle coming.
	model, peak := float64(covered)/float64(decisions), float64(peakCovered)/float64(decisions)
	t.Logf("next hour's peak covered: model %.3f, watched peak %.3f (%d decisions); mean excess: model %.2f nodes, watched peak %.2f when it covers", model, peak, decisions, slack/float64(decisions), peakSlack/float64(decisions))
	if model < 0.95 || model <= peak {
		t.Errorf("model covers %.3f of the next hours' peaks, the watched peak %.3f; want ≥ 0.95 and better", model, peak)
	}
	if slack/float64(decisions) > 3 {
		t.Errorf("model keeps %.2f nodes a decision beyond the next hour's peak, want ≤ 3", slack/float64(decisions))
	}
}

// TestForecastCausal: the demand seen within the step a forecast is issued
// at, and anything after, does not change it.
func TestForecastCausal(t *testing.T) {
	a, b := forecastLoop(t, Config{}), forecastLoop(t, Config{})
	pa, pb := &poolState{first: day0}, &poolState{first: day0}
	at := day0.Add(30 * time.Hour)
	for now := day0; now.Before(at); now = now.Add(time.Minute) {
		a.forecast(pa, now, daily(now))
		b.forecast(pb, now, daily(now))
	}
	fa, _ := a.forecast(pa, at, 0)
	fb, _ := b.forecast(pb, at, 40)
	fb2, _ := b.forecast(pb, at.Add(9*time.Minute), 40)
	if fa != fb || fa != fb2 {
		t.Fatalf("forecasts at %v differ with the demand seen at and after it: %+v, %+v, %+v", at, fa, fb, fb2)
	}
	fa3, _ := a.forecast(pa, at.Add(10*time.Minute), 0)
	fb3, _ := b.forecast(pb, at.Add(10*time.Minute), 40)
	if fa3 == fb3 {
		t.Fatalf("the next step's forecast ignores the step that ended: %+v", fa3)
	}
}

// TestForecastGap: after the loop was down for hours the model forecasts
// again once it has observed one step since (the missing steps are
// unknown, not zero); at the first pass after the gap it falls back to the
// peak rather than carry the demand from before the gap forward.
func TestForecastGap(t *testing.T) {
	l := forecastLoop(t, Config{})
	ps := &poolState{first: day0}
	back := day0.Add(34 * time.Hour)
	for now := day0; now.Before(day0.Add(50 * time.Hour)); now = now.Add(10 * time.Minute) {
		if now.After(day0.Add(30*time.Hour)) && now.Before(back) {
			continue
		}
		f, kind := l.forecast(ps, now, daily(now))
		switch {
		case now.Equal(back):
			if !strings.Contains(kind, "model after a step observed since the gap") {
				t.Fatalf("first pass after the gap: kind %q", kind)
			}
		case now.Sub(day0) >= 24*time.Hour && (!strings.HasPrefix(kind, "demand model") || f.Upper < daily(now)-4):
			t.Fatalf("at %v: kind %q, forecast %+v", now, kind, f)
		}
	}
}

func TestForecastHistoryBounded(t *testing.T) {
	dm := &demandModel{}
	dm.steps.Step = 10 * time.Minute
	for now := day0; now.Before(day0.Add(45 * 24 * time.Hour)); now = now.Add(time.Hour) {
		dm.record(now, 1)
	}
	if n := len(dm.steps.Values); n != int(maxDemandHistory/dm.steps.Step) {
		t.Fatalf("%d steps kept, want %d", n, int(maxDemandHistory/dm.steps.Step))
	}
	if end := dm.steps.End(); !end.Equal(day0.Add(45*24*time.Hour - 50*time.Minute)) {
		t.Fatalf("history ends %v", end)
	}
	before, start := slices.Clone(dm.steps.Values), dm.steps.Start
	dm.record(day0, 5)                             // the clock went back past the kept history: ignored
	dm.record(dm.steps.Start.Add(-time.Minute), 5) // just before it: ignored too
	if !dm.steps.Start.Equal(start) || len(dm.steps.Values) != len(before) {
		t.Fatalf("a pass in the past moved the history: start %v → %v, %d → %d steps", start, dm.steps.Start, len(before), len(dm.steps.Values))
	}
	for i := range before {
		if a, b := before[i], dm.steps.Values[i]; a != b && !(math.IsNaN(a) && math.IsNaN(b)) {
			t.Fatalf("a pass in the past rewrote step %d: %v → %v", i, a, b)
		}
	}
}

func TestForecastConfig(t *testing.T) {
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{Forecast: "oracle"}, `--actuator.forecast "oracle"`},
		{Config{ForecastMinHistory: -time.Hour}, "--actuator.forecast-min-history"},
	} {
		if err := tc.c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err %v, want %q", tc.c, err, tc.want)
		}
	}
	c := Config{}.withDefaults()
	c.CES.WakeLatency = 75 * time.Minute
	if h := c.forecasterConfig().Model.Horizon; h != 90*time.Minute {
		t.Errorf("wake latency 75m: horizon %v, want 1h30m", h)
	}
}
