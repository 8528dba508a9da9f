package live

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestFutureStampedJob: one Slurm job whose start is stamped a year ahead
// (a node's clock) neither moves the window off the jobs, for a runner
// already running or one starting, nor keeps later jobs from being
// predicted; it is counted and logged. A trace's event a year ahead does
// move the data clock (a simulator or a trace keeps its own time): the
// window is then empty, and the runner not ready.
func TestFutureStampedJob(t *testing.T) {
	ch, conn := schematest.Database(t)
	db := ch.Database
	ctx := context.Background()
	// Slurm stamps events with the wall clock, which ClickHouse's now() is
	// compared with.
	wall := time.Now().UTC().Truncate(time.Second)
	hist := historyFrom(wall.Add(-30 * time.Hour))
	insertFrom(t, conn, db, schemas.SourceSlurm, hist...)
	insertFrom(t, conn, db, schemas.SourceSlurm, tjob{id: "p-alice", user: "alice", gpus: 2, limit: 4 * 3600, submit: wall.Add(-time.Hour)})
	c := &clock{t: wall}
	running, _ := newRunner(t, conn, db, c)
	if pass, err := running.Once(ctx); err != nil || !pass.Trained || pass.Predictions != 1 {
		t.Fatalf("first pass = %+v, %v; want a model and p-alice predicted", pass, err)
	}

	year := 365 * 24 * time.Hour
	next := tjob{id: "p-bob", user: "bob", gpus: 2, limit: 4 * 3600, submit: wall.Add(-20 * time.Minute)}
	insertFrom(t, conn, db, schemas.SourceSlurm,
		tjob{id: "skewed", user: "bob", gpus: 1, limit: 3600, submit: wall.Add(-30 * time.Minute), start: wall.Add(year)}, next)
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	fresh, err := New(Config{Database: db, Interval: time.Second, RetrainInterval: 10 * time.Minute}, conn, slog.New(slog.NewTextHandler(&logs, nil)), reg, c.now)
	if err != nil {
		t.Fatal(err)
	}
	pass, err := fresh.Once(ctx)
	if want := (Pass{Trained: true, Jobs: len(hist) + 3, Predictions: 2}); err != nil || pass != want {
		t.Fatalf("pass of a runner started after the skewed event = %+v, %v; want %+v (the skewed job and p-bob predicted)", pass, err, want)
	}
	if _, ok := predictions(t, conn, db)["p-bob"]; !ok {
		t.Error("no prediction of p-bob, submitted after the skewed event")
	}
	if err := fresh.Ready(); err != nil {
		t.Errorf("Ready() = %v; want nil", err)
	}
	if got, want := gaugeValue(t, reg, "heliostat_predictor_data_clock_seconds"), float64(next.submit.Unix()); got != want {
		t.Errorf("data clock = %v; want %v, p-bob's submit (the newest event not ahead)", time.Unix(int64(got), 0).UTC(), next.submit)
	}
	if got := gaugeValue(t, reg, "heliostat_predictor_future_stamped_jobs"); got != 1 {
		t.Errorf("future-stamped jobs = %v; want 1", got)
	}
	lint(t, reg)
	// Logged once per 10 minutes of passes.
	if _, err := fresh.Once(ctx); err != nil {
		t.Fatal(err)
	}
	c.t = c.t.Add(11 * time.Minute)
	if _, err := fresh.Once(ctx); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logs.String(), "ignoring job events stamped in the future"); n != 2 || !strings.Contains(logs.String(), "job_id=skewed") {
		t.Errorf("logged the skewed job %d times over three passes 11 minutes apart; want 2, naming it:\n%s", n, logs.String())
	}

	// The runner already running retrains on the window, which still holds
	// every job.
	if pass, err := running.Once(ctx); err != nil || !pass.Trained || pass.Jobs != len(hist)+3 {
		t.Fatalf("retraining pass of the running runner = %+v, %v; want a model of the %d jobs", pass, err, len(hist)+3)
	}
	if n := running.hist.Load().h.Len(); n != len(hist) {
		t.Errorf("running runner's History holds %d jobs; want %d", n, len(hist))
	}

	// A trace's event a year ahead: the window is measured back from it.
	ahead := wall.Add(year + time.Hour)
	insertJobs(t, conn, db, tjob{id: "t-ahead", user: "dave", gpus: 1, submit: wall.Add(-10 * time.Minute), start: wall.Add(year), end: ahead})
	if _, err := fresh.Once(ctx); !errors.Is(err, errEmptyWindow) {
		t.Errorf("pass with the window a year ahead = %v; want errEmptyWindow", err)
	}
	if err := fresh.Ready(); err == nil || !strings.Contains(err.Error(), "the window holds no job") {
		t.Errorf("Ready() with the window a year ahead = %v; want not ready, saying why", err)
	}
	if got := gaugeValue(t, reg, "heliostat_predictor_data_clock_seconds"); got != float64(ahead.Unix()) {
		t.Errorf("data clock = %v; want the trace's %v", time.Unix(int64(got), 0).UTC(), ahead)
	}
}

// TestEmptyWindowRace: a pass whose data clock was read before the first
// jobs arrived (no job event yet: the zero time) finds its window empty;
// an ended job that arrives before the pass looks for one is not a window
// gone wrong but the next pass's work, so the pass does not fail. A job
// that had ended by the clock read still makes an empty window an error.
func TestEmptyWindowRace(t *testing.T) {
	ch, conn := schematest.Database(t)
	ctx := context.Background()
	wall := time.Now().UTC().Truncate(time.Second)
	end := wall.Add(-time.Hour)
	insertJobs(t, conn, ch.Database, tjob{id: "first", user: "ann", gpus: 1, submit: wall.Add(-3 * time.Hour), start: wall.Add(-2 * time.Hour), end: end})
	r, _ := newRunner(t, conn, ch.Database, &clock{t: wall})
	if err := r.checkEmptyWindow(ctx, time.Unix(0, 0)); err != nil {
		t.Errorf("checkEmptyWindow(clock read before any job) = %v; want nil", err)
	}
	if err := r.checkEmptyWindow(ctx, end.Add(-time.Second)); err != nil {
		t.Errorf("checkEmptyWindow(clock read before the job ended) = %v; want nil", err)
	}
	if err := r.checkEmptyWindow(ctx, end); !errors.Is(err, errEmptyWindow) {
		t.Errorf("checkEmptyWindow(clock at the job's end) = %v; want errEmptyWindow", err)
	}
}
