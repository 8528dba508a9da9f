package slurm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/heliostat-dev/heliostat/collector/slurm/slurmtest"
	"github.com/heliostat-dev/heliostat/schemas"
)

// jcLine is a job-completion log line of job 77 as Slurm 22.05 writes it,
// times in UTC.
func jcLine(state string, submit, start, end int64) string {
	tm := func(sec int64) string { return time.Unix(sec, 0).UTC().Format(jobCompTime) }
	return fmt.Sprintf("JobId=77 UserId=alice(1000) GroupId=users(100) Name=train JobState=%s Partition=batch TimeLimit=60 StartTime=%s EndTime=%s "+
		"NodeList=gpu1 NodeCnt=1 ProcCnt=1 WorkDir=/home/alice ReservationName= Tres=cpu=1,mem=1000M,node=1,billing=1,gres/gpu=1 Account=ml QOS=normal WcKey= "+
		"Cluster=c1 SubmitTime=%s EligibleTime=%s DerivedExitCode=0:0 ExitCode=0:0\n", state, tm(start), tm(end), tm(submit), tm(submit))
}

// acctDoc is a sacct --json document with one record of job 77.
func acctDoc(state string, submit, start, end int64) string {
	return fmt.Sprintf(`{"meta": {"plugin": {"type": "openapi/dbv0.0.40"}}, "errors": [], "jobs": [{"job_id": 77, "array": {"job_id": 0, "task": null, "task_id": null},
  "name": "train", "user": "alice", "group": "users", "account": "ml", "partition": "batch", "qos": "normal", "nodes": "gpu1", "allocation_nodes": 1,
  "state": {"current": %q}, "exit_code": {"status": "SUCCESS", "return_code": 0}, "priority": 10,
  "time": {"submission": %d, "eligible": %d, "start": %d, "end": %d, "limit": 60},
  "tres": {"allocated": [{"type": "cpu", "name": null, "count": 1}, {"type": "gres", "name": "gpu", "count": 1}], "requested": []}}]}`,
		state, submit, submit, start, end)
}

// TestRequeue feeds the source listings of a job that Slurm requeues, with
// what the job-completion log and the accounting hold: the requeued run ends
// at the requeue (the submit time of the next run) in the state Slurm's
// records give it, else CANCELLED, with its GPU closed then, and the job goes
// on as a new run under its id; nothing is lost or counted as an id reuse. A
// newer job under the id (no higher restart count) ends the tracked one as
// lost at the last listing that showed it.
func TestRequeue(t *testing.T) {
	base := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	bs := base.Unix()
	s0, st0 := bs-100, bs-50 // the first run's submit and start
	run0 := job(77, "RUNNING", s0, 0).on("gpu1", st0)
	pend := func(submit, restarts int64) sqJob { return job(77, "PENDING", submit, restarts) }
	completing := job(77, "COMPLETING", s0, 1)
	completing.nodes, completing.start = "gpu1", bs+40
	type step struct {
		jobs    []sqJob
		jobcomp string // appended to the log before the poll
		acct    string // what sacct prints from this poll on
	}
	for _, tc := range []struct {
		name                                     string
		accounting                               bool
		steps                                    []step // polls 30 s apart, the first at base+30s
		want                                     string // job 77's events (describe)
		allocs                                   string
		lost, requeued, superseded, olderSkipped float64
	}{
		{
			name:  "requeue seen only in squeue",
			steps: []step{{jobs: []sqJob{run0}}, {jobs: []sqJob{run0}}, {jobs: []sqJob{pend(bs+75, 1)}}, {jobs: []sqJob{pend(bs+75, 1)}}, {jobs: []sqJob{job(77, "RUNNING", bs+75, 1).on("gpu2", bs+140)}}},
			want: "SUBMIT PENDING at -100000 end -; START RUNNING at -50000 end -; END CANCELLED at +75000 end +75000; " +
				"SUBMIT PENDING at +75001 end -; START RUNNING at +140000 end -",
			allocs:   "gpu1 -50000..; gpu1 -50000..+75000; gpu2 +140000..",
			requeued: 1,
		},
		{
			name:     "preempted: the log has the run's end",
			steps:    []step{{jobs: []sqJob{run0}}, {jobs: []sqJob{run0}}, {jobs: []sqJob{pend(bs+75, 1)}, jobcomp: jcLine("PREEMPTED", s0, st0, bs+75)}},
			want:     "SUBMIT PENDING at -100000 end -; START RUNNING at -50000 end -; END PREEMPTED at +75000 end +75000; SUBMIT PENDING at +75001 end -",
			allocs:   "gpu1 -50000..; gpu1 -50000..+75000",
			requeued: 1,
		},
		{
			name:     "requeued on request: the log says PENDING",
			steps:    []step{{jobs: []sqJob{run0}}, {jobs: []sqJob{pend(bs+75, 1)}, jobcomp: jcLine("PENDING", s0, st0, bs+74)}},
			want:     "SUBMIT PENDING at -100000 end -; START RUNNING at -50000 end -; END CANCELLED at +74000 end +74000; SUBMIT PENDING at +75000 end -",
			allocs:   "gpu1 -50000..; gpu1 -50000..+74000",
			requeued: 1,
		},
		{
			name: "the log has the end while squeue shows the run completing",
			steps: []step{{jobs: []sqJob{run0}}, {jobs: []sqJob{completing}, jobcomp: jcLine("NODE_FAIL", s0, st0, bs+40)},
				{jobs: []sqJob{pend(bs+75, 1)}}},
			want:     "SUBMIT PENDING at -100000 end -; START RUNNING at -50000 end -; END NODE_FAIL at +40000 end +40000; SUBMIT PENDING at +75000 end -",
			allocs:   "gpu1 -50000..; gpu1 -50000..+40000",
			requeued: 1,
		},
		{
			name: "the log's line comes after the next run",
			steps: []step{{jobs: []sqJob{run0}}, {jobs: []sqJob{pend(bs+45, 1)}},
				{jobs: []sqJob{pend(bs+45, 1)}, jobcomp: jcLine("PREEMPTED", s0, st0, bs+45)}},
			want:     "SUBMIT PENDING at -100000 end -; START RUNNING at -50000 end -; END CANCELLED at +45000 end +45000; SUBMIT PENDING at +45001 end -",
			allocs:   "gpu1 -50000..; gpu1 -50000..+45000",
			requeued: 1,
		},
		{
			name:       "preempted: the accounting has the run's end",
			accounting: true,
			steps: []step{{jobs: []sqJob{run0}, acct: `{"jobs": []}`}, {jobs: []sqJob{pend(bs+45, 1)}, acct: acctDoc("PREEMPTED", s0, st0, bs+45)},
				{jobs: []sqJob{pend(bs+45, 1)}}, {jobs: []sqJob{pend(bs+45, 1)}}, {jobs: []sqJob{pend(bs+45, 1)}}},
			want:     "SUBMIT PENDING at -100000 end -; START RUNNING at -50000 end -; END PREEMPTED at +45000 end +45000; SUBMIT PENDING at +45001 end -",
			allocs:   "gpu1 -50000..; gpu1 -50000..+45000",
			requeued: 1,
		},
		{
			name:       "requeued on request: the accounting says REQUEUED",
			accounting: true,
			steps:      []step{{jobs: []sqJob{run0}, acct: `{"jobs": []}`}, {jobs: []sqJob{pend(bs+45, 1)}, acct: acctDoc("REQUEUED", s0, st0, bs+44)}},
			want:       "SUBMIT PENDING at -100000 end -; START RUNNING at -50000 end -; END CANCELLED at +44000 end +44000; SUBMIT PENDING at +45000 end -",
			allocs:     "gpu1 -50000..; gpu1 -50000..+44000",
			requeued:   1,
		},
		{
			name: "requeued twice, and a late line of the first run",
			steps: []step{{jobs: []sqJob{run0}}, {jobs: []sqJob{pend(bs+45, 1)}}, {jobs: []sqJob{job(77, "RUNNING", bs+45, 1).on("gpu2", bs+80)}},
				{jobs: []sqJob{pend(bs+100, 2)}, jobcomp: jcLine("PREEMPTED", s0, st0, bs+45)}},
			want: "SUBMIT PENDING at -100000 end -; START RUNNING at -50000 end -; END CANCELLED at +45000 end +45000; SUBMIT PENDING at +45001 end -; " +
				"START RUNNING at +80000 end -; END CANCELLED at +100000 end +100000; SUBMIT PENDING at +100001 end -",
			allocs:   "gpu1 -50000..; gpu1 -50000..+45000; gpu2 +80000..; gpu2 +80000..+100000",
			requeued: 2,
		},
		{
			name:       "requeued before the source saw it",
			accounting: true,
			steps:      []step{{jobs: []sqJob{pend(bs+20, 1)}, acct: acctDoc("PREEMPTED", s0, st0, bs+20)}, {jobs: []sqJob{pend(bs+20, 1)}}},
			want:       "SUBMIT PENDING at +20000 end -",
		},
		{
			name:  "a newer job under the id ends the tracked one at the last listing that showed it",
			steps: []step{{jobs: []sqJob{run0}}, {jobs: []sqJob{run0}}, {jobs: []sqJob{pend(bs+80, 0)}}},
			want: "SUBMIT PENDING at -100000 end -; START RUNNING at -50000 end -; END UNKNOWN at +60000 end +60000; " +
				"SUBMIT PENDING at +80000 end -",
			allocs: "gpu1 -50000..; gpu1 -50000..+60000",
			lost:   1, superseded: 1,
		},
		{
			name:  "without a restart count a newer submit time is a newer job",
			steps: []step{{jobs: []sqJob{job(77, "RUNNING", s0, -1).on("gpu1", st0)}}, {jobs: []sqJob{job(77, "RUNNING", s0, -1).on("gpu1", st0)}}, {jobs: []sqJob{pend(bs+75, -1)}}},
			want: "SUBMIT PENDING at -100000 end -; START RUNNING at -50000 end -; END UNKNOWN at +60000 end +60000; " +
				"SUBMIT PENDING at +75000 end -",
			allocs: "gpu1 -50000..; gpu1 -50000..+60000",
			lost:   1, superseded: 1,
		},
		{
			name:         "an older job in the accounting is still not published",
			accounting:   true,
			steps:        []step{{jobs: []sqJob{job(77, "PENDING", bs+10, 0)}, acct: acctDoc("COMPLETED", s0, s0+5, bs-60)}},
			want:         "SUBMIT PENDING at +10000 end -",
			olderSkipped: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			logPath, acctPath := filepath.Join(dir, "jobcomp.log"), filepath.Join(dir, "sacct.json")
			if err := os.WriteFile(logPath, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			sacct := filepath.Join(dir, "sacct")
			if err := os.WriteFile(sacct, []byte("#!/bin/sh\ncat '"+acctPath+"'\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			clock := base
			rec := newRecorder(t, testCluster)
			cfg := Config{Cluster: testCluster, StateFile: filepath.Join(dir, "state.json"), JobCompLog: logPath, JobCompLocation: time.UTC,
				Accounting: tc.accounting, Sacct: sacct, AccountingInterval: time.Minute}
			src, err := New(cfg, rec, testLogger(t), prometheus.NewRegistry(), func() time.Time { return clock })
			if err != nil {
				t.Fatal(err)
			}
			for i, st := range tc.steps {
				clock = base.Add(time.Duration(i+1) * 30 * time.Second)
				if st.jobcomp != "" {
					f, err := os.OpenFile(logPath, os.O_APPEND|os.O_WRONLY, 0)
					if err != nil {
						t.Fatal(err)
					}
					_, err = f.WriteString(st.jobcomp)
					if cerr := f.Close(); err == nil {
						err = cerr
					}
					if err != nil {
						t.Fatal(err)
					}
				}
				if st.acct != "" {
					if err := os.WriteFile(acctPath, []byte(st.acct), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				if err := src.apply(context.Background(), listing(t, st.jobs...), clock); err != nil {
					t.Fatalf("poll %d: %v", i+1, err)
				}
			}
			if got := describe(rec.jobEvents("77"), base); got != tc.want {
				t.Errorf("job 77 events:\n got %s\nwant %s", got, tc.want)
			}
			var allocs []string
			for _, a := range rec.jobAllocs("77") {
				s := fmt.Sprintf("%s %+d..", a.Host, a.StartMillis-base.UnixMilli())
				if a.EndMillis != 0 {
					s += fmt.Sprintf("%+d", a.EndMillis-base.UnixMilli())
				}
				allocs = append(allocs, s)
			}
			if got := strings.Join(allocs, "; "); got != tc.allocs {
				t.Errorf("job 77 allocation records:\n got %s\nwant %s", got, tc.allocs)
			}
			for name, c := range map[string]struct{ got, want float64 }{
				"heliostat_slurm_jobs_lost_total":                           {testutil.ToFloat64(src.m.lost), tc.lost},
				"heliostat_slurm_jobs_requeued_total":                       {testutil.ToFloat64(src.m.requeued), tc.requeued},
				"heliostat_slurm_job_id_reused_total{record=superseded}":    {testutil.ToFloat64(src.m.idReused.WithLabelValues(reuseSuperseded)), tc.superseded},
				"heliostat_slurm_job_id_reused_total{record=older_skipped}": {testutil.ToFloat64(src.m.idReused.WithLabelValues(reuseOlderSkipped)), tc.olderSkipped},
				"heliostat_slurm_parse_errors_total": {testutil.ToFloat64(src.m.parseErrors.WithLabelValues(inputSqueue)) +
					testutil.ToFloat64(src.m.parseErrors.WithLabelValues(inputJobComp)) + testutil.ToFloat64(src.m.parseErrors.WithLabelValues(inputSacct)), 0},
			} {
				if c.got != c.want {
					t.Errorf("%s = %v; want %v", name, c.got, c.want)
				}
			}
			if tc.accounting && (src.acctFailed || src.acctRun.IsZero()) {
				t.Errorf("accounting read %v, failed %v; want read without failing", src.acctRun, src.acctFailed)
			}
		})
	}
}

// slurmRun is one run of a job in Slurm's accounting (sacct --duplicates).
type slurmRun struct {
	state       string
	submit, end int64 // Unix ms; 0 when unknown
}

// slurmRuns returns the runs of job id that the accounting holds, oldest
// first.
func slurmRuns(ctx context.Context, t *testing.T, c *slurmtest.Cluster, id string) []slurmRun {
	t.Helper()
	out, err := c.Run(ctx, "sacct", "--duplicates", "--allocations", "--noheader", "--parsable2", "--format=State,Submit,End", "-j", id)
	if err != nil {
		t.Fatal(err)
	}
	ms := func(s string) int64 {
		tm, err := time.ParseInLocation("2006-01-02T15:04:05", s, time.Local)
		if err != nil {
			return 0
		}
		return tm.UnixMilli()
	}
	var runs []slurmRun
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 3 {
			continue
		}
		state, _, _ := strings.Cut(f[0], " ")
		runs = append(runs, slurmRun{state: state, submit: ms(f[1]), end: ms(f[2])})
	}
	return runs
}

// TestRequeueFollowsSlurm runs a real Slurm with accounting and preemption by
// partition priority (PreemptMode=REQUEUE). Three sources follow it: one
// reading squeue only, one the job-completion log too, one the accounting
// too. A job requeued with scontrol and a job preempted by a job of a
// higher-priority partition each end their first run at the requeue, as
// REQUEUED (CANCELLED on the wire) or PREEMPTED where the log or the
// accounting says so (squeue alone does not say why: CANCELLED), with their
// GPUs' intervals closed then; each goes on as a new run under its id, and
// nothing is lost or counted as an id reuse.
func TestRequeueFollowsSlurm(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Slurm cluster with slurmdbd, MariaDB and preemption")
	}
	c := slurmtest.StartWith(t, slurmtest.Options{Accounting: true, Conf: map[string]string{
		"PreemptType": "preempt/partition_prio",
		"PreemptMode": "REQUEUE",
		"PartitionName": "batch Nodes=gpu[1-4] Default=YES MaxTime=INFINITE State=UP PriorityTier=1\n" +
			"PartitionName=high Nodes=gpu[1-4] MaxTime=INFINITE State=UP PriorityTier=10",
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	defer func() {
		if t.Failed() {
			t.Logf("slurmctld log tail:\n%s", c.LogTail(30))
		}
	}()
	type follower struct {
		name string
		src  *Source
		rec  *recorder
	}
	var fs []follower
	for _, name := range []string{"squeue", "jobcomp", "accounting"} {
		cfg := testConfig(t, c, filepath.Join(t.TempDir(), "state.json"))
		cfg.JobCompLog, cfg.Accounting, cfg.AccountingInterval = "", false, 100*time.Millisecond
		switch name {
		case "jobcomp":
			cfg.JobCompLog = c.JobCompLog()
		case "accounting":
			cfg.Accounting = true
		}
		rec := newRecorder(t, testCluster)
		src, err := New(cfg, rec, testLogger(t), prometheus.NewRegistry(), time.Now)
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, follower{name, src, rec})
	}
	poll := func() {
		t.Helper()
		for _, f := range fs {
			if err := f.src.Poll(ctx); err != nil {
				t.Fatalf("%s source: poll: %v", f.name, err)
			}
		}
	}
	waitRunning := func(id string) {
		t.Helper()
		if _, err := c.WaitState(ctx, func(s string) bool { return s == "RUNNING" }, id); err != nil {
			t.Fatal(err)
		}
		poll()
		for _, f := range fs {
			if got := types(f.rec.jobEvents(id)); got != "SUBMIT START" {
				t.Fatalf("%s source: job %s running: events %q; want SUBMIT START", f.name, id, got)
			}
		}
	}
	// waitRequeued waits until the accounting holds the requeued run of id
	// (state want) and its next run, and returns them.
	waitRequeued := func(id, want string) (requeued, next slurmRun) {
		t.Helper()
		for {
			runs := slurmRuns(ctx, t, c, id)
			if len(runs) >= 2 && runs[0].state == want && runs[0].end != 0 {
				return runs[0], runs[len(runs)-1]
			}
			select {
			case <-ctx.Done():
				t.Fatalf("job %s: accounting shows %+v; want a %s run and the next one", id, runs, want)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	// checkRequeue checks the events of each source for the requeued run
	// and the next one, and its GPUs' intervals.
	checkRequeue := func(id string, gpus int, requeued, next slurmRun, states map[string]string) {
		t.Helper()
		for _, f := range fs {
			evs := f.rec.jobEvents(id)
			if got := types(evs); got != "SUBMIT START END SUBMIT" {
				t.Errorf("%s source: job %s requeued: events %q; want SUBMIT START END SUBMIT", f.name, id, got)
				continue
			}
			end, sub := evs[2], evs[3]
			wantEnd := requeued.end
			if f.name == "squeue" {
				wantEnd = next.submit // the requeue, as squeue shows it
			}
			if end.State.String() != states[f.name] || end.EndMillis != wantEnd || end.EventMillis != wantEnd || end.SubmitMillis != requeued.submit {
				t.Errorf("%s source: job %s END %v at %d, end %d, submit %d; want %s at and ending %d, submit %d",
					f.name, id, end.State, end.EventMillis, end.EndMillis, end.SubmitMillis, states[f.name], wantEnd, requeued.submit)
			}
			if sub.SubmitMillis != next.submit || sub.EventMillis != max(next.submit, end.EventMillis+1) || sub.StartMillis != 0 {
				t.Errorf("%s source: job %s next run's SUBMIT at %d, submit %d, start %d; want submit %d, after the END",
					f.name, id, sub.EventMillis, sub.SubmitMillis, sub.StartMillis, next.submit)
			}
			allocs := f.rec.jobAllocs(id)
			if len(allocs) != 2*gpus {
				t.Errorf("%s source: job %s: %d allocation records; want %d opened and closed", f.name, id, len(allocs), gpus)
				continue
			}
			for _, a := range allocs[gpus:] {
				if a.EndMillis != wantEnd {
					t.Errorf("%s source: job %s GPU %s/%d closed at %d; want %d", f.name, id, a.Host, a.GPUIndex, a.EndMillis, wantEnd)
				}
			}
		}
	}

	// Requeued on request.
	q, err := c.Submit(ctx, "--requeue", "--gres=gpu:1", "-J", "q", "--wrap", "sleep 120")
	if err != nil {
		t.Fatal(err)
	}
	poll()
	waitRunning(q)
	if _, err := c.Run(ctx, "scontrol", "requeue", q); err != nil {
		t.Fatal(err)
	}
	qRun, qNext := waitRequeued(q, "REQUEUED")
	poll()
	checkRequeue(q, 1, qRun, qNext, map[string]string{"squeue": "CANCELLED", "jobcomp": "CANCELLED", "accounting": "CANCELLED"})
	if _, err := c.Run(ctx, "scancel", q); err != nil {
		t.Fatal(err)
	}

	// Preempted and requeued: p holds every GPU, h needs eight.
	p, err := c.Submit(ctx, "--requeue", "--gres=gpu:8", "-N4", "-J", "p", "--wrap", "sleep 120")
	if err != nil {
		t.Fatal(err)
	}
	waitRunning(p)
	h, err := c.Submit(ctx, "-p", "high", "--gres=gpu:8", "-J", "h", "--wrap", "sleep 2")
	if err != nil {
		t.Fatal(err)
	}
	pRun, pNext := waitRequeued(p, "PREEMPTED")
	poll()
	checkRequeue(p, 32, pRun, pNext, map[string]string{"squeue": "CANCELLED", "jobcomp": "PREEMPTED", "accounting": "PREEMPTED"})

	// The requeued runs' records stay in the log and the accounting: they
	// change nothing more. Both next runs end, cancelled while pending.
	if _, err := c.Run(ctx, "scancel", p); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitJob(ctx, q, p, h); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		poll()
		done := true
		for _, f := range fs {
			for _, id := range []string{q, p, h} {
				if evs := f.rec.jobEvents(id); len(evs) == 0 || evs[len(evs)-1].Type != schemas.JobEnd {
					done = false
				}
			}
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobs %s, %s, %s not all ended after 30 s", q, p, h)
		}
	}
	poll()
	for _, f := range fs {
		for _, id := range []string{q, p} {
			if got := types(f.rec.jobEvents(id)); got != "SUBMIT START END SUBMIT END" {
				t.Errorf("%s source: job %s: events %q; want SUBMIT START END SUBMIT END", f.name, id, got)
			}
			if evs := f.rec.jobEvents(id); len(evs) == 5 && (evs[4].State != schemas.StateCancelled || evs[4].StartMillis != 0) {
				t.Errorf("%s source: job %s next run's END %v start %d; want CANCELLED, never started", f.name, id, evs[4].State, evs[4].StartMillis)
			}
		}
		if got := types(f.rec.jobEvents(h)); got != "SUBMIT START END" {
			t.Errorf("%s source: job %s: events %q; want SUBMIT START END", f.name, h, got)
		}
		m := f.src.m
		for name, c := range map[string]struct{ got, want float64 }{
			"heliostat_slurm_jobs_requeued_total":                       {testutil.ToFloat64(m.requeued), 2},
			"heliostat_slurm_jobs_lost_total":                           {testutil.ToFloat64(m.lost), 0},
			"heliostat_slurm_job_id_reused_total{record=superseded}":    {testutil.ToFloat64(m.idReused.WithLabelValues(reuseSuperseded)), 0},
			"heliostat_slurm_job_id_reused_total{record=older_skipped}": {testutil.ToFloat64(m.idReused.WithLabelValues(reuseOlderSkipped)), 0},
			"heliostat_slurm_parse_errors_total{input=jobcomp}":         {testutil.ToFloat64(m.parseErrors.WithLabelValues(inputJobComp)), 0},
			"heliostat_slurm_parse_errors_total{input=sacct}":           {testutil.ToFloat64(m.parseErrors.WithLabelValues(inputSacct)), 0},
		} {
			if c.got != c.want {
				t.Errorf("%s source: %s = %v; want %v", f.name, name, c.got, c.want)
			}
		}
		if err := f.src.Ready(); err != nil {
			t.Errorf("%s source: Ready: %v", f.name, err)
		}
	}
	// The accounting source had both requeued runs' ends from sacct (RQ and
	// PR records, read at once when squeue showed the next runs).
	if got := testutil.ToFloat64(fs[2].src.m.acctRecovered); got != 2 {
		t.Errorf("accounting source: heliostat_slurm_accounting_recovered_total = %v; want 2", got)
	}
}
