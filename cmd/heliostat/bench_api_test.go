package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/actuator/api"
	"github.com/heliostat-dev/heliostat/actuator/loop"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// stallServer answers like the API (a queue naming users, 200 for the rest,
// predict bodies checked) and, from its stallAt-th request, holds every
// request until stall has passed.
type stallServer struct {
	stallAt int64
	stall   time.Duration

	n        atomic.Int64
	stalled  chan struct{}
	released chan struct{}
	badBody  atomic.Int64
	mu       sync.Mutex
	routes   map[string]int
	users    map[string]int
}

func newStallServer(stallAt int64, stall time.Duration) *stallServer {
	return &stallServer{stallAt: stallAt, stall: stall, stalled: make(chan struct{}), released: make(chan struct{}),
		routes: map[string]int{}, users: map[string]int{}}
}

func (s *stallServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/queue" && r.URL.Query().Get("limit") == "10000" {
		_ = json.NewEncoder(w).Encode(api.QueueResponse{Total: 2, Jobs: []loop.QueueEntry{{User: "alice"}, {User: "bob"}}})
		return
	}
	if s.n.Add(1) == s.stallAt {
		close(s.stalled)
		time.AfterFunc(s.stall, func() { close(s.released) })
	}
	select {
	case <-s.stalled:
		<-s.released
	default:
	}
	var req api.PredictRequest
	if r.Method == http.MethodPost {
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.User == "" || r.Header.Get("Content-Type") != "application/json" {
			s.badBody.Add(1)
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
	}
	s.mu.Lock()
	s.routes[r.Method+" "+r.URL.Path]++
	if req.User != "" {
		s.users[req.User]++
	}
	s.mu.Unlock()
	_, _ = io.WriteString(w, `{}`)
}

// TestBenchAPIOpenLoop: the load generator keeps its schedule through a
// server stall and counts the stall as latency of every request due during
// it (no coordinated omission), sends the mix it reports, and reuses its
// connections.
func TestBenchAPIOpenLoop(t *testing.T) {
	skipInCHDBPass(t)
	const rate, stall = 500, 200 * time.Millisecond
	srv := newStallServer(150, stall) // about 0.3 s into the run
	ts := httptest.NewUnstartedServer(srv)
	var conns atomic.Int64
	ts.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	ts.Start()
	defer ts.Close()
	lc := loadConfig{rate: rate, dur: time.Second, conns: 8}
	res, samples, err := openLoop(context.Background(), strings.TrimPrefix(ts.URL, "http://"), []string{"alice", "bob"}, lc)
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != rate || len(samples) != rate || res.Errors != 0 {
		t.Fatalf("%d requests (%d samples), %d errors; want %d, 0", res.Requests, len(samples), res.Errors, rate)
	}
	if srv.badBody.Load() != 0 {
		t.Errorf("%d predict bodies were not valid JSON specs", srv.badBody.Load())
	}
	// Every request due during the stall waited for it: ~rate × stall of
	// them are late by up to the stall, measured from their schedule.
	late := 0
	for _, s := range samples {
		if !s.sent {
			t.Fatal("a request was not sent")
		}
		if s.lat > stall/2 {
			late++
		}
	}
	if want := int(rate * stall.Seconds() / 2); late < want {
		t.Errorf("%d requests over %v late, want at least %d (the stall must show in the latency of those due during it)", late, stall/2, want)
	}
	if res.MaxMs < float64(stall/time.Millisecond)*0.9 || res.P50Ms > 50 {
		t.Errorf("max %.1f ms, p50 %.1f ms; want max about the %v stall and a small median", res.MaxMs, res.P50Ms, stall)
	}
	// Sends follow the schedule: the run lasts the duration, not longer
	// by the stall (the backlog is sent as soon as the server answers).
	if res.DurationS > 1.2 {
		t.Errorf("run took %.2f s for 1 s of schedule", res.DurationS)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	n := float64(rate)
	for route, share := range map[string]float64{"POST /v1/predict": 0.6, "GET /v1/queue": 0.2, "GET /v1/power-plan": 0.1, "GET /v1/actions": 0.1} {
		if got := float64(srv.routes[route]) / n; got < share-0.07 || got > share+0.07 {
			t.Errorf("%s: %.2f of the requests, want about %.2f", route, got, share)
		}
	}
	if srv.users["alice"] == 0 || srv.users["bob"] == 0 {
		t.Errorf("predict users %v, want both queue users", srv.users)
	}
	// 8 connections for the run, plus the one reading the queue (none here:
	// openLoop is given the users).
	if c := conns.Load(); c != 8 {
		t.Errorf("%d connections opened, want 8 kept alive", c)
	}
}

// TestBenchAPITarget: `bench api --target URL --json` prints one JSON
// object with the figures, taking its users from the target's queue.
func TestBenchAPITarget(t *testing.T) {
	skipInCHDBPass(t)
	srv := newStallServer(-1, 0)
	ts := httptest.NewServer(srv)
	defer ts.Close()
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"bench", "api", "--target", ts.URL, "--rate", "400", "--duration", "500ms", "--warmup", "100ms", "--conns", "4", "--json"},
		func(string) string { return "" }, &out, &errb)
	if err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	var res benchAPIResult
	dec := json.NewDecoder(&out)
	if err := dec.Decode(&res); err != nil {
		t.Fatal(err)
	}
	if dec.More() {
		t.Error("more than one JSON value on stdout")
	}
	if res.Requests != 200 || res.Errors != 0 || res.Conns != 4 || res.LoadProcess != "child" || res.WarmupS != 0.1 || len(res.P99MsByRoute) != 4 {
		t.Errorf("got %+v", res)
	}
	if _, ok := readCPUTimes(); ok && (res.CPUStealPct == nil || *res.CPUStealPct < 0 || *res.CPUStealPct > 100) {
		t.Errorf("cpu_steal_pct %v, want a share in [0, 100] where /proc/stat is readable", res.CPUStealPct)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.users["alice"]+srv.users["bob"] == 0 {
		t.Errorf("predict users %v, want the queue's", srv.users)
	}
	if err := run(context.Background(), []string{"bench", "api", "--target", "localhost:1"}, func(string) string { return "" }, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "http://host:port") {
		t.Errorf("target without scheme: %v", err)
	}
}

// TestBenchAPIInProcess runs the whole benchmark briefly on the test's
// ClickHouse with the load generator in process (a test binary cannot be
// started as the child): the state is built (history, model, ranked queue)
// and every request is answered.
func TestBenchAPIInProcess(t *testing.T) {
	cfg, _ := schematest.Database(t)
	var out, errb bytes.Buffer
	args := []string{"bench", "api", "--clickhouse.addr", cfg.Addr, "--load-in-process", "--rate", "300", "--duration", "1s",
		"--warmup", "200ms", "--nodes", "16", "--json"}
	if cfg.Protocol != "" { // the chDB pass: HTTP
		args = append(args, "--clickhouse.protocol", cfg.Protocol)
	}
	err := run(context.Background(), args, func(string) string { return "" }, &out, &errb)
	if err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	var res benchAPIResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if res.Requests != 300 || res.Errors != 0 || res.LoadProcess != "in-process" {
		t.Errorf("%d requests, %d errors, load %q; want 300, 0, in-process", res.Requests, res.Errors, res.LoadProcess)
	}
	if res.Pending == 0 || res.HistoryJobs == 0 || res.ModelVersion == 0 {
		t.Errorf("state: %d pending, %d history jobs, model v%d; want all set", res.Pending, res.HistoryJobs, res.ModelVersion)
	}
}

func TestBenchStart(t *testing.T) {
	tests := []struct{ now, want string }{
		{"2026-11-22T06:14:31Z", "2026-11-16T00:00:00Z"}, // Sunday
		{"2026-11-23T00:00:00Z", "2026-11-23T00:00:00Z"}, // Monday midnight
		{"2026-11-23T23:59:59Z", "2026-11-23T00:00:00Z"},
		{"2026-11-25T15:37:00+09:00", "2026-11-23T00:00:00Z"}, // Wednesday, 06:37 UTC
		{"2026-11-24T00:30:00+02:00", "2026-11-23T00:00:00Z"}, // Tuesday local, Monday UTC
	}
	for _, tt := range tests {
		now, err := time.Parse(time.RFC3339, tt.now)
		if err != nil {
			t.Fatal(err)
		}
		if got := benchStart(now).Format(time.RFC3339); got != tt.want {
			t.Errorf("benchStart(%s) = %s, want %s", tt.now, got, tt.want)
		}
	}
}
