package main

import (
	"bufio"
	"context"
	"encoding/json"
	"regexp"
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
// error logged (a part stopped out of order logs one).
func TestUp(t *testing.T) {
	ports := make([]int, 4)
	for i := range ports {
		p, err := chserver.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = p
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout strings.Builder
	stderr := &lockedWriter{w: &strings.Builder{}}
	err := run(ctx, []string{"up", "--data-dir", t.TempDir(),
		"--clickhouse.port", strconv.Itoa(ports[0]), "--kafka.port", strconv.Itoa(ports[1]),
		"--web.listen-address", "127.0.0.1:" + strconv.Itoa(ports[2]), "--actuator.listen-address", "127.0.0.1:" + strconv.Itoa(ports[3]),
		"--source", "sim", "--sim.duration", "3h", "--sim.speedup", "1200",
		"--actuator.interval", "1s", "--predictor.interval", "1s", "--status-interval", "1s",
		"--actuator.apply", "--actuator.partitions", "*", "--actuator.nodes", "*",
		"--log.format", "json"},
		func(string) string { return "" }, &stdout, stderr)
	logs := stderr.String()
	if err != nil {
		t.Fatalf("up: %v\n%s", err, logs)
	}

	seen := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l struct {
			Level   string `json:"level"`
			Msg     string `json:"msg"`
			Kind    string `json:"kind"`
			Outcome string `json:"outcome"`
			Err     string `json:"err"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Errorf("log line is not JSON: %q", sc.Text())
			continue
		}
		if l.Level != "INFO" && l.Level != "DEBUG" {
			t.Errorf("%s logged: %s", l.Level, sc.Text())
		}
		seen[l.Msg]++
		if l.Msg == "action" && l.Kind == "power_down" && l.Outcome == "applied" {
			seen["power down applied"]++
		}
		// The safety caps count simulated time, as the plans do (a cap of
		// 20 power actions an hour on the wall clock would allow 20 in
		// 1,200 simulated hours here).
		if strings.Contains(l.Err, "rate limit") {
			t.Errorf("action refused by a rate limit: %s", sc.Text())
		}
	}
	for _, msg := range []string{"duration model trained", "power down applied", "sim stopped", "stopped"} {
		if seen[msg] == 0 {
			t.Errorf("no %q in the log:\n%s", msg, logs)
		}
	}

	// The status line counts what ClickHouse holds.
	status := regexp.MustCompile(`jobs: (\d+) submitted.* · (\d+) GPU samples`)
	var jobs, samples int
	for _, line := range strings.Split(stdout.String(), "\n") {
		if m := status.FindStringSubmatch(line); m != nil {
			jobs, _ = strconv.Atoi(m[1])
			samples, _ = strconv.Atoi(m[2])
		}
	}
	if jobs == 0 || samples == 0 {
		t.Errorf("last status line: %d jobs, %d GPU samples in ClickHouse; want both > 0\n%s", jobs, samples, stdout.String())
	}
}
