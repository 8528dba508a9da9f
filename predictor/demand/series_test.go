package demand

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestResample(t *testing.T) {
	nan := math.NaN()
	t0 := time.Date(2017, 10, 3, 0, 0, 0, 0, time.UTC)
	minutes := func(start time.Time, v ...float64) Series {
		return Series{Start: start, Step: time.Minute, Values: v, Capacity: 420}
	}
	tests := []struct {
		name      string
		in        Series
		step      time.Duration
		agg       Agg
		wantStart time.Time
		want      []float64
	}{
		{"max of 3-minute steps", minutes(t0, 1, 5, 2, 3, 3, 0, 7), 3 * time.Minute, Max, t0, []float64{5, 3, 7}},
		{"min", minutes(t0, 1, 5, 2, 3, 3, 0, 7), 3 * time.Minute, Min, t0, []float64{1, 0, 7}},
		{"mean", minutes(t0, 1, 5, 3, 3, 3, 0, 7), 3 * time.Minute, Mean, t0, []float64{3, 2, 7}},
		{"last", minutes(t0, 1, 5, 2, 3, 3, 0, 7), 3 * time.Minute, Last, t0, []float64{2, 0, 7}},
		{"missing values are skipped", minutes(t0, nan, 5, nan, 3, nan, nan), 3 * time.Minute, Max, t0, []float64{5, 3}},
		{"a step with no value is missing", minutes(t0, 1, nan, nan, nan, 2), 2 * time.Minute, Max, t0, []float64{1, nan, 2}},
		{"partial first step aligned to the grid", minutes(t0.Add(7*time.Minute), 4, 9, 1, 2), 10 * time.Minute, Max, t0, []float64{9, 2}},
		{"same step is the identity", minutes(t0, 1, 2), time.Minute, Max, t0, []float64{1, 2}},
		{"empty", minutes(t0), 10 * time.Minute, Max, t0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.in.Resample(tt.step, tt.agg)
			if err != nil {
				t.Fatalf("Resample(%v, %v) error %v", tt.step, tt.agg, err)
			}
			if !got.Start.Equal(tt.wantStart) || got.Step != tt.step || got.Capacity != 420 || !sameValues(got.Values, tt.want) {
				t.Errorf("Resample(%v, %v) of %v = %v from %v; want %v from %v", tt.step, tt.agg, tt.in.Values, got.Values, got.Start, tt.want, tt.wantStart)
			}
		})
	}
}

func TestResampleErrors(t *testing.T) {
	s := Series{Start: time.Date(2017, 10, 3, 0, 0, 0, 0, time.UTC), Step: time.Minute, Values: []float64{1, 2}}
	for _, step := range []time.Duration{0, -time.Minute, 90 * time.Second, 30 * time.Second} {
		if _, err := s.Resample(step, Max); !errors.Is(err, ErrStep) {
			t.Errorf("Resample(%v) error = %v; want ErrStep", step, err)
		}
	}
	if _, err := s.Resample(time.Hour, Agg(9)); err == nil {
		t.Errorf("Resample(Agg(9)) = nil error; want one")
	}
	if _, err := (Series{}).Resample(time.Hour, Max); !errors.Is(err, ErrStep) {
		t.Errorf("Series{}.Resample error = %v; want ErrStep", err)
	}
}

func TestBefore(t *testing.T) {
	t0 := time.Date(2017, 10, 3, 0, 0, 0, 0, time.UTC)
	s := Series{Start: t0, Step: 10 * time.Minute, Values: []float64{1, 2, 3, 4}}
	tests := []struct {
		at   time.Time
		want []float64
	}{
		{t0.Add(-time.Hour), []float64{}},
		{t0, []float64{}},
		{t0.Add(20 * time.Minute), []float64{1, 2}},
		{t0.Add(40 * time.Minute), []float64{1, 2, 3, 4}},
		{t0.Add(90 * time.Minute), []float64{1, 2, 3, 4}},
	}
	for _, tt := range tests {
		got, err := s.Before(tt.at)
		if err != nil || !sameValues(got.Values, tt.want) {
			t.Errorf("Before(%v) = %v, %v; want %v", tt.at, got.Values, err, tt.want)
		}
		if cap(got.Values) != len(got.Values) {
			t.Errorf("Before(%v) leaves capacity %d past its end %d", tt.at, cap(got.Values), len(got.Values))
		}
	}
	if _, err := s.Before(t0.Add(5 * time.Minute)); err == nil {
		t.Errorf("Before(off the grid) = nil error; want one")
	}
}

func TestFillForward(t *testing.T) {
	nan := math.NaN()
	got := fillForward([]float64{nan, 1, nan, nan, 2, nan})
	if want := []float64{nan, 1, 1, 1, 2, 2}; !sameValues(got, want) {
		t.Errorf("fillForward = %v; want %v", got, want)
	}
}
