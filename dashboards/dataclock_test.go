package dashboards

import (
	"fmt"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestOpenJobsOnTheDataClock: heliostat up's simulated cluster stamps its
// job events ahead of the wall clock, and the panels that count open jobs
// up to "now" count them up to the data's clock instead — a second after
// the newest simulated job event — not to ClickHouse's now(), before which
// every open job of such a cluster started or was submitted. Three
// simulated jobs, h hours after the wall clock:
//
//   - e: 1 GPU, submitted and started at 24 h, ended at 48 h (the newest event);
//   - r: 2 GPUs, submitted at 24 h, running since 40 h;
//   - p: 4 GPUs, submitted at 30 h, pending.
//
// Between 44 h and 47 h two jobs run on 3 GPUs and one waits for 4; the
// data's clock is 48 h + 1 s, so p has waited 18 h + 1 s and r waited 16 h.
// On the wall clock, r and p would not be counted at all and p would have
// waited a negative time.
func TestOpenJobsOnTheDataClock(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ClickHouse; skipped with -short")
	}
	cfg, conn := schematest.Database(t)
	wall := time.Now().UTC().Truncate(time.Hour).Add(time.Hour)
	at := func(h int) time.Time { return wall.Add(time.Duration(h) * time.Hour) }
	start24, start40, end48 := at(24), at(40), at(48)
	schematest.InsertJobRows(t, conn, cfg.Database, "cluster, job_id, source, user, partition_name, state, submit_time, start_time, end_time, gpus, last_event, updated_at, inserted_at, version",
		[]any{"c", "e", "sim", "u", "vc", "COMPLETED", at(24), &start24, &end48, new(uint32(1)), "END", end48, wall, uint64(1)},
		[]any{"c", "r", "sim", "u", "vc", "RUNNING", at(24), &start40, nil, new(uint32(2)), "START", start40, wall, uint64(1)},
		[]any{"c", "p", "sim", "u", "vc", "PENDING", at(30), nil, nil, new(uint32(4)), "SUBMIT", at(30), wall, uint64(1)})
	grafana := grafanaConn(t, cfg)
	from, to := at(24), at(50)
	between := fmt.Sprintf(" WHERE toUInt32(time) BETWEEN %d AND %d GROUP BY r, p", at(44).Unix(), at(47).Unix())
	checkPanelRows(t, grafana, from, to, nil, []panelRows{
		{"overview.json", 9, "SELECT running_gpus AS r, pending_gpus AS p", between, []string{"3\t4"}},
		{"overview.json", 10, "SELECT running_jobs AS r, pending_jobs AS p", between, []string{"2\t1"}},
		{"jobs-users.json", 22, "SELECT running_gpus AS r, pending_gpus AS p", between, []string{"3\t4"}},
		{"jobs-users.json", 23, "SELECT job_id, ifNull(queued_s, -1)", " ORDER BY job_id", []string{"e\t0", "p\t64801", "r\t57600"}},
		{"predictions.json", 10, "SELECT job_id, waiting_s", "", []string{"p\t64801"}},
	})
}
