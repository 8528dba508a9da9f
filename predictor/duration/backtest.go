package duration

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"
)

// CalibrationHoldout is the share of the training rows, the latest, on
// which Backtest calibrates each model's intervals (FitCalibrated).
const CalibrationHoldout = 0.2

// BacktestConfig configures Backtest.
type BacktestConfig struct {
	// TrainFrac is the chronological share of jobs used for training.
	// Default 0.7.
	TrainFrac float64
	// RefitEvery refits the model each time this many more test jobs have
	// ended (their outcomes join the training rows, as they would live).
	// Default 5,000; negative never refits.
	RefitEvery int
	// AdaptRate is the step of the Adaptive that widens or narrows the
	// intervals as test jobs end (0: DefaultAdaptRate; negative: intervals
	// are only those of each fit's calibration).
	AdaptRate float64
	// Width returns a job's service-time multiplier (processors or GPUs) for
	// the Spearman figure; nil means Procs (at least 1).
	Width func(*Job) float64

	// Progress, when set, is called every ProgressEvery jobs (training
	// and test) and after each refit, from the backtest's goroutine.
	Progress func(BacktestProgress)

	// onFeatures, when set (tests), sees every job's features as computed.
	onFeatures func(j *Job, f Features)
	// OnPredict, when set, is called with every test job's features and
	// prediction at its submit, in submit order, from the backtest's
	// goroutine: per-job output (predictor backtest --jobs-out).
	OnPredict func(j *Job, f Features, p Prediction)
}

// ProgressEvery is how many jobs a backtest goes through between calls of
// BacktestConfig.Progress and checks of its context.
const ProgressEvery = 1024

// BacktestProgress is how far a backtest has gone.
type BacktestProgress struct {
	// Done of Total jobs (with a run time) have been gone through, the
	// training jobs first.
	Done, Total int
	// Refits counts the refits so far (the initial fit not included).
	Refits int
}

// Result is the outcome of a backtest.
type Result struct {
	NTrain int `json:"n_train"`
	NTest  int `json:"n_test"`
	Metrics
	// Cold is the same figures for the test jobs whose user had no ended job
	// at submit time (cold starts; they are also in the totals).
	Cold Metrics `json:"cold_start"`
	// Segments is the same figures for the test jobs of each segment (by how
	// much of their user's history had ended at submit: exact, user2, user1,
	// cold), so that accuracy and interval coverage show where history is
	// thin. Segments without test jobs are left out.
	Segments map[string]Metrics `json:"segments"`
	// Baselines are the published baselines computed on the same split:
	// reqtime (the user's time limit), last1 (the user's last job), last2
	// (mean of the user's last two; Tsafrir et al.). Where a baseline has no
	// answer (no history, no limit) it falls back to the limit, then to the
	// median run time of the training jobs.
	Baselines map[string]Metrics `json:"baselines"`
	// ByRunTime splits heliostat's test jobs by their true run time's
	// range (under a minute, 1–10 minutes, 10 minutes–1 hour, 1–4 hours,
	// 4 hours and more), with each range's share of the squared log
	// error: where the error that keeps R² down comes from.
	ByRunTime []RunTimeBucket `json:"error_by_run_time"`
	Refits    int             `json:"refits"`
	TrainTime float64         `json:"train_s"` // the initial fit, seconds
}

// endQueue orders submitted jobs by end time.
type endQueue []*Job

func (q endQueue) Len() int           { return len(q) }
func (q endQueue) Less(i, j int) bool { return q[i].End.Before(q[j].End) }
func (q endQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *endQueue) Push(x any)        { *q = append(*q, x.(*Job)) }
func (q *endQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// Backtest follows the protocol of ANCHORS.md: jobs with a run time > 0, in
// submit order; the first TrainFrac train, the rest test; every feature of a
// job uses only jobs that had ended strictly before its submit time. The model
// is fitted on the training jobs and refitted as test jobs end. It stops
// with ctx's error, within ProgressEvery jobs or one fit, once ctx is done.
func Backtest(ctx context.Context, jobs []Job, cfg BacktestConfig) (Result, error) {
	if cfg.TrainFrac == 0 {
		cfg.TrainFrac = 0.7
	}
	if cfg.TrainFrac <= 0 || cfg.TrainFrac >= 1 {
		return Result{}, fmt.Errorf("duration: train fraction %v is outside (0, 1)", cfg.TrainFrac)
	}
	if cfg.RefitEvery == 0 {
		cfg.RefitEvery = 5000
	}
	width := cfg.Width
	if width == nil {
		width = func(j *Job) float64 { return math.Max(1, float64(j.Procs)) }
	}
	var js []*Job
	for i := range jobs {
		if jobs[i].Run > 0 {
			js = append(js, &jobs[i])
		}
	}
	sort.SliceStable(js, func(a, b int) bool { return js[a].Submit.Before(js[b].Submit) })
	nTrain := int(float64(len(js)) * cfg.TrainFrac)
	if nTrain < minSegmentRows || len(js)-nTrain < 1 {
		return Result{}, errors.New("duration: too few jobs with a run time for a backtest")
	}
	res := Result{NTrain: nTrain, NTest: len(js) - nTrain, Baselines: map[string]Metrics{}}

	trainRuns := make([]float64, 0, nTrain)
	for _, j := range js[:nTrain] {
		trainRuns = append(trainRuns, j.Run.Seconds())
	}
	sort.Float64s(trainRuns)
	medianRun := trainRuns[len(trainRuns)/2]

	h := NewHistory()
	q := &endQueue{}
	rows := make([]Row, 0, len(js))
	// pending holds the submit-time features and prediction of test jobs
	// not yet ended.
	type served struct {
		f Features
		p Prediction
	}
	pending := map[*Job]served{}
	adapt := NewAdaptive(cfg.AdaptRate)
	var (
		model       *Model
		pendingTest int
		heli        []scored
		bySeg       [numSegments][]scored
		base        = map[string][]scored{}
	)
	progress := func(done int) error {
		if cfg.Progress != nil {
			cfg.Progress(BacktestProgress{Done: done, Total: len(js), Refits: res.Refits})
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("duration: backtest stopped after %d of %d jobs: %w", done, len(js), context.Cause(ctx))
		}
		return nil
	}
	for i, j := range js {
		if i%ProgressEvery == 0 && i > 0 {
			if err := progress(i); err != nil {
				return res, err
			}
		}
		for q.Len() > 0 && (*q)[0].End.Before(j.Submit) {
			e := heap.Pop(q).(*Job)
			h.Add(e)
			if sv, ok := pending[e]; ok {
				rows = append(rows, Row{F: sv.f, Y: math.Log(e.Run.Seconds())})
				adapt.Observe(sv.p.Covers(e.Run))
				delete(pending, e)
				pendingTest++
			}
		}
		if i == nTrain {
			start := time.Now()
			m, err := FitCalibrated(rows, j.Submit, CalibrationHoldout)
			if err != nil {
				return res, err
			}
			res.TrainTime = time.Since(start).Seconds()
			model = m
		} else if model != nil && cfg.RefitEvery > 0 && pendingTest >= cfg.RefitEvery {
			m, err := FitCalibrated(rows, j.Submit, CalibrationHoldout)
			if err != nil {
				return res, err
			}
			model, pendingTest = m, 0
			res.Refits++
			if err := progress(i); err != nil {
				return res, err
			}
		}
		f := h.Features(j)
		if cfg.onFeatures != nil {
			cfg.onFeatures(j, f)
		}
		h.Submitted(j)
		heap.Push(q, j)
		if i < nTrain {
			rows = append(rows, Row{F: f, Y: math.Log(j.Run.Seconds())})
			continue
		}
		// A test job's row joins the training set only once it has ended.
		p, err := model.PredictWidened(f, j.ReqTime, adapt.Widen())
		if err != nil {
			return res, err
		}
		pending[j] = served{f, p}
		if cfg.OnPredict != nil {
			cfg.OnPredict(j, f, p)
		}
		y, w := j.Run.Seconds(), width(j)
		s := scored{pred: p.Point.Seconds(), true: y, width: w, low: p.Low.Seconds(), high: p.High.Seconds(), interval: true}
		heli = append(heli, s)
		bySeg[f.Segment] = append(bySeg[f.Segment], s)
		for name, v := range baselines(h, j, f, medianRun) {
			base[name] = append(base[name], scored{pred: v, true: y, width: w})
		}
	}
	res.Metrics = score(heli)
	res.ByRunTime = errorByRunTime(heli)
	res.Cold = score(bySeg[SegCold])
	res.Segments = map[string]Metrics{}
	for seg, s := range bySeg {
		if len(s) > 0 {
			res.Segments[Segment(seg).String()] = score(s)
		}
	}
	for name, s := range base {
		res.Baselines[name] = score(s)
	}
	return res, nil
}

// baselines returns the published history rules for j, in seconds.
func baselines(h *History, j *Job, f Features, medianRun float64) map[string]float64 {
	fallback := medianRun
	if j.ReqTime > 0 {
		fallback = j.ReqTime.Seconds()
	}
	out := map[string]float64{"reqtime": fallback, "last1": fallback, "last2": fallback}
	if u := h.users[j.User]; u != nil && u.runs.n > 0 {
		rec := u.runs.recent(2)
		out["last1"] = math.Exp(rec[0])
		if len(rec) == 2 {
			out["last2"] = (math.Exp(rec[0]) + math.Exp(rec[1])) / 2
		} else {
			out["last2"] = math.Exp(rec[0])
		}
	}
	return out
}
