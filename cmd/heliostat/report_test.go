package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/analytics/report"
	"github.com/heliostat-dev/heliostat/analytics/report/reporttest"
	"github.com/heliostat-dev/heliostat/internal/chserver"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// reportResult is the part of `report --json` the tests check.
type reportResult struct {
	Jobs              uint64             `json:"jobs"`
	GPUJobs           uint64             `json:"gpu_jobs"`
	Users             uint64             `json:"users"`
	StateShare        map[string]float64 `json:"state_share"`
	GPUTimeStateShare map[string]float64 `json:"gpu_time_state_share"`
	DurationMedianS   *float64           `json:"duration_median_s"`
	Top5Pct           float64            `json:"top5pct_users_gpu_time_share"`
	Cluster           string             `json:"cluster"`
	Window            string             `json:"window"`
	Out               string             `json:"out"`
	StartAtSubmit     *int               `json:"start_at_submit_jobs"`
	TimeZone          string             `json:"time_zone"`
	CharacterizeS     float64            `json:"characterize_s"`
}

// runReportJSON runs `heliostat report ARGS --json`; stdout must be exactly
// one JSON object.
func runReportJSON(t *testing.T, args ...string) reportResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	argv := append([]string{"report", "--json", "--log.level", "warn"}, args...)
	if err := run(context.Background(), argv, noEnv, &stdout, &stderr); err != nil {
		t.Fatalf("heliostat %s: %v\nstderr: %s", strings.Join(argv, " "), err, stderr.String())
	}
	dec := json.NewDecoder(&stdout)
	var res reportResult
	if err := dec.Decode(&res); err != nil {
		t.Fatalf("heliostat %s: decode stdout %q: %v", strings.Join(argv, " "), stdout.String(), err)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("heliostat %s: stdout holds more than one JSON object: %q", strings.Join(argv, " "), stdout.String())
	}
	return res
}

// traceFigures are the headline figures computed straight from a trace's
// rows, independently of the importer and of ClickHouse.
type traceFigures struct {
	jobs, gpuJobs, users int
	states               map[string]int     // ended jobs by class
	gpuTime              map[string]float64 // GPU-seconds by class
	median               float64
	top5                 float64
}

// figuresOf computes the headline of jobs given as (user, gpus, class,
// run seconds; -1 unknown).
func figuresOf(user []string, gpus []float64, class []string, run []float64) traceFigures {
	f := traceFigures{jobs: len(user), states: map[string]int{}, gpuTime: map[string]float64{}}
	byUser := map[string]float64{}
	var runs []float64
	for i := range user {
		byUser[user[i]] += 0
		if gpus[i] > 0 {
			f.gpuJobs++
		}
		if class[i] == "" {
			continue
		}
		f.states[class[i]]++
		if run[i] >= 0 {
			gt := gpus[i] * run[i]
			f.gpuTime[class[i]] += gt
			byUser[user[i]] += gt
			runs = append(runs, run[i])
		}
	}
	f.users = len(byUser)
	sort.Float64s(runs)
	if n := len(runs); n%2 == 1 {
		f.median = runs[n/2]
	} else if n > 0 {
		f.median = (runs[n/2-1] + runs[n/2]) / 2
	}
	var all []float64
	total := 0.0
	for _, v := range byUser {
		all = append(all, v)
		total += v
	}
	sort.Sort(sort.Reverse(sort.Float64Slice(all)))
	k := int(math.Ceil(0.05 * float64(len(all))))
	top := 0.0
	for _, v := range all[:k] {
		top += v
	}
	f.top5 = top / total
	return f
}

// check compares `report --json` with figures computed from the raw trace:
// counts exactly, shares to 1e-12 (the same sums divided), the median
// exactly.
func (want traceFigures) check(t *testing.T, got reportResult, classes []string) {
	t.Helper()
	if got.Jobs != uint64(want.jobs) || got.GPUJobs != uint64(want.gpuJobs) || got.Users != uint64(want.users) {
		t.Errorf("jobs, gpu_jobs, users = %d, %d, %d; want %d, %d, %d", got.Jobs, got.GPUJobs, got.Users, want.jobs, want.gpuJobs, want.users)
	}
	ended, total := 0, 0.0
	for _, c := range classes {
		ended += want.states[c]
		total += want.gpuTime[c]
	}
	if len(got.StateShare) != len(classes) || len(got.GPUTimeStateShare) != len(classes) {
		t.Errorf("state_share %v, gpu_time_state_share %v: want the keys %v", got.StateShare, got.GPUTimeStateShare, classes)
	}
	for _, c := range classes {
		if s, w := got.StateShare[c], float64(want.states[c])/float64(ended); math.Abs(s-w) > 1e-12 {
			t.Errorf("state_share[%s] = %v; want %v (%d of %d)", c, s, w, want.states[c], ended)
		}
		if s, w := got.GPUTimeStateShare[c], want.gpuTime[c]/total; math.Abs(s-w) > 1e-12 {
			t.Errorf("gpu_time_state_share[%s] = %v; want %v", c, s, w)
		}
	}
	if got.DurationMedianS == nil || *got.DurationMedianS != want.median {
		t.Errorf("duration_median_s = %v; want %v", got.DurationMedianS, want.median)
	}
	if math.Abs(got.Top5Pct-want.top5) > 1e-12 {
		t.Errorf("top5pct_users_gpu_time_share = %v; want %v", got.Top5Pct, want.top5)
	}
}

// venusFigures reads the Helios CSV with encoding/csv alone.
func venusFigures(t *testing.T, path string) traceFigures {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	// Helios counts TIMEOUT and NODE_FAIL as failed.
	classOf := map[string]string{"COMPLETED": "completed", "CANCELLED": "cancelled", "FAILED": "failed", "TIMEOUT": "failed", "NODE_FAIL": "failed"}
	var user, class []string
	var gpus, run []float64
	for _, r := range rows[1:] {
		g, err1 := strconv.ParseFloat(r[col["gpu_num"]], 64)
		d, err2 := strconv.ParseFloat(r[col["duration"]], 64)
		c, ok := classOf[r[col["state"]]]
		if err1 != nil || err2 != nil || !ok {
			t.Fatalf("venus row %v: unexpected values", r)
		}
		user, gpus, class, run = append(user, r[col["user"]]), append(gpus, g), append(class, c), append(run, d)
	}
	return figuresOf(user, gpus, class, run)
}

// TestReportTraceVenus is the one command: a Helios trace into a
// local ClickHouse the command starts itself, characterized and rendered;
// the JSON agrees with the raw file and every figure draws in Chromium.
func TestReportTraceVenus(t *testing.T) {
	schematest.SkipOnCHDB(t, "the ClickHouse server `report --trace` starts itself")
	path := sharedData(t, "helios/venus_sept_2vc.csv")
	vcs := sharedData(t, "helios/venus_sept_2vc_vcs.csv")
	dir := t.TempDir()
	out := filepath.Join(dir, "venus.html")
	got := runReportJSON(t, "--trace", path, "--format", "helios", "--out", out, "--analytics.capacity-file", vcs)
	venusFigures(t, path).check(t, got, []string{"completed", "cancelled", "failed"})
	if got.StartAtSubmit == nil || *got.StartAtSubmit != 1867 || got.Cluster != "venus_sept_2vc" || got.Out != out {
		t.Errorf("start_at_submit_jobs, cluster, out = %v, %q, %q; want 1867, venus_sept_2vc, %s", got.StartAtSubmit, got.Cluster, got.Out, out)
	}

	page, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"(176 GPUs: its configured VCs summed)", "taken to start when submitted", "vcvGl", "vcvlY"} {
		if !bytes.Contains(page, []byte(s)) {
			t.Errorf("report lacks %q", s)
		}
	}
	// No job waited (the trace has no start times) and a trace has no GPU
	// samples: those two figures give way to notes; every other is drawn.
	want := []string{report.FigDurationCDF, report.FigStateShare, report.FigUtilHeatmap, report.FigUtilHour, report.FigUtilWeekday,
		report.FigMonthly, report.FigVCUtil, report.FigGPUCount, report.FigStateByGPUs, report.FigUserCurve}
	reporttest.Check(t, page, want, dir)
}

// smallSWF has every SWF status the issue names (1 completed, 0 failed, 5
// cancelled, others unknown), allocated processors and, where those are
// -1, requested ones, and a job that used none.
const smallSWF = `; UnixStartTime: 1000000000
; MaxProcs: 64
    1      0     10   3600    8   -1   -1    8   7200   -1  1    5  1  -1  1  1 -1 -1
    2     60      0    100    4   -1   -1    4    600   -1  0    6  1  -1  1  1 -1 -1
    3    120     30    200   -1   -1   -1   16   3600   -1  5    5  1  -1  1  1 -1 -1
    4    180     10    500    2   -1   -1    2   1000   -1 -1    7  2  -1  1  2 -1 -1
    5    240      0     50    1   -1   -1    1    100   -1  1    5  1  -1  1  1 -1 -1
    6    300      5    400   32   -1   -1   32    600   -1  2    8  1  -1  1  1 -1 -1
    7    360      0     70    0   -1   -1    0    100   -1  1    9  1  -1  1  1 -1 -1
    8   7200     60  86000   16   -1   -1   16  90000   -1  1    5  1  -1  1  1 -1 -1
`

// TestReportTraceSWF imports an SWF trace into an existing ClickHouse
// (--clickhouse.addr), then reports on the same window from the result
// tables alone.
func TestReportTraceSWF(t *testing.T) {
	cfg, _ := schematest.Database(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "small.swf")
	if err := os.WriteFile(path, []byte(smallSWF), 0o644); err != nil {
		t.Fatal(err)
	}
	ch := chFlags(cfg)
	got := runReportJSON(t, append([]string{"--trace", path, "--format", "swf", "--out", filepath.Join(dir, "swf.html")}, ch...)...)

	// Processors play GPUs: allocated, else requested (job 3: 16).
	want := figuresOf(
		[]string{"5", "6", "5", "7", "5", "8", "9", "5"},
		[]float64{8, 4, 16, 2, 1, 32, 0, 16},
		[]string{"completed", "failed", "cancelled", "unknown", "completed", "unknown", "completed", "completed"},
		[]float64{3600, 100, 200, 500, 50, 400, 70, 86000})
	want.check(t, got, []string{"completed", "cancelled", "failed", "unknown"})
	if got.StartAtSubmit == nil || *got.StartAtSubmit != 0 {
		t.Errorf("start_at_submit_jobs = %v; want 0 (SWF gives wait times)", got.StartAtSubmit)
	}
	if page, err := os.ReadFile(filepath.Join(dir, "swf.html")); err != nil || !bytes.Contains(page, []byte("gives processors, not GPUs")) {
		t.Errorf("SWF report does not say its GPU figures count processors (%v)", err)
	}

	// The same window from ClickHouse alone: already characterized, same
	// figures; and without --since, the latest characterized window.
	since, until, _ := strings.Cut(got.Window, "/")
	again := runReportJSON(t, append([]string{"--since", since, "--until", until, "--out", filepath.Join(dir, "again.html")}, ch...)...)
	want.check(t, again, []string{"completed", "cancelled", "failed", "unknown"})
	latest := runReportJSON(t, ch...)
	if latest.Window != got.Window || latest.Jobs != got.Jobs {
		t.Errorf("report without a window: window %s, %d jobs; want %s, %d", latest.Window, latest.Jobs, got.Window, got.Jobs)
	}
	page, err := os.ReadFile(filepath.Join(dir, "again.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(page, []byte(`data-figure="`+report.FigUserQueue+`"`)) {
		t.Errorf("SWF report lacks the queuing-delay figure (its jobs waited)")
	}
}

func TestReportFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "want --out FILE.html, --json or both"},
		{[]string{"--json", "--until", "2020-01-01"}, "--until needs --since"},
		{[]string{"--json", "--trace", "x.csv", "--format", "parquet"}, `--format "parquet"`},
		{[]string{"--json", "--format", "swf"}, "--format is for --trace"},
		{[]string{"--json", "extra"}, `unexpected argument "extra"`},
		{[]string{"--json", "--since", "yesterday", "--clickhouse.addr", "127.0.0.1:1"}, ""},
		// Checked before a ClickHouse is started or the trace imported
		// (the trace does not exist):
		{[]string{"--json", "--trace", "missing.csv", "--since", "2020-02-01", "--until", "2020-01-01"}, "--since/--until"},
		{[]string{"--json", "--trace", "missing.csv", "--analytics.timezone", "Mars/Olympus"}, `--analytics.timezone "Mars/Olympus"`},
		{[]string{"--out", "/nonexistent/dir/r.html", "--trace", "missing.csv"}, "directory /nonexistent/dir does not exist"},
		{[]string{"--out", os.TempDir(), "--trace", "missing.csv"}, "is a directory"},
		// The cluster, like import's: Helios' cluster_log.csv takes its
		// directory's name, and a name no job event can hold is refused.
		{[]string{"--json", "--trace", "cluster_log.csv"}, "give --cluster"},
		{[]string{"--json", "--trace", "missing.csv", "--cluster", strings.Repeat("c", 2000)}, "--cluster"},
		{[]string{"--json", "--trace", "caf\xe9.csv"}, "not valid UTF-8"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), append([]string{"report"}, tc.args...), noEnv, &stdout, &stderr)
		if err == nil {
			t.Errorf("report %v: no error", tc.args)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("report %v: error %q; want it to say %q", tc.args, err, tc.want)
		}
		if stdout.Len() != 0 {
			t.Errorf("report %v: wrote %q on stdout", tc.args, stdout.String())
		}
	}
	if _, err := parseWhen("since", "yesterday"); err == nil || !strings.Contains(err.Error(), "RFC 3339") {
		t.Errorf("parseWhen(yesterday) = %v; want an error naming the formats", err)
	}
}

// TestReportTraceNoStart: a Helios trace without start times, told not to
// assume any, has no known run time: the median is null in the JSON, and
// the duration figure gives way to a note.
func TestReportTraceNoStart(t *testing.T) {
	cfg, _ := schematest.Database(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "nostart.csv")
	csv := "job_id,user,vc,gpu_num,node_num,state,submit_time,duration\n" +
		"1,u1,vc1,8,1,COMPLETED,2020-09-01 01:00:00,100\n" +
		"2,u2,vc1,1,1,FAILED,2020-09-01 02:00:00,50\n"
	if err := os.WriteFile(path, []byte(csv), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "nostart.html")
	got := runReportJSON(t, append([]string{"--trace", path, "--out", out, "--trace.start-at-submit=false"}, chFlags(cfg)...)...)
	if got.Jobs != 2 || got.DurationMedianS != nil || got.StartAtSubmit == nil || *got.StartAtSubmit != 0 {
		t.Errorf("jobs %d, duration_median_s %v, start_at_submit_jobs %v; want 2, null, 0", got.Jobs, got.DurationMedianS, got.StartAtSubmit)
	}
	if got.StateShare["completed"] != 0.5 || got.StateShare["failed"] != 0.5 {
		t.Errorf("state_share = %v; want half completed, half failed", got.StateShare)
	}
	page, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(page, []byte(`data-figure="`+report.FigDurationCDF+`"`)) || !bytes.Contains(page, []byte(`id="fig-`+report.FigDurationCDF+`"`)) {
		t.Errorf("report without run times: want a note, not a figure, for the run times")
	}
}

// TestReportTraceProgress: a trace import logs its progress every
// --progress-interval (here at every job), and a negative interval is
// refused before anything starts.
func TestReportTraceProgress(t *testing.T) {
	cfg, _ := schematest.Database(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "small.swf")
	if err := os.WriteFile(path, []byte(smallSWF), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	argv := []string{"report", "--json", "--trace", path, "--format", "swf", "--progress-interval", "1ns", "--clickhouse.batch-events", "2"}
	argv = append(argv, chFlags(cfg)...)
	if err := run(t.Context(), argv, noEnv, &stdout, &stderr); err != nil {
		t.Fatalf("heliostat %s: %v\nstderr: %s", strings.Join(argv, " "), err, stderr.String())
	}
	if n := strings.Count(stderr.String(), `msg="import progress"`); n < 2 || !strings.Contains(stderr.String(), "jobs=8") {
		t.Errorf("%d progress lines for the 8-job trace; want one per job, naming the total:\n%s", n, stderr.String())
	}
	err := run(t.Context(), []string{"report", "--json", "--trace", path, "--progress-interval", "-1s"}, noEnv, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "--progress-interval -1s is negative") {
		t.Errorf("report --progress-interval -1s: %v; want it refused", err)
	}
}

// TestReportStoredSettings: report reuses a window's stored results unless
// --analytics.timezone or --analytics.capacity was given and differs from
// what they were computed with; then it computes them again, as --rerun
// does. time_zone in --json is that of the figures reported.
func TestReportStoredSettings(t *testing.T) {
	day := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	end := day.Add(5 * time.Hour)
	window := []string{"--since", "2026-03-02", "--until", "2026-03-03"}
	for _, tc := range []struct {
		name          string
		stored, given []string // flags of `analytics run` and of `report`
		rerun         bool
		tz            string
		gpus          uint32 // capacity of the cluster used
		source        string
	}{
		{"no flags", nil, nil, false, "UTC", 4, "peak"},
		{"no flags, stored in another zone", []string{"--analytics.timezone", "Asia/Shanghai"}, nil, false, "Asia/Shanghai", 4, "peak"},
		{"another zone and capacity", nil, []string{"--analytics.timezone", "Asia/Shanghai", "--analytics.capacity", "c=100"}, true, "Asia/Shanghai", 100, "config"},
		{"the same zone and capacity", []string{"--analytics.timezone", "Asia/Shanghai", "--analytics.capacity", "c=100"},
			[]string{"--analytics.timezone", "Asia/Shanghai", "--analytics.capacity", "c=100"}, false, "Asia/Shanghai", 100, "config"},
		{"another capacity", []string{"--analytics.capacity", "c=100"}, []string{"--analytics.capacity", "c=50"}, true, "UTC", 50, "config"},
		{"a capacity where none was configured", nil, []string{"--analytics.capacity", "c=4"}, true, "UTC", 4, "config"},
		{"UTC given, stored in another zone", []string{"--analytics.timezone", "Asia/Shanghai"}, []string{"--analytics.timezone", "UTC"}, true, "UTC", 4, "peak"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, conn := schematest.Database(t)
			ctx := context.Background()
			db := cfg.Database
			schematest.InsertJobRows(t, conn, db, "cluster, job_id, source, user, partition_name, state, submit_time, start_time, end_time, gpus, last_event, updated_at, inserted_at, version",
				[]any{"c", "1", "slurm", "alice", "gpu", "COMPLETED", day, &day, &end, uint32(4), "END", end, end, uint64(1)})
			ch := append(chFlags(cfg), window...)
			var out, errb bytes.Buffer
			if err := run(ctx, append(append([]string{"analytics", "run", "--log.level", "warn"}, ch...), tc.stored...), noEnv, &out, &errb); err != nil {
				t.Fatalf("analytics run: %v\n%s", err, errb.String())
			}
			got := runReportJSON(t, append(ch, tc.given...)...)
			if rerun := got.CharacterizeS > 0; rerun != tc.rerun {
				t.Errorf("report computed the window again: %v; want %v", rerun, tc.rerun)
			}
			var tz, source string
			var gpus uint32
			if err := conn.QueryRow(ctx, "SELECT any(tz) FROM "+db+".analytics_utilization WHERE window_id = '2026-03-02T00:00:00Z/2026-03-03T00:00:00Z'").Scan(&tz); err != nil {
				t.Fatal(err)
			}
			if err := conn.QueryRow(ctx, "SELECT gpus, source FROM "+db+".analytics_capacity WHERE window_id = '2026-03-02T00:00:00Z/2026-03-03T00:00:00Z' AND vc = ''").Scan(&gpus, &source); err != nil {
				t.Fatal(err)
			}
			if got.TimeZone != tc.tz || tz != tc.tz {
				t.Errorf("time_zone %q in --json, %q in the results; want %q in both", got.TimeZone, tz, tc.tz)
			}
			if gpus != tc.gpus || source != tc.source {
				t.Errorf("capacity %d GPUs (%s); want %d (%s)", gpus, source, tc.gpus, tc.source)
			}
		})
	}
}

// TestReportNoData: a window whose only job still runs has no ended job to
// share out and no GPU time: report --json prints those shares as null, as
// analytics run --json does (they were 0), and the page shows "–" for them.
func TestReportNoData(t *testing.T) {
	cfg, conn := schematest.Database(t)
	db := cfg.Database
	day := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	schematest.InsertJobRows(t, conn, db, "cluster, job_id, source, user, partition_name, state, submit_time, start_time, gpus, last_event, updated_at, inserted_at, version",
		[]any{"c", "1", "slurm", "alice", "gpu", "RUNNING", day, &day, uint32(4), "START", day, day, uint64(1)})
	ch := append(chFlags(cfg), "--since", "2026-03-02", "--until", "2026-03-03", "--json", "--log.level", "warn")
	page := filepath.Join(t.TempDir(), "page.html")
	var outputs [2]map[string]any
	for i, cmd := range [][]string{{"analytics", "run"}, {"report", "--out", page}} {
		var stdout, stderr bytes.Buffer
		if err := run(t.Context(), append(cmd, ch...), noEnv, &stdout, &stderr); err != nil {
			t.Fatalf("%v: %v\n%s", cmd, err, stderr.String())
		}
		if err := json.Unmarshal(stdout.Bytes(), &outputs[i]); err != nil {
			t.Fatalf("%v: %v: %q", cmd, err, stdout.String())
		}
	}
	headline := outputs[0]["headlines"].([]any)[0].(map[string]any)
	for _, key := range []string{"state_share", "gpu_time_state_share", "top5pct_users_gpu_time_share"} {
		want, _ := json.Marshal(headline[key])
		got, _ := json.Marshal(outputs[1][key])
		if string(got) != string(want) || strings.Contains(string(got), "0") {
			t.Errorf("report --json %s = %s; want %s as analytics run --json prints, no data as null", key, got, want)
		}
	}
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, tile := range []string{"of jobs completed", "of jobs cancelled", "of jobs failed", "of GPU time used by the top 5% of users"} {
		if !strings.Contains(string(b), "<b>–</b><span>"+tile+"</span>") {
			i := strings.Index(string(b), tile)
			t.Errorf("page: the tile %q does not show –: %s", tile, string(b)[max(0, i-40):i+len(tile)])
		}
	}
}

// TestRefusedHintsUp: a one-shot command whose ClickHouse refuses the
// connection at an address not given on its command line (the default
// 127.0.0.1:9000, or $HELIOSTAT_CLICKHOUSE_ADDR's) says where `heliostat
// up`'s ClickHouse listens; an address given with --clickhouse.addr gets
// no hint. Before, `report --out r.html` on up's data, as the README said
// to run it, failed with "connection refused" alone.
func TestRefusedHintsUp(t *testing.T) {
	port, err := chserver.FreePort() // nothing listens on it
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	env := func(k string) string {
		if k == "HELIOSTAT_CLICKHOUSE_ADDR" {
			return addr
		}
		return ""
	}
	trace := fixture(t, "import_small.swf.in", "small.swf")
	hint := regexp.MustCompile(`\(127\.0\.0\.1:\d+ is from \$HELIOSTAT_CLICKHOUSE_ADDR; ` + "`heliostat up`" + `'s ClickHouse listens on 127\.0\.0\.1:19000 .*: for its data, pass --clickhouse\.addr 127\.0\.0\.1:19000\)$`)
	for _, args := range [][]string{
		{"report", "--out", filepath.Join(t.TempDir(), "r.html")},
		{"analytics", "run"},
		{"analytics", "capacity"},
		{"schema", "apply"},
		{"import", "--to", "clickhouse", trace},
	} {
		for _, given := range []bool{false, true} {
			argv := append([]string{}, args...)
			if given {
				argv = append(argv, "--clickhouse.addr", addr)
			}
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), argv, env, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), "connection refused") {
				t.Errorf("%q: error %v; want connection refused", argv, err)
				continue
			}
			if got := hint.MatchString(err.Error()); got == given {
				t.Errorf("%q: error %q; want the hint about up's ClickHouse: %v", argv, err, !given)
			}
		}
	}
}
