package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
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
