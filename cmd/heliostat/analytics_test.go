package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"slices"
	"strings"
	"testing"
	"time"

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
	base := []string{"analytics", "capacity", "demand_weekly", "--clickhouse.addr", cfg.Addr, "--clickhouse.database", cfg.Database,
		"--since", "2026-03-02", "--until", "2026-03-09"}
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
