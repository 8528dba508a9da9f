package qssf

import (
	"flag"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"
)

var t0 = time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

func ids(rs []Ranked) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

func TestRank(t *testing.T) {
	pure := Config{AgingRate: 1e-6} // aging negligible at these sizes
	for _, tc := range []struct {
		name string
		cfg  Config
		now  int
		jobs []Job
		want []string
	}{{
		name: "service time is duration times GPUs",
		cfg:  pure,
		now:  10,
		jobs: []Job{
			{ID: "long1", GPUs: 1, Submit: at(0), Predicted: 1000 * time.Second}, // 1000
			{ID: "short8", GPUs: 8, Submit: at(1), Predicted: 100 * time.Second}, // 800
			{ID: "tiny", GPUs: 2, Submit: at(2), Predicted: 10 * time.Second},    // 20
		},
		want: []string{"tiny", "short8", "long1"},
	}, {
		name: "zero and negative GPUs count as one, negative predictions as zero",
		cfg:  pure,
		now:  10,
		jobs: []Job{
			{ID: "a", GPUs: 0, Submit: at(0), Predicted: 50 * time.Second},
			{ID: "b", GPUs: -3, Submit: at(1), Predicted: 40 * time.Second},
			{ID: "c", GPUs: 4, Submit: at(2), Predicted: -time.Second},
		},
		want: []string{"c", "b", "a"},
	}, {
		name: "equal scores: earlier submission, then input order",
		cfg:  pure,
		now:  10,
		jobs: []Job{
			{ID: "x2", GPUs: 2, Submit: at(1), Predicted: 10 * time.Second},
			{ID: "x1", GPUs: 1, Submit: at(1), Predicted: 20 * time.Second},
			{ID: "y", GPUs: 4, Submit: at(0), Predicted: 5 * time.Second},
		},
		want: []string{"y", "x2", "x1"},
	}, {
		// Rate 1: "big" (service 3600) has a window of 3600 s. A job
		// submitted inside it with less service goes ahead; one
		// submitted at its end ties and goes behind (later
		// submission); one after it goes behind even with no service.
		name: "the overtaking window",
		cfg:  Config{AgingRate: 1},
		now:  5000,
		jobs: []Job{
			{ID: "big", GPUs: 1, Submit: at(0), Predicted: time.Hour},
			{ID: "inside", GPUs: 1, Submit: at(3000), Predicted: 10 * time.Second},
			{ID: "edge", GPUs: 1, Submit: at(3599), Predicted: time.Second},
			{ID: "after", GPUs: 64, Submit: at(3601), Predicted: 0},
		},
		want: []string{"inside", "big", "edge", "after"},
	}, {
		name: "the order does not depend on now",
		cfg:  Config{AgingRate: 1},
		now:  -100000,
		jobs: []Job{
			{ID: "big", GPUs: 1, Submit: at(0), Predicted: time.Hour},
			{ID: "inside", GPUs: 1, Submit: at(3000), Predicted: 10 * time.Second},
			{ID: "edge", GPUs: 1, Submit: at(3599), Predicted: time.Second},
			{ID: "after", GPUs: 64, Submit: at(3601), Predicted: 0},
		},
		want: []string{"inside", "big", "edge", "after"},
	}, {
		name: "empty",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			now := at(tc.now)
			got := tc.cfg.Rank(now, tc.jobs)
			if !slices.Equal(ids(got), tc.want) {
				t.Fatalf("Rank = %v; want %v", ids(got), tc.want)
			}
			for i, r := range got {
				if r.Rank != i+1 {
					t.Errorf("%s: Rank %d at place %d", r.ID, r.Rank, i+1)
				}
				if r.Waited != now.Sub(r.Submit) {
					t.Errorf("%s: Waited %v; want %v", r.ID, r.Waited, now.Sub(r.Submit))
				}
				want := r.Job.Service() - tc.cfg.rate()*r.Waited.Seconds()
				if math.Abs(r.Score-want) > 1e-6*math.Max(1, math.Abs(want)) {
					t.Errorf("%s: Score %v; want service − rate × waited = %v", r.ID, r.Score, want)
				}
				if i > 0 && got[i-1].Score > r.Score+1e-6 {
					t.Errorf("%s: Score %v ranked after %v", r.ID, r.Score, got[i-1].Score)
				}
			}
		})
	}
}

func TestServiceTimeSaturates(t *testing.T) {
	r := Config{}.Rank(t0, []Job{{ID: "huge", GPUs: 1 << 30, Submit: t0, Predicted: 365 * 24 * time.Hour}})
	if r[0].ServiceTime <= 0 || r[0].Window <= 0 {
		t.Fatalf("ServiceTime %v Window %v; want positive, saturated", r[0].ServiceTime, r[0].Window)
	}
}

func TestConfig(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	var c Config
	c.RegisterFlags(fs)
	if c.AgingRate != DefaultAgingRate {
		t.Fatalf("default AgingRate %v; want %v", c.AgingRate, DefaultAgingRate)
	}
	for _, tc := range []struct {
		arg string
		ok  bool
	}{{"0.1", true}, {"1e-6", true}, {"1e9", true}, {"1e-7", false}, {"2e9", false}, {"-1", false}, {"NaN", false}, {"+Inf", false}} {
		var c Config
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		c.RegisterFlags(fs)
		if err := fs.Parse([]string{"--qssf.aging-rate", tc.arg}); err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); (err == nil) != tc.ok {
			t.Errorf("Validate(aging-rate %s) = %v; want ok %v", tc.arg, err, tc.ok)
		}
	}
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("zero Config: %v", err)
	}
}

// TestStarvation runs one machine that runs one job at a time, the head of
// the QSSF order, non-preemptive, under a stream of small jobs that arrive
// faster than it serves them, so that a pure shortest-first order never
// runs the big job. The bound: no job submitted more than Window(big) after
// the big job starts before it, and it starts once the jobs ahead of it —
// a finite set — have run.
func TestStarvation(t *testing.T) {
	for _, tc := range []struct {
		name     string
		rate     float64
		smallRun int // seconds; a small job arrives every smallRun-1 s
		horizon  int
		// wantStart false: the big job must still wait at the horizon
		// (its window lies beyond it), which shows that the stream
		// starves it without aging.
		wantStart bool
	}{
		{name: "rate 10", rate: 10, smallRun: 60, horizon: 20000, wantStart: true},
		{name: "rate 1", rate: 1, smallRun: 30, horizon: 100000, wantStart: true},
		{name: "rate 0.1", rate: 0.1, smallRun: 600, horizon: 2000000, wantStart: true},
		{name: "window beyond the horizon", rate: 1e-6, smallRun: 60, horizon: 50000, wantStart: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{AgingRate: tc.rate}
			q := NewQueue(cfg)
			big := Job{ID: "big", GPUs: 8, Submit: at(100), Predicted: time.Hour} // 28,800 GPU·s
			window := int(cfg.Window(&big).Seconds())
			nextSmall, seq := 0, 0
			bigPushed := false
			busyUntil, bigStart := 0, -1
			for now := 0; now <= tc.horizon && bigStart < 0; now++ {
				for nextSmall <= now {
					seq++
					q.Push(Job{ID: "s" + strconv.Itoa(seq), GPUs: 1, Submit: at(nextSmall), Predicted: time.Duration(tc.smallRun) * time.Second}, nextSmall)
					nextSmall += tc.smallRun - 1 // arrivals outpace the machine
				}
				if !bigPushed && now >= 100 {
					q.Push(big, 100)
					bigPushed = true
				}
				if now < busyUntil {
					continue
				}
				h := q.Head()
				q.Remove(h)
				if h.ID == "big" {
					bigStart = now
					busyUntil = now + 3600
					continue
				}
				if h.Tag > 100+window {
					t.Fatalf("job submitted at %d started at %d ahead of the big job (submitted 100, window %d s)", h.Tag, now, window)
				}
				busyUntil = now + tc.smallRun
			}
			switch {
			case tc.wantStart && bigStart < 0:
				t.Fatalf("big job did not start by %d (window %d s)", tc.horizon, window)
			case !tc.wantStart && bigStart >= 0:
				t.Fatalf("big job started at %d; the stream should hold it back for its window of %d s", bigStart, window)
			}
		})
	}
}

// TestQueueMatchesRank checks that the incremental Queue gives Rank's order
// under random pushes, removals and updates, including ties.
func TestQueueMatchesRank(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cfg := Config{AgingRate: 0.5}
	q := NewQueue(cfg)
	var live []*Item
	now := 0
	for step := range 3000 {
		now += rng.IntN(120)
		switch r := rng.IntN(10); {
		case r < 5 || len(live) == 0:
			j := Job{ID: strconv.Itoa(step), GPUs: 1 << rng.IntN(4), Submit: at(now - rng.IntN(60)),
				Predicted: time.Duration(rng.IntN(6)) * 10 * time.Second}
			live = append(live, q.Push(j, step))
		case r < 7:
			k := rng.IntN(len(live))
			q.Remove(live[k])
			q.Remove(live[k]) // twice: a no-op
			live = slices.Delete(live, k, k+1)
		case r < 8:
			q.Update(live[rng.IntN(len(live))], time.Duration(rng.IntN(6))*10*time.Second)
		default:
			h := q.Head()
			q.Remove(h)
			live = slices.DeleteFunc(live, func(it *Item) bool { return it == h })
		}
		// live is in push order, which is Rank's input order.
		jobs := make([]Job, len(live))
		for i, it := range live {
			jobs[i] = it.Job
		}
		want := ids(cfg.Rank(at(now), jobs))
		var got []string
		for _, it := range q.Sorted(nil) {
			got = append(got, it.ID)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("step %d: Sorted = %v; Rank = %v", step, got, want)
		}
		if q.Len() != len(live) || len(q.Items(nil)) != len(live) {
			t.Fatalf("step %d: Len %d; want %d", step, q.Len(), len(live))
		}
		if h := q.Head(); (h == nil) != (len(want) == 0) || (h != nil && h.ID != want[0]) {
			t.Fatalf("step %d: Head = %v; want %v", step, h, want)
		}
	}
}
