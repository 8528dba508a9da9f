package analytics_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/analytics"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestQueueBySizeCensored: queue_by_size counts the runs that never started
// — still pending (waiting until the window's end, or now for a window
// still open) and those that ended without starting (waiting until their
// end) — with their waits so far, lower bounds, in every figure, and says
// how many there were (pending, left_unstarted): a congested cluster's
// queue does not look short because its longest waits are still going on.
func TestQueueBySizeCensored(t *testing.T) {
	day := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	w := analytics.Window{Since: day, Until: day.AddDate(0, 0, 1)}
	at := func(d time.Duration) *time.Time { t := day.Add(d); return &t }
	// run is one job run of g GPUs submitted at day+sub
	type run struct {
		state      string
		g          uint32
		sub        time.Duration
		start, end *time.Time
	}
	for _, tc := range []struct {
		name string
		runs []run
		now  time.Time
		want []string
	}{
		{"computed 3 days later", []run{
			{"COMPLETED", 1, 0, at(0), at(time.Hour)},
			// started after the window's end: its whole wait is known
			{"COMPLETED", 2, 23 * time.Hour, at(26 * time.Hour), at(27 * time.Hour)},
			{"COMPLETED", 8, 0, at(10 * time.Minute), at(time.Hour)},
			{"PENDING", 8, 0, nil, nil},                  // waiting at the window's end: 86400 s so far
			{"PENDING", 8, 0, nil, nil},                  // the same
			{"CANCELLED", 8, 0, nil, at(20 * time.Hour)}, // gave up after 72000 s
		}, day.AddDate(0, 0, 3), []string{
			"c 1 1 0 0 0 0 0 0 0 0",
			"c 2 1 10800 10800 10800 10800 10800 1 0 0",
			"c 8 4 61350 79200 86400 86400 86400 0.75 2 1",
		}},
		{"window still open", []run{
			{"COMPLETED", 8, 0, at(10 * time.Minute), at(time.Hour)},
			{"PENDING", 8, 0, nil, nil}, // waiting for 7200 s at now
			// submitted after now (clock skew): no wait yet, left out
			{"PENDING", 8, 3 * time.Hour, nil, nil},
		}, day.Add(2 * time.Hour), []string{
			"c 8 2 3900 3900 6540 7134 7200 0.5 1 0",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, conn := schematest.Database(t)
			ctx := context.Background()
			db := cfg.Database
			var rows [][]any
			for i, r := range tc.runs {
				sub := day.Add(r.sub)
				rows = append(rows, []any{"c", fmt.Sprint(i), "slurm", "a", "gpu", r.state, sub, r.start, r.end, r.g, "E", sub, sub, uint64(1)})
			}
			schematest.InsertJobRows(t, conn, db, "cluster, job_id, source, user, partition_name, state, submit_time, start_time, end_time, gpus, last_event, updated_at, inserted_at, version", rows...)
			var q analytics.CapacityQuery
			for _, c := range analytics.CapacityQueries() {
				if c.Name == "queue_by_size" {
					q = c
				}
			}
			res, err := analytics.RunCapacityQuery(ctx, conn, db, q, w, tc.now, time.UTC, 30*24*time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			wantCols := []string{"cluster", "gpu_bucket", "jobs", "mean_s", "p50_s", "p90_s", "p99_s", "max_s", "over_1h_share", "pending", "left_unstarted"}
			if !reflect.DeepEqual(res.Columns, wantCols) {
				t.Errorf("queue_by_size columns = %v; want %v", res.Columns, wantCols)
			}
			var got []string
			for _, r := range res.Rows {
				cells := make([]string, len(r))
				for i, v := range r {
					cells[i] = fmt.Sprint(v)
				}
				got = append(got, strings.Join(cells, " "))
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("queue_by_size rows =\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}
