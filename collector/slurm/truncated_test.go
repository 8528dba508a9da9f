package slurm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/heliostat-dev/heliostat/schemas"
)

// TestPartlyReadListings: a squeue record the source cannot use in full (a
// pending array's task list that Slurm cut short, a record that does not
// parse) leaves only its own jobs unknown. Every other job that vanishes is
// still ended as lost, and the tasks the record did not list are not.
func TestPartlyReadListings(t *testing.T) {
	base := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	bs := base.Unix()
	run77 := job(77, "RUNNING", bs-100, 0).on("gpu1", bs-50)
	run78 := job(78, "RUNNING", bs-100, 0).on("gpu2", bs-50)
	array := func(tasks string) sqJob {
		return sqJob{id: 500, arrayID: 500, task: -1, tasks: tasks, state: "PENDING", submit: bs - 200}
	}
	task4 := sqJob{id: 504, arrayID: 500, task: 4, state: "RUNNING", submit: bs - 200, restarts: 0}.on("gpu3", bs+40)
	// What squeue prints without SLURM_BITSTR_LEN=0 for --array=1,4,9,…,961.
	const squares = "1,4,9,16,25,36,49,64,81,100,121,144,169,196,225,256,28..."
	badState := run78
	badState.state = "EXPLODED"
	noID := job(0, "RUNNING", bs-100, 0).on("gpu4", bs-50)
	noID.noID = true
	for _, tc := range []struct {
		name      string
		listings  [][]sqJob         // 30 s apart, from base+30s
		want      map[string]string // job id → event types
		lost      float64
		truncated float64
		parse     float64
		polled    bool // the last listing counts as complete
	}{
		{
			name:     "a cut task list does not stop lost-job detection",
			listings: [][]sqJob{{array(squares), run77}, {array(squares)}, {array(squares)}},
			want: map[string]string{"77": "SUBMIT START END", "500_1": "SUBMIT", "500_256": "SUBMIT", "500_289": "",
				"500_324": ""},
			lost: 1, truncated: 3, polled: true,
		},
		{
			name: "tasks not listed in full are not lost; tasks listed below the cut are",
			listings: [][]sqJob{{array("0-9")}, {array("0-3,5,7,..."), task4}, {array("0-3,5,7,..."), task4},
				{array("0-3,5,7,..."), task4}},
			want: map[string]string{"500_0": "SUBMIT", "500_4": "SUBMIT START", "500_6": "SUBMIT END", "500_7": "SUBMIT",
				"500_8": "SUBMIT", "500_9": "SUBMIT"},
			lost: 1, truncated: 3, polled: true,
		},
		{
			name:     "a list cut before its first task leaves all the array's pending tasks unknown",
			listings: [][]sqJob{{array("0-2"), run77}, {array("1234...")}, {array("1234...")}},
			want:     map[string]string{"77": "SUBMIT START END", "500_0": "SUBMIT", "500_2": "SUBMIT"},
			lost:     1, truncated: 2, polled: true,
		},
		{
			name:     "a record that does not parse keeps only its own job",
			listings: [][]sqJob{{run77, run78}, {badState}, {badState}},
			want:     map[string]string{"77": "SUBMIT START END", "78": "SUBMIT START"},
			lost:     1, parse: 2, polled: true,
		},
		{
			name:     "a pending array's record that does not parse keeps its tasks",
			listings: [][]sqJob{{array("0-2"), run77}, {array("0-x")}, {array("0-x")}},
			want:     map[string]string{"77": "SUBMIT START END", "500_0": "SUBMIT", "500_2": "SUBMIT"},
			lost:     1, parse: 2, polled: true,
		},
		{
			name:     "a record without a job id stops lost-job detection",
			listings: [][]sqJob{{run77}, {noID}, {noID}, {noID}},
			want:     map[string]string{"77": "SUBMIT START"},
			parse:    3,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, rec, clock := applyListings(t, base, tc.listings)
			for id, want := range tc.want {
				if got := types(rec.jobEvents(id)); got != want {
					t.Errorf("job %s: events %q; want %q", id, got, want)
				}
			}
			for name, c := range map[string]struct{ got, want float64 }{
				"heliostat_slurm_jobs_lost_total":                                {testutil.ToFloat64(src.m.lost), tc.lost},
				"heliostat_slurm_array_task_lists_truncated_total{input=squeue}": {testutil.ToFloat64(src.m.truncated.WithLabelValues(inputSqueue)), tc.truncated},
				"heliostat_slurm_parse_errors_total{input=squeue}":               {testutil.ToFloat64(src.m.parseErrors.WithLabelValues(inputSqueue)), tc.parse},
			} {
				if c.got != c.want {
					t.Errorf("%s = %v; want %v", name, c.got, c.want)
				}
			}
			if got := src.st.Polled == clock.UnixMilli(); got != tc.polled {
				t.Errorf("last complete listing %v; want the last listing (%v) to count: %v", time.UnixMilli(src.st.Polled).UTC(), clock, tc.polled)
			}
		})
	}
}

// applyListings gives a new source (its own state file, clock and
// recorder) each of listings in turn, 30 s apart from base+30s, and returns
// it, its recorder and the time of the last listing.
func applyListings(t *testing.T, base time.Time, listings [][]sqJob) (*Source, *recorder, time.Time) {
	t.Helper()
	clock := base
	rec := newRecorder(t, testCluster)
	cfg := Config{Cluster: testCluster, StateFile: filepath.Join(t.TempDir(), "state.json")}
	src, err := New(cfg, rec, testLogger(t), prometheus.NewRegistry(), func() time.Time { return clock })
	if err != nil {
		t.Fatal(err)
	}
	for i, jobs := range listings {
		clock = base.Add(time.Duration(i+1) * 30 * time.Second)
		if err := src.apply(context.Background(), listing(t, jobs...), clock); err != nil {
			t.Fatalf("listing %d: %v", i+1, err)
		}
	}
	return src, rec, clock
}

// TestCommandsListArraysInFull: squeue and sacct run with SLURM_BITSTR_LEN=0,
// so that Slurm prints a pending array's task list in full.
func TestCommandsListArraysInFull(t *testing.T) {
	dir := t.TempDir()
	script := func(name, out string) string {
		p := filepath.Join(dir, name)
		body := "#!/bin/sh\nprintf '%s' \"${SLURM_BITSTR_LEN-unset}\" > '" + p + ".env'\necho '" + out + "'\n"
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Setenv("SLURM_BITSTR_LEN", "64")
	cfg := Config{Cluster: testCluster, StateFile: filepath.Join(dir, "state.json"), Squeue: script("squeue", `{"jobs": []}`),
		Accounting: true, Sacct: script("sacct", `{"jobs": []}`)}
	src, err := New(cfg, newRecorder(t, testCluster), testLogger(t), prometheus.NewRegistry(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"squeue", "sacct"} {
		b, err := os.ReadFile(filepath.Join(dir, name+".env"))
		if err != nil {
			t.Fatalf("%s did not run: %v", name, err)
		}
		if got := strings.TrimSpace(string(b)); got != "0" {
			t.Errorf("%s ran with SLURM_BITSTR_LEN=%s; want 0", name, got)
		}
	}
}

// TestUnreadableGPURequestPublished: a job whose GPU request is in a form
// the source does not know is published all the same, counted at each poll
// that reads it (heliostat_slurm_fields_unreadable_total), not skipped as
// unparsable: its submit with its GPUs unknown, its start with the GPUs
// Slurm allocated (gres_detail). Before 2026-11-25 every event of it was
// lost.
func TestUnreadableGPURequestPublished(t *testing.T) {
	base := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	bs := base.Unix()
	pending := job(80, "PENDING", bs-100, 0).with("tres_per_node", "gres:gpu:7:x")
	running := job(80, "RUNNING", bs-100, 0).on("gpu1", bs+40).with("tres_per_node", "gres:gpu:7:x")
	src, rec, _ := applyListings(t, base, [][]sqJob{{pending}, {running}})
	evs := rec.jobEvents("80")
	if got := types(evs); got != "SUBMIT START" {
		t.Fatalf("job 80: events %q; want SUBMIT START", got)
	}
	if evs[0].GPUs != schemas.Unknown || evs[1].GPUs != 1 {
		t.Errorf("job 80: GPUs %d at submit, %d at start; want unknown (%d), then 1 as allocated", evs[0].GPUs, evs[1].GPUs, schemas.Unknown)
	}
	if n := testutil.ToFloat64(src.m.unreadable.WithLabelValues(inputSqueue, "gpus")); n != 2 {
		t.Errorf("heliostat_slurm_fields_unreadable_total{input=squeue,field=gpus} = %v; want 2", n)
	}
	if n := testutil.ToFloat64(src.m.parseErrors.WithLabelValues(inputSqueue)); n != 0 {
		t.Errorf("heliostat_slurm_parse_errors_total{input=squeue} = %v; want 0", n)
	}
}
