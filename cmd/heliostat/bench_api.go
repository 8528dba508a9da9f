package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/actuator/adapter"
	"github.com/heliostat-dev/heliostat/actuator/api"
	"github.com/heliostat-dev/heliostat/actuator/audit"
	"github.com/heliostat-dev/heliostat/actuator/loop"
	"github.com/heliostat-dev/heliostat/actuator/simadapter"
	"github.com/heliostat-dev/heliostat/collector/sim"
	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/internal/chconn"
	"github.com/heliostat-dev/heliostat/internal/chserver"
	"github.com/heliostat-dev/heliostat/predictor/live"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/migrate"
)

// benchAPIResult is what `bench api --json` prints.
type benchAPIResult struct {
	Rate         float64            `json:"rate"`          // requests/s asked for
	AchievedRate float64            `json:"achieved_rate"` // requests answered per second of the run
	Requests     int                `json:"requests"`
	Errors       int                `json:"errors"` // transport errors and non-2xx answers
	DurationS    float64            `json:"duration_s"`
	P50Ms        float64            `json:"p50_ms"`
	P90Ms        float64            `json:"p90_ms"`
	P99Ms        float64            `json:"p99_ms"`
	MaxMs        float64            `json:"max_ms"`
	P99MsByRoute map[string]float64 `json:"p99_ms_by_route"`
	Pending      int                `json:"pending_jobs"`  // the queue the API ranks against
	HistoryJobs  int                `json:"history_jobs"`  // ended jobs the duration model learned from
	ModelVersion uint64             `json:"model_version"` // 0: no model (time-limit fallback)
	Cores        int                `json:"cores"`         // GOMAXPROCS: server and load generator share the machine's cores
	Conns        int                `json:"conns"`         // keep-alive connections of the load generator
	WarmupS      float64            `json:"warmup_s"`      // load sent before the measured run, not counted
	LoadProcess  string             `json:"load_process"`  // "child": the load generator ran as a separate process; "in-process"
	LoadProcs    int                `json:"load_procs"`    // GOMAXPROCS of the load generator
	Passes       int                `json:"passes"`        // control-loop passes run during the load (--pass-every)
	// CPUStealPct is the share of the machine's CPU time its hypervisor
	// gave to others during the load (warm-up included), from /proc/stat;
	// absent where there is none. On the 2-core VM of docs/BENCHMARKS.md,
	// runs with about 17 % steal had 2–3× the p99 of runs under 10 %.
	CPUStealPct *float64 `json:"cpu_steal_pct,omitempty"`
	Mix         string   `json:"mix"`           // share of requests per route
	Latency     string   `json:"latency_basis"` // what a latency measures
}

// runBenchAPI is `heliostat bench api`: the advisory API in-process on
// loopback, over realistic state — a duration model trained on a week of
// synthetic Helios-like jobs in ClickHouse, a simulated cluster's pending
// queue ranked by a control-loop pass, its power plans and audited actions —
// under an open-loop load of --rate requests/s for --duration.
//
// The load generator runs as a child process (this binary with --target), so
// that its allocations, garbage collection and goroutines do not share the
// server's runtime; both still share the machine's cores. With --target the
// command is only that load generator, against any running API.
func runBenchAPI(ctx context.Context, args []string, e *env) error {
	fs := newFlagSet("bench api", e)
	rate := fs.Float64("rate", 5000, "requests per second, sent on a fixed schedule whatever the answers (open loop)")
	dur := fs.Duration("duration", 10*time.Second, "how long to send")
	asJSON := fs.Bool("json", false, "print one JSON object on stdout")
	nodes := fs.Int("nodes", 64, "nodes of the simulated cluster whose queue is ranked (8 GPUs each, two VCs)")
	load := fs.Float64("load", 8, "submission rate of the simulated cluster, in multiples of the rate that offers 60% of its GPU time (above ~2 a queue builds up)")
	chAddr := fs.String("clickhouse.addr", "", "use this ClickHouse (host:port) instead of starting a local one")
	chProtocol := fs.String("clickhouse.protocol", "native", "how to talk to --clickhouse.addr: native (its TCP port) or http (its HTTP port; needs a ClickHouse newer than 18.16)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the load phase to this file")
	traceFile := fs.String("trace", "", "write a runtime execution trace of the load phase to this file (go tool trace)")
	samplesFile := fs.String("samples", "", "write every request as a CSV line (scheduled send in ms from the start, route, latency ms, ok, scheduled send in Unix ms, ms from the scheduled to the actual send) to this file")
	conns := fs.Int("conns", 64, "keep-alive connections the load generator sends on (requests due while all are busy wait, and that wait counts in their latency)")
	warmup := fs.Duration("warmup", time.Second, "send load at --rate for this long before the measured run (not counted)")
	inProcess := fs.Bool("load-in-process", false, "run the load generator inside the server's process instead of as a child process")
	loadProfile := fs.String("load-cpuprofile", "", "write a CPU profile of the load generator (child process) to this file")
	passEvery := fs.Duration("pass-every", 0, "during the load, advance the simulated cluster a minute and run a control-loop pass (dry run, audited) this often, as a live actuator does (0: none)")
	target := fs.String("target", "", "only generate load, against the API at this URL (e.g. http://127.0.0.1:9403), and print its figures")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench api: unexpected argument %q", fs.Arg(0))
	}
	if *rate <= 0 || *dur <= 0 || *nodes < 2 || *load <= 0 || *conns < 1 || *warmup < 0 || *passEvery < 0 {
		return fmt.Errorf("bench api: --rate, --duration, --load and --conns must be positive, --warmup and --pass-every not negative and --nodes at least 2")
	}
	lc := loadConfig{rate: *rate, dur: *dur, warmup: *warmup, conns: *conns}
	if *target != "" {
		return runLoadOnly(ctx, e, *target, lc, *asJSON, *samplesFile, *cpuProfile)
	}
	if *chProtocol != "native" && *chProtocol != "http" {
		return fmt.Errorf("bench api: --clickhouse.protocol %q: want native or http", *chProtocol)
	}
	if *chProtocol != "native" && *chAddr == "" {
		return fmt.Errorf("bench api: --clickhouse.protocol %s needs --clickhouse.addr (the local ClickHouse it starts is reached natively)", *chProtocol)
	}
	logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ch := chconn.Config{Addr: *chAddr, Database: "heliostat_bench_api", Protocol: *chProtocol, Compression: "none"}
	if *chAddr == "" {
		dir, err := scratchDir(e.stderr, os.TempDir(), "heliostat-bench-api")
		if err != nil {
			return fmt.Errorf("bench api: %w", err)
		}
		defer os.RemoveAll(dir)
		fmt.Fprintln(e.stderr, "starting a local ClickHouse in", dir)
		srv, err := chserver.Start(ctx, chserver.Config{Dir: dir, Install: true, NotInstalledHint: "or point --clickhouse.addr at an existing server"}, logger)
		if err != nil {
			return err
		}
		defer srv.Stop()
		ch.Addr = srv.Addr()
	}
	conn, err := ch.Open(ctx, e.getenv)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ch.Database); err != nil {
		return err
	}
	if _, err := migrate.Apply(ctx, conn, ch.Database, logger); err != nil {
		return err
	}
	defer func() { _ = conn.Exec(context.WithoutCancel(ctx), "DROP DATABASE IF EXISTS "+ch.Database) }()

	// A week of ended jobs for the model, from the simulator's generator.
	t0 := benchStart(time.Now())
	vcs := fmt.Sprintf("vc1:%d,vc2:%d", *nodes/2, *nodes-*nodes/2)
	vcList, _ := sim.ParseVCs(vcs)
	gen, err := sim.NewGenerator(sim.GeneratorConfig{Seed: 1, Start: t0.Add(-7 * 24 * time.Hour), VCs: vcList, GPUsPerNode: 8})
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stderr, "writing a week of job history and training the duration model")
	hist, err := benchHistory(ctx, conn, ch.Database, gen, t0)
	if err != nil {
		return err
	}
	// live.New needs a registry (it dereferences a nil one).
	reg := prometheus.NewRegistry()
	runner, err := live.New(live.Config{Database: ch.Database}, conn, logger, reg, time.Now)
	if err != nil {
		return err
	}
	if _, err := runner.Once(ctx); err != nil {
		return fmt.Errorf("bench api: train: %w", err)
	}
	var version uint64
	if m := runner.Model(); m != nil {
		version = m.Info.Version
	}

	// A loaded simulated cluster, half a day in, and two control-loop passes
	// (dry run) over it.
	s, err := sim.New(sim.Config{Cluster: "bench", Nodes: *nodes, VCs: vcs, Start: t0, Duration: 48 * time.Hour, Seed: 2,
		JobsPerHour: *load * sim.AutoJobsPerHour(vcList, 8)}, nil, nil, discardPub{}, logger, nil, time.Now)
	if err != nil {
		return err
	}
	if err := s.Advance(ctx, t0.Add(12*time.Hour)); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "simulated cluster: %+v\n", s.Stats())
	al, err := audit.New(conn, ch.Database, time.Now)
	if err != nil {
		return err
	}
	guard, err := adapter.NewGuard(adapter.GuardConfig{Partitions: []string{"*"}, Nodes: []string{"*"}}, simadapter.New(s), nil)
	if err != nil {
		return err
	}
	lp, err := loop.New(loop.Config{Cluster: "bench", PeakWindow: time.Minute}, guard, al, runner, nil, logger, reg, nil)
	if err != nil {
		return err
	}
	for i := range 2 {
		if i > 0 {
			if err := s.Advance(ctx, t0.Add(12*time.Hour+2*time.Minute)); err != nil {
				return err
			}
		}
		if _, err := lp.Once(ctx); err != nil {
			return err
		}
	}
	view := lp.View()
	srv, err := newActuatorAPI(api.Config{}, lp, runner, lp.Ready, al, strings.Repeat("t", 32), reg, logger)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = serveAPI(sctx, ln, srv, logger) }()
	base := "http://" + ln.Addr().String()

	users := make([]string, 0, len(view.Queue))
	for _, q := range view.Queue {
		users = append(users, q.User)
	}
	where := "a child process"
	if *inProcess {
		where = "this process"
	}
	fmt.Fprintf(e.stderr, "state: %d ended jobs, model v%d, %d pending jobs; sending %.0f req/s for %v (after %v of warm-up) from %s\n",
		hist, version, len(view.Queue), *rate, *dur, *warmup, where)
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	if *traceFile != "" {
		f, err := os.Create(*traceFile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := trace.Start(f); err != nil {
			return err
		}
	}
	var passes atomic.Int64
	if *passEvery > 0 {
		go func() {
			tick := time.NewTicker(*passEvery)
			defer tick.Stop()
			for {
				select {
				case <-sctx.Done():
					return
				case <-tick.C:
				}
				if err := s.Advance(sctx, s.Now().Add(time.Minute)); err != nil {
					return
				}
				if _, err := lp.Once(sctx); err == nil {
					passes.Add(1)
				} else if sctx.Err() == nil {
					logger.Warn("bench api: control-loop pass", "err", err)
				}
			}
		}()
	}
	var res benchAPIResult
	if *inProcess {
		var samples []benchSample
		res, samples, err = openLoop(ctx, ln.Addr().String(), users, lc)
		if err == nil && *samplesFile != "" {
			err = writeSamples(*samplesFile, samples)
		}
		res.LoadProcess, res.LoadProcs = "in-process", runtime.GOMAXPROCS(0)
	} else {
		res, err = loadChild(ctx, e, base, lc, *samplesFile, *loadProfile)
	}
	if *cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if *traceFile != "" {
		trace.Stop()
	}
	if err != nil {
		return err
	}
	stop() // no more passes
	res.Passes = int(passes.Load())
	res.Pending, res.HistoryJobs, res.ModelVersion, res.Cores = len(view.Queue), hist, version, runtime.GOMAXPROCS(0)
	if *asJSON {
		return json.NewEncoder(e.stdout).Encode(res)
	}
	printBenchAPI(e, res)
	return nil
}

// printBenchAPI prints res as text.
func printBenchAPI(e *env, res benchAPIResult) {
	fmt.Fprintf(e.stdout, "api: %d requests at %.0f/s asked, %.0f/s answered, %d errors; latency p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms (%d cores shared with the load generator, %s, %d connections)\n",
		res.Requests, res.Rate, res.AchievedRate, res.Errors, res.P50Ms, res.P90Ms, res.P99Ms, res.MaxMs, res.Cores, res.LoadProcess, res.Conns)
	if res.CPUStealPct != nil {
		fmt.Fprintf(e.stdout, "  CPU time taken by the hypervisor (steal) during the load: %.1f %%\n", *res.CPUStealPct)
	}
	for _, r := range slices.Sorted(func(yield func(string) bool) {
		for k := range res.P99MsByRoute {
			if !yield(k) {
				return
			}
		}
	}) {
		fmt.Fprintf(e.stdout, "  p99 %-14s %.2f ms\n", r, res.P99MsByRoute[r])
	}
}

type discardPub struct{}

func (discardPub) Publish(context.Context, string, []byte, []byte) error { return nil }

// benchHistory writes the generator's jobs of the week before t0 as ended
// jobs and returns how many.
func benchHistory(ctx context.Context, c driver.Conn, db string, gen *sim.Generator, t0 time.Time) (int, error) {
	start := t0.Add(-7 * 24 * time.Hour)
	var evs []schemas.JobEvent
	n := 0
	for {
		j, more := gen.Next()
		if !more || !start.Add(j.Submit).Before(t0) {
			break
		}
		if !start.Add(j.Submit).Add(j.Duration).Before(t0) {
			continue // still running at t0
		}
		submit := start.Add(j.Submit)
		end := submit.Add(j.Duration)
		base := schemas.JobEvent{JobID: fmt.Sprintf("h%d", n), ArrayTaskID: schemas.Unknown, Name: j.Name, User: j.User, UID: schemas.Unknown,
			Partition: j.VC, ExitCode: schemas.Unknown, Priority: schemas.Unknown, SubmitMillis: submit.UnixMilli(), TimeLimitS: schemas.Unknown,
			NodeCount: schemas.Unknown, CPUs: schemas.Unknown, GPUs: int64(j.GPUs), MemReqBytes: schemas.Unknown}
		if j.TimeLimit > 0 {
			base.TimeLimitS = int64(j.TimeLimit.Seconds())
		}
		sub, st, en := base, base, base
		sub.Type, sub.State, sub.EventMillis = schemas.JobSubmit, schemas.StatePending, submit.UnixMilli()
		st.Type, st.State, st.StartMillis, st.EventMillis = schemas.JobStart, schemas.StateRunning, submit.UnixMilli(), submit.UnixMilli()
		en = st
		en.Type, en.State, en.EndMillis, en.EventMillis, en.ExitCode = schemas.JobEnd, schemas.StateCompleted, end.UnixMilli(), end.UnixMilli(), 0
		evs = append(evs, sub, st, en)
		n++
	}
	if err := ingest.InsertJobEvents(ctx, c, db, "bench", schemas.SourceTrace, evs); err != nil {
		return 0, err
	}
	return n, nil
}

// loadConfig is the load of the open loop.
type loadConfig struct {
	rate   float64
	dur    time.Duration
	warmup time.Duration
	conns  int
}

// loadChild runs the load generator as a child process — this binary with
// --target — and returns its figures.
func loadChild(ctx context.Context, e *env, base string, lc loadConfig, samplesFile, cpuProfile string) (benchAPIResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return benchAPIResult{}, fmt.Errorf("bench api: find the load generator's binary: %w", err)
	}
	args := []string{"bench", "api", "--target", base, "--json", "--rate", strconv.FormatFloat(lc.rate, 'g', -1, 64),
		"--duration", lc.dur.String(), "--warmup", lc.warmup.String(), "--conns", strconv.Itoa(lc.conns)}
	if samplesFile != "" {
		args = append(args, "--samples", samplesFile)
	}
	if cpuProfile != "" {
		args = append(args, "--cpuprofile", cpuProfile)
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Stderr = e.stderr
	out, err := cmd.Output()
	if err != nil {
		return benchAPIResult{}, fmt.Errorf("bench api: load generator (%s %s): %w", exe, strings.Join(args, " "), err)
	}
	var res benchAPIResult
	if err := json.Unmarshal(out, &res); err != nil {
		return benchAPIResult{}, fmt.Errorf("bench api: load generator's answer: %w", err)
	}
	return res, nil
}

// runLoadOnly is `bench api --target URL`: the open loop against a running
// API, with users for /v1/predict taken from its queue.
func runLoadOnly(ctx context.Context, e *env, target string, lc loadConfig, asJSON bool, samplesFile, cpuProfile string) error {
	u, err := url.Parse(target)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return fmt.Errorf("bench api: --target %q: want http://host:port", target)
	}
	users, err := queueUsers(ctx, target)
	if err != nil {
		return err
	}
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	res, samples, err := openLoop(ctx, u.Host, users, lc)
	if cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if err != nil {
		return err
	}
	res.LoadProcess, res.Cores, res.LoadProcs = "child", runtime.GOMAXPROCS(0), runtime.GOMAXPROCS(0)
	if samplesFile != "" {
		if err := writeSamples(samplesFile, samples); err != nil {
			return err
		}
	}
	if asJSON {
		return json.NewEncoder(e.stdout).Encode(res)
	}
	printBenchAPI(e, res)
	return nil
}

// benchStart is when the benchmark's simulated cluster starts: the last
// Monday 00:00 UTC at or before now. The workload follows the hour and the
// weekday, so a start of a fixed weekday and hour gives every run the same
// history, queue and plans; and it stays within a week of the wall clock, as
// a live cluster's records would.
func benchStart(now time.Time) time.Time {
	d := now.UTC().Truncate(24 * time.Hour)
	return d.AddDate(0, 0, -(int(d.Weekday())+6)%7)
}

// queueUsers returns the users of target's pending queue (at least one).
func queueUsers(ctx context.Context, target string) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(target, "/")+"/v1/queue?limit=10000", nil)
	if err != nil {
		return nil, fmt.Errorf("bench api: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("bench api: read the queue: %w", err)
	}
	defer resp.Body.Close()
	var q api.QueueResponse
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("bench api: read the queue: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&q); err != nil {
		return nil, fmt.Errorf("bench api: read the queue: %w", err)
	}
	users := make([]string, 0, len(q.Jobs))
	for _, j := range q.Jobs {
		users = append(users, j.User)
	}
	if len(users) == 0 {
		users = []string{"u0001"}
	}
	return users, nil
}

// benchRequest is one prepared request: the bytes sent on the wire.
type benchRequest struct {
	route string
	raw   []byte
}

// benchRequests returns the mix's prepared requests and, for each of n
// sends, which one: 60% predict (1,024 different specs), 20% queue, 10%
// power plan, 10% actions.
func benchRequests(host string, users []string, n int) ([]benchRequest, []uint16) {
	rng := rand.New(rand.NewPCG(7, 11))
	get := func(route, path string) benchRequest {
		return benchRequest{route, []byte("GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\nUser-Agent: heliostat-bench\r\n\r\n")}
	}
	reqs := []benchRequest{get("queue", "/v1/queue?limit=50"), get("power-plan", "/v1/power-plan"), get("actions", "/v1/actions?limit=20")}
	const specs = 1024
	for range specs {
		body := fmt.Sprintf(`{"user": %q, "name": "job-%d", "partition": "vc%d", "gpus": %d, "time_limit_s": %d}`,
			users[rng.IntN(len(users))], rng.IntN(50), 1+rng.IntN(2), 1<<rng.IntN(4), 600*(1+rng.IntN(100)))
		reqs = append(reqs, benchRequest{"predict", []byte(fmt.Sprintf("POST /v1/predict HTTP/1.1\r\nHost: %s\r\nUser-Agent: heliostat-bench\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			host, len(body), body))})
	}
	which := make([]uint16, n)
	for i := range which {
		switch x := rng.IntN(100); {
		case x < 60:
			which[i] = uint16(3 + rng.IntN(specs))
		case x < 80:
			which[i] = 0
		case x < 90:
			which[i] = 1
		default:
			which[i] = 2
		}
	}
	return reqs, which
}

// benchConn is one keep-alive connection of the load generator.
type benchConn struct {
	addr string
	c    net.Conn
	br   *bufio.Reader
}

// do sends raw and reads the whole answer; false for a transport error or
// a status other than 2xx. A broken connection is dialled again next time.
func (bc *benchConn) do(raw []byte) bool {
	if bc.c == nil {
		c, err := net.DialTimeout("tcp", bc.addr, 5*time.Second)
		if err != nil {
			return false
		}
		bc.c = c
		if bc.br == nil {
			bc.br = bufio.NewReaderSize(c, 64<<10)
		} else {
			bc.br.Reset(c)
		}
	}
	_ = bc.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := bc.c.Write(raw); err != nil {
		bc.close()
		return false
	}
	resp, err := http.ReadResponse(bc.br, nil)
	if err != nil {
		bc.close()
		return false
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.Close {
		bc.close()
	}
	return err == nil && resp.StatusCode/100 == 2
}

func (bc *benchConn) close() {
	if bc.c != nil {
		bc.c.Close()
		bc.c = nil
	}
}

// openLoop sends requests to addr on a fixed schedule — the i-th at
// start + i/rate, whether or not earlier ones were answered — and measures
// each from its scheduled time, so that a slow server shows as latency
// rather than as a lower rate (no coordinated omission). lc.conns
// connections are opened first and kept alive; a pacer releases each
// request at its time and a free sender takes it, so when all are busy a due
// request waits for one, and that wait is part of its latency. The requests are prepared before the run.
// lc.warmup of load at the same rate runs first and is not counted.
func openLoop(ctx context.Context, addr string, users []string, lc loadConfig) (benchAPIResult, []benchSample, error) {
	interval := float64(time.Second) / lc.rate
	nWarm := int(lc.rate * lc.warmup.Seconds())
	n := int(lc.rate * lc.dur.Seconds())
	reqs, which := benchRequests(addr, users, nWarm+n)
	conns := make([]*benchConn, lc.conns)
	for i := range conns {
		conns[i] = &benchConn{addr: addr}
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			for _, bc := range conns[:i] {
				bc.close()
			}
			return benchAPIResult{}, nil, fmt.Errorf("bench api: connect to %s: %w", addr, err)
		}
		conns[i].c, conns[i].br = c, bufio.NewReaderSize(c, 64<<10)
	}
	samples := make([]benchSample, n)
	// One pacer releases each request at its time (with a sleep precise to
	// microseconds: Go's timers may wake up to a millisecond late, which
	// would count against the server); the senders take the due ones.
	due := make(chan int, nWarm+n)
	cpu0, cpuOK := readCPUTimes()
	warmStart := time.Now().Add(50 * time.Millisecond)
	start := warmStart.Add(time.Duration(float64(nWarm) * interval))
	go func() {
		defer close(due)
		for i := range nWarm + n {
			if d := time.Until(warmStart.Add(time.Duration(float64(i) * interval))); d > 0 {
				preciseSleep(d)
			}
			if ctx.Err() != nil {
				return
			}
			due <- i
		}
	}()
	var wg sync.WaitGroup
	for _, bc := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer bc.close()
			for i := range due {
				at := warmStart.Add(time.Duration(float64(i) * interval))
				r := &reqs[which[i]]
				sent := time.Now()
				ok := bc.do(r.raw)
				if i >= nWarm {
					samples[i-nWarm] = benchSample{at, at.Sub(start), r.route, time.Since(at), sent.Sub(at), ok, true}
				}
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return benchAPIResult{}, nil, fmt.Errorf("bench api: %w", err)
	}
	elapsed := time.Since(start)
	res := benchAPIResult{Rate: lc.rate, Requests: n, DurationS: elapsed.Seconds(), P99MsByRoute: map[string]float64{},
		Conns: lc.conns, WarmupS: lc.warmup.Seconds(),
		Mix:     "predict 60%, queue?limit=50 20%, power-plan 10%, actions?limit=20 10%",
		Latency: "from each request's scheduled send time to the end of its answer"}
	if cpu1, ok := readCPUTimes(); ok && cpuOK {
		if pct, ok := stealPct(cpu0, cpu1); ok {
			res.CPUStealPct = &pct
		}
	}
	all := make([]float64, 0, n)
	by := map[string][]float64{}
	for _, s := range samples {
		if !s.ok {
			res.Errors++
		}
		ms := float64(s.lat) / float64(time.Millisecond)
		all = append(all, ms)
		by[s.route] = append(by[s.route], ms)
	}
	res.AchievedRate = float64(n-res.Errors) / elapsed.Seconds()
	q := func(v []float64, p float64) float64 {
		if len(v) == 0 {
			return 0
		}
		slices.Sort(v)
		return v[min(len(v)-1, int(p*float64(len(v))))]
	}
	res.P50Ms, res.P90Ms, res.P99Ms, res.MaxMs = q(all, 0.5), q(all, 0.9), q(all, 0.99), q(all, 1)
	for r, v := range by {
		res.P99MsByRoute[r] = q(v, 0.99)
	}
	return res, samples, nil
}

// benchSample is one request of the open loop.
type benchSample struct {
	wall  time.Time     // scheduled send
	at    time.Duration // scheduled send, from the start of the run
	route string
	lat   time.Duration // from the scheduled send to the end of the answer
	lag   time.Duration // from the scheduled send to the actual one (part of lat)
	ok    bool
	sent  bool
}

// writeSamples writes samples as CSV: scheduled send (ms from the start),
// route, latency (ms), ok, scheduled send (Unix ms), send lag (ms: how late
// the generator sent it, part of its latency).
func writeSamples(path string, samples []benchSample) error {
	var b strings.Builder
	b.WriteString("at_ms,route,latency_ms,ok,at_unix_ms,send_lag_ms\n")
	for _, s := range samples {
		if !s.sent {
			continue
		}
		fmt.Fprintf(&b, "%.3f,%s,%.3f,%t,%.3f,%.3f\n", float64(s.at)/1e6, s.route, float64(s.lat)/1e6, s.ok, float64(s.wall.UnixNano())/1e6, float64(s.lag)/1e6)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("bench api: --samples: %w", err)
	}
	return nil
}
