package qssf

import (
	"flag"
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
	h := 3600
	cfg := Config{MaxWait: time.Hour}
	for _, tc := range []struct {
		name string
		now  int
		jobs []Job
		want []string
	}{{
		name: "service time is duration times GPUs",
		now:  10,
		jobs: []Job{
			{ID: "long1", GPUs: 1, Submit: at(0), Predicted: 1000 * time.Second}, // 1000
			{ID: "short8", GPUs: 8, Submit: at(1), Predicted: 100 * time.Second}, // 800
			{ID: "tiny", GPUs: 2, Submit: at(2), Predicted: 10 * time.Second},    // 20
		},
		want: []string{"tiny", "short8", "long1"},
	}, {
		name: "zero and negative GPUs count as one, negative predictions as zero",
		now:  10,
		jobs: []Job{
			{ID: "a", GPUs: 0, Submit: at(0), Predicted: 50 * time.Second},
			{ID: "b", GPUs: -3, Submit: at(1), Predicted: 40 * time.Second},
			{ID: "c", GPUs: 4, Submit: at(2), Predicted: -time.Second},
		},
		want: []string{"c", "b", "a"},
	}, {
		name: "equal service: earlier submission, then input order",
		now:  10,
		jobs: []Job{
			{ID: "late", GPUs: 2, Submit: at(5), Predicted: 10 * time.Second},
			{ID: "x", GPUs: 1, Submit: at(1), Predicted: 20 * time.Second},
			{ID: "y", GPUs: 4, Submit: at(1), Predicted: 5 * time.Second},
		},
		want: []string{"x", "y", "late"},
	}, {
		name: "a second before MaxWait the big job is last",
		now:  h - 1,
		jobs: []Job{
			{ID: "big", GPUs: 64, Submit: at(0), Predicted: 24 * time.Hour},
			{ID: "s1", GPUs: 1, Submit: at(100), Predicted: time.Minute},
			{ID: "s2", GPUs: 1, Submit: at(200), Predicted: time.Second},
		},
		want: []string{"s2", "s1", "big"},
	}, {
		name: "at MaxWait the big job goes first",
		now:  h,
		jobs: []Job{
			{ID: "big", GPUs: 64, Submit: at(0), Predicted: 24 * time.Hour},
			{ID: "s1", GPUs: 1, Submit: at(100), Predicted: time.Minute},
			{ID: "s2", GPUs: 1, Submit: at(200), Predicted: time.Second},
		},
		want: []string{"big", "s2", "s1"},
	}, {
		name: "aged jobs go in order of submission, whatever their size",
		now:  3 * h,
		jobs: []Job{
			{ID: "new-tiny", GPUs: 1, Submit: at(3*h - 10), Predicted: time.Second},
			{ID: "aged2", GPUs: 1, Submit: at(h), Predicted: time.Second},
			{ID: "aged1", GPUs: 128, Submit: at(0), Predicted: 48 * time.Hour},
		},
		want: []string{"aged1", "aged2", "new-tiny"},
	}, {
		name: "a job submitted after now is not aged and waited nothing",
		now:  0,
		jobs: []Job{
			{ID: "future", GPUs: 1, Submit: at(50), Predicted: time.Second},
			{ID: "now", GPUs: 1, Submit: at(0), Predicted: 2 * time.Second},
		},
		want: []string{"future", "now"},
	}, {
		name: "empty",
		now:  0,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := cfg.Rank(at(tc.now), tc.jobs)
			if !slices.Equal(ids(got), tc.want) {
				t.Fatalf("Rank = %v; want %v", ids(got), tc.want)
			}
			for i, r := range got {
				if r.Rank != i+1 {
					t.Errorf("%s: Rank %d at place %d", r.ID, r.Rank, i+1)
				}
				if want := r.Job.Service(); !r.Aged && r.Score != want {
					t.Errorf("%s: Score %v; want service %v", r.ID, r.Score, want)
				}
				if r.Aged != (r.Waited >= cfg.MaxWait) || r.Waited < 0 {
					t.Errorf("%s: Aged %v with Waited %v", r.ID, r.Aged, r.Waited)
				}
			}
		})
	}
}

func TestServiceTimeSaturates(t *testing.T) {
	r := Config{}.Rank(t0, []Job{{ID: "huge", GPUs: 1 << 30, Submit: t0, Predicted: 365 * 24 * time.Hour}})
	if r[0].ServiceTime <= 0 || r[0].Score <= 0 {
		t.Fatalf("ServiceTime %v Score %v; want positive, saturated", r[0].ServiceTime, r[0].Score)
	}
}

func TestConfig(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	var c Config
	c.RegisterFlags(fs)
	if c.MaxWait != DefaultMaxWait {
		t.Fatalf("default MaxWait %v; want %v", c.MaxWait, DefaultMaxWait)
	}
	for _, tc := range []struct {
		arg string
		ok  bool
	}{{"1m", true}, {"72h", true}, {"59s", false}, {"10000h", false}, {"-1h", false}} {
		var c Config
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		c.RegisterFlags(fs)
		if err := fs.Parse([]string{"--qssf.max-wait", tc.arg}); err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); (err == nil) != tc.ok {
			t.Errorf("Validate(max-wait %s) = %v; want ok %v", tc.arg, err, tc.ok)
		}
	}
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("zero Config: %v", err)
	}
}

// TestStarvation runs one machine that runs one job at a time (the head of
// the QSSF order, non-preemptive) under a stream of small jobs that keeps it
// busy forever. Without aging the big job would never run. The bound: the
// big job starts at the latest when the job running at the moment it aged
// ends, plus the run of the jobs submitted before it that are still queued.
func TestStarvation(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxWait  time.Duration
		smallRun int // seconds; a small job arrives every smallRun-1 s
		horizon  int
		// want: the big job starts no later than wantBy; wantStart
		// false: it must not have started by the horizon (the aging
		// bound lies beyond it) — this shows the stream does starve
		// the big job without aging.
		wantStart bool
		wantBy    int
	}{
		{name: "one hour", maxWait: time.Hour, smallRun: 60, horizon: 20000, wantStart: true, wantBy: 100 + 3600 + 60},
		{name: "ten minutes", maxWait: 10 * time.Minute, smallRun: 30, horizon: 5000, wantStart: true, wantBy: 100 + 600 + 30},
		{name: "bound beyond the horizon", maxWait: 24 * time.Hour, smallRun: 60, horizon: 50000, wantStart: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{MaxWait: tc.maxWait}
			q := NewQueue(cfg)
			nextSmall, seq := 0, 0
			bigSubmit := 100
			bigPushed := false
			busyUntil := 0
			bigStart := -1
			for now := 0; now <= tc.horizon && bigStart < 0; now++ {
				for nextSmall <= now {
					seq++
					q.Push(Job{ID: "s" + strconv.Itoa(seq), GPUs: 1, Submit: at(nextSmall), Predicted: time.Duration(tc.smallRun) * time.Second}, tc.smallRun)
					nextSmall += tc.smallRun - 1 // arrivals outpace the machine
				}
				if !bigPushed && now >= bigSubmit {
					q.Push(Job{ID: "big", GPUs: 8, Submit: at(bigSubmit), Predicted: 10 * time.Hour}, 36000)
					bigPushed = true
				}
				if now >= busyUntil {
					h := q.Head(at(now))
					q.Remove(h)
					if h.ID == "big" {
						bigStart = now
					}
					busyUntil = now + h.Tag
				}
			}
			switch {
			case tc.wantStart && (bigStart < 0 || bigStart > tc.wantBy):
				t.Fatalf("big job started at %d; want by %d (submitted %d, MaxWait %v)", bigStart, tc.wantBy, bigSubmit, tc.maxWait)
			case !tc.wantStart && bigStart >= 0:
				t.Fatalf("big job started at %d; the stream should hold it back until it ages", bigStart)
			}
		})
	}
}

// TestQueueMatchesRank checks that the incremental Queue gives Rank's order
// under random pushes, removals, updates and times, including ties.
func TestQueueMatchesRank(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cfg := Config{MaxWait: 30 * time.Minute}
	q := NewQueue(cfg)
	var live []*Item
	now := 0
	for step := range 3000 {
		now += rng.IntN(120)
		switch r := rng.IntN(10); {
		case r < 5 || len(live) == 0:
			j := Job{ID: strconv.Itoa(step), GPUs: 1 << rng.IntN(4), Submit: at(now - rng.IntN(3600)),
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
			h := q.Head(at(now))
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
		for _, it := range q.Sorted(at(now), nil) {
			got = append(got, it.ID)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("step %d: Sorted = %v; Rank = %v", step, got, want)
		}
		if q.Len() != len(live) {
			t.Fatalf("step %d: Len %d; want %d", step, q.Len(), len(live))
		}
		if h := q.Head(at(now)); (h == nil) != (len(want) == 0) || (h != nil && h.ID != want[0]) {
			t.Fatalf("step %d: Head = %v; want %v", step, h, want)
		}
	}
}
