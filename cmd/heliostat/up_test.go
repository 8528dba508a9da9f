package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/internal/chserver"
)

// TestUp runs `heliostat up` — what `make run` starts — on a simulated
// cluster for three simulated hours at 1,200× with the actuator applying:
// jobs and GPU samples reach ClickHouse through the embedded broker, the
// live predictor trains, the actuator powers idle nodes of the simulated
// cluster down, and the whole stack stops on its own with no warning or
// error logged (a part stopped out of order logs one). Then it runs up
// again on the same data directory: the simulated clock continues where the
// first run stopped, and the actuator loads the demand history the first
// run saved.
func TestUp(t *testing.T) {
	ports := make([]int, 4)
	for i := range ports {
		p, err := chserver.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = p
	}
	dir := t.TempDir()

	// The simulated cluster submits jobs at Venus's hourly rates, which
	// between 03:00 and 08:00 are a fifth of the day's peak: started at
	// the wall clock's hour, the second run's hour could see no job at all
	// (it did, at 03:12 UTC). So the first run starts tomorrow at 10:00 UTC:
	// busy hours, and still after the wall clock, so that the second run
	// resumes from it rather than from now.
	start := time.Now().UTC().Truncate(24 * time.Hour).Add(34 * time.Hour)
	first := runUpFor(t, dir, ports, "3h", "--sim.start", start.Format(time.RFC3339))
	if got := first.simTime["sim started"]; !got.Equal(start) {
		t.Errorf("first run started its simulated clock at %s, want --sim.start %s", got, start)
	}
	for _, msg := range []string{"duration model trained", "power down applied", "sim stopped", "stopped", "no saved demand history; the demand model starts from what this run records"} {
		if first.seen[msg] == 0 {
			t.Errorf("first run: no %q in the log:\n%s", msg, first.logs)
		}
	}
	// Nine seconds of wall time is ample for every part's first pass; the
	// second, shorter run may stop before analytics' first pass ends.
	if !first.ready {
		t.Errorf("first run: /-/ready never answered 200; answers: %q", first.notReady)
	}
	if first.seen["the simulated clock resumes where the last run stopped"] != 0 {
		t.Errorf("first run resumed a clock on an empty data directory:\n%s", first.logs)
	}
	// The status line counts what ClickHouse holds.
	if first.jobs == 0 || first.samples == 0 {
		t.Errorf("last status line: %d jobs, %d GPU samples in ClickHouse; want both > 0\n%s", first.jobs, first.samples, first.stdout)
	}
	started, stopped := first.simTime["sim started"], first.simTime["sim stopped"]
	// Running jobs end a second after the last samples when the nodes
	// report at the very end.
	if got := stopped.Sub(started); got != 3*time.Hour && got != 3*time.Hour+time.Second {
		t.Errorf("first run simulated %s (%s .. %s), want 3h (or 3h1s)", got, started, stopped)
	}
	clocks, err := readSimClocks(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !clocks["local"].Equal(stopped) {
		t.Errorf("saved clock %v, want the first run's stop %s", clocks, stopped)
	}

	second := runUpFor(t, dir, ports, "1h")
	for _, msg := range []string{"the simulated clock resumes where the last run stopped", "loaded the saved demand history", "sim stopped"} {
		if second.seen[msg] == 0 {
			t.Errorf("second run: no %q in the log:\n%s", msg, second.logs)
		}
	}
	if got, want := second.simTime["sim started"], stopped.Add(time.Second); !got.Equal(want) {
		t.Errorf("second run started its simulated clock at %s, want %s (a second after the first run stopped)", got, want)
	}
	if second.jobs <= first.jobs {
		t.Errorf("second run: %d jobs in ClickHouse, first %d; want more", second.jobs, first.jobs)
	}
	if clocks, err = readSimClocks(dir); err != nil {
		t.Fatal(err)
	}
	if want := second.simTime["sim stopped"]; !clocks["local"].Equal(want) {
		t.Errorf("saved clock %v, want the second run's stop %s", clocks, want)
	}
}

// upRun is what one run of up logged and printed.
type upRun struct {
	logs, stdout  string
	seen          map[string]int       // log messages, and "power down applied"
	simTime       map[string]time.Time // sim_time of "sim started" and "sim stopped"
	jobs, samples int                  // the last status line's counts
	// ready is whether /-/ready answered 200 while up ran; notReady is
	// every other answer, once each.
	ready    bool
	notReady []string
}

// runUpFor runs up on dir's data with the simulated cluster for the given
// simulated duration, with extra flags appended, and fails t on any log
// line above INFO and on an action refused by a rate limit.
func runUpFor(t *testing.T, dir string, ports []int, duration string, extra ...string) upRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout strings.Builder
	stderr := &lockedWriter{w: &strings.Builder{}}
	// /-/ready, polled while up runs.
	probeCtx, stopProbe := context.WithCancel(ctx)
	type probeResult struct {
		ready    bool
		notReady []string
	}
	probed := make(chan probeResult, 1)
	go func() {
		var res probeResult
		client := &http.Client{Timeout: 2 * time.Second}
		for probeCtx.Err() == nil {
			if resp, err := client.Get("http://127.0.0.1:" + strconv.Itoa(ports[2]) + "/-/ready"); err == nil {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					res.ready = true
				} else if a := resp.Status + " " + string(body); !slices.Contains(res.notReady, a) {
					res.notReady = append(res.notReady, a)
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		probed <- res
	}()
	err := run(ctx, append([]string{"up", "--data-dir", dir,
		"--clickhouse.port", strconv.Itoa(ports[0]), "--kafka.port", strconv.Itoa(ports[1]),
		"--web.listen-address", "127.0.0.1:" + strconv.Itoa(ports[2]), "--actuator.listen-address", "127.0.0.1:" + strconv.Itoa(ports[3]),
		"--source", "sim", "--sim.duration", duration, "--sim.speedup", "1200",
		"--actuator.interval", "1s", "--predictor.interval", "1s", "--status-interval", "1s",
		"--actuator.apply", "--actuator.partitions", "*", "--actuator.nodes", "*",
		"--log.format", "json"}, extra...),
		func(string) string { return "" }, &stdout, stderr)
	stopProbe()
	probe := <-probed
	r := upRun{logs: stderr.String(), stdout: stdout.String(), seen: map[string]int{}, simTime: map[string]time.Time{},
		ready: probe.ready, notReady: probe.notReady}
	if err != nil {
		t.Fatalf("up: %v\n%s", err, r.logs)
	}
	// Not ready only while parts wait for their first pass: nothing fails.
	for _, a := range r.notReady {
		if strings.Contains(a, "failing for") {
			t.Errorf("/-/ready reported a failure while up ran: %s", a)
		}
	}
	t.Logf("/-/ready answered 200: %v; other answers: %q", r.ready, r.notReady)
	sc := bufio.NewScanner(strings.NewReader(r.logs))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l struct {
			Level   string    `json:"level"`
			Msg     string    `json:"msg"`
			Kind    string    `json:"kind"`
			Outcome string    `json:"outcome"`
			Err     string    `json:"err"`
			SimTime time.Time `json:"sim_time"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Errorf("log line is not JSON: %q", sc.Text())
			continue
		}
		if l.Level != "INFO" && l.Level != "DEBUG" {
			t.Errorf("%s logged: %s", l.Level, sc.Text())
		}
		r.seen[l.Msg]++
		if l.Msg == "sim started" || l.Msg == "sim stopped" {
			r.simTime[l.Msg] = l.SimTime
		}
		if l.Msg == "action" && l.Kind == "power_down" && l.Outcome == "applied" {
			r.seen["power down applied"]++
		}
		// The safety caps count simulated time, as the plans do (a cap of
		// 20 power actions an hour on the wall clock would allow 20 in
		// 1,200 simulated hours here).
		if strings.Contains(l.Err, "rate limit") {
			t.Errorf("action refused by a rate limit: %s", sc.Text())
		}
	}
	status := regexp.MustCompile(`jobs: (\d+) submitted.* · (\d+) GPU samples`)
	for _, line := range strings.Split(r.stdout, "\n") {
		if m := status.FindStringSubmatch(line); m != nil {
			r.jobs, _ = strconv.Atoi(m[1])
			r.samples, _ = strconv.Atoi(m[2])
		}
	}
	return r
}

// TestSimClockFile: the saved clock keeps each cluster's entry, never moves
// back, and a damaged file is an error that says what to do.
func TestSimClockFile(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for _, step := range []struct {
		cluster string
		at      time.Time
	}{{"a", t0}, {"b", t0.Add(time.Hour)}, {"a", t0.Add(-time.Minute)}, {"a", t0.Add(90 * time.Second)}} {
		if err := saveSimClock(dir, step.cluster, step.at); err != nil {
			t.Fatal(err)
		}
	}
	got, err := readSimClocks(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !got["a"].Equal(t0.Add(90*time.Second)) || !got["b"].Equal(t0.Add(time.Hour)) || len(got) != 2 {
		t.Errorf("clocks %v, want a at %s and b at %s", got, t0.Add(90*time.Second), t0.Add(time.Hour))
	}
	if err := os.WriteFile(filepath.Join(dir, simClockFile), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readSimClocks(dir); err == nil || !strings.Contains(err.Error(), "--sim.start") {
		t.Errorf("damaged clock file: err %v, want one that names --sim.start", err)
	}
	// A run told --sim.start saves over the damaged file.
	if err := saveSimClock(dir, "a", t0); err != nil {
		t.Fatalf("save over a damaged clock file: %v", err)
	}
	if got, err := readSimClocks(dir); err != nil || len(got) != 1 || !got["a"].Equal(t0) {
		t.Errorf("after saving over the damaged file: %v, %v; want a at %s", got, err, t0)
	}
	if got, err := readSimClocks(t.TempDir()); err != nil || len(got) != 0 {
		t.Errorf("no clock file: %v, %v; want no clocks", got, err)
	}
}
