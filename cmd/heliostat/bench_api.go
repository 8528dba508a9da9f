package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
	"sync"
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
	Cores        int                `json:"cores"`         // GOMAXPROCS: server and load generator share them
	Mix          string             `json:"mix"`           // share of requests per route
	Latency      string             `json:"latency_basis"` // what a latency measures
}

// runBenchAPI is `heliostat bench api`: the advisory API in-process on
// loopback, over realistic state — a duration model trained on a week of
// synthetic Helios-like jobs in ClickHouse, a simulated cluster's pending
// queue ranked by a control-loop pass, its power plans and audited actions —
// under an open-loop load of --rate requests/s for --duration.
func runBenchAPI(ctx context.Context, args []string, e *env) error {
	fs := newFlagSet("bench api", e)
	rate := fs.Float64("rate", 5000, "requests per second, sent on a fixed schedule whatever the answers (open loop)")
	dur := fs.Duration("duration", 10*time.Second, "how long to send")
	asJSON := fs.Bool("json", false, "print one JSON object on stdout")
	nodes := fs.Int("nodes", 64, "nodes of the simulated cluster whose queue is ranked (8 GPUs each, two VCs)")
	load := fs.Float64("load", 8, "submission rate of the simulated cluster, in multiples of the rate that offers 60% of its GPU time (above ~2 a queue builds up)")
	chAddr := fs.String("clickhouse.addr", "", "use this ClickHouse (host:port) instead of starting a local one")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the load phase to this file")
	traceFile := fs.String("trace", "", "write a runtime execution trace of the load phase to this file (go tool trace)")
	samplesFile := fs.String("samples", "", "write every request as a CSV line (scheduled send in ms from the start, route, latency ms, ok) to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *rate <= 0 || *dur <= 0 || *nodes < 2 || *load <= 0 {
		return fmt.Errorf("bench api: --rate, --duration and --load must be positive and --nodes at least 2")
	}
	logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ch := chconn.Config{Addr: *chAddr, Database: "heliostat_bench_api", Compression: "none"}
	if *chAddr == "" {
		dir, err := os.MkdirTemp("", "heliostat-bench-api-*")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		fmt.Fprintln(e.stderr, "starting a local ClickHouse in", dir)
		srv, err := chserver.Start(ctx, chserver.Config{Dir: dir, Install: true}, logger)
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
	t0 := time.Now().UTC().Truncate(time.Hour)
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
	lp, err := loop.New(loop.Config{Cluster: "bench", PeakWindow: time.Minute}, guard, al, runner, logger, reg, nil)
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
	srv, err := newActuatorAPI(api.Config{}, lp, runner, al, strings.Repeat("t", 32), reg, logger)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = serveAPI(sctx, ln, srv) }()
	base := "http://" + ln.Addr().String()

	users := make([]string, 0, len(view.Queue))
	for _, q := range view.Queue {
		users = append(users, q.User)
	}
	if len(users) == 0 {
		users = []string{"u0001"}
	}
	fmt.Fprintf(e.stderr, "state: %d ended jobs, model v%d, %d pending jobs; sending %.0f req/s for %v\n", hist, version, len(view.Queue), *rate, *dur)
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
	res, samples := openLoop(ctx, base, *rate, *dur, users)
	if *cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if *traceFile != "" {
		trace.Stop()
	}
	if *samplesFile != "" {
		if err := writeSamples(*samplesFile, samples); err != nil {
			return err
		}
	}
	res.Pending, res.HistoryJobs, res.ModelVersion, res.Cores = len(view.Queue), hist, version, runtime.GOMAXPROCS(0)
	if *asJSON {
		return json.NewEncoder(e.stdout).Encode(res)
	}
	fmt.Fprintf(e.stdout, "api: %d requests at %.0f/s asked, %.0f/s answered, %d errors; latency p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms (%d cores shared with the load generator)\n",
		res.Requests, res.Rate, res.AchievedRate, res.Errors, res.P50Ms, res.P90Ms, res.P99Ms, res.MaxMs, res.Cores)
	for _, r := range slices.Sorted(func(yield func(string) bool) {
		for k := range res.P99MsByRoute {
			if !yield(k) {
				return
			}
		}
	}) {
		fmt.Fprintf(e.stdout, "  p99 %-14s %.2f ms\n", r, res.P99MsByRoute[r])
	}
	return nil
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

// openLoop sends requests on a fixed schedule — the i-th at start + i/rate,
// whether or not earlier ones were answered — and measures each from its
// scheduled time, so that a slow server shows as latency rather than as a
// lower rate (no coordinated omission).
func openLoop(ctx context.Context, base string, rate float64, dur time.Duration, users []string) (benchAPIResult, []benchSample) {
	tr := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256, IdleConnTimeout: time.Minute}
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	defer tr.CloseIdleConnections()
	n := int(rate * dur.Seconds())
	samples := make([]benchSample, n)
	rng := rand.New(rand.NewPCG(7, 11))
	type req struct {
		route, method, url, body string
	}
	reqs := make([]req, n)
	for i := range reqs {
		switch x := rng.IntN(100); {
		case x < 60:
			body := fmt.Sprintf(`{"user": %q, "name": "job-%d", "partition": "vc%d", "gpus": %d, "time_limit_s": %d}`,
				users[rng.IntN(len(users))], rng.IntN(50), 1+rng.IntN(2), 1<<rng.IntN(4), 600*(1+rng.IntN(100)))
			reqs[i] = req{"predict", "POST", base + "/v1/predict", body}
		case x < 80:
			reqs[i] = req{"queue", "GET", base + "/v1/queue?limit=50", ""}
		case x < 90:
			reqs[i] = req{"power-plan", "GET", base + "/v1/power-plan", ""}
		default:
			reqs[i] = req{"actions", "GET", base + "/v1/actions?limit=20", ""}
		}
	}
	var wg sync.WaitGroup
	start := time.Now().Add(50 * time.Millisecond)
	interval := time.Duration(float64(time.Second) / rate)
	for i := 0; i < n; i++ {
		at := start.Add(time.Duration(i) * interval)
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		}
		if ctx.Err() != nil {
			n = i
			break
		}
		wg.Add(1)
		go func(i int, at time.Time) {
			defer wg.Done()
			r := reqs[i]
			var body io.Reader
			if r.body != "" {
				body = strings.NewReader(r.body)
			}
			hr, _ := http.NewRequestWithContext(ctx, r.method, r.url, body)
			if r.body != "" {
				hr.Header.Set("Content-Type", "application/json")
			}
			resp, err := client.Do(hr)
			ok := err == nil && resp.StatusCode/100 == 2
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			samples[i] = benchSample{at.Sub(start), r.route, time.Since(at), ok}
		}(i, at)
	}
	wg.Wait()
	elapsed := time.Since(start)
	samples = samples[:n]
	res := benchAPIResult{Rate: rate, Requests: n, DurationS: elapsed.Seconds(), P99MsByRoute: map[string]float64{},
		Mix:     "predict 60%, queue?limit=50 20%, power-plan 10%, actions?limit=20 10%",
		Latency: "from each request's scheduled send time to the end of its answer"}
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
	return res, samples
}

// benchSample is one request of the open loop.
type benchSample struct {
	at    time.Duration // scheduled send, from the start of the run
	route string
	lat   time.Duration // from the scheduled send to the end of the answer
	ok    bool
}

// writeSamples writes samples as CSV: scheduled send (ms from the start),
// route, latency (ms), ok.
func writeSamples(path string, samples []benchSample) error {
	var b strings.Builder
	b.WriteString("at_ms,route,latency_ms,ok\n")
	for _, s := range samples {
		fmt.Fprintf(&b, "%.3f,%s,%.3f,%t\n", float64(s.at)/1e6, s.route, float64(s.lat)/1e6, s.ok)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("bench api: --samples: %w", err)
	}
	return nil
}
