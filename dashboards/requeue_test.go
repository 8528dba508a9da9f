package dashboards

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestRequeuedJobPanels: the panels over GPUs held and wanted, and jobs
// running and pending, show every run of a job Slurm requeued. Job 100 of
// alice, 4 GPUs, as the Slurm source publishes it: submitted at 09:00,
// started at 10:00, preempted at 20:00; its second run submitted at the
// requeue, started at 20:10, completed at 00:10. Read from jobs (its latest
// run only), nothing would be held or waiting before 20:00.
func TestRequeuedJobPanels(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ClickHouse; skipped with -short")
	}
	cfg, conn := schematest.Database(t)
	ctx := context.Background()
	day := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	at := func(h, m int) time.Time { return day.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute) }
	ev := func(typ schemas.JobEventType, event time.Time, state schemas.JobState, submit, start, end time.Time) schemas.JobEvent {
		return slurmJobEvent("100", "alice", typ, event, state, submit, start, end)
	}
	var none time.Time
	s1, r1, e1 := at(9, 0), at(10, 0), at(20, 0)
	s2, r2, e2 := e1.Add(time.Millisecond), at(20, 10), at(24, 10)
	events := []schemas.JobEvent{
		ev(schemas.JobSubmit, s1, schemas.StatePending, s1, none, none),
		ev(schemas.JobStart, r1, schemas.StateRunning, s1, r1, none),
		ev(schemas.JobEnd, e1, schemas.StatePreempted, s1, r1, e1),
		ev(schemas.JobSubmit, s2, schemas.StatePending, s2, none, none),
		ev(schemas.JobStart, r2, schemas.StateRunning, s2, r2, none),
		ev(schemas.JobEnd, e2, schemas.StateCompleted, s2, r2, e2),
	}
	if err := ingest.InsertJobEvents(ctx, conn, cfg.Database, "c", schemas.SourceSlurm, events); err != nil {
		t.Fatal(err)
	}
	grafana := grafanaConn(t, cfg)

	// The range 08:00-02:00 gives a step of 120 s; every point below is on
	// one.
	from, to := at(8, 0), at(26, 0)
	type point struct{ running, runningGPUs, pending, pendingGPUs float64 }
	want := map[time.Time]point{
		at(9, 30):  {0, 0, 1, 4}, // the first run waits
		at(12, 0):  {1, 4, 0, 0}, // the first run holds 4 GPUs
		at(19, 58): {1, 4, 0, 0},
		at(20, 4):  {0, 0, 1, 4}, // the second run waits
		at(22, 0):  {1, 4, 0, 0}, // the second run holds 4 GPUs
	}
	for _, panel := range []struct {
		file string
		id   int
	}{{"overview.json", 9}, {"overview.json", 10}, {"jobs-users.json", 22}} {
		d, p := findPanel(t, panel.file, panel.id)
		sql, err := expandAll(d, p.Targets[0].RawSQL, from, to)
		if err != nil {
			t.Fatalf("%s: %v", panelName(d, p), err)
		}
		got := map[time.Time]point{}
		rows, err := grafana.Query(ctx, sql)
		if err != nil {
			t.Fatalf("%s: %v\n%s", panelName(d, p), err, sql)
		}
		for rows.Next() {
			var ts time.Time
			var running, pending uint64
			var runningGPUs, pendingGPUs uint64
			if err := rows.Scan(&ts, &running, &runningGPUs, &pending, &pendingGPUs); err != nil {
				t.Fatalf("%s: %v", panelName(d, p), err)
			}
			if _, ok := want[ts.UTC()]; ok {
				got[ts.UTC()] = point{float64(running), float64(runningGPUs), float64(pending), float64(pendingGPUs)}
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			t.Fatalf("%s: %v", panelName(d, p), err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: at the points checked (running jobs, GPUs; pending jobs, GPUs) = %v; want %v", panelName(d, p), got, want)
		}
	}
}

// slurmJobEvent is an event of a 4-GPU job in partition gpu as the Slurm
// source publishes it; a zero time is unknown.
func slurmJobEvent(id, user string, typ schemas.JobEventType, event time.Time, state schemas.JobState, submit, start, end time.Time) schemas.JobEvent {
	ms := func(t time.Time) int64 {
		if t.IsZero() {
			return 0
		}
		return t.UnixMilli()
	}
	return schemas.JobEvent{Type: typ, EventMillis: event.UnixMilli(), JobID: id, User: user, Partition: "gpu", State: state,
		SubmitMillis: ms(submit), StartMillis: ms(start), EndMillis: ms(end), GPUs: 4,
		ArrayTaskID: schemas.Unknown, UID: schemas.Unknown, ExitCode: schemas.Unknown, Priority: schemas.Unknown,
		TimeLimitS: schemas.Unknown, NodeCount: schemas.Unknown, CPUs: schemas.Unknown, MemReqBytes: schemas.Unknown}
}
