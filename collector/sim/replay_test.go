package sim

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/schemas"
)

// TestRestartContinuesReplay: `heliostat up --sim.trace` restarted gives
// the restored simulator the same trace again. It goes on with the trace's
// jobs not submitted yet, at the same times after the earlier ones, as if
// the cluster had been paused, instead of submitting the trace again from
// its first job under the same ids (job c ran twice as one job id, a and b
// were rejected as duplicates). Another list starts from its first job.
func TestRestartContinuesReplay(t *testing.T) {
	trace := []JobSpec{
		{ID: "a", User: "ua", VC: "vc1", GPUs: 8, Duration: 2 * time.Hour, TimeLimit: 4 * time.Hour},
		{ID: "c", User: "uc", VC: "vc1", GPUs: 4, Duration: 30 * time.Minute},
		{ID: "b", User: "ub", VC: "vc1", GPUs: 16, Submit: 10 * time.Minute, Duration: 30 * time.Minute},
		{ID: "d", User: "ud", VC: "vc1", GPUs: 1, Submit: 90 * time.Minute, Duration: 10 * time.Minute},
	}
	cfg := Config{Cluster: "replay", Nodes: 2, VCs: "vc1:2", Start: t0, Duration: time.Hour, KeepJobs: true}
	for _, tc := range []struct {
		name       string
		second     []JobSpec
		pause      time.Duration // between the first run's stop and the second's start
		wantSubmit map[string][]time.Duration
	}{
		{"same trace", trace, time.Second, map[string][]time.Duration{
			"a": {0}, "c": {0}, "b": {10 * time.Minute}, "d": {90*time.Minute + time.Second}}},
		{"same trace after a pause", trace, time.Hour, map[string][]time.Duration{
			"a": {0}, "c": {0}, "b": {10 * time.Minute}, "d": {150 * time.Minute}}},
		// the restored a and b are still open: rejected as duplicates
		{"another trace", trace[1:2], time.Second, map[string][]time.Duration{
			"a": {0}, "c": {0, time.Hour + time.Second}, "b": {10 * time.Minute}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			first, err := New(cfg, Jobs(trace), nil, rec, nil, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := first.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(first.Snapshot()) // as up keeps it
			if err != nil {
				t.Fatal(err)
			}
			var saved State
			if err := json.Unmarshal(b, &saved); err != nil {
				t.Fatal(err)
			}
			c2 := cfg
			c2.Start, c2.Duration = saved.Clock.Add(tc.pause), 3*time.Hour
			second, err := New(c2, Jobs(tc.second), nil, rec, nil, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := second.Restore(saved); err != nil {
				t.Fatal(err)
			}
			if err := second.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			got := map[string][]time.Duration{}
			for _, e := range rec.decode(t, "replay").events {
				if e.Type == schemas.JobSubmit {
					got[e.JobID] = append(got[e.JobID], time.Duration(e.SubmitMillis-t0.UnixMilli())*time.Millisecond)
				}
			}
			if !maps.EqualFunc(got, tc.wantSubmit, slices.Equal) {
				t.Errorf("SUBMIT times after t0 by job = %v; want %v", got, tc.wantSubmit)
			}
		})
	}
}
