package live

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/internal/health"
	"github.com/heliostat-dev/heliostat/predictor/duration"
)

// Trained is a fitted duration model and what is recorded about it in
// prediction_models. It is immutable: a retrain publishes a new one.
type Trained struct {
	Model *duration.Model
	Info  ModelInfo
}

// ModelInfo is a model's row of prediction_models.
type ModelInfo struct {
	Version   uint64    `json:"model_version"`
	TrainedAt time.Time `json:"trained_at"`
	// DataFrom and DataTo are the earliest and latest submit times of the
	// training rows.
	DataFrom     time.Time `json:"data_from"`
	DataTo       time.Time `json:"data_to"`
	Jobs         int       `json:"n_jobs"`  // jobs in the window, ended or not
	Train        int       `json:"n_train"` // training rows: ended jobs that ran
	TrainSeconds float64   `json:"train_s"`
	InSample     Accuracy  `json:"in_sample"`
	Holdout      Accuracy  `json:"holdout"`
	Config       string    `json:"config"` // JSON: window, holdout share, rows per segment
}

// Accuracy summarizes predictions against run times, with the offline
// backtest's definitions.
type Accuracy struct {
	N                int     `json:"n"`
	Within2x         float64 `json:"within_2x"`
	R2Log            float64 `json:"r2_log"`
	MAES             float64 `json:"mae_s"`
	IntervalCoverage float64 `json:"interval_coverage"`
}

// Pass reports what one pass did.
type Pass struct {
	Trained     bool // a new model was published
	Jobs        int  // jobs in the window
	Predictions int  // prediction rows written
	Outcomes    int  // outcome rows written
}

// predRow is what the runner keeps of a written prediction to score it later.
type predRow struct {
	version             uint64
	point, lower, upper float64 // seconds
	predictedAt         time.Time
	afterEnd            bool
	// submit is the submit time of the run predicted. jobs keeps only a
	// job id's latest run: a record with another submit time is another
	// run (Slurm requeued the job) or another job (slurmctld reused the id
	// after a restart), which this prediction is not about (supersede).
	submit time.Time
	user   string
	gpus   uint32
	// segment and fitted are the row's, for an insert sent again (unsent).
	segment string
	fitted  bool
}

// outcomeRow is what the runner keeps of a written outcome: which run and
// which end of it was scored. A record of the same run that ends again
// differently (a lost Slurm job listed again, then ended) is scored again.
type outcomeRow struct {
	submit, end time.Time
	state       string
	ran         bool // scored: counted in the rolling gauges and the interval correction
}

// scores reports whether o is the outcome of rc as it stands: same run,
// same end and state.
func (o outcomeRow) scores(rc *rec) bool {
	return o.submit.Equal(rc.job.Submit) && o.end.Equal(rc.job.End) && o.state == rc.state
}

// historySnap is the History as of the latest pass, for ad-hoc predictions.
type historySnap struct {
	mu   sync.Mutex // History makes no promise about concurrent readers
	h    *duration.History
	asOf time.Time // the data's clock at the pass
	// open holds, for each job of the window that had not ended, what its
	// record adds to a Spec naming it; read-only once published.
	open map[key]openJob
}

// openJob is what a recorded job's prediction takes from its record.
type openJob struct {
	Executable string    // command hash, else name
	Procs      int       // GPUs, else CPUs
	Mem        int64     // requested memory, bytes; 0 when unknown
	GPUType    string    // GPU type asked for; "" when any or unknown
	Submit     time.Time // for a Spec without one
	// AtSubmit is the user's submissions as the job's features counted
	// them at its submit: the History of the pass counts the job itself,
	// and the user's later jobs, as submitted.
	AtSubmit duration.SubmitState
}

// openRecords returns what the records of the jobs that have not ended add
// to a Spec naming them; replay must have set their atSubmit. A task of a
// Slurm job array is also found under the array's id, the one squeue gives a
// pending array whose tasks have not been split yet; the tasks share their
// command and shape, and the array takes the submit-time state of its task
// replayed first, which none of its other tasks is counted in.
func openRecords(all []*rec) map[key]openJob {
	open := map[key]openJob{}
	of := func(rc *rec) openJob {
		return openJob{Executable: rc.job.Executable, Procs: rc.job.Procs, Mem: rc.job.Mem, GPUType: rc.job.GPUType, Submit: rc.job.Submit, AtSubmit: rc.atSubmit}
	}
	first := map[key]*rec{}
	for _, rc := range all {
		if rc.ended {
			continue
		}
		open[rc.key] = of(rc)
		if rc.arrayJobID == "" || rc.arrayJobID == rc.jobID {
			continue
		}
		k := key{rc.cluster, rc.arrayJobID}
		if f := first[k]; f == nil || replaysBefore(rc, f) {
			first[k] = rc
		}
	}
	for k, rc := range first {
		if _, ok := open[k]; !ok {
			open[k] = of(rc)
		}
	}
	return open
}

// Runner is the live predictor: each pass it reads the window of jobs from
// ClickHouse, retrains when the model is older than RetrainInterval, writes a
// prediction for every job it has not predicted yet and the error of every
// predicted job that has ended. Its state in memory is a cache of those
// tables: a new Runner reloads it and neither duplicates a prediction nor an
// outcome.
type Runner struct {
	cfg    Config
	conn   driver.Conn
	logger *slog.Logger
	now    func() time.Time
	m      *metrics

	model atomic.Pointer[Trained]
	hist  atomic.Pointer[historySnap]

	mu          sync.Mutex // one pass at a time; guards the fields below
	loaded      bool
	store       map[key]*rec
	cursor      int64 // newest inserted_at seen, Unix seconds
	predicted   map[key]predRow
	unsent      map[key]predRow // predictions whose insert reported an error (see predict)
	recorded    map[key]outcomeRow
	nextVersion uint64
	lastTrain   time.Time
	roll        *rolling
	skewLogged  time.Time // when future-stamped events were last logged

	// adapt widens or narrows the served intervals as outcomes arrive
	// (safe for concurrent use: Predict reads it outside a pass).
	adapt *duration.Adaptive

	// health holds the outcome of the last pass, for Ready.
	health *health.Status
	passes *health.Cond
}

// refreshOverlap is how far before the newest inserted_at seen an
// incremental refresh reads again: a row becomes visible only when its insert
// commits, possibly after rows stamped later.
const refreshOverlap = 2 * time.Minute

// maxAhead is how far after ClickHouse's now() an event of a live source
// (Slurm, Kubernetes: anything but the simulator and imported traces, which
// keep their own time) may be stamped and still move the data clock. One
// event stamped a year ahead (a node's clock, a bad record) would otherwise
// move the window a year ahead for good: no job in it, nothing predicted or
// trained, every user a cold start.
const maxAhead = time.Hour

// skewLogEvery is how often, at most, the events maxAhead ignores are
// logged; the gauge counts them every pass.
const skewLogEvery = 10 * time.Minute

// errEmptyWindow is a pass's error while the window holds no job although
// the jobs table holds ended ones: nothing can be trained or predicted, and
// the cause is likely an event of a simulator or trace stamped far ahead, or
// a --predictor.history shorter than the time since the last submit.
var errEmptyWindow = errors.New("live: the window holds no job, but the jobs table has ended jobs")

// New returns a Runner that reads and writes the tables of cfg.Database
// through conn. It does not touch ClickHouse until the first pass.
func New(cfg Config, conn driver.Conn, logger *slog.Logger, reg prometheus.Registerer, now func() time.Time) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Database == "" {
		return nil, errors.New("live: Config.Database is empty")
	}
	cfg = cfg.withDefaults()
	r := &Runner{cfg: cfg, conn: conn, logger: logger, now: now, roll: newRolling(cfg.AccuracyWindow),
		store: map[key]*rec{}, predicted: map[key]predRow{}, unsent: map[key]predRow{}, recorded: map[key]outcomeRow{}, adapt: duration.NewAdaptive(cfg.AdaptRate)}
	m, err := newMetrics(reg, func() float64 {
		if t := r.model.Load(); t != nil {
			return since(now, t.Info.TrainedAt)
		}
		return 0
	}, r.adapt.Widen)
	if err != nil {
		return nil, err
	}
	r.m = m
	r.m.setRolling(r.roll)
	r.health = health.New(time.Now)
	r.passes = r.health.Add("predictor", "waiting for the first pass")
	return r, nil
}

// Ready returns nil once the last pass succeeded, and otherwise
// why it failed and since when: what the predictor's /-/ready reports.
func (r *Runner) Ready() error { return r.health.Err() }

// Model returns the model serving predictions, or nil before the first one
// is trained. Safe for concurrent use.
func (r *Runner) Model() *Trained { return r.model.Load() }

// Run makes a pass every Interval until ctx is done. A failed pass is logged,
// counted by stage and retried at the next tick.
func (r *Runner) Run(ctx context.Context) error {
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := r.Once(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			r.logger.Warn("predictor pass failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Once makes one pass: refresh the window of jobs, retrain if due, predict
// the jobs not predicted yet, record the outcomes of the predicted jobs that
// have ended. Its error is what Ready reports until the next pass.
func (r *Runner) Once(ctx context.Context) (Pass, error) {
	pass, err := r.once(ctx)
	if ctx.Err() == nil {
		r.passes.Report(err)
	}
	return pass, err
}

func (r *Runner) once(ctx context.Context) (Pass, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	begin := time.Now()
	defer func() { r.m.passDuration.Observe(time.Since(begin).Seconds()) }()
	var pass Pass

	dataNow, err := r.dataClock(ctx)
	if err != nil {
		r.m.errors.WithLabelValues(stageLoad).Inc()
		return pass, err
	}
	from := dataNow.Add(-r.cfg.History)
	if from.Before(time.Unix(0, 0)) {
		from = time.Unix(0, 0)
	}
	waitFrom := dataNow.Add(-r.cfg.OutcomeWait)
	if waitFrom.Before(time.Unix(0, 0)) {
		waitFrom = time.Unix(0, 0)
	}
	retrain := r.model.Load() == nil || r.now().Sub(r.lastTrain) >= r.cfg.RetrainInterval
	changed, err := r.refresh(ctx, from, retrain || !r.loaded)
	if err != nil {
		r.m.errors.WithLabelValues(stageLoad).Inc()
		return pass, err
	}
	if !r.loaded {
		st, err := r.loadState(ctx, from, waitFrom)
		if err != nil {
			r.m.errors.WithLabelValues(stageLoad).Inc()
			return pass, err
		}
		r.restore(st)
		r.loaded = true
	}
	pass.Jobs = len(r.store)
	r.m.jobs.Set(float64(len(r.store)))
	var errs []error
	n, err := r.supersede(ctx)
	pass.Outcomes += n
	if err != nil {
		r.m.errors.WithLabelValues(stageOutcome).Inc()
		errs = append(errs, err)
	}
	if len(r.store) == 0 {
		// The rest of the pass goes on (outcomes, an empty History): the
		// error only keeps the runner not ready.
		if err := r.checkEmptyWindow(ctx, dataNow); err != nil {
			r.m.errors.WithLabelValues(stageLoad).Inc()
			errs = append(errs, err)
		}
	}

	all := make([]*rec, 0, len(r.store))
	want := map[*rec]bool{}
	for _, rc := range r.store {
		all = append(all, rc)
		if _, done := r.predicted[rc.key]; rc.predictable && !done {
			want[rc] = true
		}
	}
	var (
		rows     []duration.Row
		rowRecs  []*rec
		features = make(map[*rec]duration.Features, len(want))
	)
	trainable := func(rc *rec) bool { return retrain && rc.ended && rc.run() > 0 }
	late, err := r.outlived(ctx, waitFrom)
	if err != nil {
		r.m.errors.WithLabelValues(stageOutcome).Inc()
		errs = append(errs, err)
	}
	if !changed && !retrain && len(want) == 0 {
		// Nothing new since the last replay: its History still stands.
		n, err := r.recordOutcomes(ctx, late)
		pass.Outcomes += n
		if err != nil {
			r.m.errors.WithLabelValues(stageOutcome).Inc()
			errs = append(errs, err)
		}
		return pass, errors.Join(errs...)
	}
	h := replay(all, func(rc *rec) bool { return want[rc] || trainable(rc) }, func(rc *rec, f duration.Features) {
		if trainable(rc) {
			rows = append(rows, duration.Row{F: f, Y: math.Log(rc.run().Seconds())})
			rowRecs = append(rowRecs, rc)
		}
		if want[rc] {
			features[rc] = f
		}
	})
	r.hist.Store(&historySnap{h: h, asOf: dataNow, open: openRecords(all)})

	if retrain {
		switch {
		case len(rows) > 0:
			if err := r.train(ctx, rows, rowRecs, len(all)); err != nil {
				r.m.errors.WithLabelValues(stageTrain).Inc()
				errs = append(errs, err)
			} else {
				pass.Trained = true
				r.lastTrain = r.now()
			}
		case r.model.Load() != nil:
			// Nothing left in the window to learn from: keep the model.
			r.lastTrain = r.now()
		}
	}
	n, err = r.predict(ctx, features)
	pass.Predictions = n
	if err != nil {
		r.m.errors.WithLabelValues(stagePredict).Inc()
		errs = append(errs, err)
	}
	n, err = r.recordOutcomes(ctx, late)
	pass.Outcomes += n
	if err != nil {
		r.m.errors.WithLabelValues(stageOutcome).Inc()
		errs = append(errs, err)
	}
	r.forget(waitFrom)
	return pass, errors.Join(errs...)
}

// dataClock returns the time of the newest job event: the window is measured
// back from it, so that a simulated cluster or an imported trace works like a
// live one. An event of a live source stamped more than maxAhead after
// ClickHouse's now() is left out, its job counted in a gauge and logged
// (throttled).
func (r *Runner) dataClock(ctx context.Context) (time.Time, error) {
	var sec, chNow int64
	if err := r.conn.QueryRow(ctx, fmt.Sprintf("SELECT toInt64(toUInt32(max(updated_at))), toInt64(toUInt32(now())) FROM %s.jobs",
		r.cfg.Database)).Scan(&sec, &chNow); err != nil {
		return time.Time{}, fmt.Errorf("live: newest job event: %w", err)
	}
	jobs := uint64(0)
	if sec > chNow+int64(maxAhead/time.Second) {
		// Rare but for a simulator running ahead: the sources are read
		// only then (the usual pass reads one column of the table).
		var err error
		if sec, jobs, err = r.liveClock(ctx); err != nil {
			return time.Time{}, err
		}
	}
	clock := time.Unix(sec, 0).UTC()
	r.m.dataClock.Set(float64(sec))
	r.m.futureJobs.Set(float64(jobs))
	return clock, nil
}

// liveClock returns the newest job event but those of live sources stamped
// more than maxAhead after ClickHouse's now(), and how many jobs have such
// an event; it logs them, at most every skewLogEvery.
func (r *Runner) liveClock(ctx context.Context) (int64, uint64, error) {
	ahead := aheadSQL("updated_at")
	var (
		sec    int64
		events uint64
	)
	if err := r.conn.QueryRow(ctx, fmt.Sprintf("SELECT toInt64(toUInt32(maxIf(updated_at, NOT (%[2]s)))), countIf(%[2]s) FROM %[1]s.jobs",
		r.cfg.Database, ahead)).Scan(&sec, &events); err != nil {
		return 0, 0, fmt.Errorf("live: newest job event: %w", err)
	}
	if events == 0 {
		return sec, 0, nil
	}
	var (
		jobs           uint64
		newest, chNow  int64
		cluster, jobID string
	)
	if err := r.conn.QueryRow(ctx, fmt.Sprintf(`SELECT uniqExact(cluster, job_id), toInt64(toUInt32(max(updated_at))), argMax(cluster, updated_at), argMax(job_id, updated_at),
  toInt64(toUInt32(now())) FROM %s.jobs WHERE %s`, r.cfg.Database, ahead)).Scan(&jobs, &newest, &cluster, &jobID, &chNow); err != nil {
		return 0, 0, fmt.Errorf("live: job events stamped in the future: %w", err)
	}
	if now := r.now(); r.skewLogged.IsZero() || now.Sub(r.skewLogged) >= skewLogEvery {
		r.skewLogged = now
		r.logger.Warn("ignoring job events stamped in the future", "jobs", jobs, "max_ahead", maxAhead, "clickhouse_now", time.Unix(chNow, 0).UTC(),
			"newest", time.Unix(newest, 0).UTC(), "cluster", cluster, "job_id", jobID, "data_clock", time.Unix(sec, 0).UTC())
	}
	return sec, jobs, nil
}

// checkEmptyWindow is called when the window holds no job: it returns
// errEmptyWindow, naming the window, if the jobs table holds a job that
// had ended by the data clock the pass read (dataNow). A job whose latest
// event is newer arrived after that read (the first jobs of a new
// installation, between the clock's query and this one), and the next pass
// sees it: before, `heliostat up` could log a failed pass and be unready for
// a second at its start.
func (r *Runner) checkEmptyWindow(ctx context.Context, dataNow time.Time) error {
	var n uint64
	if err := r.conn.QueryRow(ctx, fmt.Sprintf("SELECT count() FROM (SELECT 1 FROM %s.jobs WHERE last_event = 'END' AND toInt64(toUInt32(updated_at)) <= ? LIMIT 1)", r.cfg.Database),
		dataNow.Unix()).Scan(&n); err != nil {
		return fmt.Errorf("live: look for ended jobs: %w", err)
	}
	if n == 0 {
		return nil
	}
	return fmt.Errorf("%w (jobs submitted in the %v before the newest job event, %s; an event stamped far ahead?)",
		errEmptyWindow, r.cfg.History, dataNow.Format(time.RFC3339))
}

// refresh brings the window up to date: all of it when full, else the jobs
// whose latest event arrived since the last refresh. It reports whether the
// window changed.
func (r *Runner) refresh(ctx context.Context, from time.Time, full bool) (bool, error) {
	var since int64
	if !full {
		since = max(1, r.cursor-int64(refreshOverlap/time.Second))
	}
	recs, newest, err := loadJobs(ctx, r.conn, r.cfg.Database, from, since)
	if err != nil {
		return false, fmt.Errorf("live: %w", err)
	}
	r.cursor = max(r.cursor, newest)
	if full {
		store := make(map[key]*rec, len(recs))
		for _, rc := range recs {
			if o := store[rc.key]; o != nil && o.version > rc.version {
				continue // FINAL merges within a partition: two runs submitted in different months
			}
			switch old := r.store[rc.key]; {
			case !r.loaded:
				rc.predictable = !rc.ended
			case sameRun(old, rc):
				rc.predictable = old.predictable
			default:
				rc.predictable = true
			}
			store[rc.key] = rc
		}
		r.store = store
		return true, nil
	}
	changed := false
	for _, rc := range recs {
		old := r.store[rc.key]
		if old != nil && old.version >= rc.version {
			continue // read again in the overlap, or older than what is held
		}
		rc.predictable = !sameRun(old, rc) || old.predictable
		r.store[rc.key] = rc
		changed = true
	}
	for k, rc := range r.store {
		if rc.job.Submit.Before(from) {
			delete(r.store, k)
			changed = true
		}
	}
	return changed, nil
}

// savedState is what loadState reads back.
type savedState struct {
	predicted   map[key]predRow
	recorded    map[key]outcomeRow // the outcome of the predicted run, if any
	latest      []outcomeScore     // the latest outcomes, newest first
	inside      []bool             // within_interval of the window's outcomes, in end order
	nextVersion uint64
}

// loadState reads back what earlier runners wrote: the predictions and
// outcomes of the window's jobs (submitted from from on), and the
// predictions of earlier jobs (from waitFrom on) that have no outcome yet,
// still waited for; the latest outcomes of the window for the rolling gauges,
// the outcomes for the interval correction and the highest model version.
// It changes nothing of r: a query that fails (ClickHouse restarting) leaves
// the runner as it was, for the next pass to load again, rather than half
// loaded, which the retry would load on top of (outcomes counted twice).
func (r *Runner) loadState(ctx context.Context, from, waitFrom time.Time) (savedState, error) {
	db := r.cfg.Database
	st := savedState{predicted: map[key]predRow{}, recorded: map[key]outcomeRow{}}
	// FINAL merges within a partition only: of a job id's predictions of
	// runs submitted in different months, the latest run's is kept. Read
	// back to waitFrom: a prediction of a job submitted before the window
	// that has no outcome yet is still waited for (outlived).
	rows, err := r.conn.Query(ctx, fmt.Sprintf(`SELECT cluster, job_id, model_version, predicted_s, lower_s, upper_s, after_end, predicted_at,
  submit_time, user, gpus
FROM %s.predictions FINAL WHERE submit_time >= %d`, db, waitFrom.Unix()))
	if err != nil {
		return st, fmt.Errorf("live: select predictions: %w", err)
	}
	for rows.Next() {
		var (
			k     key
			p     predRow
			after uint8
		)
		if err := rows.Scan(&k.cluster, &k.jobID, &p.version, &p.point, &p.lower, &p.upper, &after, &p.predictedAt,
			&p.submit, &p.user, &p.gpus); err != nil {
			rows.Close()
			return st, fmt.Errorf("live: scan prediction: %w", err)
		}
		p.afterEnd = after == 1
		if old, ok := st.predicted[k]; ok && old.submit.After(p.submit) {
			continue
		}
		st.predicted[k] = p
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("live: select predictions: %w", err)
	}
	// The latest outcome of each run (a rewritten one replaces the older).
	rows, err = r.conn.Query(ctx, fmt.Sprintf(`SELECT cluster, job_id, submit_time, argMax(end_time, version), argMax(state, version), argMax(ran, version)
FROM %s.prediction_outcomes WHERE submit_time >= %d GROUP BY cluster, job_id, submit_time`, db, waitFrom.Unix()))
	if err != nil {
		return st, fmt.Errorf("live: select outcomes: %w", err)
	}
	for rows.Next() {
		var (
			k   key
			o   outcomeRow
			ran uint8
		)
		if err := rows.Scan(&k.cluster, &k.jobID, &o.submit, &o.end, &o.state, &ran); err != nil {
			rows.Close()
			return st, fmt.Errorf("live: scan outcome: %w", err)
		}
		o.ran = ran == 1
		if p, ok := st.predicted[k]; ok && p.submit.Equal(o.submit) {
			st.recorded[k] = o
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("live: select outcomes: %w", err)
	}
	for k, p := range st.predicted {
		if _, done := st.recorded[k]; done && p.submit.Before(from) {
			delete(st.predicted, k) // before the window, and scored
			delete(st.recorded, k)
		}
	}
	// Bounded by submit time like the other reads: the table is
	// partitioned by submit month, and FINAL over all of it would grow
	// with its age. The gauges cover the latest outcomes of the window.
	rows, err = r.conn.Query(ctx, fmt.Sprintf(`SELECT abs_log_error, within_2x, within_interval FROM %s.prediction_outcomes FINAL
WHERE ran = 1 AND after_end = 0 AND submit_time >= %d ORDER BY end_time DESC, cluster DESC, job_id DESC LIMIT %d`, db, from.Unix(), r.cfg.AccuracyWindow))
	if err != nil {
		return st, fmt.Errorf("live: select latest outcomes: %w", err)
	}
	for rows.Next() {
		var (
			s              outcomeScore
			within, inside uint8
		)
		if err := rows.Scan(&s.absLog, &within, &inside); err != nil {
			rows.Close()
			return st, fmt.Errorf("live: scan outcome: %w", err)
		}
		s.within2x, s.inside = within == 1, inside == 1
		st.latest = append(st.latest, s)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("live: select latest outcomes: %w", err)
	}
	if st.inside, err = r.adaptiveOutcomes(ctx, from); err != nil {
		return st, err
	}
	var top uint64
	if err := r.conn.QueryRow(ctx, fmt.Sprintf("SELECT max(model_version) FROM %s.prediction_models", db)).Scan(&top); err != nil {
		return st, fmt.Errorf("live: select model version: %w", err)
	}
	st.nextVersion = top + 1
	return st, nil
}

// restore makes what loadState read back the runner's state. Nothing
// before the first load writes the maps, the gauges or the correction.
func (r *Runner) restore(st savedState) {
	r.predicted, r.recorded = st.predicted, st.recorded
	for i := len(st.latest) - 1; i >= 0; i-- {
		r.roll.add(st.latest[i])
	}
	r.m.setRolling(r.roll)
	// Replayed in end order, so that a restarted predictor serves
	// intervals as wide as the one before it did.
	for _, in := range st.inside {
		r.adapt.Observe(in)
	}
	r.nextVersion = st.nextVersion
}

// adaptiveOutcomes returns, in end order, whether each outcome of the
// window's jobs fell inside its interval: what the interval correction
// observed.
func (r *Runner) adaptiveOutcomes(ctx context.Context, from time.Time) ([]bool, error) {
	rows, err := r.conn.Query(ctx, fmt.Sprintf(`SELECT within_interval FROM %s.prediction_outcomes FINAL
WHERE ran = 1 AND after_end = 0 AND submit_time >= %d ORDER BY end_time, cluster, job_id`, r.cfg.Database, from.Unix()))
	if err != nil {
		return nil, fmt.Errorf("live: select outcomes for the interval correction: %w", err)
	}
	defer rows.Close()
	var out []bool
	for rows.Next() {
		var inside uint8
		if err := rows.Scan(&inside); err != nil {
			return nil, fmt.Errorf("live: scan outcome for the interval correction: %w", err)
		}
		out = append(out, inside == 1)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("live: select outcomes for the interval correction: %w", err)
	}
	return out, nil
}

// sameRun reports whether rc is a later version of old's job (the same
// submit), which keeps old's predictable: a job of the first pass's ended
// backlog stays unpredicted as it changes, but a new job under its id (ids
// reused after slurmctld lost its state, a finished job requeued) is work
// to predict like any other.
func sameRun(old, rc *rec) bool { return old != nil && old.job.Submit.Equal(rc.job.Submit) }

// train fits a model on rows (in submit order; recs[i] is rows[i]'s job),
// records it in prediction_models and publishes it.
func (r *Runner) train(ctx context.Context, rows []duration.Row, recs []*rec, jobs int) error {
	begin := time.Now()
	trainedAt := r.now().UTC().Truncate(time.Second)
	var (
		hold Accuracy
		cal  duration.Calibration
	)
	if k := int(float64(len(rows)) * (1 - r.cfg.Holdout)); k >= 1 && k < len(rows) {
		m, err := duration.Fit(rows[:k], trainedAt)
		if err != nil {
			return fmt.Errorf("live: fit held-out model on %d rows: %w", k, err)
		}
		if hold, err = score(m, rows[k:], recs[k:]); err != nil {
			return err
		}
		// The served model's intervals are scaled to cover 80 % of the
		// held-out rows as the held-out model predicted them, given enough
		// of them (as duration.FitCalibrated): a scale measured on a new
		// cluster's few held-out rows would be one row's error.
		if len(rows)-k >= duration.MinCalibrationRows {
			cal = duration.Calibrate(m, rows[k:])
		}
	}
	m, err := duration.Fit(rows, trainedAt)
	if err != nil {
		return fmt.Errorf("live: fit model on %d rows: %w", len(rows), err)
	}
	m = m.Calibrated(cal)
	in, err := score(m, rows, recs)
	if err != nil {
		return err
	}
	took := time.Since(begin).Seconds()
	var segs [4]int
	for _, row := range rows {
		if s := int(row.F.Segment); s >= 0 && s < len(segs) {
			segs[s]++
		}
	}
	cfg, _ := json.Marshal(map[string]any{
		"model":     "duration (per-segment robust least squares on log run time)",
		"history_s": r.cfg.History.Seconds(), "holdout": r.cfg.Holdout, "interval_calibration": calibrationJSON(cal),
		"segment_rows": map[string]int{duration.SegExact.String(): segs[duration.SegExact], duration.SegUser2.String(): segs[duration.SegUser2],
			duration.SegUser1.String(): segs[duration.SegUser1], duration.SegCold.String(): segs[duration.SegCold]},
	})
	info := ModelInfo{Version: r.nextVersion, TrainedAt: trainedAt, DataFrom: recs[0].job.Submit, DataTo: recs[len(recs)-1].job.Submit,
		Jobs: jobs, Train: len(rows), TrainSeconds: took, InSample: in, Holdout: hold, Config: string(cfg)}
	b, err := r.conn.PrepareBatch(ctx, "INSERT INTO "+r.cfg.Database+".prediction_models (model_version, trained_at, data_from, data_to, n_jobs, n_train, train_s, "+
		"in_sample_within_2x, in_sample_r2_log, in_sample_mae_s, holdout_n, holdout_within_2x, holdout_r2_log, holdout_mae_s, holdout_interval_coverage, config)")
	if err != nil {
		return fmt.Errorf("live: prepare prediction_models insert: %w", err)
	}
	defer b.Abort()
	if err := b.Append(info.Version, info.TrainedAt, info.DataFrom, info.DataTo, uint32(info.Jobs), uint32(info.Train), info.TrainSeconds,
		in.Within2x, in.R2Log, in.MAES, uint32(hold.N), hold.Within2x, hold.R2Log, hold.MAES, hold.IntervalCoverage, info.Config); err != nil {
		return fmt.Errorf("live: append model %d: %w", info.Version, err)
	}
	// The version is spent once sent: an insert that reports an error may
	// have landed, and a retry must not publish another model under it.
	r.nextVersion++
	if err := b.Send(); err != nil {
		return fmt.Errorf("live: insert model %d: %w", info.Version, err)
	}
	// The row is in: from here on predictions may name this version.
	r.model.Store(&Trained{Model: m, Info: info})
	r.m.trainDuration.Observe(took)
	r.m.modelVersion.Set(float64(info.Version))
	r.m.trainRows.Set(float64(info.Train))
	r.logger.Info("duration model trained", "model_version", info.Version, "rows", info.Train, "jobs", jobs,
		"train_s", took, "holdout_within_2x", hold.Within2x, "holdout_r2_log", hold.R2Log)
	return nil
}

// calibrationJSON names calibration's segments, for the config column.
func calibrationJSON(c duration.Calibration) map[string]any {
	scale, rows := map[string]float64{}, map[string]int{}
	for _, s := range []duration.Segment{duration.SegExact, duration.SegUser2, duration.SegUser1, duration.SegCold} {
		scale[s.String()], rows[s.String()] = c.Scale[s], c.Rows[s]
	}
	return map[string]any{"level": duration.IntervalLevel, "scale": scale, "held_out_rows": rows}
}

// score predicts rows with m and compares with their run times.
func score(m *duration.Model, rows []duration.Row, recs []*rec) (Accuracy, error) {
	a := Accuracy{N: len(rows)}
	if len(rows) == 0 {
		return a, nil
	}
	var meanLog, ssRes, ssTot float64
	for _, row := range rows {
		meanLog += row.Y
	}
	meanLog /= float64(len(rows))
	for i, row := range rows {
		p, err := m.Predict(row.F, recs[i].job.ReqTime)
		if err != nil {
			return a, fmt.Errorf("live: score job %s: %w", recs[i].jobID, err)
		}
		y := math.Exp(row.Y)
		o := outcomeOf(predRow{point: p.Point.Seconds(), lower: p.Low.Seconds(), upper: p.High.Seconds()}, y)
		if o.within2x {
			a.Within2x++
		}
		if o.inside {
			a.IntervalCoverage++
		}
		a.MAES += o.absError
		ssRes += o.logRatio * o.logRatio
		ssTot += (row.Y - meanLog) * (row.Y - meanLog)
	}
	n := float64(len(rows))
	a.Within2x /= n
	a.IntervalCoverage /= n
	a.MAES /= n
	if ssTot > 0 {
		a.R2Log = 1 - ssRes/ssTot
	}
	return a, nil
}

// outcome is a prediction's error once its job has ended.
type outcome struct {
	ran              bool
	actual, absError float64
	logRatio, absLog float64
	within2x, inside bool
}

// outcomeOf scores a prediction against the actual run time in seconds (0:
// the job never ran), with the offline backtest's definitions: the point is
// taken as at least one second.
func outcomeOf(p predRow, actual float64) outcome {
	if actual <= 0 || math.IsNaN(actual) {
		return outcome{}
	}
	pt := math.Max(p.point, 1)
	o := outcome{ran: true, actual: actual, absError: math.Abs(pt - actual), logRatio: math.Log(pt / actual)}
	o.absLog = math.Abs(o.logRatio)
	o.within2x = duration.Within2x(pt, actual)
	o.inside = p.lower <= actual && actual <= p.upper
	return o
}

// predictionVersion is the predictions table's version of a prediction made
// at t of the run submitted at submit. Of two predictions of one run (a
// retried insert, two replicas), ReplacingMergeTree keeps the first: the
// version is higher for an earlier prediction, to the second, up to 2^24 s
// (194 days) after the submit. Of predictions of two runs under one job id
// (a requeued job, an id reused), it keeps the later run's: the submit time
// is in the high bits. The top bit is set, so that every version is above
// the 2^63 - t in ms of the predictions written before runs were told apart.
func predictionVersion(submit, t time.Time) uint64 {
	const delayBits = 24
	delay := min(max(t.Unix()-submit.Unix(), 0), 1<<delayBits-1)
	return 1<<63 | uint64(max(submit.Unix(), 0))<<delayBits | uint64(1<<delayBits-1-delay)
}

// predict writes a prediction for each job of features with the current
// model, in batches, and returns how many it wrote.
func (r *Runner) predict(ctx context.Context, features map[*rec]duration.Features) (int, error) {
	t := r.model.Load()
	if t == nil || len(features) == 0 {
		return 0, nil
	}
	jobs := make([]*rec, 0, len(features))
	for rc := range features {
		jobs = append(jobs, rc)
	}
	sort.Slice(jobs, func(a, b int) bool {
		if !jobs[a].job.Submit.Equal(jobs[b].job.Submit) {
			return jobs[a].job.Submit.Before(jobs[b].job.Submit)
		}
		return jobs[a].cluster < jobs[b].cluster || jobs[a].cluster == jobs[b].cluster && jobs[a].jobID < jobs[b].jobID
	})
	written := 0
	var errs []error
	widen := r.adapt.Widen()
	for start := 0; start < len(jobs); start += r.cfg.Batch {
		chunk := jobs[start:min(start+r.cfg.Batch, len(jobs))]
		at := r.now().UTC().Truncate(time.Second)
		b, err := r.conn.PrepareBatch(ctx, "INSERT INTO "+r.cfg.Database+".predictions (cluster, job_id, user, partition_name, gpus, time_limit_s, "+
			"submit_time, model_version, segment, fitted, predicted_s, lower_s, upper_s, gpu_service_s, after_end, predicted_at, version)")
		if err != nil {
			return written, fmt.Errorf("live: prepare predictions insert: %w", err)
		}
		made := map[key]predRow{}
		for _, rc := range chunk {
			// An insert that reported an error may have landed, and FINAL
			// keeps a run's first prediction: send that row again, so that
			// the outcome scores the prediction the table holds.
			pr, again := r.unsent[rc.key]
			if !again || !pr.submit.Equal(rc.job.Submit) {
				f := features[rc]
				p, err := t.Model.PredictWidened(f, rc.job.ReqTime, widen)
				if err != nil {
					// A model that cannot take a job's features is a bug; the
					// job is retried at the next pass and counted each time.
					errs = append(errs, fmt.Errorf("live: predict job %s/%s: %w", rc.cluster, rc.jobID, err))
					continue
				}
				pr = predRow{version: t.Info.Version, point: p.Point.Seconds(), lower: p.Low.Seconds(), upper: p.High.Seconds(), predictedAt: at, afterEnd: rc.ended,
					submit: rc.job.Submit, user: rc.user, gpus: rc.gpus, segment: f.Segment.String(), fitted: p.Fitted}
			}
			if err := b.Append(rc.cluster, rc.jobID, rc.user, rc.partition, pr.gpus, rc.limit, rc.job.Submit, pr.version, pr.segment, b2u(pr.fitted),
				pr.point, pr.lower, pr.upper, pr.point*math.Max(float64(pr.gpus), 1), b2u(pr.afterEnd), pr.predictedAt,
				predictionVersion(rc.job.Submit, pr.predictedAt)); err != nil {
				b.Abort()
				return written, fmt.Errorf("live: append prediction of job %s/%s: %w", rc.cluster, rc.jobID, err)
			}
			made[rc.key] = pr
		}
		if len(made) == 0 {
			b.Abort()
			continue
		}
		if err := b.Send(); err != nil {
			for k, p := range made {
				r.unsent[k] = p
			}
			return written, fmt.Errorf("live: insert %d predictions: %w", len(made), err)
		}
		for k, p := range made {
			r.predicted[k] = p
			delete(r.unsent, k)
		}
		written += len(made)
		r.m.predictions.Add(float64(len(made)))
	}
	return written, errors.Join(errs...)
}

// outlived returns the runs of the predicted jobs that the window no longer
// holds (submitted before it) and that have no outcome yet, as job_runs has
// them now: the ended ones are scored like the window's (recordOutcomes),
// the others waited for until forget gives them up. A run job_runs does
// not hold (yet) is waited for as well. The ids go in as a set (IN a
// subquery), not has(): has() scans the array for every row, 11.5 s a
// pass for 10,000 ids where the set takes 50 ms (BenchmarkOutlived).
func (r *Runner) outlived(ctx context.Context, waitFrom time.Time) ([]*rec, error) {
	var (
		clusters, ids []string
		lo, hi        int64
	)
	for k, p := range r.predicted {
		if !r.awaited(k, p) || p.submit.Before(waitFrom) {
			continue // in the window, scored, or about to be given up (forget)
		}
		if len(ids) == 0 || p.submit.Unix() < lo {
			lo = p.submit.Unix()
		}
		hi = max(hi, p.submit.Unix())
		clusters, ids = append(clusters, k.cluster), append(ids, k.jobID)
	}
	if len(ids) == 0 {
		r.m.outlived.Set(0)
		return nil, nil
	}
	slices.Sort(clusters)
	clusters = slices.Compact(clusters)
	rows, err := r.conn.Query(ctx, fmt.Sprintf(`SELECT cluster, job_id, submit_time, argMax(source, version), argMax(state, version), argMax(last_event, version),
  argMax(start_time, version), argMax(end_time, version), argMax(%[1]s, version), max(version)
FROM %[2]s.job_runs
WHERE submit_time >= toDateTime(%[3]d, 'UTC') AND submit_time <= toDateTime(%[4]d, 'UTC') AND has(?, cluster) AND job_id IN (SELECT arrayJoin(?))
GROUP BY cluster, job_id, submit_time`, aheadSQL("end_time"), r.cfg.Database, lo, hi), clusters, ids)
	if err != nil {
		return nil, fmt.Errorf("live: select the runs of %d predicted jobs the window no longer holds: %w", len(ids), err)
	}
	defer rows.Close()
	var out []*rec
	for rows.Next() {
		var (
			rc                = &rec{}
			source, lastEvent string
			end               *time.Time
			endAhead          uint8
		)
		if err := rows.Scan(&rc.cluster, &rc.jobID, &rc.job.Submit, &source, &rc.state, &lastEvent, &rc.start, &end, &endAhead, &rc.version); err != nil {
			return nil, fmt.Errorf("live: scan the run of a predicted job the window no longer holds: %w", err)
		}
		p, ok := r.predicted[rc.key]
		if !ok || r.store[rc.key] != nil || !p.submit.Equal(rc.job.Submit) {
			continue // another job's id, or another run
		}
		rc.user, rc.gpus = p.user, p.gpus
		rc.finish(source, lastEvent, end, endAhead == 1)
		out = append(out, rc)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("live: select the runs of %d predicted jobs the window no longer holds: %w", len(ids), err)
	}
	waiting := len(ids)
	for _, rc := range out {
		if rc.ended {
			waiting-- // scored this pass
		}
	}
	r.m.outlived.Set(float64(waiting))
	return out, nil
}

// awaited reports whether prediction p of job k is of a job the window no
// longer holds and has no outcome yet: outlived, or to be given up.
func (r *Runner) awaited(k key, p predRow) bool {
	if r.store[k] != nil {
		return false
	}
	o, ok := r.recorded[k]
	return !ok || !o.submit.Equal(p.submit)
}

// forget drops what the runner keeps of jobs the window no longer holds:
// their predictions once scored, or once submitted before waitFrom
// without an outcome (given up: counted and logged; prediction_outcomes
// has no row for them).
func (r *Runner) forget(waitFrom time.Time) {
	var given []key
	for k, p := range r.predicted {
		if r.store[k] != nil {
			continue
		}
		if r.awaited(k, p) {
			if !p.submit.Before(waitFrom) {
				continue // outlived: still waited for
			}
			given = append(given, k)
		}
		delete(r.predicted, k)
	}
	for k := range r.recorded {
		if _, ok := r.predicted[k]; !ok && r.store[k] == nil {
			delete(r.recorded, k)
		}
	}
	for k := range r.unsent {
		if r.store[k] == nil {
			delete(r.unsent, k)
		}
	}
	if len(given) == 0 {
		return
	}
	r.m.abandoned.Add(float64(len(given)))
	slices.SortFunc(given, func(a, b key) int { return cmp.Or(cmp.Compare(a.cluster, b.cluster), cmp.Compare(a.jobID, b.jobID)) })
	r.logger.Warn("predicted jobs never seen to end: their errors are not recorded", "jobs", len(given), "outcome_wait", r.cfg.OutcomeWait,
		"cluster", given[0].cluster, "job_id", given[0].jobID)
}

// supersede drops the predictions whose job id's record is now another run
// than the one predicted (Slurm requeued the job; slurmctld, restarted with
// a clean state, reused the id), so that the record is predicted and scored
// as a job of its own. A dropped prediction without an outcome gets one, not
// scored (ran = 0): jobs no longer holds the run it predicted, whose state
// and times are taken from job_runs. It returns how many outcomes it wrote.
func (r *Runner) supersede(ctx context.Context) (int, error) {
	var old []key
	for k, p := range r.predicted {
		if rc := r.store[k]; rc != nil && !rc.job.Submit.Equal(p.submit) {
			old = append(old, k)
		}
	}
	if len(old) == 0 {
		return 0, nil
	}
	sort.Slice(old, func(a, b int) bool {
		return old[a].cluster < old[b].cluster || old[a].cluster == old[b].cluster && old[a].jobID < old[b].jobID
	})
	var unscored []key
	for _, k := range old {
		if o, ok := r.recorded[k]; ok && o.submit.Equal(r.predicted[k].submit) {
			delete(r.predicted, k) // its outcome is in
			delete(r.recorded, k)
			continue
		}
		unscored = append(unscored, k)
	}
	if len(unscored) == 0 {
		return 0, nil
	}
	at := r.now().UTC().Truncate(time.Second)
	b, err := r.conn.PrepareBatch(ctx, "INSERT INTO "+r.cfg.Database+".prediction_outcomes (cluster, job_id, user, gpus, state, submit_time, start_time, end_time, "+
		"model_version, predicted_at, after_end, ran, predicted_s, lower_s, upper_s, recorded_at, version)")
	if err != nil {
		return 0, fmt.Errorf("live: prepare prediction_outcomes insert: %w", err)
	}
	defer b.Abort()
	for _, k := range unscored {
		p := r.predicted[k]
		state, start, end, version, err := r.runEnd(ctx, k, p.submit)
		if err != nil {
			return 0, err
		}
		if end == nil {
			// The run's end never reached ClickHouse: it ended before
			// the record's run was submitted, as far as is known.
			e := r.store[k].job.Submit
			end = &e
		}
		if err := b.Append(k.cluster, k.jobID, p.user, p.gpus, state, p.submit, start, *end,
			p.version, p.predictedAt, b2u(p.afterEnd), uint8(0), p.point, p.lower, p.upper, at, version); err != nil {
			return 0, fmt.Errorf("live: append outcome of job %s/%s: %w", k.cluster, k.jobID, err)
		}
	}
	if err := b.Send(); err != nil {
		return 0, fmt.Errorf("live: insert %d outcomes: %w", len(unscored), err)
	}
	for _, k := range unscored {
		delete(r.predicted, k)
		delete(r.recorded, k)
	}
	r.m.outcomes.Add(float64(len(unscored)))
	r.logger.Info("predictions of superseded runs recorded unscored", "jobs", len(unscored), "cluster", unscored[0].cluster, "job_id", unscored[0].jobID)
	return len(unscored), nil
}

// runEnd returns the latest state, start, end and version of the run of
// job k submitted at submit, from job_runs; "", nil times and the version
// of its submit (submit time in ms × 8 + 1) when it has no row.
func (r *Runner) runEnd(ctx context.Context, k key, submit time.Time) (string, *time.Time, *time.Time, uint64, error) {
	rows, err := r.conn.Query(ctx, fmt.Sprintf(`SELECT argMax(state, version), argMax(start_time, version), argMax(end_time, version), max(version)
FROM %s.job_runs WHERE cluster = ? AND job_id = ? AND submit_time = toDateTime(%d, 'UTC')`, r.cfg.Database, submit.Unix()), k.cluster, k.jobID)
	if err != nil {
		return "", nil, nil, 0, fmt.Errorf("live: select run of job %s/%s: %w", k.cluster, k.jobID, err)
	}
	defer rows.Close()
	var (
		state      string
		start, end *time.Time
		version    uint64
	)
	for rows.Next() { // one row, of defaults (version 0) when none matched
		if err := rows.Scan(&state, &start, &end, &version); err != nil {
			return "", nil, nil, 0, fmt.Errorf("live: scan run of job %s/%s: %w", k.cluster, k.jobID, err)
		}
	}
	if err := rows.Err(); err != nil {
		return "", nil, nil, 0, fmt.Errorf("live: select run of job %s/%s: %w", k.cluster, k.jobID, err)
	}
	if version == 0 {
		version = uint64(submit.UnixMilli())*8 + 1
	}
	return state, start, end, version, nil
}

// recordOutcomes writes the error of every predicted job that has ended and
// has no outcome yet (the window's jobs, and the outlived runs late), or
// whose record ended again differently since its outcome was written (a
// lost Slurm job, ended as UNKNOWN, listed again and then ended): a
// rewritten outcome replaces the older. An outcome's version is that of the
// run's latest event (jobs' and job_runs' version: event time in ms × 8 plus
// the event type), so the outcome of the later end wins however the
// predictor's clock stands; every such version is above the recorded_at in
// ms that outcomes written before 2026-11-24 carry as theirs. A run's score
// counts once in the rolling gauges and the interval correction, whichever of
// its outcomes is scored first.
func (r *Runner) recordOutcomes(ctx context.Context, late []*rec) (int, error) {
	var done []*rec
	for k, p := range r.predicted {
		rc := r.store[k]
		if rc == nil || !rc.ended || !rc.job.Submit.Equal(p.submit) {
			continue // not ended, or another run (supersede), or outlived
		}
		if o, ok := r.recorded[k]; !ok || !o.scores(rc) {
			done = append(done, rc)
		}
	}
	for _, rc := range late {
		if o, ok := r.recorded[rc.key]; rc.ended && (!ok || !o.scores(rc)) {
			done = append(done, rc)
		}
	}
	if len(done) == 0 {
		return 0, nil
	}
	sort.Slice(done, func(a, b int) bool {
		if !done[a].job.End.Equal(done[b].job.End) {
			return done[a].job.End.Before(done[b].job.End)
		}
		return done[a].cluster < done[b].cluster || done[a].cluster == done[b].cluster && done[a].jobID < done[b].jobID
	})
	written := 0
	for start := 0; start < len(done); start += r.cfg.Batch {
		chunk := done[start:min(start+r.cfg.Batch, len(done))]
		at := r.now().UTC().Truncate(time.Second)
		b, err := r.conn.PrepareBatch(ctx, "INSERT INTO "+r.cfg.Database+".prediction_outcomes (cluster, job_id, user, gpus, state, submit_time, start_time, end_time, "+
			"model_version, predicted_at, after_end, ran, predicted_s, lower_s, upper_s, actual_s, abs_error_s, log_ratio, abs_log_error, within_2x, within_interval, recorded_at, version)")
		if err != nil {
			return written, fmt.Errorf("live: prepare prediction_outcomes insert: %w", err)
		}
		var scores []outcomeScore
		for _, rc := range chunk {
			p := r.predicted[rc.key]
			o := outcomeOf(p, rc.run().Seconds())
			prev, rewrite := r.recorded[rc.key]
			if err := b.Append(rc.cluster, rc.jobID, rc.user, rc.gpus, rc.state, rc.job.Submit, rc.start, rc.job.End,
				p.version, p.predictedAt, b2u(p.afterEnd), b2u(o.ran), p.point, p.lower, p.upper, o.actual, o.absError, o.logRatio, o.absLog,
				b2u(o.within2x), b2u(o.inside), at, rc.version); err != nil {
				b.Abort()
				return written, fmt.Errorf("live: append outcome of job %s/%s: %w", rc.cluster, rc.jobID, err)
			}
			if o.ran && !p.afterEnd && !(rewrite && prev.ran) {
				scores = append(scores, outcomeScore{absLog: o.absLog, within2x: o.within2x, inside: o.inside})
			}
		}
		if err := b.Send(); err != nil {
			return written, fmt.Errorf("live: insert %d outcomes: %w", len(chunk), err)
		}
		for _, rc := range chunk {
			prev := r.recorded[rc.key]
			r.recorded[rc.key] = outcomeRow{submit: rc.job.Submit, end: rc.job.End, state: rc.state, ran: prev.ran || rc.run() > 0}
		}
		for _, s := range scores {
			r.roll.add(s)
			r.adapt.Observe(s.inside)
		}
		written += len(chunk)
		r.m.outcomes.Add(float64(len(chunk)))
	}
	r.m.setRolling(r.roll)
	return written, nil
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}
