package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/analytics"
	"github.com/heliostat-dev/heliostat/analytics/report"
	"github.com/heliostat-dev/heliostat/ingest/trace"
	"github.com/heliostat-dev/heliostat/internal/atomicfile"
	"github.com/heliostat-dev/heliostat/internal/chconn"
	"github.com/heliostat-dev/heliostat/internal/chserver"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/migrate"
)

// reportFlags are the settings of `heliostat report`.
type reportFlags struct {
	out        string
	asJSON     bool
	since      string
	until      string
	cluster    string
	rerun      bool
	title      string
	tracePath  string
	format     string
	startAt    bool
	batch      int
	clickhouse chconn.Config
	analytics  analytics.Config
	log        logFlags
	keepCH     bool
	progress   *time.Duration
}

func (f *reportFlags) register(fs *flag.FlagSet, getenv func(string) string) {
	fs.StringVar(&f.out, "out", "", "write the HTML report to this file (required unless --json)")
	fs.BoolVar(&f.asJSON, "json", false, "print the headline figures as one JSON object on stdout")
	fs.StringVar(&f.since, "since", "", "start of the window: jobs submitted at or after it (RFC 3339 or YYYY-MM-DD, UTC; default: the latest characterized window, else the whole days holding the jobs)")
	fs.StringVar(&f.until, "until", "", "end of the window, exclusive (RFC 3339 or YYYY-MM-DD; default with --since: the end of today in --analytics.timezone, so that one day's calls share one window, its figures computed up to now and again when over a minute old; as analytics run --since. Today and now are the wall clock's, or the data's where simulated or trace job events lie ahead of it)")
	fs.StringVar(&f.cluster, "cluster", "", "cluster to report on (default: the only one in the window; with --trace, the name the trace is filed under, default the file name)")
	fs.BoolVar(&f.rerun, "rerun", false, "run the characterization jobs for the window even when it has results")
	fs.StringVar(&f.title, "title", "", "title of the page (default: heliostat report: CLUSTER)")
	fs.StringVar(&f.tracePath, "trace", "", "characterize this trace file in one command: import it into ClickHouse (a temporary local server unless --clickhouse.addr is given), run the jobs, render")
	fs.StringVar(&f.format, "format", "", "trace format: swf or helios (default: from the file name)")
	fs.BoolVar(&f.startAt, "trace.start-at-submit", true, "for trace jobs with a run time but no start time (Helios' Venus slice), take the start to be the submit time so that their run time is known; the report says how many")
	fs.IntVar(&f.batch, "clickhouse.batch-events", 50_000, "job events per ClickHouse insert when importing a trace")
	f.progress = progressFlag(fs)
	fs.BoolVar(&f.keepCH, "keep-clickhouse", false, "with --trace and no --clickhouse.addr: leave the temporary ClickHouse data directory in place and print it")
	f.clickhouse.RegisterFlags(fs, getenv)
	f.analytics.RegisterWindowFlags(fs)
	f.log.register(fs)
}

// check validates what can be validated before a server is started or a
// trace imported: the window, the analytics settings, ClickHouse's and
// where the page goes.
func (f *reportFlags) check() error {
	var since, until time.Time
	for _, w := range []struct {
		name, v string
		t       *time.Time
	}{{"since", f.since, &since}, {"until", f.until, &until}} {
		if w.v == "" {
			continue
		}
		t, err := parseWhen(w.name, w.v)
		if err != nil {
			return err
		}
		*w.t = t
	}
	if !until.IsZero() {
		if err := (analytics.Window{Since: since, Until: until}).Validate(); err != nil {
			return fmt.Errorf("report: --since/--until: %w", err)
		}
	}
	ac := f.analytics
	ac.Database = f.clickhouse.Database
	if err := ac.Validate(); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := f.clickhouse.Validate(); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if f.out != "" {
		dir := filepath.Dir(f.out)
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return fmt.Errorf("report: --out %s: directory %s does not exist", f.out, dir)
		}
		if fi, err := os.Stat(f.out); err == nil && fi.IsDir() {
			return fmt.Errorf("report: --out %s is a directory; want a file name", f.out)
		}
	}
	return nil
}

// parseWhen reads a --since/--until value: RFC 3339 or a UTC date.
func parseWhen(name, s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UTC().Truncate(time.Second), nil
	}
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("report: --%s %q: want RFC 3339 (2020-09-01T00:00:00Z) or a date (2020-09-01)", name, s)
}

// reportOutput is what --json prints: the headline figures, then where the
// page went and what was assumed.
type reportOutput struct {
	Jobs    uint64 `json:"jobs"`
	GPUJobs uint64 `json:"gpu_jobs"`
	Users   uint64 `json:"users"`
	// The shares are null where there is nothing to share out (no ended
	// job, no GPU time), as in analytics.Headline's JSON.
	StateShare        map[string]*float64 `json:"state_share"`
	GPUTimeStateShare map[string]*float64 `json:"gpu_time_state_share"`
	// DurationMedianS is null when no job has a known run time.
	DurationMedianS *float64 `json:"duration_median_s"`
	Top5PctGPUTime  *float64 `json:"top5pct_users_gpu_time_share"`
	EndedJobs       uint64   `json:"ended_jobs"`
	DurationJobs    uint64   `json:"duration_jobs"`
	Cluster         string   `json:"cluster"`
	Window          string   `json:"window"`
	Out             string   `json:"out,omitempty"`
	// Trace import: jobs read and rejected, and jobs whose start was taken
	// to be their submit time.
	TraceJobs      *int    `json:"trace_jobs,omitempty"`
	TraceRejected  *int    `json:"trace_rejected,omitempty"`
	StartAtSubmit  *int    `json:"start_at_submit_jobs,omitempty"`
	CharacterizeS  float64 `json:"characterize_s"`
	RenderS        float64 `json:"render_s"`
	ImportS        float64 `json:"import_s,omitempty"`
	ClickHouseAddr string  `json:"clickhouse_addr"`
	// TimeZone is the zone of the window's hours of day, days of week and
	// months, as its results were computed (--analytics.timezone, else a
	// trace's own, else UTC, when report computed them).
	TimeZone string `json:"time_zone"`
}

func runReport(ctx context.Context, args []string, e *env) error {
	return reportAt(ctx, args, e, time.Now)
}

// reportAt is runReport on the wall clock now: the page's time, and the
// clock from which it reads the data clock (readDataClock): the end of a
// window given by --since alone, whether stored results are current.
func reportAt(ctx context.Context, args []string, e *env, now func() time.Time) error {
	fs := newFlagSet("report", e)
	var f reportFlags
	f.register(fs, e.getenv)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("report: unexpected argument %q: heliostat report [--since T --until T] --out FILE.html, or heliostat report --trace FILE --format swf|helios --out FILE.html [--json]", fs.Arg(0))
	}
	if f.out == "" && !f.asJSON {
		return errors.New("report: want --out FILE.html, --json or both")
	}
	if f.format != "" && f.format != "swf" && f.format != "helios" {
		return fmt.Errorf("report: --format %q: want swf or helios", f.format)
	}
	if f.tracePath == "" && f.format != "" {
		return errors.New("report: --format is for --trace")
	}
	if f.batch < 1 {
		return fmt.Errorf("report: --clickhouse.batch-events %d: want at least 1", f.batch)
	}
	if f.until != "" && f.since == "" {
		return errors.New("report: --until needs --since")
	}
	if err := f.check(); err != nil {
		return err
	}
	prog, err := newProgress("report", e.stderr, *f.progress)
	if err != nil {
		return err
	}
	logger, err := f.log.logger(e.stderr)
	if err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if f.tracePath == "" {
		hintUpClickHouse(&f.clickhouse, fs, e.getenv)
	}

	out := &reportOutput{}
	rep := &reporter{flags: f, logger: logger, quiet: logger, stderr: e.stderr, getenv: e.getenv, out: out, now: now, progress: prog,
		tzGiven: set["analytics.timezone"], capacityGiven: set["analytics.capacity"] || set["analytics.capacity-file"]}
	if !strings.EqualFold(f.log.level, "debug") {
		quiet := logFlags{level: "warn", format: f.log.format}
		if rep.quiet, err = quiet.logger(e.stderr); err != nil {
			return err
		}
	}
	if f.tracePath != "" {
		from := clusterFromFlag
		if f.cluster == "" {
			if rep.flags.cluster, from, err = defaultCluster(f.tracePath); err != nil {
				return err
			}
		}
		if err := checkCluster(rep.flags.cluster, from); err != nil {
			return err
		}
		// Without an address (flag or environment) the trace goes into a
		// temporary local ClickHouse.
		if !set["clickhouse.addr"] && e.getenv("HELIOSTAT_CLICKHOUSE_ADDR") == "" {
			stop, err := rep.startLocalClickHouse(ctx)
			if err != nil {
				return err
			}
			defer stop()
		}
	}
	if err := rep.run(ctx); err != nil {
		return err
	}
	if f.asJSON {
		return json.NewEncoder(e.stdout).Encode(out)
	}
	what := "GPU jobs"
	if rep.processors {
		what = "jobs with processors, which stand for GPUs"
	}
	fmt.Fprintf(e.stdout, "%s: %d jobs (%d %s) of %d users in %s; report in %s\n", out.Cluster, out.Jobs, out.GPUJobs, what, out.Users, out.Window, out.Out)
	return nil
}

// reporter runs one `heliostat report`.
type reporter struct {
	flags  reportFlags
	logger *slog.Logger
	stderr io.Writer
	getenv func(string) string
	out    *reportOutput
	// now is the wall clock: the page's time, how long steps took. data is
	// the data clock, read from it once the data is in ClickHouse.
	now   func() time.Time
	data  *dataClock
	notes []string
	// processors is set for an SWF trace: its processors stand for GPUs.
	processors bool
	// quiet logs the schema migrations: at warn level unless debugging,
	// since a --trace run applies all of them to a fresh server.
	quiet *slog.Logger
	// progress paces the import's progress lines.
	progress *progress
	// tzGiven says --analytics.timezone was given: a trace's own time zone
	// does not replace it, and stored results computed in another zone are
	// computed again.
	tzGiven bool
	// capacityGiven says --analytics.capacity or --analytics.capacity-file
	// was given: stored results that used other configured capacities are
	// computed again.
	capacityGiven bool
}

// startLocalClickHouse starts a ClickHouse server on a temporary directory
// for a --trace run and points the flags at it; stop shuts it down and
// removes the directory.
func (r *reporter) startLocalClickHouse(ctx context.Context) (stop func(), err error) {
	dir, err := scratchDir(r.stderr, os.TempDir(), "heliostat-report")
	if err != nil {
		return nil, fmt.Errorf("report: temporary ClickHouse directory: %w", err)
	}
	r.logger.Info("starting a local ClickHouse for the trace", "dir", dir)
	srv, err := chserver.Start(ctx, chserver.Config{Dir: dir, Install: true}, r.logger)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("report: start a local ClickHouse (or give --clickhouse.addr): %w", err)
	}
	r.flags.clickhouse.Addr = srv.Addr()
	return func() {
		if err := srv.Stop(); err != nil {
			r.logger.Warn("stop local ClickHouse", "err", err)
		}
		if r.flags.keepCH {
			disownScratch(dir)
			fmt.Fprintf(r.stderr, "report: ClickHouse data kept in %s\n", dir)
			return
		}
		os.RemoveAll(dir)
	}, nil
}

func (r *reporter) run(ctx context.Context) error {
	f := &r.flags
	f.analytics.Database = f.clickhouse.Database
	conn, err := f.clickhouse.Open(ctx, r.getenv)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	defer conn.Close()
	r.out.ClickHouseAddr = f.clickhouse.Addr

	if f.tracePath != "" {
		if err := r.importTrace(ctx, conn); err != nil {
			return err
		}
	}
	if r.data, err = readDataClock(ctx, conn, f.clickhouse.Database, r.now); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	r.data.note(r.stderr, "report")
	w, err := r.window(ctx, conn)
	if err != nil {
		return err
	}
	r.out.Window = w.ID()
	if err := r.characterize(ctx, conn, w); err != nil {
		return err
	}
	// The zone the figures were computed in: the flag's when report
	// computed them, else the stored results'.
	if r.out.TimeZone, err = analytics.ReadTimeZone(ctx, conn, f.clickhouse.Database, w); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if r.out.TimeZone == "" {
		r.out.TimeZone = cmp.Or(f.analytics.TimeZone, "UTC")
	}
	h, err := r.headline(ctx, conn, w)
	if err != nil {
		return err
	}
	r.out.Cluster = h.Cluster
	r.out.Jobs, r.out.GPUJobs, r.out.Users, r.out.EndedJobs = h.Jobs, h.GPUJobs, h.Users, h.EndedJobs
	r.out.StateShare, r.out.GPUTimeStateShare = finiteOrNulls(h.StateShare), finiteOrNulls(h.GPUTimeStateShare)
	r.out.DurationJobs, r.out.Top5PctGPUTime = h.DurationJobs, finiteOrNull(h.Top5PctUsersGPUTimeShare)
	if h.DurationJobs > 0 {
		r.out.DurationMedianS = finiteOrNull(h.DurationMedianS)
	}
	if f.out == "" {
		return nil
	}
	t0 := r.now()
	if err := r.render(ctx, conn, w, h.Cluster); err != nil {
		return err
	}
	r.out.RenderS = r.now().Sub(t0).Seconds()
	r.out.Out = f.out
	r.logger.Info("report written", "out", f.out, "seconds", r.out.RenderS)
	return nil
}

// finiteOrNull is v, or nil (null in JSON) for NaN, nothing to divide:
// JSON has no NaN, and 0 would be a figure.
func finiteOrNull(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func finiteOrNulls(m map[string]float64) map[string]*float64 {
	out := make(map[string]*float64, len(m))
	for k, v := range m {
		out[k] = finiteOrNull(v)
	}
	return out
}

// importTrace reads the trace and writes its job events straight into
// ClickHouse under the cluster name, like `heliostat import --to clickhouse`
// (importing twice duplicates nothing).
func (r *reporter) importTrace(ctx context.Context, conn driver.Conn) error {
	f := &r.flags
	t0 := r.now()
	tr, err := trace.Open(f.tracePath, f.format)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	rejectUnstorableTimes(tr)
	startAt := 0
	if f.startAt {
		startAt = startAtSubmit(tr.Jobs)
	}
	// As import does, after the last change to the jobs: a job the encoder
	// would refuse is rejected, not the end of the import.
	tr.RejectUnencodable()
	printRejects(r.stderr, f.tracePath, tr)
	if len(tr.Jobs) == 0 {
		return fmt.Errorf("report: %s: no job could be read (%d rows rejected)", f.tracePath, tr.Rejected)
	}
	if startAt > 0 {
		r.notes = append(r.notes, fmt.Sprintf("The trace gives a run time but no start time for %d of its %d jobs: they are taken to start when submitted, so their queuing delay counts as 0 and utilization assumes they did not wait.", startAt, len(tr.Jobs)))
		r.logger.Warn("jobs without a start time start at their submit time", "jobs", startAt, "file", f.tracePath)
	}
	r.traceTimeZone(tr.TimeZone)
	if tr.Format == "swf" {
		r.processors = true
		r.notes = append(r.notes, "The trace (SWF) gives processors, not GPUs: every GPU figure of this report counts processors.")
	}
	if tr.Rejected > 0 {
		r.notes = append(r.notes, fmt.Sprintf("%d rows of the trace could not be read and are left out (by reason: %s).", tr.Rejected, countsString(tr.Reasons)))
	}
	jobs, rejected := len(tr.Jobs), tr.Rejected
	r.out.TraceJobs, r.out.TraceRejected, r.out.StartAtSubmit = &jobs, &rejected, &startAt

	if _, err := migrate.Apply(ctx, conn, f.clickhouse.Database, r.quiet); err != nil {
		return fmt.Errorf("report: apply schema: %w", err)
	}
	// The import's ClickHouse sink, on the reporter's connection (which
	// outlives it, so the sink is never closed).
	sink := &clickHouseSink{conn: conn, db: f.clickhouse.Database, cluster: f.cluster, max: f.batch}
	conv := trace.NewConverter()
	var events []schemas.JobEvent
	for i := range tr.Jobs {
		events = conv.Append(events[:0], &tr.Jobs[i])
		err := sink.add(ctx, events)
		if err == nil && i == len(tr.Jobs)-1 {
			err = sink.flush(ctx)
		}
		if err != nil {
			return fmt.Errorf("report: import %s: %d of %d jobs written: %w", f.tracePath, sink.written(), len(tr.Jobs), err)
		}
		if r.progress.due() {
			r.logger.Info("import progress", "file", f.tracePath, "jobs_written", sink.written(), "jobs", len(tr.Jobs))
		}
	}
	r.out.ImportS = r.now().Sub(t0).Seconds()
	r.logger.Info("trace imported", "file", f.tracePath, "cluster", f.cluster, "jobs", conv.Stats.Jobs, "events", conv.Stats.Events, "seconds", r.out.ImportS)
	return nil
}

// traceTimeZone makes the time zone a trace names (SWF's TimeZoneString,
// "" for none) that of the report's hours of day, days of week and calendar
// windows, unless --analytics.timezone was given, and says so on stderr and
// in the page's notes: the trace's clock is the one its users lived by.
func (r *reporter) traceTimeZone(tz string) {
	f := &r.flags
	if tz == "" || r.tzGiven || tz == f.analytics.TimeZone {
		return
	}
	if _, err := analytics.LoadTimeZone(tz); err != nil {
		r.notes = append(r.notes, fmt.Sprintf("The trace gives its time zone as %q, which this system does not know: hours of day, days of week and calendar windows are in %s.", tz, f.analytics.TimeZone))
		fmt.Fprintf(r.stderr, "report: %s: the trace's time zone %q is unknown here (%v); times of day are in %s (--analytics.timezone sets another)\n", f.tracePath, tz, err, f.analytics.TimeZone)
		return
	}
	f.analytics.TimeZone = tz
	r.notes = append(r.notes, fmt.Sprintf("Hours of day, days of week and calendar windows are in the trace's time zone, %s (its TimeZoneString header); --analytics.timezone sets another.", tz))
	fmt.Fprintf(r.stderr, "report: %s: times of day in %s, the trace's time zone (--analytics.timezone sets another)\n", f.tracePath, tz)
}

// startAtSubmit gives the jobs that have a run time but neither a start
// time nor a queuing delay (Helios' Venus slice: submit time and duration)
// a start at their submit time and an end at start + run time, and returns
// how many it changed.
func startAtSubmit(jobs []trace.Job) int {
	n := 0
	for i := range jobs {
		j := &jobs[i]
		if j.Start.IsZero() && j.Wait < 0 && j.Run >= 0 {
			j.Start = j.Submit
			if j.End.IsZero() {
				j.End = j.Start.Add(j.Run)
			}
			n++
		}
	}
	return n
}

// window is the window to report on: --since/--until; else, with --trace,
// the whole days holding the trace's jobs; else the latest characterized
// window; else the whole days holding the jobs.
func (r *reporter) window(ctx context.Context, conn driver.Conn) (analytics.Window, error) {
	f := &r.flags
	db := f.clickhouse.Database
	switch {
	case f.since != "":
		since, err := parseWhen("since", f.since)
		if err != nil {
			return analytics.Window{}, err
		}
		if f.until == "" {
			loc, err := analytics.LoadTimeZone(f.analytics.TimeZone)
			if err != nil {
				return analytics.Window{}, fmt.Errorf("report: --analytics.timezone %q: %w", f.analytics.TimeZone, err)
			}
			w, err := analytics.ThroughToday(since, r.dataNow(), loc)
			if err != nil {
				return analytics.Window{}, fmt.Errorf("report: --since %s without --until: %w", f.since, err)
			}
			return w, nil
		}
		until, err := parseWhen("until", f.until)
		if err != nil {
			return analytics.Window{}, err
		}
		w := analytics.Window{Since: since, Until: until}
		return w, w.Validate()
	case f.until != "":
		return analytics.Window{}, errors.New("report: --until needs --since")
	case f.tracePath != "":
		return analytics.DataSpan(ctx, conn, db, f.cluster)
	}
	ws, err := analytics.ReadWindows(ctx, conn, db)
	if err == nil && len(ws) > 0 {
		return report.LatestWindow(ws), nil
	}
	return analytics.DataSpan(ctx, conn, db, f.cluster)
}

// characterize runs the analytics jobs for w unless it has complete
// results computed up to its end (or, for an open window, up to the data
// clock's now) with the --analytics.timezone and capacities given (when
// given: without them the stored results stand, whatever settings the
// schedule computed them with).
func (r *reporter) characterize(ctx context.Context, conn driver.Conn, w analytics.Window) error {
	f := &r.flags
	runner, err := analytics.NewRunner(f.analytics, conn, r.logger, prometheus.NewRegistry(), r.dataNow)
	if err != nil {
		return err
	}
	if !f.rerun && f.tracePath == "" {
		done, err := r.characterized(ctx, conn, runner, w)
		if err != nil || done {
			return err
		}
	}
	if _, err := migrate.Apply(ctx, conn, f.clickhouse.Database, r.quiet); err != nil {
		return fmt.Errorf("report: apply schema: %w", err)
	}
	r.logger.Info("characterizing", "window", w.ID())
	res, err := runner.RunWindow(ctx, w)
	if err != nil {
		return err
	}
	r.out.CharacterizeS = res.Seconds
	r.logger.Info("characterized", "window", w.ID(), "jobs", res.WindowJobs, "seconds", res.Seconds)
	return nil
}

// characterized reports whether w has complete, current results computed
// with the settings given on the command line.
func (r *reporter) characterized(ctx context.Context, conn driver.Conn, runner *analytics.Runner, w analytics.Window) (bool, error) {
	ws, err := analytics.ReadWindows(ctx, conn, r.flags.clickhouse.Database)
	if err != nil && !isMissingTable(err) {
		return false, err
	}
	for _, x := range ws {
		if x.Window != w || len(x.Jobs) < len(analytics.JobNames()) || x.ComputedUntil.Before(minTime(w.Until, r.dataNow().Add(-time.Minute))) {
			continue
		}
		diffs, err := runner.StoredDifferences(ctx, w, analytics.Compare{TimeZone: r.tzGiven, Capacity: r.capacityGiven})
		if err != nil {
			return false, fmt.Errorf("report: %w", err)
		}
		if len(diffs) > 0 {
			r.logger.Info("window characterized with other settings; computing it again", "window", w.ID(), "run_at", x.RunAt, "differences", strings.Join(diffs, "; "))
			return false, nil
		}
		r.logger.Info("window already characterized", "window", w.ID(), "run_at", x.RunAt)
		return true, nil
	}
	return false, nil
}

// dataNow is the data clock (dataClock.now); the wall clock until run has
// read it.
func (r *reporter) dataNow() time.Time {
	if r.data == nil {
		return r.now()
	}
	return r.data.now()
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// isMissingTable is ClickHouse's "table doesn't exist" (a database whose
// schema was never applied).
func isMissingTable(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "doesn't exist") || strings.Contains(err.Error(), "UNKNOWN_TABLE"))
}

func (r *reporter) headline(ctx context.Context, conn driver.Conn, w analytics.Window) (*analytics.Headline, error) {
	f := &r.flags
	if f.cluster != "" {
		return analytics.ReadHeadline(ctx, conn, f.clickhouse.Database, w, f.cluster)
	}
	hs, err := analytics.ReadHeadlines(ctx, conn, f.clickhouse.Database, w)
	if err != nil {
		return nil, err
	}
	if len(hs) > 1 {
		names := make([]string, len(hs))
		for i := range hs {
			names[i] = hs[i].Cluster
		}
		return nil, fmt.Errorf("report: window %s has %d clusters (%s): choose one with --cluster", w.ID(), len(hs), strings.Join(names, ", "))
	}
	return &hs[0], nil
}

func (r *reporter) render(ctx context.Context, conn driver.Conn, w analytics.Window, cluster string) error {
	f := &r.flags
	rep, err := report.Load(ctx, conn, report.LoadOptions{Database: f.clickhouse.Database, Window: w, Cluster: cluster})
	if err != nil {
		return err
	}
	rep.Title = f.title
	if rep.Title == "" {
		rep.Title = "heliostat report: " + cluster
	}
	rep.Source = "ClickHouse database " + f.clickhouse.Database
	if f.tracePath != "" {
		rep.Source = "trace " + filepath.Base(f.tracePath)
	}
	rep.Notes = r.notes
	rep.Generated = r.now()
	var buf bytes.Buffer
	if err := report.Render(&buf, rep); err != nil {
		return err
	}
	// Replaced whole, so that a reader (a web server serving the file) never
	// sees half a page.
	if err := atomicfile.Write(f.out, buf.Bytes()); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := os.Chmod(f.out, 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}
