package duration

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/sajari/regression"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"
)

// Row is one training example: a job's features at its submit time and its log
// run time in seconds.
type Row struct {
	F Features
	Y float64
}

// Model predicts log run time. It is immutable once built: retraining builds a
// new Model, which callers swap in atomically.
type Model struct {
	segs      [numSegments]*segModel
	TrainedAt time.Time
	Rows      int
	// cal widens or narrows each segment's intervals (Calibrated).
	cal Calibration
}

type segModel struct {
	coef []float64 // intercept first
	// lo and hi are the 10th and 90th percentiles of training residuals (log).
	lo, hi float64
	// A split node sends x with x[feat] <= thr to left, the rest to right;
	// coef, lo and hi are then those of the node's own fit (unused).
	feat        int
	thr         float64
	left, right *segModel
}

// leaf returns the leaf of the tree that x falls in.
func (sm *segModel) leaf(x []float64) *segModel {
	for sm.left != nil {
		if x[sm.feat] <= sm.thr {
			sm = sm.left
		} else {
			sm = sm.right
		}
	}
	return sm
}

// A segment needs at least minSegmentRows rows, and rowsPerFeature rows per
// feature, for a fit on all its features. Short of that, a segment with core
// features (coreFeatures) fits on those alone when it has rowsPerFeature
// rows for each of them; below that it answers with its history rule rather
// than overfit.
const (
	minSegmentRows = 50
	rowsPerFeature = 30
)

// ErrNotTrained is returned by Predict on a zero Model.
var ErrNotTrained = errors.New("duration: model is not trained")

// RecencyHalfLife is the age, in training rows, at which a row weighs half
// as much in a fit as the newest: a cluster's workload drifts, and the
// latest jobs say most about the next. With the since_end features and
// Huber's k at 0.9 (added with it), it raised R² (log) on the SWF
// backtests from 0.385 to 0.446 on HPC2N and from 0.513 to 0.519 on
// CTC-SP2, within 2× no lower (docs/BENCHMARKS.md); the weights do most of
// HPC2N's gain.
const RecencyHalfLife = 40_000

// recencyWeight is the weight of the row age rows older than the newest.
func recencyWeight(age int) float64 { return math.Exp2(-float64(age) / RecencyHalfLife) }

// Fit trains one robust least-squares fit of log run time per segment (a
// model tree). rows are oldest first: each row's weight halves every
// RecencyHalfLife rows back from the last.
func Fit(rows []Row, now time.Time) (*Model, error) {
	m := &Model{TrainedAt: now, Rows: len(rows)}
	var bySeg [numSegments][]Row
	var baseBySeg [numSegments][]float64
	for i, r := range rows {
		if err := check(r.F); err != nil {
			return nil, err
		}
		if math.IsNaN(r.Y) || math.IsInf(r.Y, 0) {
			return nil, fmt.Errorf("duration: training target %v is not finite", r.Y)
		}
		bySeg[r.F.Segment] = append(bySeg[r.F.Segment], r)
		baseBySeg[r.F.Segment] = append(baseBySeg[r.F.Segment], recencyWeight(len(rows)-1-i))
	}
	for s := range bySeg {
		seg, n := Segment(s), len(bySeg[s])
		var sm *segModel
		var err error
		switch core := coreColumns(seg); {
		case n >= max(minSegmentRows, rowsPerFeature*numFeatures(seg)):
			sm, err = fitNode(seg, bySeg[s], baseBySeg[s], nil, 0)
		case core != nil && n >= max(minSegmentRows, rowsPerFeature*len(core)):
			sm, err = fitCore(seg, bySeg[s], baseBySeg[s], core)
		default:
			continue
		}
		if err != nil {
			return nil, err
		}
		m.segs[s] = sm
	}
	return m, nil
}

// fitCore fits segment s's rows on the feature columns core alone: the
// other columns are zeroed for the fit (the ridge term gives a constant
// column a coefficient of 0) and their coefficients set to exactly 0, so
// the model predicts from the full feature vector as usual. No tree: a
// segment this small has no room for leaves.
func fitCore(s Segment, rows []Row, base []float64, core []int) (*segModel, error) {
	p := numFeatures(s)
	keep := make([]bool, p)
	for _, c := range core {
		keep[c] = true
	}
	xs := make([]float64, len(rows)*p)
	masked := make([]Row, len(rows))
	for i, r := range rows {
		x := xs[i*p : (i+1)*p : (i+1)*p]
		for _, c := range core {
			x[c] = r.F.X[c]
		}
		masked[i] = Row{F: Features{Segment: r.F.Segment, X: x, Fallback: r.F.Fallback}, Y: r.Y}
	}
	sm, _, err := fitSegment(s, masked, base, nil, huberIterations)
	if err != nil {
		return nil, err
	}
	for c := range p {
		if !keep[c] {
			sm.coef[c+1] = 0
		}
	}
	return sm, nil
}

func check(f Features) error {
	if f.Segment < 0 || f.Segment >= numSegments {
		return fmt.Errorf("duration: segment %d out of range", f.Segment)
	}
	if len(f.X) != numFeatures(f.Segment) {
		return fmt.Errorf("duration: segment %d takes %d features, got %d", f.Segment, numFeatures(f.Segment), len(f.X))
	}
	for i, x := range f.X {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("duration: feature %s = %v is not finite", featureNames(f.Segment)[i], x)
		}
	}
	if f.Repeats && (math.IsNaN(f.Repeat) || math.IsInf(f.Repeat, 0)) {
		return fmt.Errorf("duration: repeated run time %v is not finite", f.Repeat)
	}
	return nil
}

// fitSegment fits log run time on the segment's features by least squares,
// each row weighted by its base weight (recency) times its Huber weight; w,
// when given, are the weights to start from (a parent's).
//
// sajari/regression solves by a QR factorisation that materialises the full
// n×n Q, so it cannot take 100,000 rows. The least-squares solution depends
// only on XᵀX and Xᵀy, so the rows are first reduced to those (centred, with a
// tiny ridge term that keeps constant features from making XᵀX singular):
// XcᵀXc + λI = LLᵀ (Cholesky) and Lz = Xcᵀyc. The rows of Lᵀ, each given once as
// is and once negated (so that sajari's intercept comes out 0), are 2p
// pseudo-observations with exactly the same normal equations; sajari solves
// them, and the intercept is ȳ − x̄·β.
func fitSegment(s Segment, rows []Row, base, w []float64, iters int) (*segModel, []float64, error) {
	if w == nil {
		w = slices.Clone(base)
	}
	// The early iterations only steer the weights: on a large segment they
	// run on every 4th row, the last two on all of them.
	var sub []Row
	var subW []float64
	if len(rows) >= 40_000 {
		subW = make([]float64, 0, len(rows)/4+1)
		sub = make([]Row, 0, len(rows)/4+1)
		for i := 0; i < len(rows); i += 4 {
			sub = append(sub, rows[i])
		}
	}
	var sm *segModel
	res := make([]float64, len(rows))
	scratch := make([]float64, 0, min(len(rows), scaleSample))
	for iter := 0; iter < iters; iter++ {
		var err error
		if sub != nil && iter < iters-2 {
			subW = subW[:0]
			for i := 0; i < len(rows); i += 4 {
				subW = append(subW, w[i])
			}
			sm, err = solveWeighted(s, sub, subW)
		} else {
			sm, err = solveWeighted(s, rows, w)
		}
		if err != nil {
			return nil, nil, err
		}
		// Huber weights: full weight within k (log units) of the fit,
		// k/|r| beyond, so that the few jobs that die in seconds or run to
		// a forgotten limit do not drag the fit for everybody else.
		for i, row := range rows {
			res[i] = row.Y - sm.predict(row.F.X)
		}
		k := huberThreshold(res, scratch)
		for i, r := range res {
			r = math.Abs(r)
			w[i] = base[i]
			if r > k {
				w[i] = base[i] * k / r
			}
		}
	}
	for i, row := range rows {
		res[i] = row.Y - sm.predict(row.F.X)
	}
	sort.Float64s(res)
	sm.lo, sm.hi = res[len(res)/10], res[len(res)*9/10]
	return sm, w, nil
}

// Model tree: a segment's fit is split where the parent's residuals show a
// change of level or slope on one side of a feature threshold.
const (
	treeDepth   = 2
	minLeafRows = 3000
	minGain     = 0.0005 // of the weighted residual sum of squares
)

func fitNode(s Segment, rows []Row, base, w []float64, depth int) (*segModel, error) {
	iters := huberIterations
	if w != nil {
		iters = childIterations // warm start from the parent's weights
	}
	sm, w, err := fitSegment(s, rows, base, w, iters)
	if err != nil {
		return nil, err
	}
	minLeaf := max(minLeafRows, rowsPerFeature*numFeatures(s))
	if depth >= treeDepth || len(rows) < 2*minLeaf {
		return sm, nil
	}
	feat, thr, ok := bestSplit(s, rows, sm, w, minLeaf)
	if !ok {
		return sm, nil
	}
	var l, r []Row
	var bl, br, wl, wr []float64
	for i, row := range rows {
		if row.F.X[feat] <= thr {
			l, bl, wl = append(l, row), append(bl, base[i]), append(wl, w[i])
		} else {
			r, br, wr = append(r, row), append(br, base[i]), append(wr, w[i])
		}
	}
	if sm.left, err = fitNode(s, l, bl, wl, depth+1); err != nil {
		return nil, err
	}
	if sm.right, err = fitNode(s, r, br, wr, depth+1); err != nil {
		return nil, err
	}
	sm.feat, sm.thr = feat, thr
	return sm, nil
}

// splitStats are weighted sums over rows for the regression of the parent's
// residual r on its prediction m: counts, Σw, Σwm, Σwm², Σwr, Σwmr, Σwr².
type splitStats struct{ n, w, m, mm, r, mr, rr float64 }

func (a *splitStats) add(b splitStats) {
	a.n += b.n
	a.w += b.w
	a.m += b.m
	a.mm += b.mm
	a.r += b.r
	a.mr += b.mr
	a.rr += b.rr
}

// explained is the weighted sum of squares of r that a + b·m explains.
func (a splitStats) explained() float64 {
	if a.w <= 0 {
		return 0
	}
	mm := a.mm - a.m*a.m/a.w
	mr := a.mr - a.m*a.r/a.w
	e := a.r * a.r / a.w
	if mm > 1e-9 {
		e += mr * mr / mm
	}
	return e
}

// splitFeature reports whether a tree may split on the feature named name:
// the job's own history and request, not load or calendar terms, which drift
// between training and use.
func splitFeature(name string) bool {
	switch name {
	case "last1", "median10", "spread10", "short", "req", "user_ratio_req", "exact_median", "exact_spread", "procs", "killed", "since_end":
		return true
	}
	return false
}

func bestSplit(s Segment, rows []Row, sm *segModel, w []float64, minLeaf int) (feat int, thr float64, ok bool) {
	p := len(rows[0].F.X)
	pred := make([]float64, len(rows))
	var total splitStats
	for i, row := range rows {
		pred[i] = sm.predict(row.F.X)
		r := row.Y - pred[i]
		total.add(splitStats{1, w[i], w[i] * pred[i], w[i] * pred[i] * pred[i], w[i] * r, w[i] * pred[i] * r, w[i] * r * r})
	}
	base := total.explained()
	best := minGain * total.rr
	step := max(1, len(rows)/2048)
	sample := make([]float64, 0, len(rows)/step+1)
	names := featureNames(s)
	for c := 0; c < p; c++ {
		if !splitFeature(names[c]) {
			continue
		}
		sample = sample[:0]
		for i := 0; i < len(rows); i += step {
			sample = append(sample, rows[i].F.X[c])
		}
		sort.Float64s(sample)
		var thrs []float64
		for q := 1; q < 16; q++ {
			t := sample[len(sample)*q/16]
			if len(thrs) == 0 || t > thrs[len(thrs)-1] {
				thrs = append(thrs, t)
			}
		}
		if len(thrs) == 0 {
			continue
		}
		bins := make([]splitStats, len(thrs)+1)
		for i, row := range rows {
			b := sort.SearchFloat64s(thrs, row.F.X[c]) // first threshold >= x
			m, r := pred[i], row.Y-pred[i]
			bins[b].add(splitStats{1, w[i], w[i] * m, w[i] * m * m, w[i] * r, w[i] * m * r, w[i] * r * r})
		}
		var left splitStats
		for b := 0; b < len(thrs); b++ {
			left.add(bins[b])
			right := total
			right.n, right.w, right.m, right.mm, right.r, right.mr, right.rr = total.n-left.n, total.w-left.w, total.m-left.m, total.mm-left.mm, total.r-left.r, total.mr-left.mr, total.rr-left.rr
			if left.n < float64(minLeaf) || right.n < float64(minLeaf) {
				continue
			}
			if g := left.explained() + right.explained() - base; g > best {
				best, feat, thr, ok = g, c, thrs[b], true
			}
		}
	}
	return feat, thr, ok
}

// Robust fitting: iteratively reweighted least squares with Huber weights.
const (
	huberIterations = 6
	childIterations = 3
	huberK          = 0.9
	huberSigmas     = 0.7
	scaleSample     = 8192
)

// huberThreshold returns the Huber threshold for a fit with residuals res:
// huberSigmas robust standard deviations of them (the median |r| / 0.6745),
// and at least huberK. A node whose run times scatter widely (HPC2N's
// user2 segment: users running a request shape new to them) then
// down-weights only what is far out for it, not half its rows; a tight one
// keeps huberK. Reading at most scaleSample of the residuals, evenly
// strided, bounds the cost.
// It raised HPC2N's backtest from 0.5322 / 0.4463 (within 2× / R² log) to
// 0.5471 / 0.4482, CTC-SP2's moved from 0.5881 / 0.5185 to 0.5876 /
// 0.5186 (docs/BENCHMARKS.md). scratch is a buffer of capacity at least
// min(len(res), scaleSample).
func huberThreshold(res, scratch []float64) float64 {
	step := max(1, (len(res)+scaleSample-1)/scaleSample) // at most scaleSample values
	scratch = scratch[:0]
	for i := 0; i < len(res); i += step {
		scratch = append(scratch, math.Abs(res[i]))
	}
	if len(scratch) == 0 {
		return huberK
	}
	sort.Float64s(scratch)
	return max(huberK, huberSigmas*scratch[len(scratch)/2]/0.6745)
}

func solveWeighted(s Segment, rows []Row, w []float64) (*segModel, error) {
	p := numFeatures(s)
	var n float64
	mx := make([]float64, p)
	var my float64
	for k, row := range rows {
		for i, v := range row.F.X {
			mx[i] += w[k] * v
		}
		my += w[k] * row.Y
		n += w[k]
	}
	for i := range mx {
		mx[i] /= n
	}
	my /= n
	// The weighted, centred XᵀX through BLAS's symmetric rank-k update, a
	// block of rows at a time (the scalar loop was most of the fit time).
	const block = 256
	acc := mat.NewSymDense(p, nil)
	b := make([]float64, p)
	buf := make([]float64, block*p)
	flush := func(k int) {
		if k == 0 {
			return
		}
		d := blas64.General{Rows: k, Cols: p, Stride: p, Data: buf[:k*p]}
		blas64.Syrk(blas.Trans, 1, d, 1, acc.RawSymmetric())
	}
	k := 0
	for r, row := range rows {
		sw := math.Sqrt(w[r])
		dy := (row.Y - my) * w[r]
		d := buf[k*p : k*p+p]
		for i, v := range row.F.X {
			d[i] = v - mx[i]
			b[i] += d[i] * dy
			d[i] *= sw
		}
		if k++; k == block {
			flush(k)
			k = 0
		}
	}
	flush(k)
	g := acc
	const ridge = 1e-6
	for i := 0; i < p; i++ {
		g.SetSym(i, i, g.At(i, i)+ridge*n+1e-9)
	}
	var chol mat.Cholesky
	if ok := chol.Factorize(g); !ok {
		return nil, fmt.Errorf("duration: fit segment %d: normal equations are not positive definite", s)
	}
	var l mat.TriDense
	chol.LTo(&l)
	// Forward substitution: L z = b.
	z := make([]float64, p)
	for i := 0; i < p; i++ {
		v := b[i]
		for j := 0; j < i; j++ {
			v -= l.At(i, j) * z[j]
		}
		z[i] = v / l.At(i, i)
	}
	r := new(regression.Regression)
	r.SetObserved("log_run")
	for i, name := range featureNames(s) {
		r.SetVar(i, name)
	}
	for i := 0; i < p; i++ {
		pos := make([]float64, p)
		neg := make([]float64, p)
		for j := 0; j < p; j++ {
			pos[j] = l.At(j, i) // row i of Lᵀ
			neg[j] = -pos[j]
		}
		r.Train(regression.DataPoint(z[i], pos), regression.DataPoint(-z[i], neg))
	}
	if err := r.Run(); err != nil {
		return nil, fmt.Errorf("duration: fit segment %d on %d rows: %w", s, len(rows), err)
	}
	c := r.GetCoeffs()
	if len(c) != p+1 {
		return nil, fmt.Errorf("duration: fit segment %d: %d coefficients for %d features", s, len(c), p)
	}
	sm := &segModel{coef: make([]float64, p+1)}
	sm.coef[0] = my + c[0]
	for i := 0; i < p; i++ {
		sm.coef[i+1] = c[i+1]
		sm.coef[0] -= c[i+1] * mx[i]
	}
	return sm, nil
}

func (sm *segModel) predict(x []float64) float64 {
	y := sm.coef[0]
	for i, v := range x {
		y += sm.coef[i+1] * v
	}
	return y
}

// Prediction is a predicted run time with an 80% interval.
type Prediction struct {
	Point, Low, High time.Duration
	// Fitted is false when the job's segment had too little training data and
	// the history rule answered.
	Fitted bool
}

// Covers reports whether run lies within the prediction's interval.
func (p Prediction) Covers(run time.Duration) bool { return p.Low <= run && run <= p.High }

// LimitGrace is how long past its time limit a job may still run before the
// scheduler has killed it (Slurm: OverTimeLimit plus KillWait, 30 s by
// default); it caps a prediction's interval. In the SWF traces 7–9 % of jobs
// ran past their request, 97–98 % of those by at most 10 minutes.
const LimitGrace = 10 * time.Minute

// Predict returns j's predicted run time. reqTime (when > 0) caps it: a job is
// stopped at its limit, so the point is at most reqTime and the interval's
// upper end at most reqTime + LimitGrace.
func (m *Model) Predict(f Features, reqTime time.Duration) (Prediction, error) {
	return m.PredictWidened(f, reqTime, 1)
}

// PredictWidened is Predict with the interval's offsets from the point, in
// log space, multiplied by widen on top of the model's calibration: the
// online correction of an Adaptive (Widen). A widen of 0 or less is taken
// as 1.
func (m *Model) PredictWidened(f Features, reqTime time.Duration, widen float64) (Prediction, error) {
	if m == nil || m.Rows == 0 {
		return Prediction{}, ErrNotTrained
	}
	if err := check(f); err != nil {
		return Prediction{}, err
	}
	y, lo, hi, fitted := m.raw(f)
	c := m.cal.scale(f.Segment)
	if widen > 0 {
		c *= widen
	}
	p := Prediction{Point: secs(y), Low: secs(y + c*lo), High: secs(y + c*hi), Fitted: fitted}
	if f.Repeats {
		// The interval stays the model's (calibrated on its point); it
		// is widened to hold the point where the band moved it out.
		p.Point = secs(min(max(y, f.Repeat-RepeatBand), f.Repeat+RepeatBand))
		p.Low, p.High = min(p.Low, p.Point), max(p.High, p.Point)
	}
	if reqTime > 0 {
		p.Point, p.Low, p.High = min(p.Point, reqTime), min(p.Low, reqTime), min(p.High, reqTime+LimitGrace)
	}
	return p, nil
}

func secs(logSeconds float64) time.Duration {
	logSeconds = math.Max(0, math.Min(logSeconds, math.Log(365*24*3600)))
	return time.Duration(math.Exp(logSeconds) * float64(time.Second))
}

// raw returns the log point prediction for f and its interval's offsets from
// it before calibration (lo < 0 < hi as a rule): a fitted segment's 10th and
// 90th percentile training residuals, a history rule's ±1 (a factor e).
func (m *Model) raw(f Features) (y, lo, hi float64, fitted bool) {
	sm := m.segs[f.Segment]
	if sm == nil {
		return f.Fallback, -1, 1, false
	}
	sm = sm.leaf(f.X)
	return sm.predict(f.X), sm.lo, sm.hi, true
}

// IntervalLevel is the share of run times a prediction's interval is meant
// to cover.
const IntervalLevel = 0.8

// MinCalibrationRows is the fewest held-out rows a segment needs for a
// scale of its own; with fewer it takes the scale of all segments together.
// FitCalibrated, and the live predictor, calibrate only on at least as many
// held-out rows in all.
const MinCalibrationRows = 50

// Calibration scales the intervals of each segment so that they cover
// IntervalLevel of run times out of sample. Training residuals understate
// the error on later jobs (a cluster's workload drifts), so a model's raw
// intervals cover less than they claim: 70–72 % for an "80 %" interval on
// the SWF backtests.
type Calibration struct {
	// Scale multiplies the interval's offsets from the point prediction,
	// in log space; 0 means 1 (uncalibrated).
	Scale [numSegments]float64
	// Rows counts the held-out rows behind each segment's scale.
	Rows [numSegments]int
}

func (c Calibration) scale(s Segment) float64 {
	if v := c.Scale[s]; v > 0 {
		return v
	}
	return 1
}

// Calibrate measures how held, a model fitted on earlier rows, covers the
// later rows: for each segment, the factor by which its raw intervals must
// be widened (or narrowed) to cover IntervalLevel of them — split conformal
// prediction, with the interval's own offsets as the unit. A segment with
// fewer than MinCalibrationRows rows gets the factor of all rows together.
// The factor is in the unit of held's interval for the segment; should held
// answer a segment with its history rule where the served model has a fit
// (or the reverse: the segment crossed the size a fit needs between the two
// fits), the factor is applied to the other's interval as it is.
func Calibrate(held *Model, rows []Row) Calibration {
	var c Calibration
	var bySeg [numSegments][]float64
	all := make([]float64, 0, len(rows))
	for _, r := range rows {
		if check(r.F) != nil {
			continue
		}
		y, lo, hi, _ := held.raw(r.F)
		// The factor that puts r.Y just on the interval's edge.
		var k float64
		switch d := r.Y - y; {
		case d >= 0:
			k = d / math.Max(hi, 1e-3)
		default:
			k = d / math.Min(lo, -1e-3)
		}
		bySeg[r.F.Segment] = append(bySeg[r.F.Segment], k)
		all = append(all, k)
	}
	pooled := conformalQuantile(all)
	for s := range bySeg {
		c.Rows[s] = len(bySeg[s])
		if len(bySeg[s]) >= MinCalibrationRows {
			c.Scale[s] = conformalQuantile(bySeg[s])
		} else {
			c.Scale[s] = pooled
		}
	}
	return c
}

// conformalQuantile returns the ⌈(n+1)·IntervalLevel⌉-th smallest of ks,
// the split-conformal quantile; 0 (no scaling) when there is none: ks empty,
// or too few for the rank (n < 4 at 80 %), where the largest of them would
// cover less than claimed.
func conformalQuantile(ks []float64) float64 {
	i := int(math.Ceil(float64(len(ks)+1)*IntervalLevel)) - 1
	if i >= len(ks) {
		return 0
	}
	ks = slices.Clone(ks)
	slices.Sort(ks)
	return ks[i]
}

// Calibrated returns a copy of m whose intervals are scaled by c.
func (m *Model) Calibrated(c Calibration) *Model {
	cp := *m
	cp.cal = c
	return &cp
}

// Calibration returns the interval scaling m applies.
func (m *Model) Calibration() Calibration { return m.cal }

// FitCalibrated fits a model on rows (in submit order) whose intervals are
// calibrated on the latest holdout share of them, as predicted by a second
// model fitted on the rest. With too few rows for the split it returns the
// uncalibrated fit.
func FitCalibrated(rows []Row, now time.Time, holdout float64) (*Model, error) {
	m, err := Fit(rows, now)
	if err != nil {
		return nil, err
	}
	k := int(float64(len(rows)) * (1 - holdout))
	if holdout <= 0 || holdout >= 1 || k < minSegmentRows || len(rows)-k < MinCalibrationRows {
		return m, nil
	}
	held, err := Fit(rows[:k], now)
	if err != nil {
		return nil, fmt.Errorf("duration: fit the calibration model on %d rows: %w", k, err)
	}
	return m.Calibrated(Calibrate(held, rows[k:])), nil
}
