package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/heliostat-dev/heliostat/internal/buildinfo"
)

// TestSubcommandUsage: a command with subcommands lists them on stdout and
// succeeds when asked for help, and fails naming them when called without one
// (or with one it does not have).
func TestSubcommandUsage(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr bool
		want    []string // in stdout, or in the error
	}{
		{[]string{"predictor", "-h"}, false, []string{"heliostat predictor backtest --trace FILE", "heliostat predictor backtest-demand", "heliostat predictor run", "<subcommand> -h"}},
		{[]string{"schema", "--help"}, false, []string{"heliostat schema apply", "heliostat schema show"}},
		{[]string{"bench", "help"}, false, []string{"heliostat bench ingest", "heliostat bench api"}},
		{[]string{"predictor"}, true, []string{"predictor: want `predictor backtest --trace FILE` (job durations) or", "`predictor run`"}},
		{[]string{"schema", "drop"}, true, []string{"schema: want `schema apply`", "`schema show` (print the DDL)"}},
		{[]string{"bench", "disk"}, true, []string{"bench: want `bench ingest [--rows N] [--json]`", "`bench api"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			err := run(context.Background(), tt.args, func(string) string { return "" }, &out, &errb)
			got := out.String()
			if tt.wantErr {
				if err == nil {
					t.Fatalf("no error; stdout %q", got)
				}
				got = err.Error()
			} else if err != nil {
				t.Fatalf("error %v", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("%q lacks %q", got, w)
				}
			}
		})
	}
}

// TestVersion: `heliostat version` and every part's heliostat_build_info
// name the same version.
func TestVersion(t *testing.T) {
	want := buildinfo.Version()
	var out bytes.Buffer
	if err := run(context.Background(), []string{"version"}, noEnv, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "heliostat "+want+" "+runtime.Version()+"\n" {
		t.Errorf("heliostat version printed %q; want version %q", got, want)
	}
	reg, srv, err := serveMetrics(webFlags{listen: "127.0.0.1:0"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv.SetReady(true)
	exp := "# HELP heliostat_build_info Always 1; the labels are the heliostat version and the Go version the binary was built with.\n" +
		"# TYPE heliostat_build_info gauge\n" +
		"heliostat_build_info{goversion=\"" + runtime.Version() + "\",version=\"" + want + "\"} 1\n" +
		"# HELP heliostat_ready 1 while the component's readiness probe (/-/ready, the actuator's /readyz) answers 200, 0 while it answers 503; the probe's body says why.\n" +
		"# TYPE heliostat_ready gauge\n" +
		"heliostat_ready 1\n"
	if err := testutil.GatherAndCompare(reg, strings.NewReader(exp), "heliostat_build_info", "heliostat_ready"); err != nil {
		t.Error(err)
	}
	_ = srv.Run(canceled())
}

// canceled returns a context that is already done.
func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}
