package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/heliostat-dev/heliostat/analytics"
	"github.com/heliostat-dev/heliostat/collector/sim"
	"github.com/heliostat-dev/heliostat/ingest/trace"
)

// badSWF writes an SWF trace of 400 good jobs (MaxProcs 64) and, after
// them, 7 bad lines on lines 403 to 409, and returns its path. The reasons
// of the bad lines are badSWFReasons.
func badSWF(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("; UnixStartTime: 1000000000\n; MaxProcs: 64\n")
	for i := range 400 {
		fmt.Fprintf(&b, "%d %d 0 %d %d -1 -1 %d 7200 -1 1 %d 1 -1 1 1 -1 -1\n", i+1, i*600, 100+50*(i%5), 1+i%8, 1+i%8, 1+i%3)
	}
	for _, l := range []string{
		"401 1 2 3\n", // bad_field_count
		"402 x 0 10 1 -1 -1 1 60 -1 1 1 1 -1 1 1 -1 -1\n",          // bad_number
		"403 -5 0 10 1 -1 -1 1 60 -1 1 1 1 -1 1 1 -1 -1\n",         // negative_submit
		"404 0 -2 10 1 -1 -1 1 60 -1 1 1 1 -1 1 1 -1 -1\n",         // negative_value
		"405 0 0 10 5000000000 -1 -1 1 60 -1 1 1 1 -1 1 1 -1 -1\n", // out_of_range
		"406 1 2 3\n", // bad_field_count
		"407 1 2 3\n", // bad_field_count
	} {
		b.WriteString(l)
	}
	p := filepath.Join(t.TempDir(), "bad.swf")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

var badSWFReasons = map[string]int{"bad_field_count": 3, "bad_number": 1, "negative_submit": 1, "negative_value": 1, "out_of_range": 1}

// checkRejectsShown checks that stderr names the first shownRejects
// rejected rows of path by file, line and reason, and then the counts.
func checkRejectsShown(t *testing.T, cmd, stderr, path string) {
	t.Helper()
	for line, reason := range map[int]string{403: "bad_field_count", 404: "bad_number", 405: "negative_submit", 406: "negative_value", 407: "out_of_range"} {
		if want := fmt.Sprintf("%s:%d: rejected: %s: ", path, line, reason); !strings.Contains(stderr, want) {
			t.Errorf("%s: stderr lacks %q:\n%s", cmd, want, stderr)
		}
	}
	if want := path + ": 7 rejected rows in all, by reason: bad_field_count 3, bad_number 1, negative_submit 1, negative_value 1, out_of_range 1"; !strings.Contains(stderr, want) {
		t.Errorf("%s: stderr lacks %q:\n%s", cmd, want, stderr)
	}
}

func TestPrintRejects(t *testing.T) {
	rows := func(n int) string {
		var b strings.Builder
		b.WriteString("job_id,submit_time\n")
		for i := range n {
			fmt.Fprintf(&b, "%d,never\n", i+1)
		}
		return b.String() + "99,2020-01-01 00:00:00\n"
	}
	for _, tc := range []struct {
		name   string
		in     string
		lines  []int
		counts bool
	}{
		{"none", rows(0), nil, false},
		{"fewer than shown", rows(3), []int{2, 3, 4}, false},
		{"as many as shown", rows(5), []int{2, 3, 4, 5, 6}, false},
		{"more than shown", rows(8), []int{2, 3, 4, 5, 6}, true},
	} {
		tr, err := trace.ReadHelios(strings.NewReader(tc.in), nil)
		if err != nil {
			t.Fatal(err)
		}
		var w bytes.Buffer
		got := printRejects(&w, "f.csv", tr)
		var lines []int
		for _, r := range got {
			lines = append(lines, r.Line)
			if want := fmt.Sprintf("f.csv:%d: rejected: bad_time: %s\n", r.Line, r.Detail); r.Reason != "bad_time" || !strings.Contains(w.String(), want) {
				t.Errorf("%s: row %+v; output %q lacks %q", tc.name, r, w.String(), want)
			}
		}
		if got == nil || !reflect.DeepEqual(lines, tc.lines) {
			t.Errorf("%s: printRejects = %+v; want lines %v (empty, not nil, for none)", tc.name, got, tc.lines)
		}
		if counts := strings.Contains(w.String(), "rejected rows in all, by reason: bad_time "); counts != tc.counts {
			t.Errorf("%s: output %q; counts by reason printed %v, want %v", tc.name, w.String(), counts, tc.counts)
		}

		var logged bytes.Buffer
		logRejects(slog.New(slog.NewTextHandler(&logged, nil)), "f.csv", tr)
		if n := strings.Count(logged.String(), "level=WARN msg=\"trace row rejected\" file=f.csv line="); n != len(tc.lines) {
			t.Errorf("%s: logged %d rejected rows at warn; want %d:\n%s", tc.name, n, len(tc.lines), logged.String())
		}
		if counts := strings.Contains(logged.String(), "reasons=\"bad_time "); counts != tc.counts {
			t.Errorf("%s: log %q: counts by reason %v, want %v", tc.name, logged.String(), counts, tc.counts)
		}
	}
}

// TestTraceCommandsShowRejects: sim, its capacity sweep and predictor
// backtest name the first rejected rows of their trace (file, line,
// reason) and count them by reason, on stderr and in their JSON, as import
// does; not only how many.
func TestTraceCommandsShowRejects(t *testing.T) {
	path := badSWF(t)
	for _, tc := range []struct {
		args              []string
		reasons, errors   string // JSON fields
		jobsField         string
		jobs              int
		rejectedFieldName string
	}{
		{[]string{"sim", "--trace", path, "--policy", "fifo", "--json"}, "rejected_reasons", "rejected_errors", "trace_jobs", 400, "rejected_rows"},
		{[]string{"sim", "--trace", path, "--capacity-sweep", "1,2", "--json"}, "rejected_reasons", "rejected_errors", "trace_jobs", 400, "rejected_rows"},
		{[]string{"predictor", "backtest", "--trace", path, "--json"}, "reasons", "errors", "jobs", 400, "rejected"},
	} {
		cmd := strings.Join(tc.args[:2], " ")
		var stdout, stderr bytes.Buffer
		if err := run(context.Background(), tc.args, noEnv, &stdout, &stderr); err != nil {
			t.Fatalf("heliostat %s: %v\n%s", strings.Join(tc.args, " "), err, stderr.String())
		}
		checkRejectsShown(t, cmd, stderr.String(), path)
		var res map[string]json.RawMessage
		if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
			t.Fatalf("%s: decode %q: %v", cmd, stdout.String(), err)
		}
		var jobs, rejected int
		var reasons map[string]int
		var errs []rejectedRow
		for _, f := range []struct {
			name string
			dst  any
		}{{tc.jobsField, &jobs}, {tc.rejectedFieldName, &rejected}, {tc.reasons, &reasons}, {tc.errors, &errs}} {
			if err := json.Unmarshal(res[f.name], f.dst); err != nil {
				t.Errorf("%s: JSON field %s %s: %v", cmd, f.name, res[f.name], err)
			}
		}
		var lines []int
		for _, e := range errs {
			lines = append(lines, e.Line)
			if e.Reason == "" || e.Detail == "" {
				t.Errorf("%s: JSON %s: %+v without reason or detail", cmd, tc.errors, e)
			}
		}
		if jobs != tc.jobs || rejected != 7 || !reflect.DeepEqual(reasons, badSWFReasons) || !reflect.DeepEqual(lines, []int{403, 404, 405, 406, 407}) {
			t.Errorf("%s: JSON %d jobs, %d rejected, %v, lines %v; want %d, 7, %v, lines 403-407", cmd, jobs, rejected, reasons, lines, tc.jobs, badSWFReasons)
		}
	}
}

// TestImportRejectsBadStrings: a Helios row with a string a job event cannot
// hold is rejected by the dry run, named by line and field, as the real
// import would have to: the dry run used to take it, and the import then
// stopped at it every time.
func TestImportRejectsBadStrings(t *testing.T) {
	var b strings.Builder
	b.WriteString("job_id,user,vc,job_name,gpu_num,state,submit_time,duration\n")
	for i := 1; i <= 10; i++ {
		user, name := "u1", "train"
		switch i {
		case 6:
			user = "u\xff\xfe"
		case 8:
			name = strings.Repeat("n", 1500)
		}
		fmt.Fprintf(&b, "%d,%s,v,%s,8,COMPLETED,2020-09-01 01:37:15,24\n", i, user, name)
	}
	path := filepath.Join(t.TempDir(), "utf8.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	res, stderr := runImportJSON(t, path, "--dry-run")
	if res.Jobs != 8 || res.Rejected != 2 || !reflect.DeepEqual(res.Reasons, map[string]int{"bad_string": 2}) {
		t.Errorf("import --dry-run: %d jobs, %d rejected %v; want 8, 2 bad_string", res.Jobs, res.Rejected, res.Reasons)
	}
	for _, want := range []string{path + ":7: rejected: bad_string: user ", path + ":9: rejected: bad_string: job_name "} {
		if !strings.Contains(stderr, want) {
			t.Errorf("import --dry-run: stderr %q lacks %q", stderr, want)
		}
	}
	if res.Conversion.Events != 16 {
		t.Errorf("import --dry-run: %d events; want 16 (2 a job)", res.Conversion.Events)
	}
}

// TestSimTraceSWF: `collector --source sim --sim.trace` replays an SWF
// trace with its processors as GPUs on any node, instead of skipping every
// job (SWF has no GPU count) and running an idle cluster.
func TestSimTraceSWF(t *testing.T) {
	path := badSWF(t)
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	f := &simFlags{trace: path, cfg: simDefaults()}
	w, err := f.workload(logger)
	if err != nil {
		t.Fatalf("workload(%s): %v\n%s", path, err, logs.String())
	}
	n := 0
	for {
		spec, ok := w.Next()
		if !ok {
			break
		}
		if spec.GPUs < 1 || spec.GPUs > 8 || spec.VC != "" || spec.Duration <= 0 {
			t.Errorf("job %s: %d GPUs in VC %q for %v; want its 1-8 processors on any node", spec.ID, spec.GPUs, spec.VC, spec.Duration)
		}
		n++
	}
	if n != 400 {
		t.Errorf("workload(%s): %d jobs; want 400", path, n)
	}
	for _, want := range []string{"level=WARN msg=\"trace row rejected\" file=" + path + " line=403 reason=bad_field_count", "level=WARN msg=\"trace rows rejected\""} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
}

// simDefaults returns the --sim.* flags' defaults.
func simDefaults() sim.Config {
	return registerSimFlags(flag.NewFlagSet("collector", flag.ContinueOnError), noEnv).cfg
}

// TestSimTraceNothingToReplay: a trace none of whose jobs the simulated
// cluster can run is refused at start, with the reasons, instead of
// replayed as an idle cluster; skipped jobs are logged at warn with theirs.
func TestSimTraceNothingToReplay(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, text, want string
	}{
		{"cpu jobs.csv", "job_id,vc,gpu_num,submit_time,duration\n1,vc1,0,2020-09-01 00:00:00,10\n2,vc1,,2020-09-01 00:00:00,10\n", "no_gpus 2"},
		{"no run.csv", "job_id,vc,gpu_num,submit_time\n1,vc1,8,2020-09-01 00:00:00\n", "no_run_time 1"},
		{"too large.csv", "job_id,vc,gpu_num,submit_time,duration\n1,vc1,64,2020-09-01 00:00:00,10\n", "larger_than_cluster 1"},
		{"unknown vc.csv", "job_id,vc,gpu_num,submit_time,duration\n1,vcX,8,2020-09-01 00:00:00,10\n", "unknown_vc 1"},
		{"too large.swf", "; MaxProcs: 1000\n1 0 0 10 100 -1 -1 100 60 -1 1 1 1 -1 1 1 -1 -1\n", "larger_than_cluster 1"},
	} {
		path := filepath.Join(dir, tc.name)
		if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		f := &simFlags{trace: path, cfg: simDefaults()}
		_, err := f.workload(slog.New(slog.NewTextHandler(&logs, nil)))
		if err == nil || !strings.Contains(err.Error(), "no job of the trace can run") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("workload(%s) = %v; want a refusal naming %q", tc.name, err, tc.want)
		}
		if !strings.Contains(logs.String(), "level=WARN") {
			t.Errorf("workload(%s): nothing logged at warn:\n%s", tc.name, logs.String())
		}
	}
}

// TestReportTraceTimeZone: report --trace takes an SWF trace's own time zone
// for its hours of day unless --analytics.timezone is given, and says so.
func TestReportTraceTimeZone(t *testing.T) {
	for _, tc := range []struct {
		name, traceTZ string
		given         bool
		want, note    string
	}{
		{"the trace's", "US/Eastern", false, "US/Eastern", "in the trace's time zone, US/Eastern"},
		{"flag given", "US/Eastern", true, "UTC", ""},
		{"none in the trace", "", false, "UTC", ""},
		{"unknown zone", "Mars/Olympus", false, "UTC", `time zone as "Mars/Olympus", which this system does not know`},
	} {
		var stderr bytes.Buffer
		r := &reporter{flags: reportFlags{tracePath: "t.swf", analytics: analytics.Config{TimeZone: "UTC"}}, stderr: &stderr, tzGiven: tc.given}
		r.traceTimeZone(tc.traceTZ)
		if r.flags.analytics.TimeZone != tc.want {
			t.Errorf("%s: time zone %q; want %q", tc.name, r.flags.analytics.TimeZone, tc.want)
		}
		notes := strings.Join(r.notes, " ")
		if tc.note == "" && (notes != "" || stderr.Len() != 0) || tc.note != "" && (!strings.Contains(notes, tc.note) || stderr.Len() == 0) {
			t.Errorf("%s: notes %q, stderr %q; want a note with %q and a line on stderr (or neither)", tc.name, notes, stderr.String(), tc.note)
		}
	}
}
