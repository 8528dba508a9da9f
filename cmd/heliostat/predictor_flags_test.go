package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

// TestPredictorFlagsRefuseZero: every command that runs the live predictor
// refuses a --predictor.* flag given as 0, which its config would read as
// the default, as predictor backtest refuses its own; and caps the rolling
// accuracy window, whose buffer is allocated up front.
func TestPredictorFlagsRefuseZero(t *testing.T) {
	type row struct {
		args []string
		want string
	}
	var tests []row
	for _, cmd := range [][]string{{"predictor", "run"}, {"actuator"}, {"up"}} {
		for _, f := range []struct{ name, arg, shown, def string }{
			{"predictor.interval", "0", "0s", "15s"},
			{"predictor.retrain-interval", "0s", "0s", "10m0s"},
			{"predictor.history", "0h", "0s", "720h0m0s"},
			{"predictor.outcome-wait", "0m", "0s", "2160h0m0s"},
			{"predictor.holdout", "0", "0", "0.2"},
			{"predictor.batch", "0", "0", "10000"},
			{"predictor.accuracy-window", "0", "0", "1000"},
			{"predictor.adapt-rate", "0.0", "0", "0.02"},
		} {
			tests = append(tests, row{append(append([]string(nil), cmd...), "--"+f.name, f.arg),
				"--" + f.name + " " + f.shown + ": must be above 0 (leave the flag out for the default, " + f.def + ")"})
		}
		tests = append(tests, row{append(append([]string(nil), cmd...), "--predictor.accuracy-window", "1000001"),
			"--predictor.accuracy-window 1000001: at most 1000000"})
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

// TestBacktestBaselineCheckedFirst: a bad --baseline is refused before the
// trace is read and the backtest run (half a minute on HPC2N): here the
// trace does not exist, and the --baseline error must win.
func TestBacktestBaselineCheckedFirst(t *testing.T) {
	for _, tt := range []struct {
		baseline string
		want     string
	}{
		{"last3", `--baseline "last3": want reqtime, last1 or last2`},
		{"heliostat", `--baseline "heliostat": want reqtime, last1 or last2`},
		{"REQTIME", `--baseline "REQTIME": want reqtime, last1 or last2`},
		{"last1", "/nonexistent/trace.swf"}, // valid: the trace is read, and fails
	} {
		args := []string{"predictor", "backtest", "--trace", "/nonexistent/trace.swf", "--baseline", tt.baseline}
		err := run(context.Background(), args, func(string) string { return "" }, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("heliostat %v = %v; want an error with %q", args, err, tt.want)
		}
	}
}
