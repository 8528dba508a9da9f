package sim

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/heliostat-dev/heliostat/schemas"
)

// runSynthetic runs the synthetic workload of seed for 12 simulated hours as
// fast as possible and returns what was published.
func runSynthetic(t *testing.T, seed uint64, reg prometheus.Registerer) (*Sim, *recorder) {
	t.Helper()
	cfg := Config{Cluster: "test", Seed: seed, VCs: "vc1:4,vc2:4", JobsPerHour: 30, Duration: 12 * time.Hour, Start: t0}
	rec := &recorder{}
	s, err := New(cfg, nil, nil, rec, nil, reg, func() time.Time { return t0 })
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, rec
}

// TestSyntheticRun runs the default synthetic cluster and checks that what it
// published is consistent: samples show load exactly where allocations of
// running jobs are, every job ended, and the counts agree.
func TestSyntheticRun(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	s, rec := runSynthetic(t, 3, reg)
	p := rec.decode(t, "test")
	checkConsistent(t, p)
	st := s.Stats()
	if st.Submitted < 200 || st.Finished != st.Submitted || st.Running != 0 || st.Pending != 0 {
		t.Errorf("Stats() = %+v; want hundreds submitted, all finished", st)
	}
	if int64(len(p.last)) != st.Submitted {
		t.Errorf("events of %d jobs; %d submitted", len(p.last), st.Submitted)
	}
	var started, busy int
	states := map[schemas.JobState]int{}
	for _, e := range p.last {
		if e.Type != schemas.JobEnd {
			t.Errorf("job %s: last event %v", e.JobID, e.Type)
		}
		states[e.State]++
		if e.StartMillis != 0 {
			started++
		}
	}
	for _, smp := range p.samples {
		if u, _ := smp.s.Uint(schemas.GPUUtil); u > 0 {
			busy++
		}
	}
	// 12h at 10s, 64 GPUs; the end tick is included.
	if want := (12*360 + 1) * 64; len(p.samples) != want {
		t.Errorf("%d samples; want %d", len(p.samples), want)
	}
	util := float64(busy) / float64(len(p.samples))
	t.Logf("jobs %d, started %d, states %v, busy samples %.2f", len(p.last), started, states, util)
	if util < 0.1 || util > 0.95 {
		t.Errorf("share of busy samples %.2f; want a busy but not saturated cluster", util)
	}
	if states[schemas.StateCompleted] == 0 || states[schemas.StateFailed] == 0 || states[schemas.StateCancelled] == 0 {
		t.Errorf("final states %v; want all of COMPLETED, FAILED, CANCELLED", states)
	}
	if got := testutil.ToFloat64(s.m.submitted); got != float64(st.Submitted) {
		t.Errorf("heliostat_sim_jobs_submitted_total = %v; want %d", got, st.Submitted)
	}
	if got := testutil.ToFloat64(s.m.messages.WithLabelValues(schemas.TopicGPUSamples, outcomePublished)); got == 0 {
		t.Error("no sample messages counted")
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("metric %s: %s", p.Metric, p.Text)
	}
}

// TestDeterminism checks that a seed fixes everything published, and that
// another seed changes it.
func TestDeterminism(t *testing.T) {
	concat := func(r *recorder) []byte {
		var b bytes.Buffer
		for _, m := range r.msgs {
			b.WriteString(m.topic)
			b.Write(m.key)
			b.Write(m.value)
		}
		return b.Bytes()
	}
	_, a := runSynthetic(t, 11, nil)
	_, b := runSynthetic(t, 11, nil)
	_, c := runSynthetic(t, 12, nil)
	if !bytes.Equal(concat(a), concat(b)) {
		t.Error("two runs with seed 11 published different messages")
	}
	if bytes.Equal(concat(a), concat(c)) {
		t.Error("seeds 11 and 12 published the same messages")
	}
}

// TestRunRealTime runs the clock at 60× in a synctest bubble and acts on the
// cluster while it runs: the action takes effect at the simulated time that
// corresponds to when it was made.
func TestRunRealTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		jobs := []JobSpec{
			{ID: "a", VC: "vc1", GPUs: 8, Duration: 40 * time.Minute},
			{ID: "b", VC: "vc1", GPUs: 8, Submit: time.Minute, Duration: 10 * time.Minute},
			{ID: "c", VC: "vc1", GPUs: 8, Submit: time.Minute, Duration: 10 * time.Minute},
		}
		rec := &recorder{}
		s, err := New(Config{Cluster: "test", Nodes: 1, Speedup: 60, Duration: time.Hour}, Jobs(jobs), nil, rec, nil, nil, time.Now)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- s.Run(context.Background()) }()
		time.Sleep(30 * time.Second)
		if err := s.SetPriority("c", 5); err != nil {
			t.Fatal(err)
		}
		if err := s.PowerDown("sim-node-001"); !errors.Is(err, ErrNodeBusy) {
			t.Errorf("PowerDown(busy node) = %v; want ErrNodeBusy", err)
		}
		if got := s.Now(); !got.Equal(start.Add(30 * time.Minute)) {
			t.Errorf("Now() after 30s at 60x = %v; want %v", got, start.Add(30*time.Minute))
		}
		if err := s.Advance(context.Background(), start.Add(2*time.Hour)); !errors.Is(err, ErrRunning) {
			t.Errorf("Advance during Run = %v; want ErrRunning", err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if elapsed := time.Since(start); elapsed != time.Minute {
			t.Errorf("an hour at 60x took %v; want 1m", elapsed)
		}
		p := rec.decode(t, "test")
		checkConsistent(t, p)
		at := func(ms int64) time.Duration { return time.UnixMilli(ms).Sub(start) }
		for _, e := range p.events {
			if e.Type == schemas.JobUpdate && (e.JobID != "c" || at(e.EventMillis) != 30*time.Minute) {
				t.Errorf("UPDATE of %s at %v; want c at 30m", e.JobID, at(e.EventMillis))
			}
		}
		for id, want := range map[string]time.Duration{"a": 0, "c": 40 * time.Minute, "b": 50 * time.Minute} {
			if got := at(p.last[id].StartMillis); got != want || p.last[id].State != schemas.StateCompleted {
				t.Errorf("job %s started at %v, state %v; want %v, COMPLETED", id, got, p.last[id].State, want)
			}
		}
	})
}

// TestRunStops checks that Run ends jobs when it returns and publishes them.
func TestRunStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		jobs := []JobSpec{
			{ID: "a", VC: "vc1", GPUs: 8, Duration: time.Hour},
			{ID: "b", VC: "vc1", GPUs: 8, Duration: time.Hour},
		}
		rec := &recorder{}
		s, err := New(Config{Cluster: "test", Nodes: 1, Speedup: 60}, Jobs(jobs), nil, rec, nil, nil, time.Now)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		time.Sleep(10 * time.Second)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		p := rec.decode(t, "test")
		if a, b := p.last["a"], p.last["b"]; a.State != schemas.StateNodeFail || b.State != schemas.StateCancelled || b.StartMillis != 0 {
			t.Errorf("after stop: a %v, b %v (start %d); want NODE_FAIL, CANCELLED never started", a.State, b.State, b.StartMillis)
		}
		checkConsistent(t, p)
	})
}

func TestNewErrors(t *testing.T) {
	rec := &recorder{}
	for _, tc := range []struct {
		cfg  Config
		pub  *recorder
		want string
	}{
		{Config{}, nil, "no publisher"},
		{Config{Speedup: 0}, rec, "never ends"},
		{Config{Nodes: 3, VCs: "a:1"}, rec, "--sim.nodes"},
	} {
		var err error
		if tc.pub == nil {
			_, err = New(tc.cfg, nil, nil, nil, nil, nil, nil)
		} else {
			_, err = New(tc.cfg, nil, nil, tc.pub, nil, nil, nil)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v; want an error containing %q", tc.cfg, err, tc.want)
		}
	}
}

// slowPublisher takes a second of (bubble) time per message, as a broker
// under load would.
type slowPublisher struct{ recorder }

func (p *slowPublisher) Publish(ctx context.Context, topic string, key, value []byte) error {
	time.Sleep(time.Second)
	return p.recorder.Publish(ctx, topic, key, value)
}

// TestRunStopsAtDuration: Run simulates Duration and no more, even when
// publishing takes real time while the clock runs at 60× (before, the
// catch-up at the stop went on to where the real clock had got to).
func TestRunStopsAtDuration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now().Truncate(time.Second)
		jobs := []JobSpec{
			{ID: "a", VC: "vc1", GPUs: 8, Duration: 50 * time.Minute},
			{ID: "b", VC: "vc1", GPUs: 8, Submit: time.Minute, Duration: 2 * time.Hour},
		}
		pub := &slowPublisher{}
		s, err := New(Config{Cluster: "test", Nodes: 1, Speedup: 60, Duration: time.Hour, Start: start}, Jobs(jobs), nil, pub, nil, nil, time.Now)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		// The nodes report at 1h, so the running job ends a second later
		// (stop), inside its allocation's samples.
		const want = time.Hour + time.Second
		if got := s.Now().Sub(start); got != want {
			t.Errorf("Now() after Run with Duration 1h = %v after the start; want %v", got, want)
		}
		p := pub.decode(t, "test")
		if b := p.last["b"]; b.State != schemas.StateNodeFail || time.UnixMilli(b.EndMillis).Sub(start) != want {
			t.Errorf("job b: %v at %v; want NODE_FAIL at %v", b.State, time.UnixMilli(b.EndMillis).Sub(start), want)
		}
	})
}
