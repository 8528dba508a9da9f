package main

import (
	"context"
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func TestRefuseZero(t *testing.T) {
	tests := []struct {
		args []string
		want string // "" for no error
	}{
		{nil, ""},
		{[]string{"--n", "3", "--d", "1s", "--f", "0.5"}, ""},
		{[]string{"--n", "0"}, "--n 0: must be above 0 (leave the flag out for the default, 8)"},
		{[]string{"--d", "0s"}, "--d 0s: must be above 0 (leave the flag out for the default, 5s)"},
		{[]string{"--f", "0"}, "--f 0: must be above 0 (leave the flag out for the default, 0.7)"},
		{[]string{"--other", "0"}, ""}, // not named
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.Int("n", 8, "")
		fs.Duration("d", 5*time.Second, "")
		fs.Float64("f", 0.7, "")
		fs.Int("other", 1, "")
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		err := refuseZero(fs, "n", "d", "f")
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("refuseZero after %v = %v; want %q", tt.args, err, tt.want)
		}
	}
}

// TestCommandFlagErrors: bad flags and stray arguments fail at once, before
// a command starts a server or reads a file, naming the flag.
func TestCommandFlagErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"up", "extra"}, `up: unexpected argument "extra"`},
		{[]string{"up", "--sim.nodes", "0"}, "--sim.nodes 0: must be above 0 (leave the flag out for the default, 8)"},
		{[]string{"up", "--collector.interval", "0s"}, "--collector.interval 0s: must be above 0"},
		{[]string{"up", "--kafka.port", "70000"}, "--kafka.port 70000: not a port"},
		{[]string{"up", "--clickhouse.port", "-1"}, "--clickhouse.port -1: not a port"},
		{[]string{"up", "--status-interval", "-1s"}, "--status-interval -1s: negative"},
		{[]string{"up", "--actuator.cluster", "prod"}, "name it with --sim.cluster"},
		{[]string{"collector", "extra"}, `collector: unexpected argument "extra"`},
		{[]string{"ingest", "extra", "--clickhouse.addr", "127.0.0.1:1"}, `ingest: unexpected argument "extra"`},
		{[]string{"ingest", "reset-partition", "--partition", "0", "--from", "0"}, "--topic is required"},
		{[]string{"ingest", "reset-partition", "--topic", "t", "--from", "0"}, "--partition is required"},
		{[]string{"ingest", "reset-partition", "--topic", "t", "--partition", "1"}, "--from is required"},
		{[]string{"ingest", "reset-partition", "--topic", "t", "--partition", "1", "--from", "0", "extra"}, `ingest reset-partition: unexpected argument "extra"`},
		{[]string{"ingest", "--ingest.log-check", "1ms", "--clickhouse.addr", "127.0.0.1:1"}, "--ingest.log-check 1ms is below 10ms"},
		{[]string{"bench", "api", "extra"}, `bench api: unexpected argument "extra"`},
		{[]string{"collector", "--collector.interval", "0s"}, "--collector.interval 0s: must be above 0"},
		{[]string{"collector", "--source", "sim", "--sim.gpus-per-node", "0"}, "--sim.gpus-per-node 0: must be above 0"},
		{[]string{"schema", "show", "extra"}, `schema show: unexpected argument "extra"`},
		{[]string{"predictor", "backtest", "--trace", "a.swf", "b.swf"}, `unexpected argument "b.swf"`},
		{[]string{"predictor", "backtest", "--trace", "a.swf", "--train-frac", "0"}, "--train-frac 0: must be above 0"},
		{[]string{"predictor", "backtest-demand", "--series", "a.csv", "--horizon", "0s"}, "--horizon 0s: must be above 0"},
		{[]string{"predictor", "backtest-demand", "--series", "a.csv", "b.csv"}, `unexpected argument "b.csv"`},
	}
	for _, tt := range tests {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := run(ctx, tt.args, func(string) string { return "" }, io.Discard, io.Discard)
		cancel()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("heliostat %v = %v; want an error with %q", tt.args, err, tt.want)
		}
	}
}

// TestUpHelpDefaults: `up -h` shows the defaults up runs with, not those of
// a deployed part.
func TestUpHelpDefaults(t *testing.T) {
	var errs strings.Builder
	_ = run(context.Background(), []string{"up", "-h"}, func(string) string { return "" }, io.Discard, &errs)
	for _, want := range []string{
		"-sim.backfill\n    \tlet a job start ahead", "(default true)\n  -sim.cluster",
		`name of the simulated cluster (env HELIOSTAT_CLUSTER) (default "local")`,
		"(default 5s)\n  -actuator.listen-address", "none when empty (default *)",
		"(default 1m0s)\n  -analytics.lookback",
		"-actuator.cluster string\n    \tnot for up",
	} {
		if !strings.Contains(errs.String(), want) {
			t.Errorf("up -h lacks %q", want)
		}
	}
}
