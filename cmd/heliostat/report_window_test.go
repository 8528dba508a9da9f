package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/analytics"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestReportWindowSinceOnly: --since without --until ends the window at the
// end of the day, in --analytics.timezone, that holds now, in report and in
// analytics run and capacity alike: every call of one day names the same
// window. (It ended at now, a new window at every call, in report, and at
// --since plus a day in the others.)
func TestReportWindowSinceOnly(t *testing.T) {
	utc := time.UTC
	shanghai, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		since, until string
		now          time.Time
		loc          *time.Location
		want         string // window ID, or the error's text
	}{
		{"2026-03-02", "", at("2026-03-02T10:00:00Z"), utc, "2026-03-02T00:00:00Z/2026-03-03T00:00:00Z"},
		{"2026-03-02", "", at("2026-03-02T23:59:59Z"), utc, "2026-03-02T00:00:00Z/2026-03-03T00:00:00Z"},
		{"2026-03-02", "", at("2026-03-04T00:00:00Z"), utc, "2026-03-02T00:00:00Z/2026-03-05T00:00:00Z"},
		// 04:00 on 3 March in Shanghai (UTC+8): that day ends at 16:00 UTC.
		{"2026-03-02T06:00:00Z", "", at("2026-03-02T20:00:00Z"), shanghai, "2026-03-02T06:00:00Z/2026-03-03T16:00:00Z"},
		{"2026-03-02", "2026-03-09", at("2026-03-04T00:00:00Z"), utc, "2026-03-02T00:00:00Z/2026-03-09T00:00:00Z"},
		{"2026-03-05", "", at("2026-03-02T10:00:00Z"), utc, "not before the end of today"},
	} {
		var f reportFlags
		f.since, f.until, f.analytics.TimeZone = tc.since, tc.until, tc.loc.String()
		rep := &reporter{flags: f, now: func() time.Time { return tc.now }}
		got, err := rep.window(t.Context(), nil)
		check := func(cmd string, got analytics.Window, err error) {
			if err != nil {
				if !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s --since %s --until %q at %s (%s): %v; want %s", cmd, tc.since, tc.until, tc.now.Format(time.RFC3339), tc.loc, err, tc.want)
				}
				return
			}
			if got.ID() != tc.want {
				t.Errorf("%s --since %s --until %q at %s (%s) = %s; want %s", cmd, tc.since, tc.until, tc.now.Format(time.RFC3339), tc.loc, got, tc.want)
			}
		}
		check("report", got, err)
		wf := windowFlags{since: tc.since, until: tc.until}
		got, err = wf.window(t.Context(), nil, "heliostat", tc.now, tc.loc)
		check("analytics run", got, err)
	}
}

// TestReportWindowSinceOnlyReused: the calls of one day of report --since
// share one window and its stored results, computed again when they are more
// than a minute old, as the schedule's open day window is, into the same
// partitions; analytics run --since names the same window.
func TestReportWindowSinceOnlyReused(t *testing.T) {
	cfg, conn := schematest.Database(t)
	ctx := t.Context()
	db := cfg.Database
	day := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	end := day.Add(5 * time.Hour)
	schematest.InsertJobRows(t, conn, db, "cluster, job_id, source, user, partition_name, state, submit_time, start_time, end_time, gpus, last_event, updated_at, inserted_at, version",
		[]any{"c", "1", "slurm", "alice", "gpu", "COMPLETED", day, &day, &end, uint32(4), "END", end, end, uint64(1)})
	ch := append(chFlags(cfg), "--log.level", "warn", "--json", "--since", "2026-03-02")
	counts := func() (windows, parts uint64) {
		t.Helper()
		if err := conn.QueryRow(ctx, "SELECT uniqExact(window_id) FROM "+db+".analytics_runs").Scan(&windows); err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRow(ctx, "SELECT uniqExact(partition) FROM system.parts WHERE database = ? AND table = 'analytics_summary' AND active", db).Scan(&parts); err != nil {
			t.Fatal(err)
		}
		return windows, parts
	}
	for i, c := range []struct {
		cmd        string // report or analytics run
		now        time.Time
		window     string
		recomputed bool
		windows    uint64 // windows stored after the call
	}{
		{"report", day.Add(10 * time.Hour), "2026-03-02T00:00:00Z/2026-03-03T00:00:00Z", true, 1},
		{"report", day.Add(10*time.Hour + 30*time.Second), "2026-03-02T00:00:00Z/2026-03-03T00:00:00Z", false, 1}, // computed 30 s ago: current
		{"report", day.Add(12 * time.Hour), "2026-03-02T00:00:00Z/2026-03-03T00:00:00Z", true, 1},                 // computed up to 10:00: stale
		{"analytics run", day.Add(12 * time.Hour), "2026-03-02T00:00:00Z/2026-03-03T00:00:00Z", true, 1},
		// the next day, a window to its end; analytics run computes it,
		// report reuses it
		{"analytics run", day.Add(33 * time.Hour), "2026-03-02T00:00:00Z/2026-03-04T00:00:00Z", true, 2},
		{"report", day.Add(33 * time.Hour), "2026-03-02T00:00:00Z/2026-03-04T00:00:00Z", false, 2},
	} {
		clock := func() time.Time { return c.now }
		var out, errb bytes.Buffer
		e := &env{getenv: noEnv, stdout: &out, stderr: &errb}
		var window string
		var recomputed bool
		if c.cmd == "report" {
			if err := reportAt(ctx, ch, e, clock); err != nil {
				t.Fatalf("call %d: report %v: %v\n%s", i+1, ch, err, errb.String())
			}
			var got reportResult
			if err := json.Unmarshal(out.Bytes(), &got); err != nil {
				t.Fatalf("call %d: report: %v: %q", i+1, err, out.String())
			}
			window, recomputed = got.Window, got.CharacterizeS > 0
		} else {
			if err := analyticsRunAt(ctx, ch, e, clock); err != nil {
				t.Fatalf("call %d: analytics run %v: %v\n%s", i+1, ch, err, errb.String())
			}
			var got struct{ Window string }
			if err := json.Unmarshal(out.Bytes(), &got); err != nil {
				t.Fatalf("call %d: analytics run: %v: %q", i+1, err, out.String())
			}
			window, recomputed = got.Window, true
		}
		windows, parts := counts()
		if window != c.window || recomputed != c.recomputed || windows != c.windows || parts != c.windows {
			t.Errorf("call %d: %s --since 2026-03-02 at %s: window %s, computed %v; %d windows in analytics_runs, %d partitions of analytics_summary; want %s, %v, %d, %d",
				i+1, c.cmd, c.now.Format(time.RFC3339), window, recomputed, windows, parts, c.window, c.recomputed, c.windows, c.windows)
		}
	}
}
