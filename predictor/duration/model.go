package duration

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/sajari/regression"
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
}

type segModel struct {
	coef []float64 // intercept first
	// lo and hi are the 10th and 90th percentiles of training residuals (log).
	lo, hi float64
}

// A segment needs at least minSegmentRows rows, and rowsPerFeature rows per
// feature, for its own fit; below that it answers with its history rule
// rather than overfit (a small trace like the Venus slice).
const (
	minSegmentRows = 50
	rowsPerFeature = 20
)

// ErrNotTrained is returned by Predict on a zero Model.
var ErrNotTrained = errors.New("duration: model is not trained")

// Fit trains one least-squares fit of log run time per segment.
func Fit(rows []Row, now time.Time) (*Model, error) {
	m := &Model{TrainedAt: now, Rows: len(rows)}
	var bySeg [numSegments][]Row
	for _, r := range rows {
		if err := check(r.F); err != nil {
			return nil, err
		}
		if math.IsNaN(r.Y) || math.IsInf(r.Y, 0) {
			return nil, fmt.Errorf("duration: training target %v is not finite", r.Y)
		}
		bySeg[r.F.Segment] = append(bySeg[r.F.Segment], r)
	}
	for s := range bySeg {
		if len(bySeg[s]) < max(minSegmentRows, rowsPerFeature*len(featureNames[s])) {
			continue
		}
		sm, err := fitSegment(Segment(s), bySeg[s])
		if err != nil {
			return nil, err
		}
		m.segs[s] = sm
	}
	return m, nil
}

func check(f Features) error {
	if f.Segment < 0 || f.Segment >= numSegments {
		return fmt.Errorf("duration: segment %d out of range", f.Segment)
	}
	if len(f.X) != len(featureNames[f.Segment]) {
		return fmt.Errorf("duration: segment %d takes %d features, got %d", f.Segment, len(featureNames[f.Segment]), len(f.X))
	}
	for i, x := range f.X {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("duration: feature %s = %v is not finite", featureNames[f.Segment][i], x)
		}
	}
	return nil
}

// fitSegment fits log run time on the segment's features by least squares.
//
// sajari/regression solves by a QR factorisation that materialises the full
// n×n Q, so it cannot take 100,000 rows. The least-squares solution depends
// only on XᵀX and Xᵀy, so the rows are first reduced to those (centred, with a
// tiny ridge term that keeps constant features from making XᵀX singular):
// XcᵀXc + λI = LLᵀ (Cholesky) and Lz = Xcᵀyc. The rows of Lᵀ, each given once as
// is and once negated (so that sajari's intercept comes out 0), are 2p
// pseudo-observations with exactly the same normal equations; sajari solves
// them, and the intercept is ȳ − x̄·β.
func fitSegment(s Segment, rows []Row) (*segModel, error) {
	w := make([]float64, len(rows))
	for i := range w {
		w[i] = 1
	}
	var sm *segModel
	for iter := 0; iter < huberIterations; iter++ {
		var err error
		if sm, err = solveWeighted(s, rows, w); err != nil {
			return nil, err
		}
		// Huber weights: full weight within huberK (log units) of the fit,
		// k/|r| beyond, so that the few jobs that die in seconds or run to
		// a forgotten limit do not drag the fit for everybody else.
		for i, row := range rows {
			r := math.Abs(row.Y - sm.predict(row.F.X))
			w[i] = 1
			if r > huberK {
				w[i] = huberK / r
			}
		}
	}
	res := make([]float64, len(rows))
	for i, row := range rows {
		res[i] = row.Y - sm.predict(row.F.X)
	}
	sort.Float64s(res)
	sm.lo, sm.hi = res[len(res)/10], res[len(res)*9/10]
	return sm, nil
}

// Robust fitting: iteratively reweighted least squares with Huber weights.
var (
	huberIterations = 6
	huberK          = 1.0
)

func solveWeighted(s Segment, rows []Row, w []float64) (*segModel, error) {
	p := len(featureNames[s])
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
	// Upper triangle of the weighted, centred XᵀX, accumulated in a flat
	// array: gonum's element accessors cost more than the arithmetic here.
	acc := make([]float64, p*p)
	b := make([]float64, p)
	d := make([]float64, p)
	for k, row := range rows {
		for i, v := range row.F.X {
			d[i] = v - mx[i]
		}
		wk := w[k]
		dy := (row.Y - my) * wk
		for i := 0; i < p; i++ {
			b[i] += d[i] * dy
			wi := wk * d[i]
			ai := acc[i*p : i*p+p]
			for j := i; j < p; j++ {
				ai[j] += wi * d[j]
			}
		}
	}
	g := mat.NewSymDense(p, nil)
	for i := 0; i < p; i++ {
		for j := i; j < p; j++ {
			g.SetSym(i, j, acc[i*p+j])
		}
	}
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
	for i, name := range featureNames[s] {
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

// Predict returns j's predicted run time. reqTime (when > 0) caps it: a job is
// stopped at its limit.
func (m *Model) Predict(f Features, reqTime time.Duration) (Prediction, error) {
	if m == nil || m.Rows == 0 {
		return Prediction{}, ErrNotTrained
	}
	if err := check(f); err != nil {
		return Prediction{}, err
	}
	var y, lo, hi float64
	sm := m.segs[f.Segment]
	fitted := sm != nil
	if fitted {
		y = sm.predict(f.X)
		lo, hi = y+sm.lo, y+sm.hi
	} else {
		y, lo, hi = f.Fallback, f.Fallback-1, f.Fallback+1
	}
	p := Prediction{Point: secs(y), Low: secs(lo), High: secs(hi), Fitted: fitted}
	if reqTime > 0 {
		p.Point, p.Low, p.High = min(p.Point, reqTime), min(p.Low, reqTime), min(p.High, reqTime)
	}
	return p, nil
}

func secs(logSeconds float64) time.Duration {
	logSeconds = math.Max(0, math.Min(logSeconds, math.Log(365*24*3600)))
	return time.Duration(math.Exp(logSeconds) * float64(time.Second))
}
