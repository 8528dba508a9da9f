package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/internal/chserver"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestInterruptLongCommands runs the offline commands that take longest on
// a full trace as separate processes (as main runs them), sends SIGINT once
// they print progress, and checks that they stop, say where they stopped and
// why, and exit with 130: before, the backtest ignored Ctrl-C, ran its 45 s
// to the end and exited 0 (a command that finished anyway fails here on the
// status and the message, so the test needs no clock).
func TestInterruptLongCommands(t *testing.T) {
	skipInCHDBPass(t)
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

// slowStopEnv makes the test binary run slowStopChild instead of the tests.
const slowStopEnv = "HELIOSTAT_TEST_SLOW_STOP"

// slowStopChild watches the signals as cli does, says so, and once the
// first signal cancels its context prints the cause and then takes a
// minute to "stop", as a part stuck in its shutdown would.
func slowStopChild() {
	ctx, release := interruptContext()
	defer release()
	fmt.Println("watching")
	<-ctx.Done()
	fmt.Println("stopping:", context.Cause(ctx))
	time.Sleep(time.Minute)
	os.Exit(0)
}

// TestSecondSignalEndsAtOnce: after the first SIGINT cancels the context,
// a second one ends a process whose stop hangs, by SIGINT's default action,
// instead of being swallowed.
func TestSecondSignalEndsAtOnce(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), slowStopEnv+"=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	sc := bufio.NewScanner(stdout)
	next := func(want string) {
		t.Helper()
		if !sc.Scan() || sc.Text() != want {
			t.Fatalf("child printed %q (%v); want %q", sc.Text(), sc.Err(), want)
		}
	}
	next("watching")
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	next("stopping: interrupted (SIGINT)")
	signalled := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err = <-waited:
	case <-time.After(20 * time.Second):
		t.Fatal("child still running 20 s after a second SIGINT: the signal was swallowed")
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("child after a second SIGINT: %v; want it killed by the signal", err)
	}
	if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGINT {
		t.Errorf("child ended with %v; want killed by SIGINT", exit.ProcessState)
	}
	t.Logf("ended %v after the second SIGINT (%v)", time.Since(signalled).Round(time.Millisecond), exit.ProcessState)
}

// TestInterruptUpStarting sends SIGINT to `heliostat up` while it starts
// its ClickHouse: up stops as it does once running (exit 0), says what it
// was doing, and leaves no ClickHouse behind. Before, it printed only
// "heliostat: context canceled" and exited 130.
func TestInterruptUpStarting(t *testing.T) {
	schematest.SkipOnCHDB(t, "`heliostat up`, which starts a ClickHouse server of its own")
	if testing.Short() {
		t.Skip("starts a ClickHouse of its own")
	}
	dir := t.TempDir()
	args := []string{"up", "--data-dir", dir, "--source", "sim", "--status-interval", "0"}
	for _, f := range []string{"clickhouse.port", "kafka.port"} {
		p, err := chserver.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, "--"+f, strconv.Itoa(p))
	}
	args = append(args, "--web.listen-address", freeAddr(t), "--actuator.listen-address", freeAddr(t))
	for _, tc := range []struct {
		after string // SIGINT once a stderr line has this
		want  string // the line that says what up was doing
	}{
		{"starting embedded broker and local clickhouse", "interrupted while starting ClickHouse"},
	} {
		cmd := childCommand(args...)
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
			if strings.Contains(sc.Text(), tc.after) {
				break
			}
		}
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		out := strings.Join(lines, "\n")
		if err := cmd.Wait(); err != nil {
			t.Errorf("up interrupted after %q: %v; want exit 0, as a stop once running\n%s", tc.after, err, out)
		}
		if !strings.Contains(out, tc.want) || strings.Contains(out, "context canceled") {
			t.Errorf("up interrupted after %q logged:\n%s\nwant %q and no \"context canceled\"", tc.after, out, tc.want)
		}
		t.Logf("interrupted after %q:\n%s", tc.after, out)
		if pid := clickHousePID(dir); pid != 0 {
			t.Errorf("a ClickHouse (pid %d) still runs on %s after up stopped", pid, dir)
		}
	}
}
