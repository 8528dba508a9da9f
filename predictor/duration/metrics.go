package duration

import (
	"math"
	"sort"
)

// Metrics are the accuracy figures of DESIGN.md's `predictor backtest`.
type Metrics struct {
	N        int     `json:"n"`
	Within2x float64 `json:"within_2x"` // share with max(p/y, y/p) < 2
	R2Log    float64 `json:"r2_log"`    // R² of log predictions against log run times
	MAES     float64 `json:"mae_s"`     // mean absolute error, seconds
	// HeliosBuckets are the shares within 10%, 50%, 100% and 1000% relative
	// error (|p−y|/y), as the Helios paper reports its estimator.
	HeliosBuckets [4]float64 `json:"helios_buckets"`
	// SpearmanGPUTime is the rank correlation of predicted and true service
	// time (run time × processors or GPUs): how well the prediction orders a
	// queue of pending jobs for shortest-predicted-service-first.
	SpearmanGPUTime float64 `json:"spearman_gpu_time_pending"`
	// IntervalCoverage is the share of jobs whose run time fell within
	// their prediction's interval (meant to hold IntervalLevel of them),
	// and IntervalRatio the median ratio of the interval's upper end to its
	// lower: how far the interval can be trusted, and how wide it is. Absent
	// for a predictor without intervals (the baselines).
	IntervalCoverage *float64 `json:"interval_coverage,omitempty"`
	IntervalRatio    *float64 `json:"interval_ratio,omitempty"`
}

type scored struct {
	pred, true float64 // seconds
	width      float64 // processors or GPUs, >= 1
	low, high  float64 // the prediction's interval, seconds, when interval
	interval   bool
}

// Within2x reports whether a prediction of pred seconds (taken as at least
// 1 s) is within a factor 2 of a run of actual seconds: the rule of the
// backtests' within_2x and of prediction_outcomes.
func Within2x(pred, actual float64) bool {
	p := math.Max(pred, 1)
	return math.Max(p/actual, actual/p) < 2
}

func score(s []scored) Metrics {
	m := Metrics{N: len(s)}
	if len(s) == 0 {
		return m
	}
	var meanLog float64
	for _, x := range s {
		meanLog += math.Log(x.true)
	}
	meanLog /= float64(len(s))
	var ssRes, ssTot float64
	for _, x := range s {
		p, y := math.Max(x.pred, 1), x.true
		if Within2x(p, y) {
			m.Within2x++
		}
		d := math.Log(y) - math.Log(p)
		ssRes += d * d
		ssTot += (math.Log(y) - meanLog) * (math.Log(y) - meanLog)
		m.MAES += math.Abs(p - y)
		rel := math.Abs(p-y) / y
		for i, b := range []float64{0.1, 0.5, 1, 10} {
			if rel <= b {
				m.HeliosBuckets[i]++
			}
		}
	}
	n := float64(len(s))
	m.Within2x /= n
	m.MAES /= n
	for i := range m.HeliosBuckets {
		m.HeliosBuckets[i] /= n
	}
	if ssTot > 0 {
		m.R2Log = 1 - ssRes/ssTot
	}
	pw := make([]float64, len(s))
	tw := make([]float64, len(s))
	for i, x := range s {
		pw[i], tw[i] = x.pred*x.width, x.true*x.width
	}
	m.SpearmanGPUTime = spearman(pw, tw)
	if s[0].interval {
		var in float64
		ratios := make([]float64, len(s))
		for i, x := range s {
			if x.low <= x.true && x.true <= x.high {
				in++
			}
			ratios[i] = math.Max(x.high, 1) / math.Max(x.low, 1)
		}
		sort.Float64s(ratios)
		cov, ratio := in/n, ratios[len(ratios)/2]
		m.IntervalCoverage, m.IntervalRatio = &cov, &ratio
	}
	return m
}

// spearman is the Pearson correlation of average ranks.
func spearman(a, b []float64) float64 {
	ra, rb := ranks(a), ranks(b)
	var ma, mb float64
	for i := range ra {
		ma += ra[i]
		mb += rb[i]
	}
	ma /= float64(len(ra))
	mb /= float64(len(rb))
	var num, da, db float64
	for i := range ra {
		num += (ra[i] - ma) * (rb[i] - mb)
		da += (ra[i] - ma) * (ra[i] - ma)
		db += (rb[i] - mb) * (rb[i] - mb)
	}
	if da == 0 || db == 0 {
		return 0
	}
	return num / math.Sqrt(da*db)
}

func ranks(v []float64) []float64 {
	idx := make([]int, len(v))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(i, j int) bool { return v[idx[i]] < v[idx[j]] })
	r := make([]float64, len(v))
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && v[idx[j+1]] == v[idx[i]] {
			j++
		}
		avg := float64(i+j)/2 + 1
		for k := i; k <= j; k++ {
			r[idx[k]] = avg
		}
		i = j + 1
	}
	return r
}

// RunTimeBucket is the accuracy of the test jobs whose true run time fell in
// one range: where the remaining error comes from. SSEShare is the share of
// the backtest's whole squared log error (the part of R² still missing)
// that these jobs carry, and OverSSEShare the part of it from predictions
// above the true run time: on the SWF traces most of it is jobs that ended
// within a minute (a failed start) predicted at their user's usual length.
type RunTimeBucket struct {
	Bucket       string  `json:"bucket"`    // e.g. "1m-10m": at least 1 minute, under 10
	MinS         float64 `json:"min_s"`     // the range's lower end, seconds (inclusive)
	MaxS         float64 `json:"max_s"`     // its upper end (exclusive); 0 for none
	N            int     `json:"n"`         // test jobs in the range
	Share        float64 `json:"share"`     // of all test jobs
	Within2x     float64 `json:"within_2x"` // of these jobs
	SSEShare     float64 `json:"sse_share"`
	OverSSEShare float64 `json:"over_sse_share"`
}

// runTimeRange is one range of errorByRunTime: from min seconds to the next
// range's min (the last has no upper end).
type runTimeRange struct {
	name string
	min  float64
}

func runTimeRanges() []runTimeRange {
	return []runTimeRange{{"<1m", 0}, {"1m-10m", 60}, {"10m-1h", 600}, {"1h-4h", 3600}, {">=4h", 4 * 3600}}
}

// errorByRunTime splits the squared log error of s (point predictions
// floored at 1 s, as score does) by the true run time's range. Every range
// is listed, empty ones with N 0.
func errorByRunTime(s []scored) []RunTimeBucket {
	ranges := runTimeRanges()
	out := make([]RunTimeBucket, len(ranges))
	sse := make([]float64, len(out))
	over := make([]float64, len(out))
	hit := make([]int, len(out))
	var total float64
	for _, x := range s {
		k := len(ranges) - 1
		for k > 0 && x.true < ranges[k].min {
			k--
		}
		p, y := math.Max(x.pred, 1), x.true
		d := math.Log(p) - math.Log(y)
		out[k].N++
		sse[k] += d * d
		total += d * d
		if d > 0 {
			over[k] += d * d
		}
		if math.Max(p/y, y/p) < 2 {
			hit[k]++
		}
	}
	for k, b := range ranges {
		o := &out[k]
		o.Bucket, o.MinS = b.name, b.min
		if k+1 < len(ranges) {
			o.MaxS = ranges[k+1].min
		}
		if o.N > 0 {
			o.Share = float64(o.N) / float64(len(s))
			o.Within2x = float64(hit[k]) / float64(o.N)
		}
		if total > 0 {
			o.SSEShare, o.OverSSEShare = sse[k]/total, over[k]/total
		}
	}
	return out
}
