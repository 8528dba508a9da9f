package api

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/actuator/loop"
	"github.com/heliostat-dev/heliostat/actuator/qssf"
)

// benchServer serves a view of n pending jobs, without a predictor (the
// time-limit path) and without an audit table.
func benchServer(b *testing.B, n int) *Server {
	c := qssf.Config{AgingRate: 0.1}
	jobs := make([]qssf.Job, n)
	for i := range jobs {
		jobs[i] = qssf.Job{ID: fmt.Sprint(i), User: fmt.Sprintf("u%03d", i%97), VC: fmt.Sprintf("vc%d", i%2+1), GPUs: 1 << (i % 4),
			Submit: t0.Add(-time.Duration(i) * time.Minute), Predicted: time.Duration(1+i%300) * time.Minute}
	}
	var queue []loop.QueueEntry
	for _, r := range c.Rank(t0, jobs) {
		queue = append(queue, loop.QueueEntry{Rank: r.Rank, JobID: r.ID, User: r.User, Partition: r.VC, GPUs: r.GPUs, Submit: r.Submit,
			PredictedS: r.Predicted.Seconds(), Source: loop.SourceTimeLimit, GPUServiceS: r.Job.Service(), Score: r.Score})
	}
	v := loop.NewView(t0, "sim", false, c, queue, nil)
	s, err := New(Config{}, Deps{View: func() *loop.View { return v }, Now: func() time.Time { return t0 }}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

func BenchmarkPredict(b *testing.B) {
	s := benchServer(b, 1000)
	body := `{"user": "u007", "name": "job-3", "partition": "vc1", "gpus": 4, "time_limit_s": 3600}`
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest("POST", "/v1/predict", strings.NewReader(body)))
		if w.Code != 200 {
			b.Fatal(w.Code, w.Body)
		}
	}
}

func BenchmarkQueue50(b *testing.B) {
	s := benchServer(b, 1000)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest("GET", "/v1/queue?limit=50", nil))
		if w.Code != 200 {
			b.Fatal(w.Code)
		}
	}
}
