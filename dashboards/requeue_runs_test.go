package dashboards

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestRequeuedJobRuns: the panels over predictions, ended jobs and
// submissions count every run of a job Slurm requeued, and their submit
// bounds keep it. Three 4-GPU jobs in partition gpu, as the Slurm source
// publishes them:
//
//   - 100 (alice): submitted 09:00, started 10:00, preempted 20:00;
//     requeued at 20:00, started 20:10, completed 22:00. Predicted when
//     first seen (stamped 09:00), scored once it completed (the outcome
//     carries the last run's submit time, 20:00).
//   - 300 (carol): submitted 09:30, started 10:00, ended by a node failure
//     at 11:00; requeued at 11:00, pending since. Predicted at 09:30.
//   - 200 (bob): submitted 12:00, pending. Predicted at 12:00.
//
// jobs keeps each id's latest run only (100 COMPLETED, 300 PENDING since
// 11:00), job_runs all five runs. The bounded panels must return the same
// rows without their bounds, with every variable at All and with vc gpu,
// on the rows as inserted and once merged; the panels checked directly
// must count the preempted and node-failed runs, both of 300's
// submissions, and show 300's prediction.
func TestRequeuedJobRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ClickHouse; skipped with -short")
	}
	cfg, conn := schematest.Database(t)
	ctx := context.Background()
	day := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	at := func(h, m int) time.Time { return day.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute) }
	var none time.Time
	const ms = time.Millisecond
	events := []schemas.JobEvent{
		slurmJobEvent("100", "alice", schemas.JobSubmit, at(9, 0), schemas.StatePending, at(9, 0), none, none),
		slurmJobEvent("100", "alice", schemas.JobStart, at(10, 0), schemas.StateRunning, at(9, 0), at(10, 0), none),
		slurmJobEvent("100", "alice", schemas.JobEnd, at(20, 0), schemas.StatePreempted, at(9, 0), at(10, 0), at(20, 0)),
		slurmJobEvent("100", "alice", schemas.JobSubmit, at(20, 0).Add(ms), schemas.StatePending, at(20, 0).Add(ms), none, none),
		slurmJobEvent("100", "alice", schemas.JobStart, at(20, 10), schemas.StateRunning, at(20, 0).Add(ms), at(20, 10), none),
		slurmJobEvent("100", "alice", schemas.JobEnd, at(22, 0), schemas.StateCompleted, at(20, 0).Add(ms), at(20, 10), at(22, 0)),
		slurmJobEvent("300", "carol", schemas.JobSubmit, at(9, 30), schemas.StatePending, at(9, 30), none, none),
		slurmJobEvent("300", "carol", schemas.JobStart, at(10, 0), schemas.StateRunning, at(9, 30), at(10, 0), none),
		slurmJobEvent("300", "carol", schemas.JobEnd, at(11, 0), schemas.StateNodeFail, at(9, 30), at(10, 0), at(11, 0)),
		slurmJobEvent("300", "carol", schemas.JobSubmit, at(11, 0).Add(ms), schemas.StatePending, at(11, 0).Add(ms), none, none),
		slurmJobEvent("200", "bob", schemas.JobSubmit, at(12, 0), schemas.StatePending, at(12, 0), none, none),
	}
	if err := ingest.InsertJobEvents(ctx, conn, cfg.Database, "c", schemas.SourceSlurm, events); err != nil {
		t.Fatal(err)
	}
	// The predictor's rows, as it writes them (predictor/live).
	for _, p := range []struct {
		id, user  string
		submit    time.Time
		predicted float64
	}{{"100", "alice", at(9, 0), 7200}, {"300", "carol", at(9, 30), 100}, {"200", "bob", at(12, 0), 1000}} {
		q := fmt.Sprintf(`INSERT INTO %s.predictions (cluster, job_id, user, partition_name, gpus, submit_time, model_version, segment, fitted,
    predicted_s, lower_s, upper_s, gpu_service_s, after_end, predicted_at, version)
SELECT 'c', '%s', '%s', 'gpu', toUInt32(4), toDateTime(%d), toUInt64(1), 'cold', toUInt8(1),
    %g, %g, %g, %g, toUInt8(0), toDateTime(%d), toUInt64(1)`,
			cfg.Database, p.id, p.user, p.submit.Unix(), p.predicted, p.predicted/2, p.predicted*2, p.predicted*4, p.submit.Unix())
		if err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
	}
	q := fmt.Sprintf(`INSERT INTO %s.prediction_outcomes (cluster, job_id, user, gpus, state, submit_time, start_time, end_time, model_version,
    predicted_at, after_end, ran, predicted_s, lower_s, upper_s, actual_s, abs_error_s, log_ratio, abs_log_error, within_2x,
    within_interval, recorded_at, version)
SELECT 'c', '100', 'alice', toUInt32(4), 'COMPLETED', toDateTime(%d), toDateTime(%d), toDateTime(%d), toUInt64(1),
    toDateTime(%d), toUInt8(0), toUInt8(1), 7200., 3600., 14400., 6600., 600., log(7200 / 6600), log(7200 / 6600), toUInt8(1),
    toUInt8(1), toDateTime(%d), toUInt64(1)`,
		cfg.Database, at(20, 0).Unix(), at(20, 10).Unix(), at(22, 0).Unix(), at(9, 0).Unix(), at(22, 0).Unix())
	if err := conn.Exec(ctx, q); err != nil {
		t.Fatalf("%v\n%s", err, q)
	}
	grafana := grafanaConn(t, cfg)
	// The range 08:00-02:00 gives a step of 120 s: every time above starts
	// a bucket.
	s := &seeded{db: cfg.Database, conn: conn, grafana: grafana, from: at(8, 0), to: at(26, 0)}

	gpu := map[string][]string{"vc": {"gpu"}}
	for _, state := range []string{"fresh", "merged"} {
		if state == "merged" {
			for _, table := range []string{"jobs", "job_runs", "predictions", "prediction_outcomes"} {
				if err := conn.Exec(ctx, "OPTIMIZE TABLE "+cfg.Database+"."+table+" FINAL"); err != nil {
					t.Fatal(err)
				}
			}
		}
		s.checkSubmitBounds(t, s.boundedQueries(t, nil), state+", all")
		s.checkSubmitBounds(t, s.boundedQueries(t, gpu), state+", vc gpu")
	}

	unix := func(h, m int) string { return fmt.Sprint(at(h, m).Unix()) }
	for _, c := range []struct {
		file   string
		id     int
		pick   map[string][]string
		outer  string // selects the columns compared from the panel's rows (FROM (panel))
		want   []string
		sorted bool // compare the rows sorted
	}{
		// runs ended in the range: 100's preempted and completed runs,
		// 300's node-failed run
		{"overview.json", 7, nil, "SELECT completed, failed, cancelled, unknown", []string{"1\t1\t1\t0"}, false},
		{"overview.json", 14, nil, "SELECT state, runs_ended", []string{"COMPLETED\t1", "NODE_FAIL\t1", "PREEMPTED\t1"}, true},
		// every run's submission, at its submit time
		{"overview.json", 13, nil, "SELECT toUInt32(time), vc, submissions",
			[]string{unix(9, 0) + "\tgpu\t1", unix(9, 30) + "\tgpu\t1", unix(11, 0) + "\tgpu\t1", unix(12, 0) + "\tgpu\t1", unix(20, 0) + "\tgpu\t1"}, false},
		{"jobs-users.json", 21, nil, "SELECT toUInt32(time), gpu_jobs, cpu_jobs",
			[]string{unix(9, 0) + "\t1\t0", unix(9, 30) + "\t1\t0", unix(11, 0) + "\t1\t0", unix(12, 0) + "\t1\t0", unix(20, 0) + "\t1\t0"}, false},
		// 300 pends with its prediction (400 GPU-seconds), ahead of 200's
		{"predictions.json", 10, nil, "SELECT qssf_position, job_id, gpu_service_s, model_version", []string{"1\t300\t400\t1", "2\t200\t4000\t1"}, false},
		// 100 is scored, whether a VC is selected or not
		{"predictions.json", 2, gpu, "SELECT scored_jobs, within_2x", []string{"1\t1"}, false},
		{"predictions.json", 5, gpu, "SELECT job_id, state", []string{"100\tCOMPLETED"}, false},
		{"predictions.json", 19, nil, "SELECT history, scored_jobs", []string{"cold\t1"}, false},
		{"predictions.json", 19, gpu, "SELECT history, scored_jobs", []string{"cold\t1"}, false},
	} {
		d, p := findPanel(t, c.file, c.id)
		sql, err := s.expand(d, p.Targets[0].RawSQL, picked(d, c.pick))
		if err != nil {
			t.Fatalf("%s: %v", panelName(d, p), err)
		}
		sql = c.outer + " FROM (" + sql + ")"
		got, err := allRows(ctx, grafana, sql)
		if err != nil {
			t.Fatalf("%s: %v\n%s", panelName(d, p), err, sql)
		}
		if c.sorted {
			slices.Sort(got)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s, variables %v: %s = %q; want %q", panelName(d, p), c.pick, c.outer, got, c.want)
		}
	}
}
