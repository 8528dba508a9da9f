package report

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/heliostat-dev/heliostat/analytics"
	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/ingest/trace"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

func TestMain(m *testing.M) { os.Exit(schematest.Main(m)) }

// week is the window of the seeded jobs: Monday 2024-01-01 to the next
// Monday.
var week = analytics.Window{Since: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), Until: time.Date(2024, 1, 8, 0, 0, 0, 0, time.UTC)}

// seedJob is one job of the seeded cluster.
type seedJob struct {
	user, vc string
	gpus     int
	state    string
	submit   time.Duration // after week.Since
	wait     time.Duration
	run      time.Duration
}

// seedJobs has every final state, single- and multi-GPU jobs in two VCs and
// a hostile user name.
var seedJobs = []seedJob{
	{"alice", "a", 1, "COMPLETED", 0, 10 * time.Minute, time.Hour},
	{"alice", "a", 8, "FAILED", 2 * time.Hour, 0, 30 * time.Minute},
	{"alice", "a", 1, "COMPLETED", 26 * time.Hour, 5 * time.Minute, 2 * time.Hour},
	{hostile, "b", 2, "CANCELLED", 3 * time.Hour, time.Hour, 20 * time.Minute},
	{hostile, "b", 4, "TIMEOUT", 50 * time.Hour, 0, 4 * time.Hour},
	{"carol", "a", 16, "COMPLETED", 75 * time.Hour, 2 * time.Hour, 3 * time.Hour},
	{"carol", "b", 1, "NODE_FAIL", 100 * time.Hour, 0, 10 * time.Second},
	{"dave", "a", 1, "COMPLETED", 120 * time.Hour, 30 * time.Second, 45 * time.Second},
}

// seedGPUType is the GPU type of each seeded user's jobs: the hostile
// user's record none.
var seedGPUType = map[string]string{"alice": "a100", "carol": "h100", "dave": "a100"}

// seed writes seedJobs into cluster "c1" and characterizes the week.
func seed(t *testing.T) (db string, conn driver.Conn) {
	t.Helper()
	cfg, c := schematest.Database(t)
	conv := trace.NewConverter()
	var events []schemas.JobEvent
	for i, j := range seedJobs {
		submit := week.Since.Add(j.submit)
		tj := trace.Job{Line: i + 1, ID: string(rune('A' + i)), User: j.user, Queue: j.vc, State: j.state,
			Submit: submit, Start: submit.Add(j.wait), End: submit.Add(j.wait + j.run), Run: j.run, Wait: j.wait, ReqTime: -1,
			Procs: -1, ReqProcs: -1, GPUs: j.gpus, Nodes: -1}
		n := len(events)
		events = conv.Append(events, &tj)
		for k := n; k < len(events); k++ {
			events[k].GPUType = seedGPUType[j.user]
		}
	}
	ctx := context.Background()
	if err := ingest.InsertJobEvents(ctx, c, cfg.Database, "c1", schemas.SourceTrace, events); err != nil {
		t.Fatal(err)
	}
	r, err := analytics.NewRunner(analytics.Config{Database: cfg.Database, TimeZone: "UTC",
		Capacity: []analytics.Capacity{{Cluster: "c1", GPUs: 32}, {Cluster: "c1", VC: "a", GPUs: 24}, {Cluster: "c1", VC: "b", GPUs: 8}}},
		c, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.RunWindow(ctx, week); err != nil {
		t.Fatal(err)
	}
	return cfg.Database, c
}

func TestLoad(t *testing.T) {
	db, conn := seed(t)
	ctx := context.Background()
	r, err := Load(ctx, conn, LoadOptions{Database: db, Window: week})
	if err != nil {
		t.Fatal(err)
	}

	// What the jobs above give, computed here.
	class := map[string]string{"COMPLETED": "completed", "FAILED": "failed", "TIMEOUT": "failed", "NODE_FAIL": "failed", "CANCELLED": "cancelled"}
	jobsBy, gpuTimeBy := map[string]int64{}, map[string]float64{}
	users := map[string]float64{}
	var runs []float64
	var total float64
	for _, j := range seedJobs {
		gt := float64(j.gpus) * j.run.Seconds()
		jobsBy[class[j.state]]++
		gpuTimeBy[class[j.state]] += gt
		users[j.user] += gt
		total += gt
		runs = append(runs, j.run.Seconds())
	}
	sort.Float64s(runs)
	median := (runs[3] + runs[4]) / 2

	h := r.Headline
	if h.Jobs != 8 || h.GPUJobs != 8 || h.Users != 4 {
		t.Errorf("headline jobs, gpu jobs, users = %d, %d, %d; want 8, 8, 4", h.Jobs, h.GPUJobs, h.Users)
	}
	if h.DurationMedianS != median {
		t.Errorf("median run time = %v; want %v", h.DurationMedianS, median)
	}
	for _, st := range []string{"completed", "cancelled", "failed"} {
		if got, want := h.StateShare[st], float64(jobsBy[st])/8; math.Abs(got-want) > 1e-12 {
			t.Errorf("state share %s = %v; want %v", st, got, want)
		}
		if got, want := h.GPUTimeStateShare[st], gpuTimeBy[st]/total; math.Abs(got-want) > 1e-12 {
			t.Errorf("GPU time share %s = %v; want %v", st, got, want)
		}
	}
	if _, ok := h.StateShare["unknown"]; ok {
		t.Errorf("state shares have unknown; no job's outcome is unknown")
	}
	if len(r.States) != 3 {
		t.Fatalf("States = %+v; want completed, cancelled, failed", r.States)
	}
	for _, s := range r.States {
		if s.Jobs != jobsBy[s.State] || math.Abs(s.GPUTime-gpuTimeBy[s.State]) > 1e-6 {
			t.Errorf("state %s: %d jobs, %v GPU-s; want %d, %v", s.State, s.Jobs, s.GPUTime, jobsBy[s.State], gpuTimeBy[s.State])
		}
	}
	// One GPU-count row per distinct count, buckets 1, 2, 3-4, 5-8, 9-16.
	var counts []int64
	for _, g := range r.GPUCounts {
		counts = append(counts, g.GPUs)
	}
	if got := fmt.Sprint(counts); got != "[1 2 4 8 16]" {
		t.Errorf("GPU counts = %v; want 1,2,4,8,16", counts)
	}
	var buckets []string
	for _, b := range r.StateByGPUs {
		buckets = append(buckets, b.Bucket)
	}
	if got := strings.Join(buckets, ","); got != "1,2,3-4,5-8,9-16" {
		t.Errorf("GPU buckets = %s; want 1,2,3-4,5-8,9-16", got)
	}
	if r.StateByGPUs[0].Jobs["completed"] != 3 || r.StateByGPUs[0].Jobs["failed"] != 1 {
		t.Errorf("1-GPU jobs by state = %v; want 3 completed, 1 failed", r.StateByGPUs[0].Jobs)
	}
	// GPU types, most GPU time first: h100 carol's 16 × 3 h + 1 × 10 s
	// (one completed, one failed), a100 alice's and dave's 1 + 4 + 2 +
	// 0.0125 GPU-hours (three completed, one failed); the hostile user's
	// untyped jobs in none.
	wantTypes := []GPUType{
		{Name: "h100", Jobs: 2, Users: 1, MeanGPUs: 8.5, MedianRunS: (3*3600 + 10) / 2.0, MeanRunS: (3*3600 + 10) / 2.0,
			MedianQueueS: 3600, MeanQueueS: 3600, CompletedShare: 0.5, FailedShare: 0.5, GPUTime: 16*3*3600 + 10},
		{Name: "a100", Jobs: 4, Users: 2, MeanGPUs: 11.0 / 4, MedianRunS: (3600 + 1800) / 2.0, MeanRunS: (3600 + 1800 + 7200 + 45) / 4.0,
			MedianQueueS: (30 + 300) / 2.0, MeanQueueS: (600 + 300 + 30) / 4.0, CompletedShare: 0.75, FailedShare: 0.25, GPUTime: 3600 + 8*1800 + 7200 + 45},
	}
	if !reflect.DeepEqual(r.GPUTypes, wantTypes) {
		t.Errorf("GPU types:\n%+v\nwant\n%+v", r.GPUTypes, wantTypes)
	}
	// VCs, heaviest first: a holds 1+0.5·8+2+48+0.0125 GPU-hours.
	if len(r.VCs) != 2 || r.VCs[0].Name != "a" || r.VCs[1].Name != "b" || r.VCs[0].Capacity != 24 || r.VCs[0].Jobs != 5 {
		t.Errorf("VCs = %+v; want a (24 GPUs, 5 jobs), then b", r.VCs)
	}
	// Users: the hostile user waited 1 h of the 3 h 15 min 30 s all waited.
	var wait float64
	for _, j := range seedJobs {
		wait += j.wait.Seconds()
	}
	found := false
	for _, u := range r.Users {
		if u.Name == hostile {
			found = true
			if math.Abs(u.QueueShare-3600/wait) > 1e-12 || u.CompletionRate != 0 || u.Jobs != 2 {
				t.Errorf("user %q = %+v; want queue share %v, completion 0, 2 jobs", hostile, u, 3600/wait)
			}
		}
	}
	if !found || len(r.Users) != 4 {
		t.Errorf("Users = %+v; want 4 with %q", r.Users, hostile)
	}
	if len(r.Months) != 1 || r.Months[0].Month != "2024-01" || r.Months[0].SingleGPUJobs != 4 || r.Months[0].MultiGPUJobs != 4 {
		t.Errorf("Months = %+v; want 2024-01 with 4 single- and 4 multi-GPU jobs", r.Months)
	}
	// Monday 00:10-01:10 alice holds 1 GPU of 32: hour 0 is 50 min of it.
	if got, want := r.HourWeekday[0][0], (50.0/60)/32; math.Abs(got-want) > 1e-9 {
		t.Errorf("utilization Monday 00h = %v; want %v", got, want)
	}
	if len(r.DurationCDF) != 3 || r.DurationCDF[0].Name != "all GPU jobs" {
		t.Errorf("duration CDFs = %d series; want all GPU jobs and two VCs", len(r.DurationCDF))
	}
	if len(r.Summary) != 3 || r.Summary[0].Jobs != 8 || r.Summary[0].GPUs != 32 {
		t.Errorf("summary = %+v; want c1 (32 GPUs, 8 jobs) and two VCs", r.Summary)
	}
	if r.Capacity != 32 || r.CapacitySource != "config" {
		t.Errorf("capacity = %v from %q; want 32 from config", r.Capacity, r.CapacitySource)
	}
	if r.Telemetry != nil {
		t.Errorf("telemetry = %+v; no job has GPU samples", r.Telemetry)
	}
	if len(r.Concentration) == 0 || r.Concentration[0].Users != 1 {
		t.Errorf("concentration = %+v; want the top 1%% as 1 user", r.Concentration)
	}

	var page bytes.Buffer
	if err := Render(&page, r); err != nil {
		t.Fatal(err)
	}
	want := []string{FigDurationCDF, FigStateShare, FigUtilHeatmap, FigUtilHour, FigUtilWeekday, FigMonthly, FigVCUtil, FigGPUCount, FigStateByGPUs, FigUserCurve, FigUserQueue}
	if got := r.Figures(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("figures = %v; want %v", got, want)
	}
	if strings.Contains(page.String(), "<script") {
		t.Errorf("page holds a hostile name unescaped")
	}
}

func TestHandler(t *testing.T) {
	db, conn := seed(t)
	now := time.Date(2024, 2, 1, 0, 0, 0, 0, time.UTC)
	reg := prometheus.NewPedanticRegistry()
	h, err := NewHandler(HandlerConfig{Database: db, Registry: reg}, conn, slog.New(slog.DiscardHandler), func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get("/")
	if code != http.StatusOK || !strings.Contains(body, `data-figure="`+FigDurationCDF+`"`) || !strings.Contains(body, "c1") {
		t.Fatalf("GET / = %d %.300q; want the report of c1", code, body)
	}
	if code, _ := get("/?window=" + week.ID() + "&cluster=c1"); code != http.StatusOK {
		t.Errorf("GET ?window&cluster = %d; want 200", code)
	}
	if code, body := get("/?cluster=nope"); code != http.StatusNotFound || !strings.Contains(body, "No characterization results") {
		t.Errorf("GET ?cluster=nope = %d %.200q; want 404 saying there are no results", code, body)
	}
	for _, tc := range []struct{ query, want string }{
		{"window=bad", "parameter window: analytics: window \"bad\": want SINCE/UNTIL"},
		{"window=2026-01-02T00:00:00Z/2026-01-01T00:00:00Z", "parameter window: "},
		{"windw=" + week.ID(), `unknown parameter "windw" (known: window, cluster)`},
		{"cluster=c1&cluster=c2", "parameter cluster given 2 times"},
	} {
		if code, body := get("/?" + tc.query); code != http.StatusBadRequest || !strings.Contains(body, tc.want) {
			t.Errorf("GET ?%s = %d %q; want 400 saying %q", tc.query, code, body, tc.want)
		}
	}
	for code, want := range map[string]float64{"200": 2, "400": 4, "404": 1, "500": 0} {
		if got := testutil.ToFloat64(h.requests.WithLabelValues(code)); got != want {
			t.Errorf("heliostat_report_requests_total{code=%q} = %v; want %v", code, got, want)
		}
	}
	if n, err := testutil.GatherAndCount(reg, "heliostat_report_requests_total"); err != nil || n != 5 {
		t.Errorf("registry has %d heliostat_report_requests_total series (%v); want 5", n, err)
	}
}

func TestHandlerNothingYet(t *testing.T) {
	cfg, conn := schematest.Database(t)
	h, err := NewHandler(HandlerConfig{Database: cfg.Database}, conn, slog.New(slog.DiscardHandler), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET on a database never characterized = %d; want 404", resp.StatusCode)
	}
}

// TestLoadZeroRunTime: a GPU job that ran 0 s counts at the run-time CDF's
// first point, 1 s (its bucket is 0 where log10 of 0 would be -inf), and one
// that ran an hour only from 3,981 s (10^3.6) on.
// characterize runs the analytics jobs named (all when none) over window w
// of cluster c with cfg, on the clock now, and loads the report of it.
func characterize(t *testing.T, conn driver.Conn, cfg analytics.Config, w analytics.Window, now func() time.Time, jobs ...string) *Report {
	t.Helper()
	r, err := analytics.NewRunner(cfg, conn, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.RunWindow(t.Context(), w, jobs...); err != nil {
		t.Fatal(err)
	}
	rep, err := Load(t.Context(), conn, LoadOptions{Database: cfg.Database, Window: w, Cluster: "c"})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestLoadZeroRunTime(t *testing.T) {
	cfg, conn := schematest.Database(t)
	db := cfg.Database
	day := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	end := day.Add(time.Hour)
	schematest.InsertJobRows(t, conn, db, "cluster, job_id, source, user, partition_name, state, submit_time, start_time, end_time, gpus, last_event, updated_at, inserted_at, version",
		[]any{"c", "1", "slurm", "a", "gpu", "COMPLETED", day, &day, &end, uint32(1), "END", end, end, uint64(1)},
		[]any{"c", "2", "slurm", "a", "gpu", "COMPLETED", day, &day, &day, uint32(1), "END", day, day, uint64(1)})
	rep := characterize(t, conn, analytics.Config{Database: db}, analytics.Window{Since: day, Until: day.AddDate(0, 0, 1)}, time.Now, "jobs")
	if len(rep.DurationCDF) == 0 {
		t.Fatal("no run-time CDF")
	}
	got := map[float64]float64{}
	for _, p := range rep.DurationCDF[0].Points {
		got[math.Round(p.X)] = p.Y
	}
	for _, want := range []Point{{1, 0.5}, {3162, 0.5}, {3981, 1}} {
		if y, ok := got[want.X]; !ok || math.Abs(y-want.Y) > 1e-9 {
			t.Errorf("run-time CDF at %g s = %v (present %v); want %v", want.X, y, ok, want.Y)
		}
	}
}

// TestLoadGPUJobsOnly: the figures of GPU jobs leave CPU jobs out. The
// median run time of GPU jobs (the key number and the run-time figure's
// caption) is the GPU jobs' median, while the headline's DurationMedianS
// (--json's duration_median_s) stays the median of every job; the users'
// shares of queuing delay are of the GPU jobs' delay, so a user whose CPU
// jobs waited has none of it. One day, cluster c: user cpu submits three
// CPU jobs that wait 100 s and run 10 s; users ann and ben GPU jobs.
func TestLoadGPUJobsOnly(t *testing.T) {
	type gpuJob struct {
		user      string
		gpus      uint32
		wait, run time.Duration
		wantShare float64 // of the GPU jobs' queuing delay; NaN: none waited
	}
	for _, tc := range []struct {
		name       string
		gpuJobs    []gpuJob
		wantMedian float64 // GPU jobs' run time
		wantAll    float64 // every job's run time
		wantQueue  string  // in the queuing-delay figure's caption
	}{
		{"GPU jobs waited", []gpuJob{
			{"ann", 1, 60 * time.Second, 1000 * time.Second, 60.0 / 80},
			{"ben", 2, 20 * time.Second, 3000 * time.Second, 20.0 / 80},
		}, 2000, 10, "account for 100% of all queuing delay of GPU jobs"},
		{"no GPU job waited", []gpuJob{
			{"ann", 1, 0, 1000 * time.Second, math.NaN()},
		}, 1000, 10, "No GPU job waited"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, conn := schematest.Database(t)
			db := cfg.Database
			day := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
			row := func(id, user string, gpus uint32, submit time.Time, wait, run time.Duration) []any {
				start, end := submit.Add(wait), submit.Add(wait+run)
				return []any{"c", id, "slurm", user, "p", "COMPLETED", submit, &start, &end, gpus, "END", end, end, uint64(1)}
			}
			var rows [][]any
			for i := range 3 {
				rows = append(rows, row("cpu"+strconv.Itoa(i), "cpu", 0, day.Add(time.Duration(i)*time.Hour), 100*time.Second, 10*time.Second))
			}
			want := map[string]float64{"cpu": 0}
			for i, j := range tc.gpuJobs {
				rows = append(rows, row("gpu"+strconv.Itoa(i), j.user, j.gpus, day.Add(time.Duration(5+i)*time.Hour), j.wait, j.run))
				want[j.user] = j.wantShare
			}
			if math.IsNaN(tc.gpuJobs[0].wantShare) {
				want["cpu"] = math.NaN() // no GPU delay to share out
			}
			schematest.InsertJobRows(t, conn, db, "cluster, job_id, source, user, partition_name, state, submit_time, start_time, end_time, gpus, last_event, updated_at, inserted_at, version", rows...)
			rep := characterize(t, conn, analytics.Config{Database: db, Capacity: []analytics.Capacity{{Cluster: "c", GPUs: 4}}},
				analytics.Window{Since: day, Until: day.AddDate(0, 0, 1)}, time.Now)
			if rep.RunP50S != tc.wantMedian || rep.Headline.DurationMedianS != tc.wantAll {
				t.Errorf("median run time: GPU jobs %v, all jobs %v; want %v, %v", rep.RunP50S, rep.Headline.DurationMedianS, tc.wantMedian, tc.wantAll)
			}
			caption := rep.figDurationCDF().Caption
			if s := "(median " + strconv.FormatFloat(tc.wantMedian, 'f', -1, 64) + " s)"; !strings.Contains(caption, s) {
				t.Errorf("run-time caption %q; want %q", caption, s)
			}
			var page bytes.Buffer
			if err := Render(&page, rep); err != nil {
				t.Fatal(err)
			}
			if tile := "<b>" + fmtDur(tc.wantMedian) + "</b><span>median run time of GPU jobs"; !strings.Contains(page.String(), tile) {
				t.Errorf("key numbers lack %q", tile)
			}
			got := map[string]float64{}
			for _, u := range rep.Users {
				got[u.Name] = u.QueueShare
			}
			for user, share := range want {
				if g, ok := got[user]; !ok || !(math.Abs(g-share) < 1e-12 || math.IsNaN(g) && math.IsNaN(share)) {
					t.Errorf("user %s: share of the GPU jobs' queuing delay %v (listed %v); want %v", user, g, ok, share)
				}
			}
			if caption := rep.figUserQueue().Caption; !strings.Contains(caption, tc.wantQueue) {
				t.Errorf("queuing-delay caption %q; want %q", caption, tc.wantQueue)
			}
		})
	}
}

// TestLoadHeatmapPartialHours: the heatmap's cell is GPU-seconds held over
// capacity-seconds computed, so an hour that only partly lies in the window
// up to computed_until weighs by its seconds in it, not as a whole hour.
// Two-week windows from Monday 2026-03-02 of a cluster with 1 GPU; the only
// job holds it on the second Monday from 10:00.
func TestLoadHeatmapPartialHours(t *testing.T) {
	mon := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	held := mon.AddDate(0, 0, 7).Add(10 * time.Hour)
	for _, tc := range []struct {
		name  string
		since time.Time
		now   time.Time
		end   time.Time // the job's end; zero: still running at now
		want  float64   // Monday 10:00
	}{
		// Monday 10:00 twice: the first week's idle for 3600 s, the second's
		// held for the 360 s computed.
		{"open window, its last hour computed for 6 min", mon, held.Add(6 * time.Minute), time.Time{}, 360.0 / (3600 + 360)},
		// Monday 10:00 three times: 10:30-11:00 idle, 10:00-11:00 held for
		// 1800 s, 10:00-10:30 idle (the window ends at 10:30).
		{"window from 10:30, its first and last hours halves", mon.Add(10*time.Hour + 30*time.Minute), mon.AddDate(0, 1, 0), held.Add(30 * time.Minute), 1800.0 / (1800 + 3600 + 1800)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, conn := schematest.Database(t)
			db := cfg.Database
			job := []any{"c", "1", "slurm", "a", "p", "RUNNING", held, &held, nil, uint32(1), "START", held, held, uint64(1)}
			if !tc.end.IsZero() {
				job = []any{"c", "1", "slurm", "a", "p", "COMPLETED", held, &held, &tc.end, uint32(1), "END", tc.end, tc.end, uint64(1)}
			}
			schematest.InsertJobRows(t, conn, db, "cluster, job_id, source, user, partition_name, state, submit_time, start_time, end_time, gpus, last_event, updated_at, inserted_at, version", job)
			rep := characterize(t, conn, analytics.Config{Database: db, Capacity: []analytics.Capacity{{Cluster: "c", GPUs: 1}}},
				analytics.Window{Since: tc.since, Until: tc.since.AddDate(0, 0, 14)}, func() time.Time { return tc.now })
			if got := rep.HourWeekday[0][10]; math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("heatmap Monday 10:00 = %v; want %v", got, tc.want)
			}
		})
	}
}
