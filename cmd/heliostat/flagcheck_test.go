package main

import (
	"context"
	"flag"
	"io"
	"os"
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
		{[]string{"bench", "api", "--clickhouse.addr", "127.0.0.1:1", "--clickhouse.protocol", "grpc"}, `bench api: --clickhouse.protocol "grpc": want native or http`},
		{[]string{"bench", "api", "--clickhouse.protocol", "http"}, "--clickhouse.protocol http needs --clickhouse.addr"},
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
		"(default 5s)\n  -actuator.kind-use-half-life", "none when empty (default *)",
		"(default 1m0s)\n  -analytics.lookback",
		"-actuator.cluster string\n    \tnot for up",
	} {
		if !strings.Contains(errs.String(), want) {
			t.Errorf("up -h lacks %q", want)
		}
	}
}

// TestRefusesNegative: up's (and the collector's) counts and durations that
// cannot be negative are refused at once, naming the flag, before anything
// is started or written in the data directory. Before, `up --synthetic.gpus
// -2` ran with no GPU and `up --retention -5h` kept everything.
func TestRefusesNegative(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"up", "--source", "synthetic", "--synthetic.gpus", "-2"}, "up: --synthetic.gpus -2: negative"},
		{[]string{"up", "--retention", "-5h"}, "up: --retention -5h0m0s: negative (0 keeps all)"},
		{[]string{"up", "--kafka.retention", "-5h"}, "up: --kafka.retention -5h0m0s: negative (0 keeps all)"},
		{[]string{"up", "--actuator.audit-retention", "-1h"}, "up: --actuator.audit-retention -1h0m0s: negative (0 keeps all)"},
		{[]string{"up", "--analytics.interval", "-1m"}, "--analytics.interval, --analytics.settle and --analytics.lookback must not be negative"},
		{[]string{"collector", "--source", "synthetic", "--synthetic.gpus", "-2"}, "collector: --synthetic.gpus -2: negative"},
	} {
		dir := t.TempDir()
		args := append([]string{}, tc.args...)
		// Should a value be taken, what starts stays in dir, on free ports.
		if tc.args[0] == "up" {
			args = append(args, "--data-dir", dir, "--clickhouse.port", "0", "--kafka.port", "0",
				"--web.listen-address", "127.0.0.1:0", "--actuator.listen-address", "127.0.0.1:0")
		} else {
			args = append(args, "--spool.dir", dir, "--kafka.brokers", "127.0.0.1:1", "--web.listen-address", "127.0.0.1:0")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := run(ctx, args, func(string) string { return "" }, io.Discard, io.Discard)
		cancel()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("heliostat %v = %v; want an error with %q", tc.args, err, tc.want)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("heliostat %v wrote %d files in its data directory before refusing", tc.args, len(entries))
		}
	}
}
