package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/heliostat-dev/heliostat/internal/chconn"
	"github.com/heliostat-dev/heliostat/internal/chserver"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
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
	schematest.SkipOnCHDB(t, "`heliostat up`, which starts a ClickHouse server of its own")
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

	// Starts that fail after reading the saved jobs leave them to the next
	// start. Before, they took them out of the file: the second run ended
	// them as lost (a warning, "it was killed").
	saved, err := os.ReadFile(filepath.Join(dir, simStateFile))
	if err != nil {
		t.Fatal(err)
	}
	if st, err := readSimStates(dir); err != nil || len(st["local"].Jobs) == 0 {
		t.Fatalf("the first run saved %v, %v; want jobs of cluster local", st, err)
	}
	upFails(t, dir, ports, "--actuator.token-file", "--actuator.token-file", filepath.Join(dir, "no-such-token"))
	held, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(ports[3]))
	if err != nil {
		t.Fatal(err)
	}
	upFails(t, dir, ports, "address already in use")
	held.Close()
	if after, err := os.ReadFile(filepath.Join(dir, simStateFile)); err != nil || string(after) != string(saved) {
		t.Fatalf("%s after the failed starts:\n%s (%v)\nwant as the first run saved it:\n%s", simStateFile, after, err, saved)
	}

	second := runUpFor(t, dir, ports, "1h")
	for _, msg := range []string{"the simulated clock resumes where the last run stopped", "loaded the saved demand history", "sim stopped",
		"the simulated cluster continues the jobs the last run left"} {
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
		// apiMetrics is the advisory API's answer to /metrics.
		apiMetrics string
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
			if res.apiMetrics == "" {
				if resp, err := client.Get("http://127.0.0.1:" + strconv.Itoa(ports[3]) + "/metrics"); err == nil {
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					res.apiMetrics = resp.Status + " " + string(body)
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
	// One registry, served once: the API's port names where (a Prometheus
	// scraping both counted every series twice).
	if want := "127.0.0.1:" + strconv.Itoa(ports[2]) + "/metrics"; !strings.HasPrefix(probe.apiMetrics, "404") || !strings.Contains(probe.apiMetrics, want) {
		t.Errorf("the advisory API's /metrics answered %q; want 404 naming %s", probe.apiMetrics, want)
	}
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

// upFails runs up on dir's data with the simulated cluster, with extra
// flags appended, and fails t unless it fails naming want. Its metrics
// listen on a port of their own: a start that fails does not close its
// metrics listener (the process exits).
func upFails(t *testing.T, dir string, ports []int, want string, extra ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	webPort, err := chserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	err = run(ctx, append([]string{"up", "--data-dir", dir,
		"--clickhouse.port", strconv.Itoa(ports[0]), "--kafka.port", strconv.Itoa(ports[1]),
		"--web.listen-address", "127.0.0.1:" + strconv.Itoa(webPort), "--actuator.listen-address", "127.0.0.1:" + strconv.Itoa(ports[3]),
		"--source", "sim", "--sim.duration", "1h", "--sim.speedup", "1200", "--log.format", "json"}, extra...),
		noEnv, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("up %q = %v; want an error naming %s\n%s", extra, err, want, stderr.String())
	}
	t.Logf("up %q: %v", extra, err)
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

// TestUpListensOnLoopback: up serves its report, metrics and advisory API
// (user names, jobs, actions; no token by default) on 127.0.0.1 unless told
// otherwise, as its broker and ClickHouse are; the deployed parts keep
// listening on every interface. Before, `up -h` showed ":9400" and ":9403".
func TestUpListensOnLoopback(t *testing.T) {
	for _, tc := range []struct {
		cmd  []string
		flag string
		want string
	}{
		{[]string{"up"}, "web.listen-address", "127.0.0.1:9400"},
		{[]string{"up"}, "actuator.listen-address", "127.0.0.1:9403"},
		{[]string{"collector"}, "web.listen-address", ":9400"},
		{[]string{"actuator"}, "actuator.listen-address", ":9403"},
	} {
		var out, errb strings.Builder
		if err := run(context.Background(), append(tc.cmd, "-h"), noEnv, &out, &errb); err != nil && !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("%s -h: %v", tc.cmd, err)
		}
		re := regexp.MustCompile(`(?m)^  -` + regexp.QuoteMeta(tc.flag) + ` string\n(?:\s+\t.*\n)*?\s+\t.*\(default "([^"]*)"\)`)
		m := re.FindStringSubmatch(errb.String())
		if m == nil {
			t.Errorf("%s -h: no default for -%s in:\n%s", tc.cmd, tc.flag, errb.String())
			continue
		}
		if m[1] != tc.want {
			t.Errorf("%s -h: -%s default %q; want %q", tc.cmd, tc.flag, m[1], tc.want)
		}
	}
}

// clickHousePID returns the pid of the clickhouse-server that runs on up's
// data directory dir, or 0.
func clickHousePID(dir string) int {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if strings.Contains(string(b), "--path="+filepath.Join(dir, "clickhouse")+"/data/") {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			return pid
		}
	}
	return 0
}

// upProcess is `heliostat up` running in this process on the simulated
// cluster, logging JSON.
type upProcess struct {
	dir            string
	ports          []int // clickhouse, kafka, web, actuator
	stdout, stderr *lockedWriter
	stop           context.CancelFunc
	done           chan error
}

// startUp starts up on a new data directory with the simulated cluster at
// 1,200× for ten simulated days (12 minutes, longer than any test here
// waits), with extra flags appended.
func startUp(t *testing.T, extra ...string) *upProcess {
	t.Helper()
	u := &upProcess{dir: t.TempDir(), ports: make([]int, 4), stdout: &lockedWriter{w: &strings.Builder{}},
		stderr: &lockedWriter{w: &strings.Builder{}}, done: make(chan error, 1)}
	for i := range u.ports {
		p, err := chserver.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		u.ports[i] = p
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	u.stop = cancel
	args := append([]string{"up", "--data-dir", u.dir,
		"--clickhouse.port", strconv.Itoa(u.ports[0]), "--kafka.port", strconv.Itoa(u.ports[1]),
		"--web.listen-address", "127.0.0.1:" + strconv.Itoa(u.ports[2]), "--actuator.listen-address", "127.0.0.1:" + strconv.Itoa(u.ports[3]),
		"--source", "sim", "--sim.duration", "240h", "--sim.speedup", "1200", "--status-interval", "1s",
		"--log.format", "json"}, extra...)
	go func() { u.done <- run(ctx, args, noEnv, u.stdout, u.stderr) }()
	t.Cleanup(func() {
		cancel()
		<-u.done
	})
	return u
}

// upLog is one line of up's JSON log.
type upLog struct {
	Level  string `json:"level"`
	Msg    string `json:"msg"`
	Status string `json:"status"`
	Log    string `json:"log"`
	PID    int    `json:"pid"`
	Err    string `json:"err"`
}

// waitFor polls up's log and stdout until f says it saw what it waits
// for, and fails t when up exits first or after timeout.
func (u *upProcess) waitFor(t *testing.T, what string, timeout time.Duration, f func(logs []upLog, stdout string) bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); ; time.Sleep(200 * time.Millisecond) {
		var logs []upLog
		for _, line := range strings.Split(u.stderr.String(), "\n") {
			var l upLog
			if json.Unmarshal([]byte(line), &l) == nil {
				logs = append(logs, l)
			}
		}
		if f(logs, u.stdout.String()) {
			return
		}
		select {
		case err := <-u.done:
			u.done <- err
			t.Fatalf("up exited (%v) while the test waited for %s\n%s", err, what, u.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %s:\n%s\nstdout:\n%s", what, timeout, u.stderr.String(), u.stdout.String())
		}
	}
}

// lastSamples returns the GPU samples of the last status line in stdout,
// and how many status lines there were.
func lastSamples(stdout string) (samples, lines int) {
	status := regexp.MustCompile(`jobs: \d+ submitted.* · (\d+) GPU samples`)
	for _, line := range strings.Split(stdout, "\n") {
		if m := status.FindStringSubmatch(line); m != nil {
			samples, _ = strconv.Atoi(m[1])
			lines++
		}
	}
	return samples, lines
}

// TestUpRestartsClickHouse kills up's ClickHouse with SIGKILL while up
// runs: up logs an error naming the exit status and where ClickHouse's log
// is, starts it again on the same data, and ingest goes on (the status
// line counts more samples than before the kill). Before, nothing said so,
// and the parts logged "connection refused" until up was stopped.
func TestUpRestartsClickHouse(t *testing.T) {
	schematest.SkipOnCHDB(t, "`heliostat up`, which starts a ClickHouse server of its own")
	if testing.Short() {
		t.Skip("runs heliostat up")
	}
	u := startUp(t)
	var before int
	u.waitFor(t, "a status line with GPU samples", 2*time.Minute, func(_ []upLog, stdout string) bool {
		before, _ = lastSamples(stdout)
		return before > 0
	})
	pid := clickHousePID(u.dir)
	if pid == 0 {
		t.Fatalf("no clickhouse-server runs on %s", u.dir)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	logDir := filepath.Join(u.dir, "clickhouse", "log")
	u.waitFor(t, "error log of the ClickHouse exit", time.Minute, func(logs []upLog, _ string) bool {
		for _, l := range logs {
			if l.Level == "ERROR" && strings.Contains(l.Msg, "clickhouse server exited") {
				t.Logf("logged: level %s msg %q status %q pid %d log %s", l.Level, l.Msg, l.Status, l.PID, l.Log)
				if l.Status != "signal: killed" || !strings.HasPrefix(l.Log, logDir) || l.PID != pid {
					t.Errorf("exit logged with status %q, log %q, pid %d; want \"signal: killed\", a file in %s, pid %d", l.Status, l.Log, l.PID, logDir, pid)
				}
				return true
			}
		}
		return false
	})
	u.waitFor(t, "a restarted ClickHouse", time.Minute, func(logs []upLog, _ string) bool {
		for _, l := range logs {
			if l.Msg == "clickhouse server restarted" {
				return l.PID != 0 && l.PID != pid && clickHousePID(u.dir) == l.PID
			}
		}
		return false
	})
	if n, err := metricValue("http://127.0.0.1:"+strconv.Itoa(u.ports[2])+"/metrics", "heliostat_up_clickhouse_exits_total"); err != nil || n != 1 {
		t.Errorf("heliostat_up_clickhouse_exits_total = %v (%v); want 1", n, err)
	}
	u.waitFor(t, "a status line with more GPU samples than before the kill", time.Minute, func(_ []upLog, stdout string) bool {
		n, _ := lastSamples(stdout)
		return n > before
	})
	u.stop()
	if err := <-u.done; err != nil {
		t.Errorf("up stopped with %v after its ClickHouse was restarted", err)
	}
	u.done <- nil
}

// TestUpTrims: up's embedded topics keep 7 days (kfake, like Kafka, trims
// only topics with a retention), and the raw samples' retention runs on the
// simulated clock, which runs ahead of the wall clock: a day of samples
// older than --retention in simulated time is dropped, though the wall
// clock has not reached it. Before, the topics had no retention and the
// sample partitions were compared with the wall clock.
func TestUpTrims(t *testing.T) {
	schematest.SkipOnCHDB(t, "`heliostat up`, which starts a ClickHouse server of its own")
	if testing.Short() {
		t.Skip("runs heliostat up")
	}
	start := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, 60).Add(10 * time.Hour)
	u := startUp(t, "--sim.start", start.Format(time.RFC3339), "--retention", "720h", "--analytics.interval", "2s")
	u.waitFor(t, "the start banner", 2*time.Minute, func(_ []upLog, stdout string) bool {
		return strings.Contains(stdout, "heliostat is up")
	})
	u.refusesSecond(t)

	// The topics up created.
	client := &kafka.Client{Addr: kafka.TCP("127.0.0.1:" + strconv.Itoa(u.ports[1])), Timeout: 10 * time.Second}
	var resources []kafka.DescribeConfigRequestResource
	topics := append(schemas.DataTopics(), schemas.TopicActions)
	for _, topic := range topics {
		resources = append(resources, kafka.DescribeConfigRequestResource{ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, ConfigNames: []string{"retention.ms"}})
	}
	resp, err := client.DescribeConfigs(context.Background(), &kafka.DescribeConfigsRequest{Resources: resources})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range resp.Resources {
		for _, c := range r.ConfigEntries {
			// 1: DYNAMIC_TOPIC_CONFIG, set on the topic; kfake reports
			// its defaults with IsDefault false.
			if c.ConfigName == "retention.ms" && c.ConfigSource == 1 {
				got[r.ResourceName] = c.ConfigValue
			}
		}
	}
	for _, topic := range topics {
		if got[topic] != "604800000" {
			t.Errorf("topic %s: retention.ms %q; want 604800000 (7 days) set on the topic", topic, got[topic])
		}
	}

	// A day of samples 40 simulated days old: 20 days ahead of the wall
	// clock.
	ch := chconn.Config{Addr: "127.0.0.1:" + strconv.Itoa(u.ports[0]), Database: "heliostat"}
	conn, err := ch.Open(context.Background(), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	old := start.AddDate(0, 0, -40)
	// Partition 999 is no partition of gpu.samples: the ledger row the
	// insert adds is never asked about.
	ictx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := conn.Exec(ictx, "INSERT INTO heliostat.gpu_samples (ts, cluster, host, gpu_uuid, kafka_partition, kafka_offset) SELECT ?, 'local', 'seeded', 'GPU-seeded', 999, 1", old); err != nil {
		t.Fatal(err)
	}
	partition := old.Format("20060102")
	u.waitFor(t, "partition "+partition+" of gpu_samples dropped", time.Minute, func(_ []upLog, _ string) bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var n uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM system.parts WHERE database = 'heliostat' AND table = 'gpu_samples' AND active AND partition = ?", partition).Scan(&n); err != nil {
			t.Logf("partitions of gpu_samples: %v", err)
			return false
		}
		return n == 0
	})

	// The analytics take the simulated cluster's and VCs' capacities from
	// its layout (--sim.vcs vc1:4,vc2:4 of 8-GPU nodes). Before, a VC's
	// was the most GPUs its jobs held at once (source peak: 9 and 11 GPUs).
	type capacity struct {
		vc, source string
		gpus       uint32
	}
	var caps []capacity
	u.waitFor(t, "analytics capacities of the simulated VCs", time.Minute, func(_ []upLog, _ string) bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rows, err := conn.Query(ctx, "SELECT vc, source, gpus FROM heliostat.analytics_capacity WHERE cluster = 'local' ORDER BY window_id, vc")
		if err != nil {
			t.Logf("analytics capacities: %v", err)
			return false
		}
		defer rows.Close()
		caps = caps[:0]
		for rows.Next() {
			var c capacity
			if err := rows.Scan(&c.vc, &c.source, &c.gpus); err != nil {
				t.Fatal(err)
			}
			caps = append(caps, c)
		}
		return slices.ContainsFunc(caps, func(c capacity) bool { return c.vc != "" })
	})
	for _, c := range caps {
		want := uint32(32) // a VC's 4 nodes × 8 GPUs
		if c.vc == "" {
			want = 64 // the cluster's
		}
		if c.source != "config" || c.gpus != want {
			t.Errorf("analytics capacity of VC %q: %d GPUs (%s); want %d (config)", c.vc, c.gpus, c.source, want)
		}
	}
	u.stop()
	if err := <-u.done; err != nil {
		t.Errorf("up: %v", err)
	}
	u.done <- nil
}

// refusesSecond runs a second up on u's data directory and ports, as
// `make run` run twice does: it must stop at once, naming the data
// directory, before it touches anything of the running up's. Before, it
// took the running up's ClickHouse for its own ("local clickhouse
// started"), opened a second broker on its kafka directory, rewriting its
// files, and failed only at the spool's lock.
func (u *upProcess) refusesSecond(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr strings.Builder
	begun := time.Now()
	err := run(ctx, []string{"up", "--data-dir", u.dir,
		"--clickhouse.port", strconv.Itoa(u.ports[0]), "--kafka.port", strconv.Itoa(u.ports[1]),
		"--web.listen-address", "127.0.0.1:" + strconv.Itoa(u.ports[2]), "--actuator.listen-address", "127.0.0.1:" + strconv.Itoa(u.ports[3]),
		"--source", "sim", "--sim.duration", "1h", "--sim.speedup", "1200", "--log.format", "json"}, noEnv, &stdout, &stderr)
	t.Logf("second up on %s: %v after %s", u.dir, err, time.Since(begun).Round(time.Millisecond))
	if err == nil || !strings.Contains(err.Error(), u.dir) || !strings.Contains(err.Error(), "another heliostat up") || !strings.Contains(err.Error(), "--data-dir") {
		t.Errorf("second up on the same data directory = %v; want an error naming %s, another heliostat up and --data-dir", err, u.dir)
	}
	if logs := stderr.String(); strings.Contains(logs, "clickhouse") {
		t.Errorf("second up on the same data directory started something:\n%s", logs)
	}
}
