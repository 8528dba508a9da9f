package live

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/predictor/duration"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

func TestMain(m *testing.M) { os.Exit(schematest.Main(m)) }

// tjob is a test job: pending when start is zero and not ended, running
// when started and not ended, CANCELLED when ended without a start.
type tjob struct {
	id, user string
	array    string // the Slurm array the job is task 1 of; "" for none
	gpus     int64
	limit    int64 // seconds; 0 unknown
	mem      int64 // requested memory, bytes; 0 unknown
	gpuType  string
	submit   time.Time
	start    time.Time
	end      time.Time
}

func (j tjob) events() []schemas.JobEvent {
	base := schemas.JobEvent{JobID: j.id, ArrayTaskID: schemas.Unknown, Name: "train-" + j.user, User: j.user, UID: schemas.Unknown,
		Partition: "batch", ExitCode: schemas.Unknown, Priority: schemas.Unknown, SubmitMillis: j.submit.UnixMilli(),
		TimeLimitS: schemas.Unknown, NodeCount: schemas.Unknown, CPUs: schemas.Unknown, GPUs: j.gpus, MemReqBytes: schemas.Unknown}
	if j.limit > 0 {
		base.TimeLimitS = j.limit
	}
	if j.mem > 0 {
		base.MemReqBytes = j.mem
	}
	base.GPUType = j.gpuType
	if j.array != "" {
		base.ArrayJobID, base.ArrayTaskID = j.array, 1
	}
	sub := base
	sub.Type, sub.State, sub.EventMillis = schemas.JobSubmit, schemas.StatePending, base.SubmitMillis
	evs := []schemas.JobEvent{sub}
	last := sub
	if !j.start.IsZero() {
		s := base
		s.Type, s.State, s.StartMillis, s.EventMillis = schemas.JobStart, schemas.StateRunning, j.start.UnixMilli(), j.start.UnixMilli()
		evs = append(evs, s)
		last = s
	}
	if !j.end.IsZero() {
		e := last
		e.Type, e.State, e.EndMillis, e.EventMillis = schemas.JobEnd, schemas.StateCompleted, j.end.UnixMilli(), j.end.UnixMilli()
		if j.start.IsZero() {
			e.State = schemas.StateCancelled
		} else {
			e.ExitCode = 0
		}
		evs = append(evs, e)
	}
	return evs
}

// insertJobs inserts the events of jobs as a trace's, into cluster c1.
func insertJobs(t *testing.T, conn driver.Conn, db string, jobs ...tjob) {
	t.Helper()
	insertFrom(t, conn, db, schemas.SourceTrace, jobs...)
}

// insertFrom inserts the events of jobs as src's, into cluster c1.
func insertFrom(t *testing.T, conn driver.Conn, db string, src schemas.JobSource, jobs ...tjob) {
	t.Helper()
	var evs []schemas.JobEvent
	for _, j := range jobs {
		evs = append(evs, j.events()...)
	}
	if err := ingest.InsertJobEvents(context.Background(), conn, db, "c1", src, evs); err != nil {
		t.Fatal(err)
	}
}

var t0 = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)

// history returns 40 ended jobs for each of three users with typical run
// times of 10 minutes (alice), an hour (bob) and a minute (carol), over the
// 20 hours after t0.
func history() []tjob { return historyFrom(t0) }

// historyFrom is history over the 20 hours after t0.
func historyFrom(t0 time.Time) []tjob {
	rng := rand.New(rand.NewPCG(1, 2))
	var out []tjob
	for i := range 40 {
		for u, typical := range map[string]time.Duration{"alice": 10 * time.Minute, "bob": time.Hour, "carol": time.Minute} {
			submit := t0.Add(time.Duration(i) * 30 * time.Minute)
			run := time.Duration(float64(typical) * (0.8 + 0.45*rng.Float64())).Truncate(time.Second)
			start := submit.Add(time.Minute)
			out = append(out, tjob{id: fmt.Sprintf("%s-%d", u, i), user: u, gpus: 2, limit: 4 * 3600, submit: submit, start: start, end: start.Add(run)})
		}
	}
	return out
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newRunner(t *testing.T, conn driver.Conn, db string, c *clock) (*Runner, *prometheus.Registry) {
	t.Helper()
	return newRunnerCfg(t, conn, Config{Database: db, Interval: time.Second, RetrainInterval: 10 * time.Minute}, c)
}

// historyDB returns a new database holding history()'s jobs, where most
// tests start.
func historyDB(t *testing.T) (driver.Conn, string) {
	t.Helper()
	ch, conn := schematest.Database(t)
	insertJobs(t, conn, ch.Database, history()...)
	return conn, ch.Database
}

// newRunnerCfg is newRunner with cfg.
func newRunnerCfg(t *testing.T, conn driver.Conn, cfg Config, c *clock) (*Runner, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	r, err := New(cfg, conn, slog.New(slog.DiscardHandler), reg, c.now)
	if err != nil {
		t.Fatal(err)
	}
	return r, reg
}

type predictionRow struct {
	version                          uint64
	predicted, lower, upper, service float64
	gpus                             uint32
	afterEnd                         uint8
	segment                          string
}

func predictions(t *testing.T, conn driver.Conn, db string) map[string]predictionRow {
	t.Helper()
	rows, err := conn.Query(context.Background(), "SELECT job_id, model_version, predicted_s, lower_s, upper_s, gpu_service_s, gpus, after_end, segment FROM "+db+".predictions FINAL")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]predictionRow{}
	for rows.Next() {
		var id string
		var p predictionRow
		if err := rows.Scan(&id, &p.version, &p.predicted, &p.lower, &p.upper, &p.service, &p.gpus, &p.afterEnd, &p.segment); err != nil {
			t.Fatal(err)
		}
		out[id] = p
	}
	return out
}

func within2x(p, y float64) bool { return math.Max(p/y, y/p) < 2 }

// TestRunner drives the runner through a small history, new jobs, their
// ends, a job seen only once ended, and a restart, checking every table.
func TestRunner(t *testing.T) {
	ch, conn := schematest.Database(t)
	db := ch.Database
	ctx := context.Background()
	hist := history()
	insertJobs(t, conn, db, hist...)
	now := t0.Add(30 * time.Hour)
	pending := []tjob{
		{id: "p-alice", user: "alice", gpus: 2, limit: 4 * 3600, submit: now},
		{id: "p-bob", user: "bob", gpus: 2, limit: 4 * 3600, submit: now, start: now.Add(time.Minute)},
		{id: "p-carol", user: "carol", gpus: 2, limit: 4 * 3600, submit: now},
		{id: "p-dave", user: "dave", gpus: 4, submit: now},
		{id: "88_1", array: "88", user: "carol", gpus: 1, limit: 3600, submit: now},
	}
	insertJobs(t, conn, db, pending...)
	c := &clock{t: now.Add(time.Minute)}
	r, reg := newRunner(t, conn, db, c)
	if r.Model() != nil {
		t.Fatal("Model() before the first pass is not nil")
	}
	if _, err := r.Predict(Spec{Cluster: "c1", User: "alice"}); err != ErrNoModel {
		t.Fatalf("Predict before the first pass: err %v; want ErrNoModel", err)
	}
	if err := r.Ready(); err == nil || !strings.Contains(err.Error(), "predictor: waiting for the first pass") {
		t.Errorf("Ready() before the first pass = %v; want waiting", err)
	}

	pass, err := r.Once(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Ready(); err != nil {
		t.Errorf("Ready() after a pass = %v; want nil", err)
	}
	if want := (Pass{Trained: true, Jobs: len(hist) + len(pending), Predictions: len(pending)}); pass != want {
		t.Fatalf("first pass = %+v; want %+v (the ended backlog is not predicted)", pass, want)
	}
	m := r.Model()
	if m == nil || m.Info.Version != 1 || m.Info.Train != len(hist) || m.Info.Holdout.N != len(hist)/5 {
		t.Fatalf("Model() = %+v; want version 1 trained on %d rows, %d held out", m, len(hist), len(hist)/5)
	}
	var (
		version       uint64
		nTrain, nJobs uint32
		holdoutN      uint32
		holdout2x     float64
		cfg           string
	)
	if err := conn.QueryRow(ctx, "SELECT model_version, n_train, n_jobs, holdout_n, holdout_within_2x, config FROM "+db+".prediction_models").
		Scan(&version, &nTrain, &nJobs, &holdoutN, &holdout2x, &cfg); err != nil {
		t.Fatal(err)
	}
	if version != 1 || int(nTrain) != len(hist) || int(nJobs) != len(hist)+len(pending) || int(holdoutN) != len(hist)/5 || cfg == "" {
		t.Errorf("prediction_models row = %d, %d train, %d jobs, %d held out, config %q", version, nTrain, nJobs, holdoutN, cfg)
	}
	// Three users with steady run times: the history rules get them all.
	if holdout2x < 0.9 {
		t.Errorf("held-out within 2x = %.3f; want >= 0.9 on this history", holdout2x)
	}

	preds := predictions(t, conn, db)
	typical := map[string]float64{"p-alice": 600, "p-bob": 3600, "p-carol": 60}
	for _, j := range pending {
		p, ok := preds[j.id]
		if !ok {
			t.Errorf("no prediction for %s", j.id)
			continue
		}
		if p.version != 1 || p.afterEnd != 0 || int64(p.gpus) != j.gpus {
			t.Errorf("prediction of %s = %+v; want model 1, after_end 0, %d GPUs", j.id, p, j.gpus)
		}
		if !(p.lower <= p.predicted && p.predicted <= p.upper) || p.predicted <= 0 {
			t.Errorf("prediction of %s: %v not inside its interval [%v, %v]", j.id, p.predicted, p.lower, p.upper)
		}
		if want := p.predicted * math.Max(float64(j.gpus), 1); math.Abs(p.service-want) > 1e-9*want {
			t.Errorf("gpu_service_s of %s = %v; want %v", j.id, p.service, want)
		}
		if y, ok := typical[j.id]; ok && !within2x(p.predicted, y) {
			t.Errorf("prediction of %s = %.0f s; want within 2x of the user's typical %.0f s", j.id, p.predicted, y)
		}
	}
	if preds["p-dave"].segment != "cold" || preds["p-alice"].segment == "cold" {
		t.Errorf("segments: dave %q (want cold), alice %q (want a history segment)", preds["p-dave"].segment, preds["p-alice"].segment)
	}

	// The advisory API's ad-hoc prediction uses the same model and history.
	est, err := r.Predict(Spec{Cluster: "c1", User: "alice", Name: "train-alice", Partition: "batch", GPUs: 2, TimeLimit: 4 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if est.ModelVersion != 1 || !within2x(est.PredictedS, 600) || est.GPUServiceS != est.PredictedS*2 || est.LowerS > est.PredictedS || est.UpperS < est.PredictedS {
		t.Errorf("Predict(alice) = %+v; want model 1, about 600 s, service twice that", est)
	}
	// The point stops at the limit; the interval's upper end at most
	// duration.LimitGrace past it (a job overruns until it is killed).
	if est, err := r.Predict(Spec{Cluster: "c1", User: "alice", TimeLimit: 90 * time.Second}); err != nil || est.PredictedS > 90 || est.UpperS > 90+duration.LimitGrace.Seconds() {
		t.Errorf("Predict(alice, limit 90s) = %+v, %v; want capped at the limit (the upper end at the limit + %v)", est, err, duration.LimitGrace)
	}
	if _, err := r.Predict(Spec{Cluster: "c1", User: "alice", GPUs: -1}); err == nil {
		t.Error("Predict with -1 GPUs: no error")
	}
	// The pass publishes what the records of the jobs that have not ended
	// add to a Spec naming them (TestEstimateOpenJob: how it is used):
	// their command (here the name, as they have no hash) and processors.
	// The array task is also found under its array's id, which is how
	// squeue names a pending array whose tasks have not been split.
	open := r.hist.Load().open
	if len(open) != len(pending)+1 {
		t.Errorf("open records %v; want the %d pending and running jobs and one array", open, len(pending))
	}
	for _, j := range pending {
		if o := open[key{"c1", j.id}]; o.Executable != "train-"+j.user || o.Procs != int(j.gpus) || !o.Submit.Equal(j.submit) {
			t.Errorf("open record of %s: %+v", j.id, o)
		}
	}
	if o := open[key{"c1", "88"}]; o != open[key{"c1", "88_1"}] {
		t.Errorf("open record of array 88: %+v; want its task's, %+v", o, open[key{"c1", "88_1"}])
	}

	// Jobs end: alice's after 700 s, bob's after 3000 s, carol's cancelled
	// while pending; and a job of alice's comes and goes between passes.
	done := []tjob{
		{id: "p-alice", user: "alice", gpus: 2, limit: 4 * 3600, submit: now, start: now.Add(time.Minute), end: now.Add(time.Minute + 700*time.Second)},
		{id: "p-bob", user: "bob", gpus: 2, limit: 4 * 3600, submit: now, start: now.Add(time.Minute), end: now.Add(time.Minute + 3000*time.Second)},
		{id: "p-carol", user: "carol", gpus: 2, limit: 4 * 3600, submit: now, end: now.Add(2 * time.Minute)},
		{id: "quick", user: "alice", gpus: 1, limit: 4 * 3600, submit: now.Add(5 * time.Minute), start: now.Add(6 * time.Minute), end: now.Add(16 * time.Minute)},
	}
	insertJobs(t, conn, db, done...)
	c.t = c.t.Add(time.Minute)
	if pass, err = r.Once(ctx); err != nil {
		t.Fatal(err)
	}
	if want := (Pass{Jobs: len(hist) + len(pending) + 1, Predictions: 1, Outcomes: 4}); pass != want {
		t.Fatalf("second pass = %+v; want %+v", pass, want)
	}
	preds = predictions(t, conn, db)
	if preds["quick"].afterEnd != 1 {
		t.Errorf("quick: after_end = %d; want 1 (first seen ended)", preds["quick"].afterEnd)
	}
	type outRow struct {
		ran, afterEnd, w2x, inside uint8
		pred, actual, logRatio     float64
		version                    uint64
	}
	outs := map[string]outRow{}
	rows, err := conn.Query(ctx, "SELECT job_id, ran, after_end, within_2x, within_interval, predicted_s, actual_s, log_ratio, model_version FROM "+db+".prediction_outcomes FINAL")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var o outRow
		if err := rows.Scan(&id, &o.ran, &o.afterEnd, &o.w2x, &o.inside, &o.pred, &o.actual, &o.logRatio, &o.version); err != nil {
			t.Fatal(err)
		}
		outs[id] = o
	}
	rows.Close()
	for id, actual := range map[string]float64{"p-alice": 700, "p-bob": 3000, "quick": 600} {
		o, p := outs[id], preds[id]
		if o.ran != 1 || o.actual != actual || o.pred != p.predicted || o.version != p.version {
			t.Errorf("outcome of %s = %+v; want ran, actual %v s, the prediction %v of model %d", id, o, actual, p.predicted, p.version)
		}
		if want := math.Log(math.Max(p.predicted, 1) / actual); math.Abs(o.logRatio-want) > 1e-9 {
			t.Errorf("outcome of %s: log_ratio %v; want %v", id, o.logRatio, want)
		}
		if (o.w2x == 1) != within2x(math.Max(p.predicted, 1), actual) || (o.inside == 1) != (p.lower <= actual && actual <= p.upper) {
			t.Errorf("outcome of %s: within_2x %d, within_interval %d for prediction %+v and %v s", id, o.w2x, o.inside, p, actual)
		}
	}
	if o := outs["p-carol"]; o.ran != 0 || len(outs) != 4 {
		t.Errorf("outcomes: %d rows, carol's %+v; want 4, carol's ran = 0", len(outs), o)
	}
	if outs["quick"].afterEnd != 1 || outs["p-alice"].afterEnd != 0 {
		t.Errorf("outcome after_end: quick %d, p-alice %d; want 1, 0", outs["quick"].afterEnd, outs["p-alice"].afterEnd)
	}

	// Accuracy over time: the two jobs that ran and were predicted in time,
	// both ending in the same hour.
	rows, err = conn.Query(ctx, AccuracyQuery(db))
	if err != nil {
		t.Fatal(err)
	}
	var hours int
	for rows.Next() {
		var (
			hour                     time.Time
			jobs                     uint64
			w2x, absLog, cover, maeS float64
		)
		if err := rows.Scan(&hour, &jobs, &w2x, &absLog, &cover, &maeS); err != nil {
			t.Fatal(err)
		}
		hours++
		wantW := 0.0
		for _, id := range []string{"p-alice", "p-bob"} {
			wantW += float64(outs[id].w2x) / 2
		}
		if !hour.Equal(now.Truncate(time.Hour)) || jobs != 2 || w2x != wantW || absLog < 0 || maeS <= 0 {
			t.Errorf("accuracy row %v: %d jobs, within 2x %v, |log| %v, coverage %v, MAE %v; want hour %v, 2 jobs, within 2x %v",
				hour, jobs, w2x, absLog, cover, maeS, now.Truncate(time.Hour), wantW)
		}
	}
	rows.Close()
	if hours != 1 {
		t.Errorf("accuracy query: %d hours; want 1", hours)
	}
	if got, want := testutil.ToFloat64(r.m.predictions), float64(len(pending)+1); got != want {
		t.Errorf("predictions_total = %v; want %v", got, want)
	}
	if got := testutil.ToFloat64(r.m.outcomes); got != 4 {
		t.Errorf("outcomes_total = %v; want 4", got)
	}
	if got := testutil.ToFloat64(r.m.rollingN); got != 2 {
		t.Errorf("rolling outcomes = %v; want 2 (ran, predicted in time)", got)
	}
	if got := testutil.ToFloat64(r.m.modelVersion); got != 1 {
		t.Errorf("model_version gauge = %v; want 1", got)
	}
	// The interval correction saw the same two outcomes.
	missed := 2 - int(outs["p-alice"].inside) - int(outs["p-bob"].inside)
	adapt := r.adapt.State()
	if adapt.Observed != 2 || adapt.Missed != missed {
		t.Errorf("interval correction %+v; want 2 observed, %d missed", adapt, missed)
	}
	if got := gaugeValue(t, reg, "heliostat_predictor_interval_widen"); got != adapt.Widen {
		t.Errorf("interval_widen gauge = %v; want %v", got, adapt.Widen)
	}
	lint(t, reg)

	// A restart (a new runner on the same tables) retrains as version 2 and
	// writes no prediction or outcome twice; then dave's job ends and is
	// scored against the prediction written before the restart.
	c.t = c.t.Add(11 * time.Minute)
	r2, _ := newRunner(t, conn, db, c)
	if pass, err = r2.Once(ctx); err != nil {
		t.Fatal(err)
	}
	if want := (Pass{Trained: true, Jobs: len(hist) + len(pending) + 1}); pass != want {
		t.Fatalf("pass after restart = %+v; want %+v", pass, want)
	}
	if v := r2.Model().Info.Version; v != 2 {
		t.Errorf("model version after restart = %d; want 2", v)
	}
	if got := testutil.ToFloat64(r2.m.rollingN); got != 2 {
		t.Errorf("rolling outcomes after restart = %v; want 2 (read back)", got)
	}
	if got := r2.adapt.State(); got != adapt {
		t.Errorf("interval correction after restart %+v; want %+v (replayed from prediction_outcomes)", got, adapt)
	}
	insertJobs(t, conn, db, tjob{id: "p-dave", user: "dave", gpus: 4, submit: now, start: now.Add(time.Minute), end: now.Add(time.Hour)})
	c.t = c.t.Add(time.Minute)
	if pass, err = r2.Once(ctx); err != nil {
		t.Fatal(err)
	}
	if pass.Predictions != 0 || pass.Outcomes != 1 {
		t.Fatalf("pass after dave's end = %+v; want 0 predictions, 1 outcome", pass)
	}
	var davePred float64
	if err := conn.QueryRow(ctx, "SELECT predicted_s FROM "+db+".prediction_outcomes FINAL WHERE job_id = 'p-dave'").Scan(&davePred); err != nil {
		t.Fatal(err)
	}
	if davePred != preds["p-dave"].predicted {
		t.Errorf("dave's outcome scores prediction %v; want the one written before the restart, %v", davePred, preds["p-dave"].predicted)
	}
	// A pass with nothing new writes nothing.
	c.t = c.t.Add(time.Minute)
	if pass, err = r2.Once(ctx); err != nil || pass != (Pass{Jobs: len(hist) + len(pending) + 1}) {
		t.Fatalf("idle pass = %+v, %v; want nothing written", pass, err)
	}
	for table, want := range map[string]uint64{"predictions": uint64(len(pending) + 1), "prediction_outcomes": 5, "prediction_models": 2} {
		if n := schematest.Count(t, conn, db+"."+table); n != want {
			t.Errorf("%s holds %d rows (without FINAL); want %d: nothing written twice", table, n, want)
		}
	}
}

// gaugeValue returns the value of the unlabelled gauge name in reg.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

func lint(t *testing.T, reg *prometheus.Registry) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("metric %s: %s", p.Metric, p.Text)
	}
}

// TestConcurrentPredict calls Predict and Model from several goroutines
// while passes retrain and swap models (run with -race).
func TestConcurrentPredict(t *testing.T) {
	conn, db := historyDB(t)
	ctx := context.Background()
	c := &clock{t: t0.Add(30 * time.Hour)}
	reg := prometheus.NewRegistry()
	// RetrainInterval equal to Interval with the clock moved 1 s a pass:
	// every other pass retrains.
	r, err := New(Config{Database: db, Interval: time.Second, RetrainInterval: time.Second}, conn, slog.New(slog.DiscardHandler), reg, c.now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Once(ctx); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	errc := make(chan error, 4)
	for g := range 4 {
		go func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					errc <- nil
					return
				default:
				}
				e, err := r.Predict(Spec{Cluster: "c1", User: []string{"alice", "bob", "carol", "new"}[(g+i)%4], GPUs: i % 3})
				if err != nil || e.ModelVersion == 0 || r.Model() == nil {
					errc <- fmt.Errorf("Predict = %+v, %v", e, err)
					return
				}
			}
		}()
	}
	for i := range 4 {
		c.t = c.t.Add(time.Second)
		insertJobs(t, conn, db, tjob{id: fmt.Sprint("n", i), user: "alice", gpus: 1, submit: c.t, start: c.t, end: c.t.Add(time.Minute)})
		if _, err := r.Once(ctx); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	for range 4 {
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}
	if v := r.Model().Info.Version; v < 3 {
		t.Errorf("model version %d after 5 passes; want retrains", v)
	}
}

// TestReadyAfterFailedPass: a pass that cannot read its tables leaves the
// runner not ready, saying why.
func TestReadyAfterFailedPass(t *testing.T) {
	_, conn := schematest.Database(t)
	r, _ := newRunner(t, conn, "no_such_database", &clock{t: time.Date(2026, 4, 6, 8, 0, 0, 0, time.UTC)})
	if _, err := r.Once(context.Background()); err == nil {
		t.Fatal("Once on a missing database = nil; want an error")
	}
	if err := r.Ready(); err == nil || !strings.Contains(err.Error(), "predictor: failing for") {
		t.Errorf("Ready() after a failed pass = %v; want the predictor failing", err)
	}
}
