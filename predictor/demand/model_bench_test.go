package demand

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"
)

// BenchmarkFit trains the 1-hour model of the CES protocol on the Philly
// series before 2017-12-01 (the resampling to 10 minutes included).
func BenchmarkFit(b *testing.B) {
	s := philly(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Fit(s, DefaultConfig().TestFrom, time.Hour); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPredict issues one forecast from a 10-minute history.
func BenchmarkPredict(b *testing.B) {
	s := philly(b)
	m, err := Fit(s, DefaultConfig().TestFrom, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	y, err := s.Resample(m.Step(), Max)
	if err != nil {
		b.Fatal(err)
	}
	at := DefaultConfig().TestFrom.Add(36 * time.Hour)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Predict(y, at); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBacktest runs the whole 1-hour CES backtest: 14 models, 2,016
// forecasts.
func BenchmarkBacktest(b *testing.B) {
	s := philly(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := (Config{}).Backtest(context.Background(), s, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadSeries reads the Philly CSV (106k rows).
func BenchmarkReadSeries(b *testing.B) {
	philly(b) // skip or fail as the tests do when the file is missing
	data, err := os.ReadFile(phillyPath)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ReadSeries(bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}
