package ingest_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/schemas"
)

// TestInsertJobEventsUnfit: a known value job_events cannot hold fails the
// direct insert, naming the event and the column, before anything is written
// (the connection is never used), instead of being stored as NULL unseen.
func TestInsertJobEventsUnfit(t *testing.T) {
	submit := time.Date(2020, 9, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		change func(e *schemas.JobEvent)
		column string
	}{
		{"gpus", func(e *schemas.JobEvent) { e.GPUs = math.MaxUint32 + 1 }, "gpus"},
		{"cpus", func(e *schemas.JobEvent) { e.CPUs = 5_000_000_000 }, "cpus"},
		{"node count", func(e *schemas.JobEvent) { e.NodeCount = math.MaxUint32 + 1 }, "node_count"},
		{"time limit", func(e *schemas.JobEvent) { e.TimeLimitS = math.MaxInt64 }, "time_limit_s"},
		{"exit code", func(e *schemas.JobEvent) { e.ExitCode = math.MaxInt32 + 1 }, "exit_code"},
	} {
		evs := testJob("42", submit)
		tc.change(&evs[len(evs)-1])
		err := ingest.InsertJobEvents(context.Background(), nil, "db", "c1", schemas.SourceTrace, evs)
		if !errors.Is(err, ingest.ErrUnfitValue) || !strings.Contains(err.Error(), tc.column) || !strings.Contains(err.Error(), `"42"`) {
			t.Errorf("InsertJobEvents(%s too large) = %v; want ErrUnfitValue naming job 42 and %s", tc.name, err, tc.column)
		}
	}
}
