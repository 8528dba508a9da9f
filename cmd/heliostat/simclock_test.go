package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/heliostat-dev/heliostat/collector/sim"
	"github.com/heliostat-dev/heliostat/collector/sim/simtest"
	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestResumeSimStart: the simulated clock resumes a second after the latest
// of the saved clock and the cluster's newest job event, GPU sample and
// allocation record in ClickHouse. Before, samples and allocations did not
// count: after a killed run, whose clock is saved only every 5 s (300
// simulated seconds at 60×), the next run resumed before samples ClickHouse
// already held, and each GPU got two interleaved sample streams.
func TestResumeSimStart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ClickHouse; skipped with -short")
	}
	ch, conn := schematest.Database(t)
	db := ch.Database
	ctx := context.Background()
	now := time.Date(2025, 3, 4, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return now.Add(d) }
	for _, tc := range []struct {
		name    string
		saved   time.Time // zero: no saved clock
		event   time.Time // a job event
		sample  time.Time // a GPU sample
		alloc   [2]time.Time
		other   time.Time // a GPU sample of another cluster
		want    time.Time
		resumed bool
	}{
		{name: "nothing: now", want: now},
		{name: "only past data: now", event: at(-time.Hour), sample: at(-time.Hour), want: now},
		{name: "saved clock", saved: at(time.Hour), event: at(30 * time.Minute), want: at(time.Hour + time.Second), resumed: true},
		{name: "job event after the saved clock", saved: at(time.Hour), event: at(61 * time.Minute), want: at(61*time.Minute + time.Second), resumed: true},
		{name: "samples after the saved clock", saved: at(time.Hour), event: at(30 * time.Minute), sample: at(64*time.Minute + 50*time.Second),
			want: at(64*time.Minute + 51*time.Second), resumed: true},
		{name: "an allocation closed after the samples", saved: at(time.Hour), sample: at(64 * time.Minute),
			alloc: [2]time.Time{at(10 * time.Minute), at(64*time.Minute + 1*time.Second)}, want: at(64*time.Minute + 2*time.Second), resumed: true},
		{name: "an allocation opened after the samples", sample: at(time.Hour),
			alloc: [2]time.Time{at(time.Hour + 5*time.Second)}, want: at(time.Hour + 6*time.Second), resumed: true},
		{name: "another cluster's samples do not count", saved: at(time.Hour), other: at(3 * time.Hour), want: at(time.Hour + time.Second), resumed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cluster := "c-" + t.Name()[len("TestResumeSimStart/"):]
			dir := t.TempDir()
			if !tc.saved.IsZero() {
				if err := saveSimClock(dir, cluster, tc.saved); err != nil {
					t.Fatal(err)
				}
			}
			if !tc.event.IsZero() {
				e := schemas.JobEvent{Type: schemas.JobSubmit, EventMillis: tc.event.UnixMilli(), JobID: "1", State: schemas.StatePending,
					SubmitMillis: tc.event.UnixMilli(), ArrayTaskID: schemas.Unknown, UID: schemas.Unknown, ExitCode: schemas.Unknown,
					Priority: schemas.Unknown, TimeLimitS: schemas.Unknown, NodeCount: schemas.Unknown, CPUs: schemas.Unknown,
					GPUs: 1, MemReqBytes: schemas.Unknown}
				if err := ingest.InsertJobEvents(ctx, conn, db, cluster, schemas.SourceSim, []schemas.JobEvent{e}); err != nil {
					t.Fatal(err)
				}
			}
			insertSample(t, conn, db, cluster, tc.sample)
			insertSample(t, conn, db, cluster+"-other", tc.other)
			if from := tc.alloc[0]; !from.IsZero() {
				var end *time.Time
				if !tc.alloc[1].IsZero() {
					end = &tc.alloc[1]
				}
				insert(t, conn, "INSERT INTO "+db+".gpu_allocations (cluster, host, gpu_index, gpu_uuid, mig_uuid, job_id, user, alloc_start, alloc_end, source, version, kafka_partition, kafka_offset)",
					cluster, "n1", int32(0), "GPU-0", "", "1", "u", from, end, "sim", uint64(1), uint32(0), uint64(0))
			}
			h := &logRecorder{}
			got, err := resumeSimStart(ctx, conn, db, dir, cluster, now, slog.New(h))
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(tc.want) {
				t.Errorf("resumeSimStart() = %v; want %v", got, tc.want)
			}
			if resumed := slices.Contains(h.msgs, "the simulated clock resumes where the last run stopped"); resumed != tc.resumed {
				t.Errorf("logged the resume: %v; want %v (%q)", resumed, tc.resumed, h.msgs)
			}
		})
	}
}

func insertSample(t *testing.T, conn driver.Conn, db, cluster string, ts time.Time) {
	t.Helper()
	if ts.IsZero() {
		return
	}
	insert(t, conn, "INSERT INTO "+db+".gpu_samples (ts, ts_millis, cluster, host, gpu_index, gpu_uuid, mig_uuid, kafka_partition, kafka_offset)",
		ts, uint16(0), cluster, "n1", uint16(0), "GPU-0", "", uint32(0), uint64(0))
}

// insert inserts one row.
func insert(t *testing.T, conn driver.Conn, query string, row ...any) {
	t.Helper()
	b, err := conn.PrepareBatch(context.Background(), query)
	if err == nil {
		if err = b.Append(row...); err == nil {
			err = b.Send()
		}
	}
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// logRecorder is a slog.Handler that keeps the messages logged.
type logRecorder struct{ msgs []string }

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	h.msgs = append(h.msgs, r.Message)
	return nil
}
func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecorder) WithGroup(string) slog.Handler      { return h }

// TestSimResumeAfterKillAndStop drives the simulated cluster through up's
// restarts, with up's steps (resumeSimStartFrom, restoreSim,
// closeLostSimJobs, saveSimState) and up's path to ClickHouse:
//
//   - a first run is killed at 1h12m: its clock was saved at 1h, ClickHouse
//     holds its samples up to 1h04m, and the last 8 minutes (job c's end
//     among them) are still in the broker, ingest being down;
//   - the second run resumes after all of it, ends the first run's open jobs
//     a (running) and b (pending) as lost (UNKNOWN, at its start, their
//     allocations closed) but not c, whose end ingest stores after all; it
//     runs job d, then stops cleanly with job e running;
//   - the third run continues e, which ends COMPLETED at its own end.
//
// Before, the second run resumed at the saved clock (1h), under samples
// ClickHouse held, and a and b stayed open for ever.
func TestSimResumeAfterKillAndStop(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ClickHouse and a broker; skipped with -short")
	}
	p := simtest.New(t)
	ctx := context.Background()
	dir := t.TempDir()
	const cluster = "local"
	t0 := time.Now().UTC().Truncate(time.Hour).Add(-48 * time.Hour)
	sec := func(s int64) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	cfg := sim.Config{Cluster: cluster, Nodes: 2, VCs: "vc1:2", Start: t0, KeepJobs: true}
	first, err := sim.New(cfg, sim.Jobs([]sim.JobSpec{
		{ID: "a", VC: "vc1", GPUs: 8, Duration: 2 * time.Hour},
		{ID: "c", VC: "vc1", GPUs: 4, Duration: 70 * time.Minute},
		{ID: "b", VC: "vc1", GPUs: 16, Submit: 10 * time.Minute, Duration: time.Hour},
	}), nil, p.Pub, p.Logger, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Advance(ctx, sec(3600)); err != nil {
		t.Fatal(err)
	}
	if err := saveSimClock(dir, cluster, first.Now()); err != nil { // keepSimClock
		t.Fatal(err)
	}
	if err := first.Advance(ctx, sec(3840)); err != nil {
		t.Fatal(err)
	}
	p.Flush(t)
	// 385 ticks of 16 GPUs (0 s .. 3840 s).
	p.WaitFor(t, "samples up to 1h04m", "SELECT count() FROM "+p.DB+".gpu_samples", 385*16)
	p.StopIngest(t)
	if err := first.Advance(ctx, sec(4320)); err != nil {
		t.Fatal(err)
	}
	p.Flush(t) // and killed: nothing saved, no job ended

	// The second run.
	start, err := resumeSimStartFrom(ctx, p.Conn, p.DB, []string{p.Broker}, dir, cluster, t0, p.Logger)
	if err != nil {
		t.Fatal(err)
	}
	if want := sec(4321); !start.Equal(want) {
		t.Errorf("resumeSimStartFrom() = %v; want %v (a second after the last sample the broker holds)", start.Sub(t0), want.Sub(t0))
	}
	if chOnly, err := resumeSimStart(ctx, p.Conn, p.DB, dir, cluster, t0, p.Logger); err != nil || !chOnly.Equal(sec(3841)) {
		t.Errorf("resumeSimStart() = %v, %v; want %v (a second after the last sample in ClickHouse)", chOnly.Sub(t0), err, sec(3841).Sub(t0))
	}
	cfg.Start, cfg.Duration = start, 30*time.Minute
	second, err := sim.New(cfg, sim.Jobs([]sim.JobSpec{
		{ID: "d", VC: "vc1", GPUs: 8, Duration: 10 * time.Minute},
		{ID: "e", VC: "vc1", GPUs: 8, Submit: 5 * time.Minute, Duration: 2 * time.Hour},
	}), nil, p.Pub, p.Logger, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	restored, err := restoreSim(dir, second, p.Logger)
	if err != nil || len(restored) != 0 {
		t.Fatalf("restoreSim() after a killed run = %v, %v; want nothing", restored, err)
	}
	if err := takeSimState(dir, cluster); err != nil {
		t.Fatal(err)
	}
	p.StartIngest(t)
	if err := closeLostSimJobs(ctx, second, restored, []string{p.Broker}, p.Group, p.Conn, p.DB, p.Logger); err != nil {
		t.Fatal(err)
	}
	if err := second.Run(ctx); err != nil { // stops at start+30m, e running
		t.Fatal(err)
	}
	if err := saveSimState(dir, second); err != nil {
		t.Fatal(err)
	}
	p.Flush(t)
	p.WaitFor(t, "jobs a, b, c, d ended", "SELECT count() FROM "+p.DB+".jobs FINAL WHERE cluster = 'local' AND last_event = 'END'", 4)
	got := p.Jobs(t, cluster, t0)
	want := map[string]simtest.Job{
		"a": {State: "UNKNOWN", Start: 0, End: 4321},
		"b": {State: "UNKNOWN", Start: -1, End: 4321},
		"c": {State: "COMPLETED", Start: 0, End: 4200},
		"d": {State: "COMPLETED", Start: 4321, End: 4921},
		"e": {State: "RUNNING", Start: 4621, End: -1},
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("after the second run: job %s %+v; want %+v", id, got[id], w)
		}
	}
	p.WaitFor(t, "the first run's allocations closed",
		"SELECT count() FROM "+p.DB+".gpu_allocations FINAL WHERE cluster = 'local' AND alloc_end IS NULL AND job_id != 'e'", 0)
	var wrong uint64
	if err := p.Conn.QueryRow(ctx, "SELECT count() FROM "+p.DB+".gpu_allocations FINAL WHERE job_id = 'a' AND alloc_end != ? OR job_id = 'c' AND alloc_end != ?",
		sec(4321), sec(4200)).Scan(&wrong); err != nil || wrong != 0 {
		t.Errorf("allocations of a not closed at 4321 s or of c not at 4200 s: %d, %v", wrong, err)
	}

	// The third run: e goes on.
	start, err = resumeSimStartFrom(ctx, p.Conn, p.DB, []string{p.Broker}, dir, cluster, t0, p.Logger)
	if err != nil {
		t.Fatal(err)
	}
	if want := sec(4321 + 1800 + 1); !start.Equal(want) {
		t.Errorf("third run: resumeSimStartFrom() = %v; want %v", start.Sub(t0), want.Sub(t0))
	}
	cfg.Start, cfg.Duration = start, 3*time.Hour
	third, err := sim.New(cfg, sim.Jobs(nil), nil, p.Pub, p.Logger, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if restored, err = restoreSim(dir, third, p.Logger); err != nil || !slices.Equal(restored, []string{"e"}) {
		t.Fatalf("restoreSim() after a clean stop = %v, %v; want [e]", restored, err)
	}
	if err := takeSimState(dir, cluster); err != nil {
		t.Fatal(err)
	}
	if again, err := readSimStates(dir); err != nil || len(again) != 0 {
		t.Errorf("saved states after takeSimState: %v, %v; want none (taken)", again, err)
	}
	if err := closeLostSimJobs(ctx, third, restored, []string{p.Broker}, p.Group, p.Conn, p.DB, p.Logger); err != nil {
		t.Fatal(err)
	}
	if err := third.Run(ctx); err != nil {
		t.Fatal(err)
	}
	p.Flush(t)
	p.WaitFor(t, "job e ended", "SELECT count() FROM "+p.DB+".jobs FINAL WHERE cluster = 'local' AND last_event = 'END'", 5)
	// The allocations' closing rows may land in a later batch than the
	// jobs' ends.
	p.WaitFor(t, "allocations closed", "SELECT count() FROM "+p.DB+".gpu_allocations FINAL WHERE alloc_end IS NULL", 0)
	if got := p.Jobs(t, cluster, t0)["e"]; got != (simtest.Job{State: "COMPLETED", Start: 4621, End: 4621 + 7200}) {
		t.Errorf("after the third run: job e %+v; want COMPLETED 4621 .. 11821", got)
	}
	for _, q := range []struct{ what, from string }{
		{"open runs", p.DB + ".job_runs FINAL WHERE last_event != 'END'"},
		{"open allocations", p.DB + ".gpu_allocations FINAL WHERE alloc_end IS NULL"},
		{"GPU times with two samples", "(SELECT gpu_uuid, ts FROM " + p.DB + ".gpu_samples GROUP BY gpu_uuid, ts HAVING count() > 1)"},
		{"NODE_FAIL or CANCELLED jobs", p.DB + ".jobs FINAL WHERE state IN ('NODE_FAIL', 'CANCELLED')"},
	} {
		if n := schematest.Count(t, p.Conn, q.from); n != 0 {
			t.Errorf("%d %s; want none", n, q.what)
		}
	}
}

// TestRestoreSimFile: the saved jobs are taken out of the state file when a
// run that restored them is about to run (takeSimState), not before (a
// start that fails in between keeps them for the next), kept for the other
// clusters, and not restored by a run told to start before them.
func TestRestoreSimFile(t *testing.T) {
	t0 := time.Date(2025, 3, 4, 10, 0, 0, 0, time.UTC)
	logger := slog.New(slog.DiscardHandler)
	newSim := func(cluster string, start time.Time) *sim.Sim {
		t.Helper()
		s, err := sim.New(sim.Config{Cluster: cluster, Nodes: 1, VCs: "vc1:1", Start: start, KeepJobs: true},
			sim.Jobs([]sim.JobSpec{{ID: cluster + "-1", VC: "vc1", GPUs: 8, Duration: 2 * time.Hour}}), nil, discardPublisher{}, logger, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, tc := range []struct {
		name  string
		start time.Duration // of the restored run, after t0
		want  []string
	}{
		{name: "continued", start: time.Hour + time.Second, want: []string{"x-1"}},
		{name: "--sim.start before the stop", start: 30 * time.Minute, want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, c := range []string{"x", "y"} {
				s := newSim(c, t0)
				if err := s.Advance(context.Background(), t0.Add(time.Hour)); err != nil {
					t.Fatal(err)
				}
				if err := saveSimState(dir, s); err != nil {
					t.Fatal(err)
				}
			}
			if clocks, err := readSimClocks(dir); err != nil || !clocks["x"].Equal(t0.Add(time.Hour)) {
				t.Errorf("saved clocks %v, %v; want x at %v", clocks, err, t0.Add(time.Hour))
			}
			got, err := restoreSim(dir, newSim("x", t0.Add(tc.start)), logger)
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("restoreSim() = %v, %v; want %v", got, err, tc.want)
			}
			st, err := readSimStates(dir)
			if err != nil || len(st["x"].Jobs) != 1 || len(st["y"].Jobs) != 1 {
				t.Errorf("states after restoreSim: %v, %v; want x's and y's (kept until the run)", st, err)
			}
			if err := takeSimState(dir, "x"); err != nil {
				t.Fatal(err)
			}
			st, err = readSimStates(dir)
			if _, ok := st["x"]; err != nil || ok || len(st["y"].Jobs) != 1 {
				t.Errorf("states after takeSimState: %v, %v; want y's only", st, err)
			}
			if got, err := restoreSim(dir, newSim("x", t0.Add(2*time.Hour)), logger); err != nil || len(got) != 0 {
				t.Errorf("restoreSim() again = %v, %v; want nothing", got, err)
			}
		})
	}
	// A damaged file restores nothing and is replaced at the next save.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, simStateFile), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := newSim("x", t0)
	if got, err := restoreSim(dir, s, logger); err != nil || len(got) != 0 {
		t.Errorf("restoreSim() of a damaged file = %v, %v; want nothing, no error", got, err)
	}
	if err := takeSimState(dir, "x"); err != nil {
		t.Errorf("takeSimState() of a damaged file: %v", err)
	}
	if err := saveSimState(dir, s); err != nil {
		t.Errorf("saveSimState() over a damaged file: %v", err)
	}
}

// discardPublisher accepts every message and keeps none.
type discardPublisher struct{}

func (discardPublisher) Publish(context.Context, string, []byte, []byte) error { return nil }
