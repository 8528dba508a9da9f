package demand

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/sajari/regression"
	"gonum.org/v1/gonum/mat"
)

// linear is a fitted linear model, y = coef[0] + Σ coef[j+1]·x[j]. It is
// immutable once fitted and safe for concurrent use.
type linear struct {
	coef []float64
}

var (
	// ErrNotTrained is returned by a model that was never fitted.
	ErrNotTrained = errors.New("demand: model not trained")
	// ErrFeatures is returned for a feature vector of the wrong length or
	// with a value that is not finite.
	ErrFeatures = errors.New("demand: bad feature vector")
	// ErrNotEnoughData is returned when there are too few training rows.
	ErrNotEnoughData = errors.New("demand: not enough data")
)

// predict returns the model's value at x after checking x: sajari/regression
// itself reads past nothing and checks nothing (a short vector panics, a long
// one is silently cut, an unfitted model answers 0).
func (l linear) predict(x []float64) (float64, error) {
	if len(l.coef) == 0 {
		return 0, ErrNotTrained
	}
	if len(x) != len(l.coef)-1 {
		return 0, fmt.Errorf("%w: %d features, want %d", ErrFeatures, len(x), len(l.coef)-1)
	}
	y := l.coef[0]
	for j, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, fmt.Errorf("%w: feature %d is %v", ErrFeatures, j, v)
		}
		y += l.coef[j+1] * v
	}
	return y, nil
}

// Huber regression: the change in demand is heavy-tailed (jobs arrive and
// leave in blocks of nodes), and squared loss lets a few unforeseeable jumps
// set the coefficients. Rows whose residual exceeds huberDelta robust
// standard deviations (1.4826·MAD) are down-weighted in proportion, by
// iteratively reweighted least squares; 1.345 is the usual constant (95%
// efficiency on Gaussian noise). On the validation window before the CES
// test window (2017-11-17..30) it cut the 1-hour RMSE from 1.009 to 0.992 of
// the "last" baseline's.
const (
	huberDelta = 1.345
	huberIters = 3
)

// fitHuber fits like fitLinear, then refits huberIters times with Huber
// weights (times w) from the previous fit's residuals.
func fitHuber(x []float64, p int, y, w []float64, ridge float64) (linear, error) {
	l, err := fitLinear(x, p, y, w, ridge)
	if err != nil {
		return l, err
	}
	n := len(y)
	res := make([]float64, n)
	sorted := make([]float64, n)
	hw := make([]float64, n)
	for range huberIters {
		for i := range n {
			v, err := l.predict(x[i*p : i*p+p])
			if err != nil {
				return linear{}, err
			}
			res[i] = math.Abs(y[i] - v)
		}
		copy(sorted, res)
		slices.Sort(sorted)
		cut := huberDelta * 1.4826 * sorted[n/2]
		if !(cut > 0) {
			break // most rows are fitted exactly: nothing to down-weight
		}
		for i, r := range res {
			hw[i] = 1
			if r > cut {
				hw[i] = cut / r
			}
			if w != nil {
				hw[i] *= w[i]
			}
		}
		if l, err = fitLinear(x, p, y, hw, ridge); err != nil {
			return linear{}, err
		}
	}
	return l, nil
}

// fitLinear fits y ≈ coef·[1, x] by weighted ridge least squares, with
// sajari/regression solving the least-squares problem.
//
// x holds the rows one after another, p values each; w are the rows' weights
// (nil: all equal). ridge adds ridge·var(x_j) to each feature's variance
// (scale-free, the intercept unpenalised); a feature that is constant over the
// rows gets coefficient 0.
//
// sajari/regression keeps every row and its Run builds the full n×n Q of a QR
// factorisation: on 7,500 rows of 35 features that took 6.7 s and 1.7 GB.
// The least-squares solution depends on the rows only through their weighted
// mean μ and covariance S, so sajari is given 2d rows that have exactly that
// mean and covariance instead, μ ± √(dλ)·v for each eigenpair (λ, v) of S (d
// the number of features plus one): same coefficients, a (2d)×(d) problem.
func fitLinear(x []float64, p int, y, w []float64, ridge float64) (linear, error) {
	n := len(y)
	if p < 0 || len(x) != n*p || (w != nil && len(w) != n) {
		return linear{}, fmt.Errorf("demand: fit: %d rows, %d values, %d weights for %d features", n, len(x), len(w), p)
	}
	if n < 2*(p+1) {
		return linear{}, fmt.Errorf("%w: %d training rows for %d features", ErrNotEnoughData, n, p)
	}
	d := p + 1 // features, then the target
	z := func(i, j int) float64 {
		if j == p {
			return y[i]
		}
		return x[i*p+j]
	}
	weight := func(i int) float64 {
		if w == nil {
			return 1
		}
		return w[i]
	}
	var wsum float64
	mu := make([]float64, d)
	for i := range n {
		wi := weight(i)
		if wi < 0 || math.IsNaN(wi) || math.IsInf(wi, 0) {
			return linear{}, fmt.Errorf("demand: fit: row %d: weight %v", i, wi)
		}
		wsum += wi
		for j := range d {
			v := z(i, j)
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return linear{}, fmt.Errorf("demand: fit: row %d: value %d is %v", i, j, v)
			}
			mu[j] += wi * v
		}
	}
	if !(wsum > 0) {
		return linear{}, fmt.Errorf("%w: the weights sum to %v", ErrNotEnoughData, wsum)
	}
	for j := range mu {
		mu[j] /= wsum
	}
	cov := make([]float64, d*d)
	dev := make([]float64, d)
	for i := range n {
		wi := weight(i) / wsum
		for j := range d {
			dev[j] = z(i, j) - mu[j]
		}
		for a := range d {
			row := cov[a*d : a*d+d]
			for b := a; b < d; b++ {
				row[b] += wi * dev[a] * dev[b]
			}
		}
	}

	// Keep the features that vary; a constant one is the intercept again.
	var keep []int
	for j := range p {
		if cov[j*d+j] > 1e-12*(1+mu[j]*mu[j]) {
			keep = append(keep, j)
		}
	}
	keep = append(keep, p) // the target
	dk := len(keep)
	s := mat.NewSymDense(dk, nil)
	for a, ja := range keep {
		for b := a; b < dk; b++ {
			jb := keep[b]
			v := cov[ja*d+jb]
			if a == b && ja != p {
				v *= 1 + ridge
			}
			s.SetSym(a, b, v)
		}
	}
	if err := checkConditioning(s, dk-1); err != nil {
		return linear{}, err
	}
	var eig mat.EigenSym
	if !eig.Factorize(s, true) {
		return linear{}, errors.New("demand: fit: eigendecomposition of the covariance failed")
	}
	vals := eig.Values(nil)
	var vecs mat.Dense
	eig.VectorsTo(&vecs)

	r := new(regression.Regression)
	for e, lambda := range vals {
		a := math.Sqrt(float64(dk) * max(lambda, 0))
		for _, sign := range []float64{1, -1} {
			vars := make([]float64, dk-1)
			for q := range dk - 1 {
				vars[q] = mu[keep[q]] + sign*a*vecs.At(q, e)
			}
			r.Train(regression.DataPoint(mu[p]+sign*a*vecs.At(dk-1, e), vars))
		}
	}
	if err := r.Run(); err != nil {
		return linear{}, fmt.Errorf("demand: fit: %w", err)
	}
	c := r.GetCoeffs()
	if len(c) != dk {
		return linear{}, fmt.Errorf("demand: fit: %d coefficients, want %d", len(c), dk)
	}
	out := linear{coef: make([]float64, p+1)}
	out.coef[0] = c[0]
	for q, j := range keep[:dk-1] {
		out.coef[j+1] = c[q+1]
	}
	for j, v := range out.coef {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return linear{}, fmt.Errorf("demand: fit: coefficient %d is %v (collinear features?)", j, v)
		}
	}
	return out, nil
}

// checkConditioning fails when the first p variables of cov are (nearly)
// collinear: sajari/regression's QR has no pivoting and would answer with
// huge coefficients that cancel, not with an error.
func checkConditioning(cov *mat.SymDense, p int) error {
	if p == 0 {
		return nil
	}
	corr := mat.NewSymDense(p, nil)
	for a := range p {
		for b := a; b < p; b++ {
			corr.SetSym(a, b, cov.At(a, b)/math.Sqrt(cov.At(a, a)*cov.At(b, b)))
		}
	}
	var eig mat.EigenSym
	if !eig.Factorize(corr, false) {
		return errors.New("demand: fit: eigendecomposition of the feature correlations failed")
	}
	vals := eig.Values(nil) // ascending
	if rcond := vals[0] / vals[p-1]; !(rcond > 1e-10) {
		return fmt.Errorf("demand: fit: features are collinear (reciprocal condition %.1e); use a ridge", rcond)
	}
	return nil
}
