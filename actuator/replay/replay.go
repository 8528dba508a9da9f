// Package replay replays a job trace on a node/GPU model of a cluster under a
// scheduling policy and measures job completion and queueing times: the
// evaluation half of `heliostat sim`.
//
// The model is the Helios artifact's: each virtual cluster (VC) is separate;
// a job of at most one node's GPUs is packed on the node with the fewest free
// GPUs that still fit it (ties: the first node), a larger one on
// ceil(GPUs/GPUs-per-node) whole free nodes (the first ones); jobs run to
// their recorded run time, never preempted; and the queue of a VC blocks at
// the first job, in policy order, that does not fit. With Backfill, jobs
// behind the blocked one may start if they fit and end, by their estimate,
// before the blocked job could start (EASY backfilling without the "extra
// nodes" rule). The estimate is the job's requested time limit when the trace
// has one, else its true run time.
//
// Policies: FIFO (submission order), SJF (true run time, shortest first: the
// oracle), SJFGPU (true GPU service time, run time × GPUs, shortest first:
// the oracle on QSSF's own key, and the one ANCHORS' SWF figures use) and QSSF (actuator/qssf's order on predicted GPU service time, with
// its aging bound). QSSF's predictions come from predictor/duration learning
// online in simulated time: a job's outcome is learned when it ends in the
// replay — the simulated end, since the policy moves start times — and
// nothing from later in the trace is seen before.
//
// Time runs in whole seconds. At one instant, ends free resources first,
// then arrivals join the queues, then each queue that changed starts what it
// can; a job of zero run time ends at the instant it starts.
package replay

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/heliostat-dev/heliostat/actuator/qssf"
)

// Policy names a scheduling policy.
type Policy string

// Policies.
const (
	FIFO Policy = "fifo" // submission order
	SJF  Policy = "sjf"  // true run time, shortest first (oracle)
	// SJFGPU: true GPU service time (run time × GPUs or processors),
	// shortest first (oracle)
	SJFGPU Policy = "sjf-gpu"
	QSSF   Policy = "qssf" // predicted GPU service time, with aging
)

// Policies lists the policies in their usual order.
var Policies = []Policy{FIFO, SJF, SJFGPU, QSSF}

// ParsePolicy returns the policy named s.
func ParsePolicy(s string) (Policy, error) {
	for _, p := range Policies {
		if string(p) == s {
			return p, nil
		}
	}
	return "", fmt.Errorf("replay: unknown policy %q; want fifo, sjf, sjf-gpu or qssf", s)
}

// Default values of Config.
const (
	DefaultSlowdownBound = 10 * time.Second
	DefaultRefitEvery    = 50000
	DefaultTrainWindow   = 200_000
)

// Config configures a replay.
type Config struct {
	// Backfill lets jobs start ahead of a blocked one (see the package
	// comment). Default false: the queue blocks.
	Backfill bool
	// QSSF is the QSSF policy's configuration (its aging bound).
	QSSF qssf.Config
	// RefitEvery bounds how many more ended jobs the duration model may
	// lag behind: it is refitted when the ended jobs have doubled since
	// the last fit (from 50) or this many more have ended. Default 50,000.
	RefitEvery int
	// TrainWindow is how many of the most recently ended jobs the
	// duration model is fitted on. Default 200,000: the size the
	// predictor's training budget is set for (2 s), and every job of the
	// SWF traces, as the backtest fits; the predictor's recency weights
	// (duration.RecencyHalfLife) already favour the newest. The first
	// default, 30,000, predates those weights: on HPC2N it gave QSSF 23,839
	// s on average over 24 seeds of --qssf.jitter 0.01 against 23,684 with
	// 200,000, and within 2x at submit 0.579 against 0.598; CTC-SP2 (56,848
	// against 57,219 s, sd ~5,000) and Venus (1,867 jobs) did not change.
	TrainWindow int
	// Jitter, when > 0, multiplies each of QSSF's predictions of job j by
	// e^(Jitter·u), u uniform in [−1, 1], drawn for j from JitterSeed
	// (the same for every re-prediction of j), before the time limit caps
	// it: replays under a few seeds show how far the average moves with
	// prediction errors that small (a queue's order, and so its figures,
	// can change a lot with them). 0 (the default) replays the predictions
	// as made. At most MaxJitter.
	Jitter     float64
	JitterSeed uint64
	// SlowdownBound is the run time below which bounded slowdown counts
	// a job as this long: max(1, (wait+run) / max(run, bound)). Default
	// 10 s.
	SlowdownBound time.Duration
	// Progress, when set, is called every ProgressEvery ended jobs with
	// how many of the workload's jobs have ended.
	Progress func(ended, total int)
}

// ProgressEvery is how many jobs end in a replay between calls of
// Config.Progress and checks of its context.
const ProgressEvery = 4096

func (c Config) withDefaults() Config {
	if c.RefitEvery == 0 {
		c.RefitEvery = DefaultRefitEvery
	}
	if c.SlowdownBound == 0 {
		c.SlowdownBound = DefaultSlowdownBound
	}
	if c.TrainWindow == 0 {
		c.TrainWindow = DefaultTrainWindow
	}
	return c
}

// Validate reports an invalid field.
func (c Config) Validate() error {
	if err := c.QSSF.Validate(); err != nil {
		return err
	}
	if c.RefitEvery < 0 {
		return fmt.Errorf("replay: refit every %d jobs: want > 0", c.RefitEvery)
	}
	if c.TrainWindow < 0 {
		return fmt.Errorf("replay: train window of %d jobs: want > 0", c.TrainWindow)
	}
	if c.SlowdownBound < 0 {
		return fmt.Errorf("replay: slowdown bound %v is negative", c.SlowdownBound)
	}
	if !(c.Jitter >= 0 && c.Jitter <= MaxJitter) {
		return fmt.Errorf("replay: jitter %v: want 0..%v (log scale: 0.01 is ±1 %%)", c.Jitter, MaxJitter)
	}
	return nil
}

// MaxJitter bounds Config.Jitter: a factor e of error either way.
const MaxJitter = 1.0

// Result is the outcome of one replay.
type Result struct {
	Policy string `json:"policy"`
	NJobs  int    `json:"n_jobs"`
	// AvgJCT is the mean job completion time, end − submit, seconds.
	AvgJCT float64 `json:"avg_jct_s"`
	// AvgQueue is the mean queueing delay, start − submit, seconds.
	AvgQueue float64 `json:"avg_queue_s"`
	// P99Queue is the 99th percentile of queueing delay (nearest rank).
	P99Queue float64 `json:"p99_queue_s"`
	// MaxQueue is the longest queueing delay.
	MaxQueue float64 `json:"max_queue_s"`
	// AvgBoundedSlowdown is the mean of max(1, (queue+run) / max(run,
	// SlowdownBound)).
	AvgBoundedSlowdown float64 `json:"avg_bounded_slowdown"`
	SlowdownBoundS     float64 `json:"slowdown_bound_s"`
	// Makespan is the last end − the first submit, seconds.
	Makespan float64 `json:"makespan_s"`
	// Predictor describes QSSF's online duration model; nil for other
	// policies.
	Predictor *PredictorStats `json:"predictor,omitempty"`
	// ElapsedS is the wall time of the replay, seconds.
	ElapsedS float64 `json:"elapsed_s"`

	// Start and End are each job's simulated start and end, Unix
	// seconds, in the order of Workload.Jobs (not in JSON).
	Start, End []int64 `json:"-"`
	// Predicted is QSSF's prediction of each job's run time at its submit,
	// in the same order (nil for other policies; not in JSON). Later
	// refreshes of a pending job's prediction are not kept.
	Predicted []time.Duration `json:"-"`
}

// PredictorStats describes the predictions QSSF ordered by.
type PredictorStats struct {
	// Refits counts model fits during the replay.
	Refits int `json:"refits"`
	// Within2x is the share of jobs (run > 0) whose prediction at submit
	// was within a factor 2 of the true run time.
	Within2x float64 `json:"within_2x_at_submit"`
	// FitErrors counts fits that failed (the previous model stayed).
	FitErrors int `json:"fit_errors"`
	// Refreshes counts predictions of pending jobs made again because
	// their user's history changed or the model was refitted.
	Refreshes int `json:"refreshes"`
	// FitS is the wall time spent fitting, seconds.
	FitS float64 `json:"fit_s"`
}

// Run replays w under pol. It stops with ctx's error, within ProgressEvery
// ended jobs, once ctx is done.
func Run(ctx context.Context, w *Workload, pol Policy, cfg Config) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	if _, err := ParsePolicy(string(pol)); err != nil {
		return Result{}, err
	}
	if len(w.VCs) == 0 {
		return Result{}, errors.New("replay: no virtual clusters")
	}
	for i := 1; i < len(w.Jobs); i++ {
		if w.Jobs[i].Submit < w.Jobs[i-1].Submit {
			return Result{}, fmt.Errorf("replay: job %d (%s) submitted before the one before it: jobs must be in order of submission", i, w.Jobs[i].ID)
		}
	}
	for i := range w.Jobs {
		j := &w.Jobs[i]
		if j.VC < 0 || j.VC >= len(w.VCs) {
			return Result{}, fmt.Errorf("replay: job %s: VC %d out of range", j.ID, j.VC)
		}
		v := w.VCs[j.VC]
		if j.GPUs < 1 || int64(j.GPUs) > int64(v.Nodes)*int64(v.GPUsPerNode) || j.Run < 0 {
			return Result{}, fmt.Errorf("replay: job %s: %d GPUs, run %d s: want 1 to %d GPUs and run >= 0", j.ID, j.GPUs, j.Run, v.Nodes*v.GPUsPerNode)
		}
	}
	began := time.Now()
	e := newEngine(w, pol, cfg.withDefaults())
	if err := e.run(ctx); err != nil {
		return Result{}, err
	}
	res := e.result()
	res.ElapsedS = time.Since(began).Seconds()
	return res, nil
}

// GapClosed returns the share of the FIFO → SJF gap in average JCT that x
// closes: (fifo − x) / (fifo − sjf); NaN when there is no gap.
func GapClosed(fifo, sjf, x float64) float64 {
	if fifo == sjf {
		return math.NaN()
	}
	return (fifo - x) / (fifo - sjf)
}

type engine struct {
	w   *Workload
	pol Policy
	cfg Config

	vcs        []*vcState
	start, end []int64
	place      []int32   // node of a one-node job; -1 for multi-node jobs
	multi      [][]int32 // nodes of a multi-node job
	runPos     []int32   // index in its VC's running list
	ends       endHeap
	dirty      []int
	next       int // next job to arrive
	ended      int // jobs ended so far

	pred  *online
	items []*qssf.Item
	order []int
	rels  []release
	avail []int
}

type vcState struct {
	idx     int
	gpn     int
	free    []int // free GPUs per node
	total   int   // free GPUs in all
	running []int
	q       queue
	dirty   bool
}

func newEngine(w *Workload, pol Policy, cfg Config) *engine {
	n := len(w.Jobs)
	e := &engine{
		w: w, pol: pol, cfg: cfg,
		start: make([]int64, n), end: make([]int64, n),
		place: make([]int32, n), runPos: make([]int32, n),
	}
	for i := range e.start {
		e.start[i], e.end[i] = -1, -1
	}
	for i, vc := range w.VCs {
		v := &vcState{idx: i, gpn: vc.GPUsPerNode, free: make([]int, vc.Nodes), total: vc.Nodes * vc.GPUsPerNode}
		for k := range v.free {
			v.free[k] = vc.GPUsPerNode
		}
		switch pol {
		case FIFO:
			v.q = newHeapQueue(n, func(a, b int) bool { return a < b }, cfg.Backfill)
		case SJF:
			v.q = newHeapQueue(n, func(a, b int) bool {
				ra, rb := w.Jobs[a].Run, w.Jobs[b].Run
				return ra < rb || (ra == rb && a < b)
			}, cfg.Backfill)
		case SJFGPU:
			v.q = newHeapQueue(n, func(a, b int) bool {
				sa, sb := w.Jobs[a].Run*int64(w.Jobs[a].GPUs), w.Jobs[b].Run*int64(w.Jobs[b].GPUs)
				return sa < sb || (sa == sb && a < b)
			}, cfg.Backfill)
		case QSSF:
			v.q = &qssfQueue{e: e, q: qssf.NewQueue(cfg.QSSF)}
		}
		e.vcs = append(e.vcs, v)
	}
	if pol == QSSF {
		e.pred = newOnline(w, cfg.RefitEvery, cfg.TrainWindow)
		e.pred.jitter, e.pred.seed = cfg.Jitter, cfg.JitterSeed
		e.items = make([]*qssf.Item, n)
	}
	return e
}

// est is the run time the backfilling scheduler assumes for job j.
func (e *engine) est(j int) int64 {
	if r := e.w.Jobs[j].ReqTime; r > 0 {
		return r
	}
	return e.w.Jobs[j].Run
}

func (e *engine) run(ctx context.Context) error {
	jobs := e.w.Jobs
	for e.next < len(jobs) || len(e.ends) > 0 {
		t := int64(math.MaxInt64)
		if e.next < len(jobs) {
			t = jobs[e.next].Submit
		}
		if len(e.ends) > 0 {
			t = min(t, e.ends[0].t)
		}
		for len(e.ends) > 0 && e.ends[0].t == t {
			j := heap.Pop(&e.ends).(endEvent).job
			e.release(j)
			if e.ended++; e.ended%ProgressEvery == 0 {
				if e.cfg.Progress != nil {
					e.cfg.Progress(e.ended, len(jobs))
				}
				if err := ctx.Err(); err != nil {
					return fmt.Errorf("replay: %s stopped after %d of %d jobs ended: %w", e.pol, e.ended, len(jobs), context.Cause(ctx))
				}
			}
			if e.pred != nil {
				if e.pred.observe(j, t) {
					e.refresh()
				} else {
					e.refreshUser(e.w.Jobs[j].User)
				}
			}
		}
		for e.next < len(jobs) && jobs[e.next].Submit == t {
			e.arrive(e.next, t)
			e.next++
		}
		for _, k := range e.dirty {
			v := e.vcs[k]
			v.dirty = false
			e.schedule(v, t)
		}
		e.dirty = e.dirty[:0]
	}
	return nil
}

func (e *engine) mark(v *vcState) {
	if !v.dirty {
		v.dirty = true
		e.dirty = append(e.dirty, v.idx)
	}
}

func (e *engine) arrive(j int, t int64) {
	v := e.vcs[e.w.Jobs[j].VC]
	v.q.push(j)
	e.mark(v)
}

// refreshDiv sets how often a user's pending jobs are predicted again: after
// one of their jobs ends, once at least pending/refreshDiv of their jobs have
// ended since the last time. A user with up to 128 queued jobs gets fresh
// predictions after every end; one with thousands queued costs O(n log n)
// predictions over the batch, not O(n²). (HPC2N, first: refreshing after
// every end made 5.3 million predictions for 23,948 s average JCT; 32 made
// 0.7 million for 24,006 s; 8 made 0.24 million for 24,072 s. With the
// 200,000-job window, 8 seeds of --qssf.jitter 0.01: 8 23,912 s; 32
// 23,677; 128 23,621; every end 23,637; and over 24 seeds 32 23,684, 128
// 23,609 (1.6 million predictions, the replay no slower: about 9 s).
// CTC-SP2 under 128: 56,901 over 16 seeds against 57,219 over 24, sd
// ~5,000; Venus unchanged.)
const refreshDiv = 128

// refreshUser notes that one of user's jobs ended and, when it is due,
// predicts their pending jobs again from the history as it is now.
func (e *engine) refreshUser(user string) {
	u := e.pred.users[user]
	if u == nil {
		return
	}
	u.endsSince++
	k := 0
	for _, j := range u.pending {
		if e.items[j] != nil { // still pending
			u.pending[k] = j
			k++
		}
	}
	u.pending = u.pending[:k]
	if u.endsSince*refreshDiv < len(u.pending) {
		return
	}
	u.endsSince = 0
	for _, j := range u.pending {
		v := e.vcs[e.w.Jobs[j].VC]
		v.q.(*qssfQueue).q.Update(e.items[j], e.pred.fresh(j))
		e.mark(v)
	}
}

// refresh re-predicts every pending job with the model just fitted.
func (e *engine) refresh() {
	for _, v := range e.vcs {
		q := v.q.(*qssfQueue).q
		e.pred.buf = q.Items(e.pred.buf[:0])
		for _, it := range e.pred.buf {
			q.Update(it, e.pred.fresh(it.Tag))
		}
		if len(e.pred.buf) > 0 {
			e.mark(v)
		}
	}
}

func (e *engine) schedule(v *vcState, t int64) {
	if !e.cfg.Backfill {
		for {
			j := v.q.head(t)
			if j < 0 || !e.fit(v, j) {
				return
			}
			v.q.remove(j)
			e.startJob(v, j, t)
		}
	}
	// Every job holds at least one GPU: with none free nothing can start,
	// and the whole queue need not be sorted (an overloaded cluster is full
	// at most arrivals).
	if v.total == 0 {
		return
	}
	e.order = v.q.sorted(t, e.order[:0])
	blocked, shadow := false, int64(0)
	for _, j := range e.order {
		if v.total == 0 {
			break
		}
		if blocked && t+e.est(j) > shadow {
			continue
		}
		if e.fit(v, j) {
			v.q.remove(j)
			e.startJob(v, j, t)
			continue
		}
		if !blocked {
			blocked, shadow = true, e.shadow(v, j, t)
		}
	}
}

// fit places job j on v's nodes if it fits now, and reports whether it did.
func (e *engine) fit(v *vcState, j int) bool {
	g := e.w.Jobs[j].GPUs
	if g > v.total {
		return false
	}
	if g <= v.gpn {
		best := -1
		for k, f := range v.free {
			if f >= g && (best < 0 || f < v.free[best]) {
				best = k
				if f == g {
					break
				}
			}
		}
		if best < 0 {
			return false
		}
		v.free[best] -= g
		v.total -= g
		e.place[j] = int32(best)
		return true
	}
	need := (g + v.gpn - 1) / v.gpn
	picked := make([]int32, 0, need)
	for k, f := range v.free {
		if f == v.gpn {
			if picked = append(picked, int32(k)); len(picked) == need {
				break
			}
		}
	}
	if len(picked) < need {
		return false
	}
	for _, k := range picked {
		v.free[k] = 0
	}
	v.total -= need * v.gpn
	e.place[j] = -1
	if e.multi == nil {
		e.multi = make([][]int32, len(e.w.Jobs))
	}
	e.multi[j] = picked
	return true
}

func (e *engine) startJob(v *vcState, j int, t int64) {
	e.start[j] = t
	e.runPos[j] = int32(len(v.running))
	v.running = append(v.running, j)
	heap.Push(&e.ends, endEvent{t: t + e.w.Jobs[j].Run, job: j})
	if e.pred != nil {
		e.items[j] = nil
	}
}

func (e *engine) release(j int) {
	job := &e.w.Jobs[j]
	v := e.vcs[job.VC]
	e.end[j] = e.start[j] + job.Run
	if k := e.place[j]; k >= 0 {
		v.free[k] += job.GPUs
		v.total += job.GPUs
	} else {
		for _, k := range e.multi[j] {
			v.free[k] = v.gpn
		}
		v.total += len(e.multi[j]) * v.gpn
		e.multi[j] = nil
	}
	p := e.runPos[j]
	last := v.running[len(v.running)-1]
	v.running[p] = last
	e.runPos[last] = p
	v.running = v.running[:len(v.running)-1]
	e.mark(v)
}

type release struct {
	at   int64
	node int32
	gpus int
}

// shadow returns the earliest time job j could start on v if the running
// jobs end at their estimates (now, for one past its estimate), or
// MaxInt64 if never.
func (e *engine) shadow(v *vcState, j int, now int64) int64 {
	g := e.w.Jobs[j].GPUs
	want, need := g, 1
	if g > v.gpn {
		want, need = v.gpn, (g+v.gpn-1)/v.gpn
	}
	e.rels = e.rels[:0]
	for _, r := range v.running {
		at := max(now, e.start[r]+e.est(r))
		if k := e.place[r]; k >= 0 {
			e.rels = append(e.rels, release{at, k, e.w.Jobs[r].GPUs})
		} else {
			for _, k := range e.multi[r] {
				e.rels = append(e.rels, release{at, k, v.gpn})
			}
		}
	}
	slices.SortFunc(e.rels, func(a, b release) int {
		switch {
		case a.at < b.at:
			return -1
		case a.at > b.at:
			return 1
		}
		return 0
	})
	e.avail = append(e.avail[:0], v.free...)
	ready := 0
	for _, f := range e.avail {
		if f >= want {
			ready++
		}
	}
	if ready >= need {
		return now
	}
	for _, r := range e.rels {
		was := e.avail[r.node] >= want
		e.avail[r.node] += r.gpus
		if !was && e.avail[r.node] >= want {
			if ready++; ready >= need {
				return r.at
			}
		}
	}
	return math.MaxInt64
}

func (e *engine) result() Result {
	jobs := e.w.Jobs
	res := Result{Policy: string(e.pol), NJobs: len(jobs), Start: e.start, End: e.end,
		SlowdownBoundS: e.cfg.SlowdownBound.Seconds()}
	if len(jobs) == 0 {
		return res
	}
	bound := e.cfg.SlowdownBound.Seconds()
	waits := make([]float64, len(jobs))
	var jct, wait, sd float64
	var last int64
	for i := range jobs {
		j := &jobs[i]
		q := float64(e.start[i] - j.Submit)
		run := float64(j.Run)
		waits[i] = q
		wait += q
		jct += float64(e.end[i] - j.Submit)
		sd += math.Max(1, (q+run)/math.Max(run, bound))
		last = max(last, e.end[i])
	}
	n := float64(len(jobs))
	res.AvgJCT, res.AvgQueue, res.AvgBoundedSlowdown = jct/n, wait/n, sd/n
	slices.Sort(waits)
	res.P99Queue = waits[int(math.Ceil(0.99*n))-1]
	res.MaxQueue = waits[len(waits)-1]
	res.Makespan = float64(last - jobs[0].Submit)
	if e.pred != nil {
		res.Predictor = e.pred.stats()
		res.Predicted = e.pred.pred
	}
	return res
}

type endEvent struct {
	t   int64
	job int
}

type endHeap []endEvent

func (h endHeap) Len() int { return len(h) }
func (h endHeap) Less(i, j int) bool {
	if h[i].t != h[j].t {
		return h[i].t < h[j].t
	}
	return h[i].job < h[j].job
}
func (h endHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *endHeap) Push(x any)   { *h = append(*h, x.(endEvent)) }
func (h *endHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// sortBySubmit sorts jobs by submission, keeping file order for ties.
func sortBySubmit(jobs []Job) {
	slices.SortStableFunc(jobs, func(a, b Job) int {
		switch {
		case a.Submit < b.Submit:
			return -1
		case a.Submit > b.Submit:
			return 1
		}
		return 0
	})
}
