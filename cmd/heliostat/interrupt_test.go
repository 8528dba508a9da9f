package main

import (
	"bufio"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestInterruptLongCommands runs the offline commands that take longest on
// a full trace as separate processes (as main runs them), sends SIGINT once
// they print progress, and checks that they stop, say where they stopped and
// why, and exit with 130: before, the backtest ignored Ctrl-C, ran its 45 s
// to the end and exited 0 (a command that finished anyway fails here on the
// status and the message, so the test needs no clock).
func TestInterruptLongCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("reads the HPC2N trace; skipped with -short")
	}
	hpc2n := sharedData(t, "swf/HPC2N-2002-2.2-cln.swf.gz")
	philly := sharedData(t, "philly/philly_node_sequence.csv")
	for _, tc := range []struct {
		name     string
		args     []string
		progress string // a progress line starts with this
		stopped  string
	}{
		{"predictor backtest", []string{"predictor", "backtest", "--trace", hpc2n, "--progress-interval", "20ms"},
			"predictor backtest: ", "duration: backtest stopped after "},
		{"sim", []string{"sim", "--trace", hpc2n, "--policy", "qssf", "--progress-interval", "20ms"},
			"sim: qssf: ", "replay: qssf stopped after "},
		// At 1-minute steps the demand backtest trains 66 models (over a minute).
		{"predictor backtest-demand", []string{"predictor", "backtest-demand", "--series", philly, "--test-from", "2017-10-10", "--demand.step", "1m", "--progress-interval", "20ms"},
			"predictor backtest-demand: ", "demand: backtest stopped after "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := childCommand(tc.args...)
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill() })
			var lines []string
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				lines = append(lines, sc.Text())
				if strings.HasPrefix(sc.Text(), tc.progress) {
					break
				}
			}
			if len(lines) == 0 || !strings.HasPrefix(lines[len(lines)-1], tc.progress) {
				t.Fatalf("no progress line %q on stderr:\n%s", tc.progress, strings.Join(lines, "\n"))
			}
			signalled := time.Now()
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			for sc.Scan() {
				lines = append(lines, sc.Text())
			}
			err = cmd.Wait()
			took := time.Since(signalled)
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 130 {
				t.Errorf("exit after SIGINT: %v; want status 130", err)
			}
			last := lines[len(lines)-1]
			if !strings.Contains(last, tc.stopped) || !strings.HasSuffix(last, "interrupted (SIGINT)") {
				t.Errorf("last line %q; want %q ... interrupted (SIGINT)", last, tc.stopped)
			}
			t.Logf("stopped %v after SIGINT: %s", took.Round(time.Millisecond), last)
		})
	}
}
