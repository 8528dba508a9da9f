package live

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/predictor/duration"
)

// TestInFlightForgetsEndedJobs: a job that ended without a run time
// (cancelled while pending, lost, ended after no time) has left its user's
// jobs in flight once it ended, as a job that ran has: replay counts in
// flight at a job's submit only the user's jobs submitted and not yet
// ended.
func TestInFlightForgetsEndedJobs(t *testing.T) {
	base := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name string
		run  time.Duration // of the ten jobs before the target; 0: never ran
		end  time.Duration // after their submit; 0: not ended
		want int
	}{
		{"ran and ended", 10 * time.Minute, 11 * time.Minute, 0},
		{"cancelled while pending", 0, 30 * time.Second, 0},
		{"ended at its start", 0, time.Minute, 0},
		{"still pending", 0, 0, 10},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var recs []*rec
			add := func(id string, submit time.Time, run, end time.Duration) *rec {
				rc := &rec{key: key{"c1", id}, user: "alice"}
				rc.job = duration.Job{User: "alice", Executable: "e", Queue: "q", Submit: submit, ReqTime: time.Hour, Procs: 1}
				if end > 0 {
					rc.ended, rc.job.End, rc.job.Run = true, submit.Add(end), run
				}
				recs = append(recs, rc)
				return rc
			}
			// Two jobs that ran (the user reaches segment user2), then ten
			// of the row's fate, all submitted hours before the target.
			add("ran-1", base, 10*time.Minute, 11*time.Minute)
			add("ran-2", base.Add(time.Hour), 10*time.Minute, 11*time.Minute)
			for i := range 10 {
				add(fmt.Sprint("other-", i), base.Add(2*time.Hour+time.Duration(i)*time.Minute), tt.run, tt.end)
			}
			target := add("target", base.Add(10*time.Hour), 0, 0)
			var f duration.Features
			replay(recs, func(rc *rec) bool { return rc == target }, func(_ *rec, got duration.Features) { f = got })
			if target.atSubmit.InFlight != tt.want {
				t.Errorf("in flight at the target's submit = %d; want %d", target.atSubmit.InFlight, tt.want)
			}
			// in_flight is feature 8 of the segments user2 and exact.
			if f.Segment > duration.SegUser2 || f.X[8] != math.Log1p(float64(tt.want)) {
				t.Errorf("target's features: segment %s, in_flight %v; want user2 or exact, ln(1 + %d)", f.Segment, f.X[8], tt.want)
			}
		})
	}
}
