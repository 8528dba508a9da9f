package slurm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/heliostat-dev/heliostat/collector/slurm/slurmtest"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

func TestMain(m *testing.M) {
	// schematest.Main runs the tests and stops ClickHouse (end-to-end test);
	// then the Slurm cluster is stopped.
	code := schematest.Main(m)
	slurmtest.StopShared(code)
	os.Exit(code)
}

const testCluster = "slurmtest"

// testConfig is a Config for the cluster c with a fast poll.
func testConfig(t *testing.T, c *slurmtest.Cluster, stateFile string) Config {
	return Config{
		Cluster:         testCluster,
		PollInterval:    250 * time.Millisecond,
		SlurmConf:       c.Conf(),
		JobCompLog:      c.JobCompLog(),
		JobCompLocation: time.Local,
		StateFile:       stateFile,
		HashScripts:     true,
	}
}

// slurmTimes returns a job's submit, start and end times as scontrol shows
// them (seconds, slurmctld's local time), to check the events against a view
// of Slurm that does not go through the source's parser.
func slurmTimes(ctx context.Context, t *testing.T, c *slurmtest.Cluster, id string) (submit, start, end int64, user string) {
	t.Helper()
	out, err := c.Run(ctx, "scontrol", "show", "job", "-o", id)
	if err != nil {
		t.Fatal(err)
	}
	get := func(k string) string {
		for _, f := range strings.Fields(out) {
			if v, ok := strings.CutPrefix(f, k+"="); ok {
				return v
			}
		}
		t.Fatalf("scontrol show job %s has no %s: %s", id, k, out)
		return ""
	}
	ms := func(k string) int64 {
		tm, err := time.ParseInLocation("2006-01-02T15:04:05", get(k), time.Local)
		if err != nil {
			t.Fatalf("scontrol show job %s: %s: %v", id, k, err)
		}
		return tm.UnixMilli()
	}
	u, _, _ := strings.Cut(get("UserId"), "(")
	return ms("SubmitTime"), ms("StartTime"), ms("EndTime"), u
}

// TestSourceFollowsSlurm submits jobs of 1, 2, 8 and 16 GPUs, a cancelled, a
// failed, a held-then-changed job and an array to a real Slurm while the
// source follows it, and checks each job's events and allocation intervals.
// It then checks that a new source on the same state file emits nothing
// again, and reports a job that started and ended while no source ran.
func TestSourceFollowsSlurm(t *testing.T) {
	c := slurmtest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	defer func() {
		if t.Failed() {
			t.Logf("slurmctld log tail:\n%s", c.LogTail(30))
		}
	}()
	stateFile := filepath.Join(t.TempDir(), "state.json")
	rec := newRecorder(t, testCluster)
	src, err := New(testConfig(t, c, stateFile), rec, testLogger(t), prometheus.NewRegistry(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	runDone := make(chan error, 1)
	go func() { runDone <- src.Run(runCtx) }()

	type tc struct {
		name     string
		args     []string
		tasks    int // array tasks; 0 for a plain job
		state    schemas.JobState
		exit     int64
		gpus     int64
		nodes    int
		started  bool
		update   bool // expect one UPDATE (time limit changed while held)
		user     string
		id       string
		cancelIt bool
	}
	cases := []*tc{
		{name: "1 gpu", args: []string{"--gres=gpu:1", "-J", "one", "-t", "5", "--wrap", "sleep 2"}, state: schemas.StateCompleted, gpus: 1, nodes: 1, started: true, user: "root"},
		{name: "2 gpus", args: []string{"--gres=gpu:2", "--wrap", "sleep 2"}, state: schemas.StateCompleted, gpus: 2, nodes: 1, started: true, user: "root"},
		{name: "8 gpus", args: []string{"--gres=gpu:8", "--wrap", "sleep 2"}, state: schemas.StateCompleted, gpus: 8, nodes: 1, started: true, user: "root"},
		{name: "16 gpus on 2 nodes", args: []string{"--gres=gpu:8", "-N2", "--wrap", "sleep 2"}, state: schemas.StateCompleted, gpus: 16, nodes: 2, started: true, user: "root"},
		{name: "failed", args: []string{"--wrap", "exit 3"}, state: schemas.StateFailed, exit: 3, gpus: 0, nodes: 1, started: true, user: "root"},
		{name: "cancelled", args: []string{"--gres=gpu:1", "--wrap", "sleep 60"}, state: schemas.StateCancelled, exit: 128 + 15, gpus: 1, nodes: 1, started: true, user: "root", cancelIt: true},
		{name: "other user", args: []string{"--uid=nobody", "--chdir=/tmp", "-o", "/dev/null", "--gres=gpu:1", "--wrap", "sleep 1"}, state: schemas.StateCompleted, gpus: 1, nodes: 1, started: true, user: "nobody"},
		{name: "held then changed", args: []string{"--hold", "--gres=gpu:1", "-t", "10", "--wrap", "sleep 1"}, state: schemas.StateCompleted, gpus: 1, nodes: 1, started: true, update: true, user: "root"},
		{name: "array", args: []string{"--array=0-2", "--gres=gpu:1", "--wrap", "sleep 1"}, tasks: 3, state: schemas.StateCompleted, gpus: 1, nodes: 1, started: true, user: "root"},
	}
	for _, tc := range cases {
		if tc.id, err = c.Submit(ctx, tc.args...); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
	}
	jobIDs := func(tc *tc) []string {
		if tc.tasks == 0 {
			return []string{tc.id}
		}
		var ids []string
		for i := 0; i < tc.tasks; i++ {
			ids = append(ids, tc.id+"_"+strconv.Itoa(i))
		}
		return ids
	}
	var all []string
	for _, tc := range cases {
		switch {
		case tc.cancelIt:
			// Cancel once the source has seen it run, so that its GPUs
			// were attributed.
			waitEvents(ctx, t, rec, tc.id, "SUBMIT START")
			if _, err := c.Run(ctx, "scancel", tc.id); err != nil {
				t.Fatal(err)
			}
		case tc.update:
			waitEvents(ctx, t, rec, tc.id, "SUBMIT")
			if _, err := c.Run(ctx, "scontrol", "update", "jobid="+tc.id, "timelimit=7"); err != nil {
				t.Fatal(err)
			}
			waitEvents(ctx, t, rec, tc.id, "SUBMIT UPDATE")
			if _, err := c.Run(ctx, "scontrol", "release", tc.id); err != nil {
				t.Fatal(err)
			}
		}
		all = append(all, jobIDs(tc)...)
	}
	if _, err := c.WaitJob(ctx, all...); err != nil {
		t.Fatalf("%v\n%s", err, c.LogTail(20))
	}
	for _, tc := range cases {
		for _, id := range jobIDs(tc) {
			if !tc.update {
				waitEvents(ctx, t, rec, id, "SUBMIT START END")
				continue
			}
			// The release sets the priority of the held job (0 while
			// held): an UPDATE of its own unless the job starts first.
			if got := waitEnd(ctx, t, rec, id); got != "SUBMIT UPDATE START END" && got != "SUBMIT UPDATE UPDATE START END" {
				t.Errorf("job %s: events %q; want SUBMIT UPDATE [UPDATE] START END", id, got)
			}
		}
	}
	stop()
	if err := <-runDone; err != nil {
		t.Fatalf("Run: %v", err)
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, id := range jobIDs(tc) {
				checkJob(ctx, t, c, rec, id, tc.state, tc.exit, tc.gpus, tc.nodes, tc.user)
			}
			if tc.tasks > 0 {
				for i, id := range jobIDs(tc) {
					e := rec.jobEvents(id)[0]
					if e.ArrayJobID != tc.id || e.ArrayTaskID != int64(i) {
						t.Errorf("job %s: array job %q task %d; want %q %d", id, e.ArrayJobID, e.ArrayTaskID, tc.id, i)
					}
				}
			}
			if tc.update {
				evs := rec.jobEvents(tc.id)
				last := evs[len(evs)-1]
				if evs[0].TimeLimitS != 600 || evs[1].TimeLimitS != 420 || last.TimeLimitS != 420 {
					t.Errorf("job %s time limits %d, %d, %d; want 600, 420, 420", tc.id, evs[0].TimeLimitS, evs[1].TimeLimitS, last.TimeLimitS)
				}
				if evs[0].Priority != 0 || last.Priority <= 0 {
					t.Errorf("job %s priority %d while held, %d at the end; want 0, then positive", tc.id, evs[0].Priority, last.Priority)
				}
			}
		})
	}
	if t.Failed() {
		return
	}

	// A new source on the same state file emits nothing again.
	t.Run("restart", func(t *testing.T) {
		rec2 := newRecorder(t, testCluster)
		src2, err := New(testConfig(t, c, stateFile), rec2, testLogger(t), prometheus.NewRegistry(), time.Now)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			if err := src2.Poll(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if n := rec2.eventCount(); n != 0 {
			t.Errorf("restarted source emitted %d events; want 0: %v", n, rec2.events)
		}

		// A job that starts and ends between two polls (here: while no
		// source runs) is reported once, from its final record.
		id, err := c.Submit(ctx, "--gres=gpu:2", "--wrap", "true")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.WaitJob(ctx, id); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			if err := src2.Poll(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if got := types(rec2.jobEvents(id)); got != "SUBMIT START END" {
			t.Errorf("job %s between polls: events %q; want SUBMIT START END", id, got)
		}
		if n := rec2.eventCount(); n != 3 {
			t.Errorf("restarted source emitted %d events; want only the 3 of job %s", n, id)
		}
		if a := rec2.jobAllocs(id); len(a) != 0 {
			t.Errorf("job %s between polls: %d allocations; want none (Slurm shows no GPU indices once a job ended)", id, len(a))
		}
		if got := testutil.ToFloat64(src2.m.noGPUIndex); got != 1 {
			t.Errorf("heliostat_slurm_allocations_unknown_total = %v; want 1", got)
		}
		checkJob(ctx, t, c, rec2, id, schemas.StateCompleted, 0, 2, 1, "root")
	})
}

// waitEvents waits until the recorder has exactly the events want (types,
// space-separated) for job id.
func waitEvents(ctx context.Context, t *testing.T, rec *recorder, id, want string) {
	t.Helper()
	for {
		got := types(rec.jobEvents(id))
		if got == want {
			return
		}
		if !strings.HasPrefix(want, got) {
			t.Fatalf("job %s: events %q; want %q", id, got, want)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("job %s: events %q; want %q: %v", id, got, want, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitEnd waits until the last event recorded for job id is END and returns
// the event types.
func waitEnd(ctx context.Context, t *testing.T, rec *recorder, id string) string {
	t.Helper()
	for {
		evs := rec.jobEvents(id)
		if len(evs) > 0 && evs[len(evs)-1].Type == schemas.JobEnd {
			return types(evs)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("job %s: events %q; want an END: %v", id, types(evs), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// checkJob checks one job's recorded events and allocation intervals against
// what was asked and what Slurm itself reports.
func checkJob(ctx context.Context, t *testing.T, c *slurmtest.Cluster, rec *recorder, id string, state schemas.JobState, exit, gpus int64, nodes int, user string) {
	t.Helper()
	evs := rec.jobEvents(id)
	submit, start, end, slurmUser := slurmTimes(ctx, t, c, id)
	if slurmUser != user {
		t.Fatalf("job %s runs as %q in Slurm; the test wants %q", id, slurmUser, user)
	}
	last := evs[len(evs)-1]
	// A START or END is stamped at Slurm's time, or 1 ms after the job's
	// previous event where that lies later: an UPDATE the source saw in
	// the second Slurm started the job (the release of a held job sets
	// its priority, and the job may start within that second; Slurm's
	// times are whole seconds).
	at := func(i int, slurm int64) int64 {
		if i > 0 && evs[i-1].EventMillis > slurm {
			return evs[i-1].EventMillis + 1
		}
		return slurm
	}
	for i, e := range evs {
		if e.JobID != id || e.User != user || e.SubmitMillis != submit || e.GPUs != gpus || e.Partition != "batch" {
			t.Errorf("job %s %v: id %q user %q submit %d gpus %d partition %q; want %q %q %d %d batch",
				id, e.Type, e.JobID, e.User, e.SubmitMillis, e.GPUs, e.Partition, id, user, submit, gpus)
		}
		if e.CommandHash == "" || len(e.CommandHash) != 64 || e.WorkDir == "" {
			t.Errorf("job %s %v: command hash %q work dir %q", id, e.Type, e.CommandHash, e.WorkDir)
		}
		if (user == "root") != (e.UID == 0) {
			t.Errorf("job %s %v: uid %d for user %s", id, e.Type, e.UID, user)
		}
		switch e.Type {
		case schemas.JobSubmit:
			if e.EventMillis != submit || e.State != schemas.StatePending || e.StartMillis != 0 || len(e.Nodes) != 0 {
				t.Errorf("job %s SUBMIT at %d state %v start %d nodes %v; want at %d PENDING, not started", id, e.EventMillis, e.State, e.StartMillis, e.Nodes, submit)
			}
		case schemas.JobStart:
			if e.EventMillis != at(i, start) || e.StartMillis != start || e.State != schemas.StateRunning || len(e.Nodes) != nodes || e.EndMillis != 0 {
				t.Errorf("job %s START at %d start %d state %v nodes %v end %d; want at %d RUNNING on %d nodes", id, e.EventMillis, e.StartMillis, e.State, e.Nodes, e.EndMillis, at(i, start), nodes)
			}
		case schemas.JobEnd:
			if e.EventMillis != at(i, end) || e.EndMillis != end || e.StartMillis != start || e.State != state || e.ExitCode != exit || len(e.Nodes) != nodes {
				t.Errorf("job %s END at %d start %d end %d state %v exit %d nodes %v; want at %d, %d-%d, %v exit %d on %d nodes",
					id, e.EventMillis, e.StartMillis, e.EndMillis, e.State, e.ExitCode, e.Nodes, at(i, end), start, end, state, exit, nodes)
			}
		}
	}
	if last.Type != schemas.JobEnd {
		t.Errorf("job %s: last event %v; want END", id, last.Type)
	}
	// Allocation intervals: one opening and one closing record per GPU,
	// each GPU of a node once, on the job's nodes.
	allocs := rec.jobAllocs(id)
	if gpus == 0 || len(allocs) == 0 {
		if int64(len(allocs)) != 0 && gpus == 0 {
			t.Errorf("job %s without GPUs has %d allocations", id, len(allocs))
		}
		return
	}
	if int64(len(allocs)) != 2*gpus {
		t.Errorf("job %s: %d allocation records; want %d (open and close of %d GPUs)", id, len(allocs), 2*gpus, gpus)
	}
	closed := map[string]bool{}
	for i, a := range allocs {
		k := fmt.Sprintf("%s/%d", a.Host, a.GPUIndex)
		if a.StartMillis != start || a.Source != schemas.AllocScontrol || a.User != user || !slices.Contains(last.Nodes, a.Host) ||
			a.GPUIndex < 0 || a.GPUIndex >= slurmtest.GPUsPerNode {
			t.Errorf("job %s allocation %+v; want start %d on %v, scontrol", id, a, start, last.Nodes)
		}
		open := int64(i) < gpus
		switch {
		case open && a.EndMillis != 0, !open && a.EndMillis != end:
			t.Errorf("job %s allocation %d ends %d; want open records first, then closed at %d", id, i, a.EndMillis, end)
		case !open:
			if closed[k] {
				t.Errorf("job %s: GPU %s closed twice", id, k)
			}
			closed[k] = true
		}
	}
}
