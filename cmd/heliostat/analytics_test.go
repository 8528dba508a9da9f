package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/analytics"
	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/internal/chconn"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestAnalyticsCapacitySQL: with a window given, --sql prints the expanded
// queries without a server (the address below refuses connections), shared
// fragments inlined and no placeholder left.
func TestAnalyticsCapacitySQL(t *testing.T) {
	var out, errb bytes.Buffer
	args := []string{"analytics", "capacity", "--sql", "--clickhouse.addr", "127.0.0.1:1", "--clickhouse.database", "ctc",
		"--since", "1996-07-01T00:00:00Z", "--until", "1996-09-01T00:00:00Z", "demand_weekly", "demand_trend"}
	if err := run(context.Background(), args, func(string) string { return "" }, &out, &errb); err != nil {
		t.Fatalf("%v\nstderr: %s", err, errb.String())
	}
	s := out.String()
	for _, want := range []string{"-- demand_weekly\n", "-- demand_trend\n", "FROM ctc.job_runs FINAL", "toDateTime(841536000)"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if n := strings.Count(s, "ANY LEFT JOIN"); n != 2 {
		t.Errorf("%d hourly-demand joins, want one per query", n)
	}
	if strings.Contains(s, "{") {
		t.Errorf("a placeholder is left:\n%s", s)
	}

	// Without a window it needs the data: the error says how to do without.
	err := run(context.Background(), args[:7], func(string) string { return "" }, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "give --since and --until to print the SQL without a server") {
		t.Errorf("capacity --sql without --since and no server = %v; want the way round", err)
	}
}

// TestAnalyticsCapacityRunsWhatSQLPrints: `analytics capacity` runs the SQL
// that --sql prints for the same flags, --analytics.lookback included; and
// since earlier runs count whatever the lookback, a run submitted two days
// before --since that holds 8 GPUs through the window counts with a lookback
// of an hour as with the default.
func TestAnalyticsCapacityRunsWhatSQLPrints(t *testing.T) {
	cfg, conn := schematest.Database(t)
	ctx := context.Background()
	since := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC) // a Monday
	sub := since.Add(-48 * time.Hour)
	schematest.InsertJobRows(t, conn, cfg.Database, "cluster, job_id, source, user, partition_name, state, submit_time, start_time, gpus, last_event, updated_at, inserted_at, version",
		[]any{"c", "1", "slurm", "alice", "gpu", "RUNNING", sub, &sub, uint32(8), "START", sub, sub, uint64(1)})
	base := []string{"analytics", "capacity", "demand_weekly", "--since", "2026-03-02", "--until", "2026-03-09"}
	base = append(base, chFlags(cfg)...)
	for _, lookback := range []string{"720h", "1h"} {
		args := append(append([]string{}, base...), "--analytics.lookback", lookback)
		var out, errb bytes.Buffer
		if err := run(ctx, append(args, "--json"), noEnv, &out, &errb); err != nil {
			t.Fatalf("%v\n%s", err, errb.String())
		}
		var res struct {
			Results []struct {
				Columns []string `json:"columns"`
				Rows    [][]any  `json:"rows"`
			} `json:"results"`
		}
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			t.Fatal(err)
		}
		var ran []float64
		for _, r := range res.Results[0].Rows {
			ran = append(ran, r[slices.Index(res.Results[0].Columns, "demand_max")].(float64))
		}

		out.Reset()
		if err := run(ctx, append(args, "--sql"), noEnv, &out, &errb); err != nil {
			t.Fatalf("%v\n%s", err, errb.String())
		}
		sql := strings.TrimSuffix(strings.TrimSpace(out.String()), ";")
		rows, err := conn.Query(ctx, "SELECT demand_max FROM ("+sql+")")
		if err != nil {
			t.Fatalf("run the printed SQL: %v", err)
		}
		var printed []float64
		for rows.Next() {
			var v float64
			if err := rows.Scan(&v); err != nil {
				t.Fatal(err)
			}
			printed = append(printed, v)
		}
		rows.Close()
		if !slices.Equal(ran, printed) || len(ran) != 1 || ran[0] != 8 {
			t.Errorf("--analytics.lookback %s: demand_max %v when run, %v from the --sql output; want [8] from both", lookback, ran, printed)
		}
	}
}

// TestAnalyticsTimeZoneLocal: every command that takes --analytics.timezone
// refuses Local, which ClickHouse does not know, before it connects, naming
// the flag.
func TestAnalyticsTimeZoneLocal(t *testing.T) {
	ch := []string{"--clickhouse.addr", "127.0.0.1:1", "--analytics.timezone", "Local"}
	for _, args := range [][]string{
		{"analytics", "--web.listen-address", "127.0.0.1:0"},
		{"analytics", "run", "--since", "2026-03-02"},
		{"analytics", "capacity", "--sql", "--since", "2026-03-02"},
		{"report", "--json", "--since", "2026-03-02"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var out, errb bytes.Buffer
		err := run(ctx, append(args, ch...), noEnv, &out, &errb)
		cancel()
		if err == nil || !strings.Contains(err.Error(), `--analytics.timezone "Local"`) {
			t.Errorf("%v: run = %v; want an error naming --analytics.timezone \"Local\"", args, err)
		}
	}
}

// TestAnalyticsHelp: `analytics -h` names the run and capacity subcommands
// and says that the schedule's --analytics.interval must be above 0, which
// the command enforces.
func TestAnalyticsHelp(t *testing.T) {
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"analytics", "-h"}, noEnv, &out, &errb); err != nil && !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("analytics -h = %v", err)
	}
	help := errb.String() + out.String()
	for _, want := range []string{"heliostat analytics run [flags] [JOB…]", "heliostat analytics capacity [flags] [QUERY…]", "must be above 0"} {
		if !strings.Contains(help, want) {
			t.Errorf("analytics -h lacks %q:\n%s", want, help)
		}
	}
	err := run(context.Background(), []string{"analytics", "--analytics.interval", "0", "--clickhouse.addr", "127.0.0.1:1"}, noEnv, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "--analytics.interval 0: must be above 0") {
		t.Errorf("analytics --analytics.interval 0 = %v; want it refused as -h says", err)
	}
}

// simAhead is a database as heliostat up leaves it while its simulated
// clock runs ahead of the wall clock: the job events of cluster "sim"
// (source sim) lie in the wall clock's future, and up's analytics schedule,
// on the simulated clock, has characterized the day windows around it.
type simAhead struct {
	cfg  chconn.Config
	conn driver.Conn
	// wall is the wall clock of the commands; sim the clock of up's last
	// scheduled pass; newest the newest job event, between them.
	wall, sim, newest time.Time
}

// newSimAhead seeds the database: on 23 November, six jobs of two GPUs each
// submitted four hours apart from 01:00, each starting ten minutes after
// its submit and running two hours; on 24 November one job submitted at
// 02:00, running since 03:00 (the newest event). The wall clock is
// 2026-11-23T12:19:42Z, when three of the six had been submitted; up's
// schedule ran at 2026-11-24T06:00:00Z.
func newSimAhead(t *testing.T) *simAhead {
	t.Helper()
	cfg, conn := schematest.Database(t)
	s := &simAhead{cfg: cfg, conn: conn,
		wall:   time.Date(2026, 11, 23, 12, 19, 42, 0, time.UTC),
		sim:    time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC),
		newest: time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC)}
	var evs []schemas.JobEvent
	job := func(id, user string, submit, start, end time.Time) {
		e := schemas.JobEvent{Type: schemas.JobSubmit, State: schemas.StatePending, EventMillis: submit.UnixMilli(), JobID: id,
			ArrayTaskID: schemas.Unknown, User: user, UID: schemas.Unknown, Partition: "gpu", ExitCode: schemas.Unknown, Priority: schemas.Unknown,
			SubmitMillis: submit.UnixMilli(), TimeLimitS: 4 * 3600, NodeCount: 1, CPUs: 8, GPUs: 2, MemReqBytes: schemas.Unknown}
		evs = append(evs, e)
		e.Type, e.State, e.StartMillis, e.EventMillis = schemas.JobStart, schemas.StateRunning, start.UnixMilli(), start.UnixMilli()
		evs = append(evs, e)
		if !end.IsZero() {
			e.Type, e.State, e.ExitCode, e.EndMillis, e.EventMillis = schemas.JobEnd, schemas.StateCompleted, 0, end.UnixMilli(), end.UnixMilli()
			evs = append(evs, e)
		}
	}
	day := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	for i := range 6 {
		submit := day.Add(time.Duration(1+4*i) * time.Hour)
		job(fmt.Sprint(i+1), []string{"alice", "bob"}[i%2], submit, submit.Add(10*time.Minute), submit.Add(130*time.Minute))
	}
	job("7", "carol", day.Add(26*time.Hour), s.newest, time.Time{})
	if err := ingest.InsertJobEvents(t.Context(), conn, cfg.Database, "sim", schemas.SourceSim, evs); err != nil {
		t.Fatal(err)
	}
	// up's schedule: analytics.NewRunner on the simulated clock (up.go).
	up, err := analytics.NewRunner(analytics.Config{Database: cfg.Database, Interval: time.Minute, Periods: []analytics.Period{analytics.Day},
		Settle: 48 * time.Hour, Lookback: 30 * 24 * time.Hour, TimeZone: "UTC"}, conn, slog.New(slog.DiscardHandler), prometheus.NewRegistry(),
		func() time.Time { return s.sim })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := up.Pass(t.Context()); err != nil {
		t.Fatalf("up's scheduled pass: %v", err)
	}
	return s
}

// stored returns the window's stored headline jobs of cluster sim, the
// computed_until of its analytics_runs (FINAL, the earliest of its jobs)
// and the GPU-hours of its hourly utilization.
func (s *simAhead) stored(t *testing.T, window string) (jobs uint64, computedUntil time.Time, gpuHours float64) {
	t.Helper()
	since, until, _ := strings.Cut(window, "/")
	w := analytics.Window{Since: mustTime(t, since), Until: mustTime(t, until)}
	if h, err := analytics.ReadHeadline(t.Context(), s.conn, s.cfg.Database, w, "sim"); err == nil {
		jobs = h.Jobs
	} else if !errors.Is(err, analytics.ErrNoResults) {
		t.Fatal(err)
	}
	db := s.cfg.Database
	if err := s.conn.QueryRow(t.Context(), "SELECT min(computed_until) FROM "+db+".analytics_runs FINAL WHERE window_id = ?", window).Scan(&computedUntil); err != nil {
		t.Fatal(err)
	}
	q := `SELECT sum(busy_gpus * least(3600, toInt64(toUInt32(r.cu)) - toInt64(toUInt32(hour_start)))) / 3600
		FROM ` + db + `.analytics_utilization_hourly AS u
		ANY LEFT JOIN (SELECT window_id, min(computed_until) AS cu FROM ` + db + `.analytics_runs FINAL GROUP BY window_id) AS r USING window_id
		WHERE u.window_id = ? AND scope = 'cluster' AND cluster = 'sim'`
	if err := s.conn.QueryRow(t.Context(), q, window).Scan(&gpuHours); err != nil {
		t.Fatal(err)
	}
	return jobs, computedUntil.UTC(), gpuHours
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v.UTC()
}

// TestAnalyticsDataClock: on data whose job events lie in the wall clock's
// future (heliostat up's simulated cluster), analytics run, analytics
// capacity and report cut an open window, and end a --since-only window,
// at the data's clock, not the wall clock's: they see every job, say on
// stderr which clock they used, and leave the results up's schedule stored
// no emptier than they were. (They cut at the wall clock: "0 jobs submitted
// in it", and replaced the window's stored rows with the emptier ones.)
func TestAnalyticsDataClock(t *testing.T) {
	s := newSimAhead(t)
	const (
		day23 = "2026-11-23T00:00:00Z/2026-11-24T00:00:00Z"
		day24 = "2026-11-24T00:00:00Z/2026-11-25T00:00:00Z"
	)
	before := map[string][3]any{}
	for _, w := range []string{day23, day24} {
		jobs, cu, gh := s.stored(t, w)
		before[w] = [3]any{jobs, cu, gh}
	}
	// What up's pass stored: the sixth job and the open seventh, with 3 h
	// of its 2 GPUs up to the simulated clock.
	if want := [3]any{uint64(6), mustTime(t, "2026-11-24T00:00:00Z"), 24.0}; before[day23] != want {
		t.Fatalf("up's schedule stored %s: jobs, computed_until, GPU-hours %v; want %v", day23, before[day23], want)
	}
	if want := [3]any{uint64(1), s.sim, 6.0}; before[day24] != want {
		t.Fatalf("up's schedule stored %s: jobs, computed_until, GPU-hours %v; want %v", day24, before[day24], want)
	}
	ch := append(chFlags(s.cfg), "--log.level", "warn", "--json")
	for _, tc := range []struct {
		cmd    string // analytics run, analytics capacity or report
		args   []string
		window string
		jobs   uint64
	}{
		// the evidence's command: a window closed on the data's clock
		{"analytics run", []string{"--since", "2026-11-23", "--until", "2026-11-24"}, day23, 6},
		// a window still open on the data's clock: computed up to the
		// schedule's clock, not up to the newest event before it
		{"analytics run", []string{"--since", "2026-11-24", "--until", "2026-11-25"}, day24, 1},
		// --since alone: to the end of the data's today
		{"analytics run", []string{"--since", "2026-11-23"}, "2026-11-23T00:00:00Z/2026-11-25T00:00:00Z", 7},
		{"report", []string{"--since", "2026-11-23", "--until", "2026-11-24", "--rerun"}, day23, 6},
		{"report", []string{"--since", "2026-11-24", "--until", "2026-11-25", "--rerun"}, day24, 1},
		{"report", []string{"--since", "2026-11-22", "--cluster", "sim"}, "2026-11-22T00:00:00Z/2026-11-25T00:00:00Z", 7},
		{"analytics capacity", []string{"gpu_hours_monthly", "--since", "2026-11-23", "--until", "2026-11-25"}, "2026-11-23T00:00:00Z/2026-11-25T00:00:00Z", 7},
	} {
		var out, errb bytes.Buffer
		e := &env{getenv: noEnv, stdout: &out, stderr: &errb}
		args := append(append([]string{}, ch...), tc.args...)
		wall := func() time.Time { return s.wall }
		var (
			err    error
			window string
			jobs   uint64
		)
		switch tc.cmd {
		case "analytics run":
			err = analyticsRunAt(t.Context(), args, e, wall)
			var got struct {
				Window    string               `json:"window"`
				Headlines []analytics.Headline `json:"headlines"`
			}
			if err == nil {
				err = json.Unmarshal(out.Bytes(), &got)
			}
			window = got.Window
			for _, h := range got.Headlines {
				jobs += h.Jobs
			}
		case "report":
			err = reportAt(t.Context(), args, e, wall)
			var got reportResult
			if err == nil {
				err = json.Unmarshal(out.Bytes(), &got)
			}
			window, jobs = got.Window, got.Jobs
		case "analytics capacity":
			err = analyticsCapacityAt(t.Context(), args, e, wall)
			var got struct {
				Window  string `json:"window"`
				Results []struct {
					Columns []string `json:"columns"`
					Rows    [][]any  `json:"rows"`
				} `json:"results"`
			}
			if err == nil {
				err = json.Unmarshal(out.Bytes(), &got)
			}
			window = got.Window
			for _, r := range got.Results {
				for _, row := range r.Rows {
					jobs += uint64(row[slices.Index(r.Columns, "jobs")].(float64))
				}
			}
		}
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", tc.cmd, tc.args, err, errb.String())
		}
		if window != tc.window || jobs != tc.jobs {
			t.Errorf("%s %v at %s = window %s, %d jobs; want %s, %d jobs", tc.cmd, tc.args, s.wall.Format(time.RFC3339), window, jobs, tc.window, tc.jobs)
		}
		if want := "clock " + s.sim.Format(time.RFC3339); !strings.Contains(errb.String(), want) {
			t.Errorf("%s %v: stderr does not name the data's clock (%q):\n%s", tc.cmd, tc.args, want, errb.String())
		}
		for w, b := range before {
			jobs, cu, gh := s.stored(t, w)
			if jobs < b[0].(uint64) || cu.Before(b[1].(time.Time)) || gh < b[2].(float64) {
				t.Errorf("after %s %v: %s stored jobs, computed_until, GPU-hours %d, %s, %v; want no fewer than up's schedule stored, %v",
					tc.cmd, tc.args, w, jobs, cu.Format(time.RFC3339), gh, b)
			}
		}
	}
}

// TestAnalyticsReadDataClock: the data clock is the wall clock unless job events of
// a simulated cluster or a trace lie after it; then a second after the
// newest, or the clock of the newest stored analytics run when later. A
// live source's event stamped in the future (a node's skewed clock) moves
// nothing, nor does a stored run alone: on a real cluster it is the wall
// clock.
func TestAnalyticsReadDataClock(t *testing.T) {
	wall := time.Date(2026, 11, 23, 12, 19, 42, 0, time.UTC)
	type event struct {
		source  schemas.JobSource
		cluster string
		at      time.Time
	}
	for _, tc := range []struct {
		name   string
		events []event
		run    time.Time // version of a stored analytics run; zero for none
		want   time.Time
	}{
		{"no data", nil, time.Time{}, wall},
		{"slurm ahead", []event{{schemas.SourceSlurm, "c", wall.Add(48 * time.Hour)}}, time.Time{}, wall},
		{"slurm ahead, run ahead", []event{{schemas.SourceSlurm, "c", wall.Add(48 * time.Hour)}}, wall.Add(time.Hour), wall},
		{"sim behind", []event{{schemas.SourceSim, "s", wall.Add(-time.Hour)}}, time.Time{}, wall},
		{"sim ahead", []event{{schemas.SourceSim, "s", wall.Add(5*time.Hour + 1500*time.Millisecond)}}, time.Time{}, wall.Add(5*time.Hour + 2*time.Second)},
		{"trace ahead", []event{{schemas.SourceTrace, "t", wall.Add(time.Hour)}}, time.Time{}, wall.Add(time.Hour + time.Second)},
		// the newest of every cluster: one window holds them all
		{"two sims", []event{{schemas.SourceSim, "s1", wall.Add(time.Hour)}, {schemas.SourceSim, "s2", wall.Add(3 * time.Hour)}}, time.Time{}, wall.Add(3*time.Hour + time.Second)},
		{"sim ahead, run after it", []event{{schemas.SourceSim, "s", wall.Add(time.Hour)}}, wall.Add(2*time.Hour + 300*time.Millisecond), wall.Add(2*time.Hour + 300*time.Millisecond)},
		{"sim ahead, run before it", []event{{schemas.SourceSim, "s", wall.Add(time.Hour)}}, wall.Add(30 * time.Minute), wall.Add(time.Hour + time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, conn := schematest.Database(t)
			for i, ev := range tc.events {
				e := schemas.JobEvent{Type: schemas.JobSubmit, State: schemas.StatePending, EventMillis: ev.at.UnixMilli(), JobID: fmt.Sprint(i),
					ArrayTaskID: schemas.Unknown, User: "alice", UID: schemas.Unknown, ExitCode: schemas.Unknown, Priority: schemas.Unknown,
					SubmitMillis: ev.at.UnixMilli(), TimeLimitS: schemas.Unknown, NodeCount: schemas.Unknown, CPUs: schemas.Unknown, GPUs: 1, MemReqBytes: schemas.Unknown}
				if err := ingest.InsertJobEvents(t.Context(), conn, cfg.Database, ev.cluster, ev.source, []schemas.JobEvent{e}); err != nil {
					t.Fatal(err)
				}
			}
			if !tc.run.IsZero() {
				if err := conn.Exec(t.Context(), fmt.Sprintf("INSERT INTO %s.analytics_runs (window_id, job, run_at, version) SELECT 'w', 'jobs', toDateTime(%d), %d",
					cfg.Database, tc.run.Unix(), tc.run.UnixNano())); err != nil {
					t.Fatal(err)
				}
			}
			c, err := readDataClock(t.Context(), conn, cfg.Database, func() time.Time { return wall })
			if err != nil {
				t.Fatal(err)
			}
			if got := c.now(); !got.Equal(tc.want) {
				t.Errorf("readDataClock(%s) at %s = %s; want %s", tc.name, wall.Format(time.RFC3339), got.Format(time.RFC3339Nano), tc.want.Format(time.RFC3339Nano))
			}
			var note bytes.Buffer
			c.note(&note, "cmd")
			if ahead := tc.want.After(wall); ahead != (note.Len() > 0) || strings.Count(note.String(), "\n") > 1 {
				t.Errorf("readDataClock(%s): note %q; want one line only when ahead of the wall clock", tc.name, note.String())
			}
		})
	}

	// A database whose schema was never applied holds no data ahead.
	cfg, conn := schematest.Database(t)
	if err := conn.Exec(t.Context(), "DROP TABLE "+cfg.Database+".job_events"); err != nil {
		t.Fatal(err)
	}
	c, err := readDataClock(t.Context(), conn, cfg.Database, func() time.Time { return wall })
	if err != nil || !c.now().Equal(wall) {
		t.Errorf("readDataClock(no job_events table) = %v, %v; want the wall clock %s", c, err, wall.Format(time.RFC3339))
	}
}
