package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
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
