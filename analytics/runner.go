package analytics

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/internal/health"
)

// Config configures a Runner.
type Config struct {
	// Database holds heliostat's tables (the --clickhouse.database of the
	// caller).
	Database string
	// Interval between scheduled passes; 0 disables the schedule (Run
	// returns at once; `heliostat analytics`, which only runs the schedule,
	// refuses it). The flag defaults to 15m.
	Interval time.Duration
	// Periods are the calendar windows the schedule keeps up to date. The
	// flag defaults to day,month.
	Periods []Period
	// Settle is how long after a window closes the schedule still
	// recomputes it: jobs submitted in it may end, and change its figures,
	// after it closed. The flag defaults to 48h.
	Settle time.Duration
	// Lookback is how long before a window's start the runs read whole
	// (job_runs FINAL) were submitted. Earlier runs that still held or
	// waited for GPUs in the window count too, found through a scan of
	// job_runs' end times, and RunResult.EarlyRuns counts them: the figures
	// do not depend on Lookback, only the cost of the read, which is least
	// when it covers most runs' time from submission to end. The flag
	// defaults to 720h (30 days).
	Lookback time.Duration
	// TimeZone is the IANA name of the zone of the calendar windows, hours
	// of day, days of week and months; not "Local", which ClickHouse does
	// not know. Default (and flag default) UTC.
	TimeZone string
	// Capacity are configured GPU capacities (--analytics.capacity); they
	// win over CapacityFile's for the same cluster and VC.
	Capacity []Capacity
	// CapacityFile names a CSV file of capacities (ReadCapacityFile), read
	// by NewRunner.
	CapacityFile string
}

// RegisterFlags adds every --analytics.* flag to fs: the schedule's
// (RegisterScheduleFlags) and those of a window's figures
// (RegisterWindowFlags), for the commands that run the schedule.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	c.RegisterScheduleFlags(fs)
	c.RegisterWindowFlags(fs)
}

// RegisterScheduleFlags adds the flags of the schedule (Run):
// --analytics.interval, --analytics.windows and --analytics.settle. A
// command that characterizes one window and never runs the schedule leaves
// them out, since it would ignore them.
func (c *Config) RegisterScheduleFlags(fs *flag.FlagSet) {
	c.Periods = []Period{Day, Month}
	fs.DurationVar(&c.Interval, "analytics.interval", 15*time.Minute, "how often the schedule recomputes the recent windows (0 disables it)")
	fs.Func("analytics.windows", "comma-separated calendar windows the schedule keeps up to date: day, week, month (default day,month)", func(s string) error {
		c.Periods = nil
		for _, p := range strings.Split(s, ",") {
			if strings.TrimSpace(p) == "" {
				continue
			}
			per, err := ParsePeriod(p)
			if err != nil {
				return err
			}
			c.Periods = append(c.Periods, per)
		}
		return nil
	})
	fs.DurationVar(&c.Settle, "analytics.settle", 48*time.Hour, "keep recomputing a window this long after it closed (its jobs may still end)")
}

// RegisterWindowFlags adds the flags that shape a window's figures:
// --analytics.timezone, --analytics.capacity, --analytics.capacity-file and
// --analytics.lookback.
func (c *Config) RegisterWindowFlags(fs *flag.FlagSet) {
	c.TimeZone = "UTC"
	fs.DurationVar(&c.Lookback, "analytics.lookback", 30*24*time.Hour, "job runs submitted up to this long before a window are read whole; earlier ones that ran or waited in it are found by a scan of their end times (a cost trade-off: the figures are the same)")
	fs.StringVar(&c.TimeZone, "analytics.timezone", "UTC", "IANA time zone of calendar windows, hours of day, days of week and months (not Local: ClickHouse does not know it)")
	fs.Func("analytics.capacity", "GPU capacities: comma-separated CLUSTER=GPUS, CLUSTER/VC=GPUS or /VC=GPUS (default: --analytics.capacity-file, else the sum of a cluster's configured VCs, else the GPUs that reported samples in the window (gpu_inventory for a cluster with none), else the peak GPUs held at once)", func(s string) error {
		cs, err := ParseCapacities(s)
		c.Capacity = append(c.Capacity, cs...)
		return err
	})
	fs.StringVar(&c.CapacityFile, "analytics.capacity-file", "", "CSV file of GPU capacities: header cluster,vc,gpus (or vc,nodes,gpus_per_node as the Helios VC files)")
}

// Validate reports a configuration error.
func (c *Config) Validate() error {
	var errs []error
	if !identifier.MatchString(c.Database) {
		errs = append(errs, fmt.Errorf("database %q is not a plain identifier", c.Database))
	}
	if c.Interval < 0 || c.Settle < 0 || c.Lookback < 0 {
		errs = append(errs, errors.New("--analytics.interval, --analytics.settle and --analytics.lookback must not be negative"))
	}
	if c.Interval > 0 && len(c.Periods) == 0 {
		errs = append(errs, errors.New("--analytics.windows is empty while --analytics.interval schedules runs"))
	}
	for _, p := range c.Periods {
		if _, err := ParsePeriod(string(p)); err != nil {
			errs = append(errs, err)
		}
	}
	// One cluster or VC given twice is a typo or a stale entry; the file
	// refuses it too. (File entries that a flag entry overrides are not in
	// c.Capacity yet: NewRunner merges them after Validate.)
	seen := map[[2]string]uint32{}
	for _, cp := range c.Capacity {
		k := [2]string{cp.Cluster, cp.VC}
		if prev, dup := seen[k]; dup {
			errs = append(errs, fmt.Errorf("--analytics.capacity gives %s twice (%d and %d GPUs)", cp.key(), prev, cp.GPUs))
			continue
		}
		seen[k] = cp.GPUs
	}
	if _, err := c.location(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("analytics: %w", errors.Join(errs...))
	}
	return nil
}

func (c *Config) location() (*time.Location, error) {
	loc, err := LoadTimeZone(c.TimeZone)
	if err != nil {
		return nil, fmt.Errorf("--analytics.timezone %q: %w", c.TimeZone, err)
	}
	return loc, nil
}

// errLocalZone refuses Go's "Local", which time.LoadLocation accepts but
// ClickHouse, where the name goes, does not ("Cannot load time zone Local").
var errLocalZone = errors.New(`"Local" is Go's name for this machine's zone, unknown to ClickHouse: give the zone's IANA name (e.g. Europe/Berlin; timedatectl shows it)`)

// LoadTimeZone returns the location of an IANA time zone name that both Go
// and ClickHouse know; "" is UTC. It refuses "Local".
func LoadTimeZone(name string) (*time.Location, error) {
	switch name {
	case "":
		return time.UTC, nil
	case "Local":
		return nil, errLocalZone
	}
	return time.LoadLocation(name)
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Runner runs the characterization jobs for windows of time, on demand
// (RunWindow) and on a schedule (Run), writing the result tables of
// migrations 0014-0019. Each run reads the window's jobs (every run of a
// requeued job) from job_runs FINAL once into a Memory table that all jobs
// read, builds every result table's rows
// in a staging copy, and swaps each staging copy in with ALTER TABLE …
// REPLACE PARTITION: a re-run replaces a window's rows, never adds to them,
// and readers never see half a result. Runners share nothing but ClickHouse;
// two running the same window at once both write correct rows, the later
// swap wins.
type Runner struct {
	cfg    Config
	conn   driver.Conn
	logger *slog.Logger
	now    func() time.Time
	loc    *time.Location
	m      *metrics
	// health holds the outcome of the last Pass, for Ready.
	health *health.Status
	passes *health.Cond
}

// NewRunner returns a Runner writing through conn. It reads
// cfg.CapacityFile, if any.
func NewRunner(cfg Config, conn driver.Conn, logger *slog.Logger, reg prometheus.Registerer, now func() time.Time) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	loc, _ := cfg.location()
	if cfg.CapacityFile != "" {
		f, err := os.Open(cfg.CapacityFile)
		if err != nil {
			return nil, fmt.Errorf("analytics: %w", err)
		}
		fromFile, err := ReadCapacityFile(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%w (file %s)", err, cfg.CapacityFile)
		}
		// Flag entries come last so that they win (resolveCapacities keeps
		// the last entry of a key).
		cfg.Capacity = append(fromFile, cfg.Capacity...)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	r := &Runner{cfg: cfg, conn: conn, logger: logger, now: now, loc: loc, m: m, health: health.New(time.Now)}
	r.passes = r.health.Add("analytics", "waiting for the first scheduled pass")
	return r, nil
}

// Ready returns nil once the last scheduled pass ran every window, and
// otherwise why it did not: what the analytics command's /-/ready reports.
// A zero Interval (no schedule) is ready.
func (r *Runner) Ready() error {
	if r.cfg.Interval == 0 {
		return nil
	}
	return r.health.Err()
}

// JobResult is what one job of a run did.
type JobResult struct {
	Job     string         `json:"job"`
	Rows    map[string]int `json:"rows"` // rows written per result table
	Seconds float64        `json:"seconds"`
}

// RunResult is what a run did.
type RunResult struct {
	Window        string      `json:"window"`
	ComputedUntil time.Time   `json:"computed_until"`
	SnapshotJobs  uint64      `json:"snapshot_jobs"` // job runs read: the window's, and earlier ones that held or waited for GPUs in it
	WindowJobs    uint64      `json:"window_jobs"`   // of them submitted in the window
	EarlyRuns     uint64      `json:"early_runs"`    // of them submitted before the lookback (found by the scan of end times)
	PrepareS      float64     `json:"prepare_s"`     // reading job_runs FINAL and the capacity
	Jobs          []JobResult `json:"jobs"`
	Seconds       float64     `json:"seconds"`
}

// RunWindow runs the named jobs (all when none is named) for window w and
// replaces their results for w. Data after the runner's clock is not
// awaited: an open window is computed up to now (RunResult.ComputedUntil).
func (r *Runner) RunWindow(ctx context.Context, w Window, names ...string) (*RunResult, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	jobs, err := selectJobs(names)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	res, err := r.runWindow(ctx, w, jobs)
	// The last-success gauge is for Prometheus (time() − it, in
	// HeliostatAnalyticsStale): wall clock, as the duration, not the data
	// clock r.now, which a simulated cluster sets ahead.
	r.m.observe(err, time.Since(t0), time.Now())
	if err != nil {
		return nil, fmt.Errorf("analytics: window %s: %w", w.ID(), err)
	}
	res.Seconds = time.Since(t0).Seconds()
	return res, nil
}

func selectJobs(names []string) ([]Job, error) {
	all := Jobs()
	if len(names) == 0 {
		return all, nil
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var out []Job
	for _, j := range all {
		if want[j.Name] {
			out = append(out, j)
			delete(want, j.Name)
		}
	}
	for n := range want {
		return nil, fmt.Errorf("analytics: no job %q; jobs: %s", n, strings.Join(JobNames(), ", "))
	}
	return out, nil
}

// run holds the names and placeholders of one run.
type run struct {
	vars    map[string]string
	cleanup []string // tables to drop when the run ends
}

func (r *Runner) runWindow(ctx context.Context, w Window, jobs []Job) (*RunResult, error) {
	until := w.Until
	if now := r.now().UTC().Truncate(time.Second); now.Before(until) {
		until = now
	}
	if until.Before(w.Since) {
		until = w.Since
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	db := r.cfg.Database
	lookback := w.Since.Add(-r.cfg.Lookback).Unix()
	if lookback < 0 {
		lookback = 0
	}
	tz := "UTC"
	if r.loc != nil {
		tz = r.loc.String()
	}
	rn := &run{vars: map[string]string{
		"database":       db,
		"jobs":           db + ".analytics_tmp_jobs_" + id,
		"capacity":       db + ".analytics_tmp_capacity_" + id,
		"capacity_all":   db + ".analytics_tmp_capacity_all_" + id,
		"gpus_seen":      db + ".analytics_tmp_gpus_seen_" + id,
		"window_id":      w.ID(),
		"since":          unix(w.Since.Unix()),
		"hour0":          unix(hourStart(w.Since, r.loc).Unix()),
		"until":          unix(w.Until.Unix()),
		"computed_until": unix(until.Unix()),
		"lookback_since": unix(lookback),
		"tz":             tz,
		"window_columns": "'" + w.ID() + "' AS window_id, toDateTime(" + unix(w.Since.Unix()) + ", 'UTC') AS window_start, toDateTime(" + unix(w.Until.Unix()) + ", 'UTC') AS window_end",
	}}
	defer r.dropAll(rn)

	res := &RunResult{Window: w.ID(), ComputedUntil: until}
	needs := false
	for _, j := range jobs {
		needs = needs || j.needsSnapshot
	}
	if needs {
		t0 := time.Now()
		if err := r.prepare(ctx, rn, res); err != nil {
			return nil, err
		}
		res.PrepareS = time.Since(t0).Seconds()
	}
	for _, j := range jobs {
		jr, err := r.runJob(ctx, rn, id, j)
		if err != nil {
			return nil, fmt.Errorf("job %s: %w", j.Name, err)
		}
		res.Jobs = append(res.Jobs, *jr)
		if err := r.recordRun(ctx, w, until, jr); err != nil {
			return nil, err
		}
		r.logger.Debug("analytics job done", "window", w.ID(), "job", j.Name, "rows", jr.Rows, "seconds", jr.Seconds)
	}
	return res, nil
}

// prepare reads the window's jobs and the capacities (prepare.sql,
// prepare_capacity.sql).
func (r *Runner) prepare(ctx context.Context, rn *run, res *RunResult) error {
	rn.cleanup = append(rn.cleanup, rn.vars["jobs"], rn.vars["capacity_all"], rn.vars["gpus_seen"], rn.vars["capacity"])
	if err := r.execAll(ctx, rn, "prepare", mustStatements("queries/prepare.sql")); err != nil {
		return err
	}
	if err := r.conn.QueryRow(ctx, "SELECT count(), countIf(in_window = 1), countIf(submit_s < "+rn.vars["lookback_since"]+") FROM "+rn.vars["jobs"]).Scan(&res.SnapshotJobs, &res.WindowJobs, &res.EarlyRuns); err != nil {
		return fmt.Errorf("count the window's jobs: %w", err)
	}
	if len(r.cfg.Capacity) > 0 {
		if err := r.insertConfigCapacity(ctx, rn); err != nil {
			return err
		}
	}
	return r.execAll(ctx, rn, "prepare_capacity", mustStatements("queries/prepare_capacity.sql"))
}

func (r *Runner) insertConfigCapacity(ctx context.Context, rn *run) error {
	rows, err := r.conn.Query(ctx, "SELECT DISTINCT cluster, vc FROM "+rn.vars["jobs"])
	if err != nil {
		return fmt.Errorf("list the window's clusters and VCs: %w", err)
	}
	var pairs [][2]string
	for rows.Next() {
		var p [2]string
		if err := rows.Scan(&p[0], &p[1]); err != nil {
			rows.Close()
			return fmt.Errorf("list the window's clusters and VCs: %w", err)
		}
		pairs = append(pairs, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("list the window's clusters and VCs: %w", err)
	}
	cs := resolveCapacities(r.cfg.Capacity, pairs)
	if len(cs) == 0 {
		return nil
	}
	batch, err := r.conn.PrepareBatch(ctx, "INSERT INTO "+rn.vars["capacity_all"]+" (cluster, vc, gpus, source, prio)")
	if err != nil {
		return fmt.Errorf("insert configured capacities: %w", err)
	}
	defer batch.Abort()
	for _, c := range cs {
		if err := batch.Append(c.cluster, c.vc, c.gpus, c.source, c.prio); err != nil {
			return fmt.Errorf("insert configured capacities: %w", err)
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("insert configured capacities: %w", err)
	}
	return nil
}

func (r *Runner) execAll(ctx context.Context, rn *run, what string, stmts []string) error {
	return r.execStatements(ctx, rn.vars, what, stmts)
}

// execStatements expands and runs stmts in order; what names them in errors
// and in the debug log of each statement's duration.
func (r *Runner) execStatements(ctx context.Context, vars map[string]string, what string, stmts []string) error {
	for i, s := range stmts {
		q, err := expand(s, vars)
		if err != nil {
			return fmt.Errorf("%s statement %d: %w", what, i+1, err)
		}
		t0 := time.Now()
		if err := r.conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s statement %d: %w", what, i+1, err)
		}
		r.logger.Debug("analytics statement", "job", what, "statement", i+1, "seconds", time.Since(t0).Seconds())
	}
	return nil
}

// runJob runs one job into staging copies of its tables and swaps them in.
func (r *Runner) runJob(ctx context.Context, rn *run, id string, j Job) (*JobResult, error) {
	t0 := time.Now()
	db := r.cfg.Database
	vars := make(map[string]string, len(rn.vars)+len(j.Tables))
	for k, v := range rn.vars {
		vars[k] = v
	}
	for _, t := range j.temps {
		name := db + ".analytics_tmp_" + id + "_" + t
		vars["tmp."+t] = name
		rn.cleanup = append(rn.cleanup, name)
	}
	stage := map[string]string{}
	for _, t := range j.Tables {
		s := db + ".analytics_stage_" + id + "_" + t
		stage[t] = s
		vars["out."+t] = s
		rn.cleanup = append(rn.cleanup, s)
		if err := r.conn.Exec(ctx, "CREATE TABLE "+s+" AS "+db+"."+t); err != nil {
			return nil, fmt.Errorf("create staging table for %s: %w", t, err)
		}
	}
	if err := r.execStatements(ctx, vars, j.Name, j.Statements); err != nil {
		return nil, err
	}
	jr := &JobResult{Job: j.Name, Rows: map[string]int{}}
	for _, t := range j.Tables {
		var n uint64
		if err := r.conn.QueryRow(ctx, "SELECT count() FROM "+stage[t]).Scan(&n); err != nil {
			return nil, fmt.Errorf("count %s: %w", t, err)
		}
		jr.Rows[t] = int(n)
		// A window with no rows any more has none: its partition is
		// dropped. REPLACE PARTITION from an empty staging table did that
		// up to ClickHouse 24; current releases refuse it (unless
		// allow_replace_partition_from_empty_source, a setting 18.16
		// does not know).
		swap := "ALTER TABLE " + db + "." + t + " REPLACE PARTITION '" + rn.vars["window_id"] + "' FROM " + stage[t]
		if n == 0 {
			swap = "ALTER TABLE " + db + "." + t + " DROP PARTITION '" + rn.vars["window_id"] + "'"
		}
		if err := r.conn.Exec(ctx, swap); err != nil {
			return nil, fmt.Errorf("swap in %s: %w", t, err)
		}
	}
	jr.Seconds = time.Since(t0).Seconds()
	return jr, nil
}

func (r *Runner) recordRun(ctx context.Context, w Window, until time.Time, jr *JobResult) error {
	var rows uint64
	for _, n := range jr.Rows {
		rows += uint64(n)
	}
	now := r.now()
	b, err := r.conn.PrepareBatch(ctx, "INSERT INTO "+r.cfg.Database+".analytics_runs (window_id, window_start, window_end, computed_until, job, rows_written, seconds, run_at, version)")
	if err != nil {
		return fmt.Errorf("record run of %s: %w", jr.Job, err)
	}
	defer b.Abort()
	if err := b.Append(w.ID(), w.Since, w.Until, until, jr.Job, rows, jr.Seconds, now, uint64(now.UnixNano())); err != nil {
		return fmt.Errorf("record run of %s: %w", jr.Job, err)
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("record run of %s: %w", jr.Job, err)
	}
	return nil
}

// dropAll drops the run's temporary and staging tables, also when the run's
// context was cancelled.
func (r *Runner) dropAll(rn *run) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, t := range rn.cleanup {
		if err := r.conn.Exec(ctx, "DROP TABLE IF EXISTS "+t); err != nil {
			r.logger.Warn("drop analytics temporary table", "table", t, "err", err)
		}
	}
}

// Run recomputes, every Interval until ctx is done, the windows of each
// configured period that are open or closed less than Settle ago. A failed
// window is logged, counted and retried at the next pass.
func (r *Runner) Run(ctx context.Context) error {
	if r.cfg.Interval == 0 {
		return nil
	}
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		_, _ = r.Pass(ctx) // failures are logged and reported to Ready
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Pass runs one scheduled pass and returns the windows it ran and the first
// error, which Ready reports until the next pass.
func (r *Runner) Pass(ctx context.Context) ([]Window, error) {
	done, err := r.pass(ctx)
	if ctx.Err() == nil {
		r.passes.Report(err)
	}
	return done, err
}

func (r *Runner) pass(ctx context.Context) ([]Window, error) {
	now := r.now()
	var (
		done  []Window
		first error
		seen  = map[string]bool{}
	)
	for _, p := range r.cfg.Periods {
		for _, w := range p.Recent(now, r.cfg.Settle, r.loc) {
			if seen[w.ID()] || ctx.Err() != nil {
				continue
			}
			seen[w.ID()] = true
			res, err := r.RunWindow(ctx, w)
			if err != nil {
				if ctx.Err() != nil {
					return done, ctx.Err()
				}
				r.logger.Warn("analytics window failed", "window", w.ID(), "period", p, "err", err)
				if first == nil {
					first = fmt.Errorf("window %s: %w", w.ID(), err)
				}
				continue
			}
			done = append(done, w)
			r.logger.Info("analytics window done", "window", w.ID(), "period", p, "jobs", res.WindowJobs, "early_runs", res.EarlyRuns, "seconds", res.Seconds)
		}
	}
	return done, first
}
