package duration

import (
	"testing"
	"time"
)

func benchRows(n int) ([]Row, *History, []Job) { return benchRowsWith(n, nil) }

// benchRowsWith is benchRows with each job first changed by edit (nil: as
// synthJobs makes them).
func benchRowsWith(n int, edit func(i int, j *Job)) ([]Row, *History, []Job) {
	jobs := synthJobs(n, 5)
	h := NewHistory()
	rows := make([]Row, 0, n)
	for i := range jobs {
		if edit != nil {
			edit(i, &jobs[i])
		}
		rows = append(rows, Row{F: h.Features(&jobs[i]), Y: 6})
		h.Add(&jobs[i])
	}
	return rows, h, jobs
}

// BenchmarkFit200k is training on 200,000 jobs (goal: under 2 s).
func BenchmarkFit200k(b *testing.B) {
	rows, _, _ := benchRows(200_000)
	b.ResetTimer()
	for range b.N {
		if _, err := Fit(rows, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPredict is one prediction: features from History plus the model
// (goal: under 20 µs).
func BenchmarkPredict(b *testing.B) { benchPredict(b, nil) }

// BenchmarkPredictTyped is BenchmarkPredict on jobs that name a memory
// request and a GPU type, so that each same-shape lookup walks all four of
// shapeKeys (shape, memory and type; shape and type; shape and memory; the
// shape).
func BenchmarkPredictTyped(b *testing.B) {
	benchPredict(b, func(i int, j *Job) {
		j.Mem = int64(1+i%3) << 33
		j.GPUType = [...]string{"a100", "h100"}[i%2]
	})
}

// benchPredict fits on 20,000 jobs changed by edit and times predicting
// them again.
func benchPredict(b *testing.B, edit func(i int, j *Job)) {
	rows, h, jobs := benchRowsWith(20_000, edit)
	m, err := Fit(rows, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		j := &jobs[i%len(jobs)]
		if _, err := m.Predict(h.Features(j), j.ReqTime); err != nil {
			b.Fatal(err)
		}
	}
}
