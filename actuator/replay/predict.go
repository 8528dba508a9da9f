package replay

import (
	"math"
	"time"

	"github.com/heliostat-dev/heliostat/actuator/qssf"
	"github.com/heliostat-dev/heliostat/predictor/duration"
)

// online is heliostat's duration predictor learning in simulated time: a
// job's features are computed when it is submitted, from the jobs that have
// ended in the replay by then; its outcome joins the history and the
// training rows when it ends in the replay. Nothing else is ever read, so
// no prediction depends on the future of the simulated timeline.
type online struct {
	w          *Workload
	refitEvery int

	h     *duration.History
	model *duration.Model
	rows  []duration.Row
	feats []duration.Features    // by job: features at submit
	pred  []time.Duration        // by job: prediction at submit
	atSub []duration.SubmitState // by job: the user's state at submit (fresh)

	lastFit    int // rows at the last fit
	refits     int
	freshCalls int
	fitErrors  int
	fitTime    time.Duration
	buf        []*qssf.Item
	users      map[string]*userState
	window     int
	jitter     float64 // Config.Jitter
	seed       uint64  // Config.JitterSeed
}

// userState is what the replay keeps of a user for refreshing predictions.
type userState struct {
	pending   []int // jobs submitted, maybe started since
	endsSince int   // the user's jobs ended since the last refresh
}

// firstFit is how many ended jobs the first fit waits for.
const firstFit = 50

func newOnline(w *Workload, refitEvery, window int) *online {
	return &online{
		w: w, refitEvery: refitEvery, h: duration.NewHistory(),
		feats: make([]duration.Features, len(w.Jobs)), pred: make([]time.Duration, len(w.Jobs)), atSub: make([]duration.SubmitState, len(w.Jobs)),
		users: map[string]*userState{}, window: window,
	}
}

func (o *online) djob(j int) duration.Job {
	job := &o.w.Jobs[j]
	d := duration.Job{
		User: job.User, Executable: job.Executable, Queue: job.Queue,
		Submit: time.Unix(job.Submit, 0).UTC(), Procs: job.ReqProcs,
		Run: time.Duration(job.Run) * time.Second, Mem: job.ReqMem,
	}
	if d.Procs <= 0 {
		d.Procs = job.GPUs
	}
	if job.ReqTime > 0 {
		d.ReqTime = time.Duration(job.ReqTime) * time.Second
	}
	return d
}

// predict computes job j's features and prediction at its submission (now)
// and notes the submission in the history.
func (o *online) predict(j int) time.Duration {
	d := o.djob(j)
	d.Run = 0 // not known at submit; Features reads only submit-time fields anyway
	o.atSub[j] = o.h.SubmitState(d.User)
	f := o.h.Features(&d)
	o.h.Submitted(&d)
	o.feats[j] = f
	u := o.users[d.User]
	if u == nil {
		u = &userState{}
		o.users[d.User] = u
	}
	u.pending = append(u.pending, j)
	p := o.apply(j, f, d.ReqTime)
	o.pred[j] = p
	return p
}

// fresh predicts job j, still pending, from the history as it is now.
func (o *online) fresh(j int) time.Duration {
	o.freshCalls++
	d := o.djob(j)
	d.Run = 0
	return o.apply(j, o.freshFeatures(&d, j), d.ReqTime)
}

// freshFeatures returns job j's (d's) features from the history as it is
// now, with the user's submit-time state as it stood at j's submit — as the
// model's rows and predictor/live have them: the history counts j as
// submitted and in flight since, which j's own features at submit did not.
func (o *online) freshFeatures(d *duration.Job, j int) duration.Features {
	return o.h.FeaturesAt(d, o.atSub[j])
}

func (o *online) apply(j int, f duration.Features, req time.Duration) time.Duration {
	return o.jittered(j, o.point(f, req), req)
}

// jittered returns p times e^(jitter·u), u in [−1, 1] drawn for job j
// from the seed (splitmix64 of both), at most req when req > 0.
func (o *online) jittered(j int, p, req time.Duration) time.Duration {
	if o.jitter == 0 {
		return p
	}
	x := o.seed*0x9E3779B97F4A7C15 + uint64(j)
	x = (x ^ x>>30) * 0xBF58476D1CE4E5B9
	x = (x ^ x>>27) * 0x94D049BB133111EB
	x ^= x >> 31
	u := float64(x>>11)/(1<<52) - 1 // [−1, 1)
	p = time.Duration(float64(p) * math.Exp(o.jitter*u))
	if req > 0 {
		p = min(p, req)
	}
	return p
}

// point is the model's prediction of a job with features f and limit req.
func (o *online) point(f duration.Features, req time.Duration) time.Duration {
	if o.model != nil {
		if p, err := o.model.Predict(f, req); err == nil {
			return p.Point
		}
	}
	// No model yet: the history rule behind the features (the user's
	// recent runs, the limit, the queue's typical run).
	s := math.Exp(math.Max(0, math.Min(f.Fallback, math.Log(366*24*3600))))
	p := time.Duration(s * float64(time.Second))
	if req > 0 {
		p = min(p, req)
	}
	return p
}

// observe learns job j, which ended at t (simulated), and refits the model
// when it is due. It reports whether it refitted.
func (o *online) observe(j int, t int64) bool {
	d := o.djob(j)
	d.End = time.Unix(t, 0).UTC()
	o.h.Add(&d)
	if d.Run <= 0 {
		return false
	}
	o.rows = append(o.rows, duration.Row{F: o.feats[j], Y: math.Log(d.Run.Seconds())})
	n := len(o.rows)
	if n < firstFit || (n < 2*o.lastFit && n-o.lastFit < o.refitEvery) {
		return false
	}
	began := time.Now()
	m, err := duration.Fit(o.rows[max(0, n-o.window):], d.End)
	o.fitTime += time.Since(began)
	if err != nil {
		// Rows come from History's own features; a failed fit keeps
		// the previous model and is counted.
		o.lastFit = n
		o.fitErrors++
		return false
	}
	o.model, o.lastFit = m, n
	o.refits++
	return true
}

func (o *online) stats() *PredictorStats {
	var n, hit int
	for j := range o.w.Jobs {
		run := float64(o.w.Jobs[j].Run)
		if run <= 0 {
			continue
		}
		n++
		p := math.Max(o.pred[j].Seconds(), 1e-9)
		if math.Max(p/run, run/p) < 2 {
			hit++
		}
	}
	s := &PredictorStats{Refits: o.refits, FitErrors: o.fitErrors, Refreshes: o.freshCalls, FitS: o.fitTime.Seconds()}
	if n > 0 {
		s.Within2x = float64(hit) / float64(n)
	}
	return s
}
