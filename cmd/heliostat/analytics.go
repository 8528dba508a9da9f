package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/analytics"
	"github.com/heliostat-dev/heliostat/internal/chconn"
	"github.com/heliostat-dev/heliostat/schemas"
)

const analyticsUsage = "`analytics` (the schedule), `analytics run [--since T --until T] [JOB…]`, `analytics capacity [QUERY…] [--since T --until T] [--sql]`"

// runAnalytics is `heliostat analytics`: without a subcommand it keeps the
// recent calendar windows characterized on a schedule; `run` characterizes
// one window now; `capacity` prints the capacity-planning queries.
func runAnalytics(ctx context.Context, args []string, e *env) error {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "run":
			return runAnalyticsRun(ctx, args[1:], e)
		case "capacity":
			return runAnalyticsCapacity(ctx, args[1:], e)
		default:
			return fmt.Errorf("analytics: unknown subcommand %q; want %s", args[0], analyticsUsage)
		}
	}
	fs := newFlagSet("analytics", e)
	var ch chconn.Config
	ch.RegisterFlags(fs, e.getenv)
	var cfg analytics.Config
	cfg.RegisterFlags(fs)
	var lf logFlags
	lf.register(fs)
	var wf webFlags
	wf.register(fs, ":9402")
	// This command only runs the schedule: 0, which disables it elsewhere
	// (up), leaves it nothing to do.
	fs.Lookup("analytics.interval").Usage = "how often the schedule recomputes the recent windows; must be above 0 (for one window once: heliostat analytics run)"
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: heliostat analytics [flags]                     keep the recent calendar windows characterized
       heliostat analytics run [flags] [JOB…]         characterize one window now (run -h: its flags and jobs)
       heliostat analytics capacity [flags] [QUERY…]  capacity-planning queries (capacity -h: its flags and queries)

flags of the schedule:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("analytics: unexpected arguments %q; want %s", fs.Args(), analyticsUsage)
	}
	cfg.Database = ch.Database
	if err := ch.Validate(); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.Interval == 0 {
		return errors.New("analytics: --analytics.interval 0: must be above 0, since this command only runs the schedule; use `analytics run` for one window")
	}
	logger, err := lf.logger(e.stderr)
	if err != nil {
		return err
	}
	reg, srv, err := serveMetrics(wf, logger)
	if err != nil {
		return err
	}
	return serveWhile(ctx, srv, func(ctx context.Context) error {
		conn, err := waitMigrated(ctx, ch, e, logger, reg, srv.Starting)
		if err != nil {
			return err
		}
		defer conn.Close()
		r, err := analytics.NewRunner(cfg, conn, logger, reg, time.Now)
		if err != nil {
			return err
		}
		logger.Info("analytics running", "clickhouse", ch.Addr, "database", ch.Database, "interval", cfg.Interval,
			"windows", cfg.Periods, "metrics", srv.URL("/metrics"))
		srv.AddCheck(r.Ready)
		srv.SetReady(true)
		return r.Run(ctx)
	})
}

// windowFlags are --since and --until.
type windowFlags struct {
	since, until string
}

func (w *windowFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&w.since, "since", "", "window start, RFC 3339 or YYYY-MM-DD (UTC) (default: the first day of the jobs' submit times)")
	fs.StringVar(&w.until, "until", "", "window end, exclusive, RFC 3339 or YYYY-MM-DD (default: the day after the last submit time; with --since, the end of today in --analytics.timezone, as report --since; today on the data's clock where simulated or trace job events lie ahead of the wall clock)")
}

func parseWindowTime(name, s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("--%s %q: want RFC 3339 (2020-09-01T00:00:00Z) or a date (2020-09-01)", name, s)
}

// window resolves the flags: with neither, the days holding every job's
// submit time; with --since alone, from it to the end of the day, in loc,
// that holds now (analytics.ThroughToday).
func (w *windowFlags) window(ctx context.Context, conn driver.Conn, database string, now time.Time, loc *time.Location) (analytics.Window, error) {
	if w.since == "" && w.until == "" {
		return analytics.DataSpan(ctx, conn, database, "")
	}
	if w.since == "" {
		return analytics.Window{}, errors.New("--until needs --since")
	}
	since, err := parseWindowTime("since", w.since)
	if err != nil {
		return analytics.Window{}, err
	}
	if w.until == "" {
		// As report --since: one window a day, not one a call.
		return analytics.ThroughToday(since, now, loc)
	}
	until, err := parseWindowTime("until", w.until)
	if err != nil {
		return analytics.Window{}, err
	}
	win := analytics.Window{Since: since, Until: until}
	return win, win.Validate()
}

// analyticsRunOutput is what `analytics run --json` prints.
type analyticsRunOutput struct {
	*analytics.RunResult
	Headlines []analytics.Headline `json:"headlines"`
}

func runAnalyticsRun(ctx context.Context, args []string, e *env) error {
	return analyticsRunAt(ctx, args, e, time.Now)
}

// analyticsRunAt is runAnalyticsRun on the wall clock wall, from which it
// reads the data clock (readDataClock): the end of a window given by
// --since alone, and the runner's clock.
func analyticsRunAt(ctx context.Context, args []string, e *env, wall func() time.Time) error {
	fs := newFlagSet("analytics run", e)
	var ch chconn.Config
	ch.RegisterFlags(fs, e.getenv)
	var cfg analytics.Config
	cfg.RegisterWindowFlags(fs)
	var wf windowFlags
	wf.register(fs)
	asJSON := fs.Bool("json", false, "print one JSON object on stdout")
	var lf logFlags
	lf.register(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: heliostat analytics run [flags] [JOB…]\n\njobs (default all): %s\n\nflags:\n", strings.Join(analytics.JobNames(), ", "))
		fs.PrintDefaults()
	}
	jobs, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	hintUpClickHouse(&ch, fs, e.getenv)
	cfg.Database = ch.Database
	if err := ch.Validate(); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	logger, err := lf.logger(e.stderr)
	if err != nil {
		return err
	}
	if err := applySchema(ctx, ch, e, logger); err != nil {
		return fmt.Errorf("apply schema: %w", err)
	}
	ch.Logger = logger
	conn, err := ch.Open(ctx, e.getenv)
	if err != nil {
		return err
	}
	defer conn.Close()
	loc, err := analytics.LoadTimeZone(cfg.TimeZone)
	if err != nil {
		return fmt.Errorf("analytics run: --analytics.timezone %q: %w", cfg.TimeZone, err)
	}
	clock, err := readDataClock(ctx, conn, ch.Database, wall)
	if err != nil {
		return fmt.Errorf("analytics run: %w", err)
	}
	clock.note(e.stderr, "analytics run")
	w, err := wf.window(ctx, conn, ch.Database, clock.now(), loc)
	if err != nil {
		return fmt.Errorf("analytics run: %w", err)
	}
	r, err := analytics.NewRunner(cfg, conn, logger, prometheus.NewRegistry(), clock.now)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "characterizing %s (jobs: %s)\n", w, orAll(jobs))
	res, err := r.RunWindow(ctx, w, jobs...)
	if err != nil {
		return err
	}
	out := analyticsRunOutput{RunResult: res, Headlines: []analytics.Headline{}}
	if hs, err := analytics.ReadHeadlines(ctx, conn, ch.Database, w); err == nil {
		out.Headlines = hs
	} else if !errors.Is(err, analytics.ErrNoResults) {
		return err
	}
	if *asJSON {
		return json.NewEncoder(e.stdout).Encode(out)
	}
	printRun(e.stdout, &out)
	return nil
}

// parseInterleaved parses flags that may come before or after the
// positional arguments and returns the positional ones.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func orAll(names []string) string {
	if len(names) == 0 {
		return "all"
	}
	return strings.Join(names, ", ")
}

func printRun(w io.Writer, out *analyticsRunOutput) {
	fmt.Fprintf(w, "window %s (data up to %s): %d jobs submitted in it, %d read with the earlier ones that held or waited for GPUs in it (%d submitted before the lookback); prepared in %.2fs, %.2fs in all\n",
		out.Window, out.ComputedUntil.Format(time.RFC3339), out.WindowJobs, out.SnapshotJobs, out.EarlyRuns, out.PrepareS, out.Seconds)
	for _, j := range out.Jobs {
		var parts []string
		for t, n := range j.Rows {
			parts = append(parts, fmt.Sprintf("%s %d", t, n))
		}
		fmt.Fprintf(w, "  %-12s %6.2fs  %s\n", j.Job, j.Seconds, strings.Join(sortedStrings(parts), ", "))
	}
	for _, h := range out.Headlines {
		fmt.Fprintf(w, "cluster %s: %d jobs (%d GPU jobs), %d users; ended jobs completed %s, cancelled %s, failed %s",
			h.Cluster, h.Jobs, h.GPUJobs, h.Users, pctOrDash(h.StateShare["completed"]), pctOrDash(h.StateShare["cancelled"]), pctOrDash(h.StateShare["failed"]))
		if u, ok := h.StateShare["unknown"]; ok {
			fmt.Fprintf(w, ", unknown %s", pctOrDash(u))
		}
		median := "–"
		if !math.IsNaN(h.DurationMedianS) && !math.IsInf(h.DurationMedianS, 0) {
			median = fmt.Sprintf("%.0fs", h.DurationMedianS)
		}
		fmt.Fprintf(w, "; median run time %s over %d jobs; top 5%% of users hold %s of GPU time\n",
			median, h.DurationJobs, pctOrDash(h.Top5PctUsersGPUTimeShare))
	}
}

// pctOrDash formats a share as a percentage, or "–" where there is nothing
// to share out (NaN: no ended job, no GPU time).
func pctOrDash(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "–"
	}
	return fmt.Sprintf("%.1f%%", 100*v)
}

func sortedStrings(s []string) []string {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s
}

func runAnalyticsCapacity(ctx context.Context, args []string, e *env) error {
	return analyticsCapacityAt(ctx, args, e, time.Now)
}

// analyticsCapacityAt is runAnalyticsCapacity on the wall clock wall, from
// which it reads the data clock (readDataClock) when it connects: --sql
// with a window given, which needs no server, cuts an open window at the
// wall clock.
func analyticsCapacityAt(ctx context.Context, args []string, e *env, wall func() time.Time) error {
	fs := newFlagSet("analytics capacity", e)
	var ch chconn.Config
	ch.RegisterFlags(fs, e.getenv)
	var wf windowFlags
	wf.register(fs)
	tz := fs.String("analytics.timezone", "UTC", "IANA time zone of weeks and months (not Local: ClickHouse does not know it)")
	lookback := fs.Duration("analytics.lookback", 30*24*time.Hour, "job runs submitted up to this long before --since are read whole; earlier ones that ran or waited in the window are found by a scan of their end times (a cost trade-off: the figures are the same)")
	asJSON := fs.Bool("json", false, "print one JSON object on stdout: {\"window\", \"results\": [{query, columns, rows}]}")
	printSQL := fs.Bool("sql", false, "print the SQL with the placeholders filled in (for clickhouse-client) instead of running it")
	var lf logFlags
	lf.register(fs)
	all := analytics.CapacityQueries()
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: heliostat analytics capacity [flags] [QUERY…]\n\nqueries (default all):\n")
		for _, q := range all {
			first, _, _ := strings.Cut(q.Doc, ".")
			fmt.Fprintf(fs.Output(), "  %-18s %s.\n", q.Name, strings.ReplaceAll(first, "\n", " "))
		}
		fmt.Fprintln(fs.Output(), "\nflags:")
		fs.PrintDefaults()
	}
	names, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	hintUpClickHouse(&ch, fs, e.getenv)
	queries := all
	if len(names) > 0 {
		byName := map[string]analytics.CapacityQuery{}
		for _, q := range all {
			byName[q.Name] = q
		}
		queries = nil
		for _, n := range names {
			q, ok := byName[n]
			if !ok {
				var known []string
				for _, q := range all {
					known = append(known, q.Name)
				}
				return fmt.Errorf("analytics capacity: no query %q; queries: %s", n, strings.Join(known, ", "))
			}
			queries = append(queries, q)
		}
	}
	loc, err := analytics.LoadTimeZone(*tz)
	if err != nil {
		return fmt.Errorf("analytics capacity: --analytics.timezone %q: %w", *tz, err)
	}
	if *lookback < 0 {
		return fmt.Errorf("analytics capacity: --analytics.lookback %v: must not be negative", *lookback)
	}
	if err := ch.Validate(); err != nil {
		return err
	}
	if _, err := lf.logger(e.stderr); err != nil {
		return err
	}
	// Printing the SQL of a given window needs no server; anything else
	// (running, or a window taken from the data) does.
	var conn driver.Conn
	if !*printSQL || wf.since == "" {
		if conn, err = ch.Open(ctx, e.getenv); err != nil {
			if *printSQL {
				return fmt.Errorf("analytics capacity: --sql without --since takes the window from the data, in ClickHouse (give --since and --until to print the SQL without a server): %w", err)
			}
			return err
		}
		defer conn.Close()
	}
	clock := &dataClock{wall: wall}
	if conn != nil {
		if clock, err = readDataClock(ctx, conn, ch.Database, wall); err != nil {
			return fmt.Errorf("analytics capacity: %w", err)
		}
		clock.note(e.stderr, "analytics capacity")
	}
	now := clock.now()
	w, err := wf.window(ctx, conn, ch.Database, now, loc)
	if err != nil {
		return fmt.Errorf("analytics capacity: %w", err)
	}
	if *printSQL {
		for _, q := range queries {
			s, err := analytics.CapacitySQL(q, ch.Database, w, now, loc, *lookback)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "-- %s\n%s;\n\n", q.Name, s)
		}
		return nil
	}
	type output struct {
		Window  string                      `json:"window"`
		Results []*analytics.CapacityResult `json:"results"`
	}
	out := output{Window: w.ID()}
	for _, q := range queries {
		fmt.Fprintf(e.stderr, "running %s for %s\n", q.Name, w)
		res, err := analytics.RunCapacityQuery(ctx, conn, ch.Database, q, w, now, loc, *lookback)
		if err != nil {
			return err
		}
		out.Results = append(out.Results, res)
		if !*asJSON {
			fmt.Fprintf(e.stdout, "== %s (%s)\n%s\n", q.Name, w, res.FormatTable())
		}
	}
	if *asJSON {
		return json.NewEncoder(e.stdout).Encode(out)
	}
	return nil
}

// dataClock is the clock of the commands that characterize the data
// ClickHouse holds (analytics run, analytics capacity, report): it cuts an
// open window, ends a window given by --since alone, and is the clock the
// stored results are computed up to and versioned by. It is the wall
// clock, unless a simulated cluster or an imported trace left job events
// after it: heliostat up's simulated clock runs ahead of the wall clock
// (--sim.speedup), and cut at the wall clock its data held almost no jobs.
// Then it is the later of a second after the newest such event and the
// clock of the newest stored analytics run (up's schedule runs on the
// simulated clock, which may be past the newest event): a run on an earlier
// clock would compute an open window up to less than the schedule did, and
// its analytics_runs rows, versioned by their clock, would lose to the
// schedule's under FINAL, so that the window's record would no longer say
// what its results are.
//
// A live source's events (Slurm's) never move it: they are stamped by the
// cluster's clocks, and one ahead (a node's skewed clock) must not move
// every window (the live predictor ignores them too). So on a real cluster
// it is the wall clock.
//
// The clock is global, not per cluster: a run replaces a window's results
// of every cluster at once, under one computed_until, so the clock of one
// cluster (even the one report --cluster shows) would cut the others'.
type dataClock struct {
	wall func() time.Time
	// ahead is the data's time when it lies ahead of the wall clock read
	// at readDataClock, else zero; from says where it came from.
	ahead time.Time
	from  string
}

// now returns the later of the wall clock and the data's time.
func (c *dataClock) now() time.Time {
	t := c.wall()
	if c.ahead.After(t) {
		return c.ahead
	}
	return t
}

// note writes one line to w, named after cmd, when the data's clock is
// ahead of the wall clock.
func (c *dataClock) note(w io.Writer, cmd string) {
	wall := c.wall()
	if !c.ahead.After(wall) {
		return
	}
	fmt.Fprintf(w, "%s: data clock %s (%s), ahead of the wall clock %s\n",
		cmd, c.ahead.UTC().Format(time.RFC3339Nano), c.from, wall.UTC().Format(time.RFC3339))
}

// readDataClock reads the clock of the data in db (dataClock) on the wall
// clock wall. A table not created yet holds nothing.
func readDataClock(ctx context.Context, conn driver.Conn, db string, wall func() time.Time) (*dataClock, error) {
	c := &dataClock{wall: wall}
	event, err := newestJobEvent(ctx, conn, db, "", schemas.SourceSim, schemas.SourceTrace)
	if err != nil && !isMissingTable(err) {
		return nil, err
	}
	if event.IsZero() {
		return c, nil
	}
	// Its second is all of it that job_runs keeps (a job submitted then is
	// submitted before computed_until only from the next second).
	event = event.Truncate(time.Second).Add(time.Second)
	if !event.After(wall()) {
		return c, nil
	}
	c.ahead, c.from = event, "a second after the newest simulated or trace job event"
	// analytics_runs.version is the clock of the runner that wrote the row,
	// in nanoseconds (analytics.Runner.recordRun).
	var version uint64
	err = conn.QueryRow(ctx, "SELECT max(version) FROM "+db+".analytics_runs").Scan(&version)
	if err != nil && !isMissingTable(err) {
		return nil, fmt.Errorf("read the clock of the newest analytics run: %w", err)
	}
	if run := time.Unix(0, int64(version)).UTC(); version > 0 && run.After(c.ahead) {
		c.ahead, c.from = run, "the newest stored analytics run's, past the newest simulated or trace job event"
	}
	return c, nil
}

// newestJobEvent returns the time of the newest job event in db's
// job_events of cluster ("": of every cluster) from one of sources (none:
// from any); zero when there is none.
func newestJobEvent(ctx context.Context, conn driver.Conn, db, cluster string, sources ...schemas.JobSource) (time.Time, error) {
	var (
		where []string
		args  []any
	)
	if cluster != "" {
		where, args = append(where, "cluster = ?"), append(args, cluster)
	}
	if len(sources) > 0 {
		names := make([]string, len(sources))
		for i, s := range sources {
			names[i] = s.String()
		}
		where, args = append(where, "has(?, source)"), append(args, names)
	}
	q := "SELECT count(), max(event_ts) FROM " + db + ".job_events"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	var (
		n uint64
		t time.Time
	)
	if err := conn.QueryRow(ctx, q, args...).Scan(&n, &t); err != nil {
		what := "every cluster"
		if cluster != "" {
			what = fmt.Sprintf("cluster %q", cluster)
		}
		return time.Time{}, fmt.Errorf("read the newest job event of %s: %w", what, err)
	}
	if n == 0 {
		return time.Time{}, nil
	}
	return t.UTC(), nil
}
