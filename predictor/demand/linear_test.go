package demand

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sajari/regression"
)

// rows returns n rows of p random features and y = f(x) + noise·N(0,1).
func rows(n, p int, noise float64, f func([]float64) float64) (x, y []float64) {
	rng := rand.New(rand.NewPCG(1, 2))
	x = make([]float64, n*p)
	y = make([]float64, n)
	for i := range n {
		r := x[i*p : i*p+p]
		for j := range r {
			r[j] = 100 * rng.Float64()
		}
		y[i] = f(r) + noise*rng.NormFloat64()
	}
	return x, y
}

func TestFitLinearExact(t *testing.T) {
	x, y := rows(50, 3, 0, func(r []float64) float64 { return 2 + 3*r[0] - r[1] + 0.5*r[2] })
	l, err := fitLinear(x, 3, y, nil, 0)
	if err != nil {
		t.Fatalf("fitLinear error %v", err)
	}
	if want := []float64{2, 3, -1, 0.5}; !near(l.coef, want, 1e-8) {
		t.Errorf("fitLinear coefficients = %v; want %v", l.coef, want)
	}
}

// TestFitLinearMatchesSajari checks the moment-compressed fit against
// sajari/regression run on every row.
func TestFitLinearMatchesSajari(t *testing.T) {
	const p = 4
	x, y := rows(300, p, 5, func(r []float64) float64 { return 10 + r[0] - 2*r[1] + 0.1*r[2]*r[3] })
	got, err := fitLinear(x, p, y, nil, 0)
	if err != nil {
		t.Fatalf("fitLinear error %v", err)
	}
	r := new(regression.Regression)
	for i := range y {
		r.Train(regression.DataPoint(y[i], x[i*p:i*p+p]))
	}
	if err := r.Run(); err != nil {
		t.Fatal(err)
	}
	if want := r.GetCoeffs(); !near(got.coef, want, 1e-7) {
		t.Errorf("fitLinear = %v; sajari on all rows = %v", got.coef, want)
	}
}

// TestFitLinearWeights checks that weight 2 counts a row twice.
func TestFitLinearWeights(t *testing.T) {
	const p = 2
	x, y := rows(40, p, 3, func(r []float64) float64 { return r[0] + r[1] })
	w := make([]float64, len(y))
	var x2, y2 []float64
	for i := range y {
		w[i] = float64(1 + i%2)
		for range int(w[i]) {
			x2 = append(x2, x[i*p:i*p+p]...)
			y2 = append(y2, y[i])
		}
	}
	weighted, err := fitLinear(x, p, y, w, 0)
	if err != nil {
		t.Fatal(err)
	}
	doubled, err := fitLinear(x2, p, y2, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !near(weighted.coef, doubled.coef, 1e-9) {
		t.Errorf("fitLinear with weights = %v; with rows repeated = %v", weighted.coef, doubled.coef)
	}
}

func TestFitLinearConstantAndCollinear(t *testing.T) {
	const p = 3
	x, y := rows(60, p, 1, func(r []float64) float64 { return 4 * r[0] })
	for i := range y {
		x[i*p+1] = 7          // constant: it is the intercept again
		x[i*p+2] = 2 * x[i*p] // collinear with the first
	}
	if _, err := fitLinear(x, p, y, nil, 0); err == nil {
		t.Errorf("fitLinear(collinear, no ridge) = nil error; want one")
	}
	l, err := fitLinear(x, p, y, nil, 1e-3)
	if err != nil {
		t.Fatalf("fitLinear(collinear, ridge) error %v", err)
	}
	if l.coef[2] != 0 {
		t.Errorf("coefficient of a constant feature = %v; want 0", l.coef[2])
	}
	if got := l.coef[1] + 2*l.coef[3]; math.Abs(got-4) > 0.05 {
		t.Errorf("collinear coefficients sum to %v; want about 4", got)
	}
}

func TestFitLinearErrors(t *testing.T) {
	x, y := rows(5, 3, 0, func(r []float64) float64 { return r[0] })
	if _, err := fitLinear(x, 3, y, nil, 0); !errors.Is(err, ErrNotEnoughData) {
		t.Errorf("fitLinear(5 rows, 3 features) error = %v; want ErrNotEnoughData", err)
	}
	x, y = rows(20, 1, 0, func(r []float64) float64 { return r[0] })
	y[3] = math.NaN()
	if _, err := fitLinear(x, 1, y, nil, 0); err == nil {
		t.Errorf("fitLinear(NaN target) = nil error; want one")
	}
	if _, err := fitLinear(x[:5], 1, y, nil, 0); err == nil {
		t.Errorf("fitLinear(short x) = nil error; want one")
	}
}

func TestLinearPredict(t *testing.T) {
	l := linear{coef: []float64{1, 2, 3}}
	tests := []struct {
		x       []float64
		want    float64
		wantErr error
	}{
		{[]float64{1, 1}, 6, nil},
		{[]float64{1}, 0, ErrFeatures},
		{[]float64{1, 1, 1}, 0, ErrFeatures},
		{[]float64{math.NaN(), 1}, 0, ErrFeatures},
		{[]float64{1, math.Inf(-1)}, 0, ErrFeatures},
	}
	for _, tt := range tests {
		got, err := l.predict(tt.x)
		if got != tt.want || !errors.Is(err, tt.wantErr) {
			t.Errorf("predict(%v) = %v, %v; want %v, %v", tt.x, got, err, tt.want, tt.wantErr)
		}
	}
	if _, err := (linear{}).predict(nil); !errors.Is(err, ErrNotTrained) {
		t.Errorf("untrained predict error = %v; want ErrNotTrained", err)
	}
}

func TestFitHuberResistsOutliers(t *testing.T) {
	x, y := rows(400, 1, 1, func(r []float64) float64 { return 5 + 2*r[0] })
	for i := 0; i < len(y); i += 20 {
		y[i] += 500 // a few jumps nobody could foresee
	}
	ls, err := fitLinear(x, 1, y, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	hub, err := fitHuber(x, 1, y, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(hub.coef[0]-5) >= math.Abs(ls.coef[0]-5) || math.Abs(hub.coef[1]-2) > 0.05 {
		t.Errorf("fitHuber = %v, least squares = %v; want Huber nearer (5, 2)", hub.coef, ls.coef)
	}
}
