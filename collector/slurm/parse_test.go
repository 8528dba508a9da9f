package slurm

import (
	"bufio"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/internal/slurmfmt"
	"github.com/heliostat-dev/heliostat/schemas"
)

func TestParseJobCompLine(t *testing.T) {
	loc := time.UTC
	ms := func(s string) int64 {
		tm, err := time.ParseInLocation(jobCompTime, s, loc)
		if err != nil {
			t.Fatal(err)
		}
		return tm.UnixMilli()
	}
	const head = "JobId=8 UserId=alice(1001) GroupId=users(100) Name=wrap JobState=FAILED Partition=batch TimeLimit=5 "
	const times = "StartTime=2026-11-21T23:35:35 EndTime=2026-11-21T23:35:40 "
	const tail = "NodeList=gpu[1-2] NodeCnt=2 ProcCnt=4 WorkDir=/home/alice ReservationName= Tres=cpu=4,mem=2000M,node=2,billing=4 Account=ml QOS=normal WcKey= Cluster=unknown SubmitTime=2026-11-21T23:35:25 EligibleTime=2026-11-21T23:35:26 DerivedExitCode=0:0 ExitCode=3:0 \n"
	for _, tc := range []struct {
		name string
		line string
		want func(e *schemas.JobEvent) // edits the expected event of the full line
		err  string
	}{
		{"full", head + times + tail, func(*schemas.JobEvent) {}, ""},
		{"name with spaces", strings.Replace(head, "Name=wrap", "Name=my big job", 1) + times + tail,
			func(e *schemas.JobEvent) { e.Name = "my big job" }, ""},
		{"name and directory with Key=value words", strings.NewReplacer("Name=wrap", "Name=sweep Lr=0.1 Seed=7 x", "WorkDir=/home/alice", "WorkDir=/home/alice/Run=3 B=2").Replace(head + times + tail),
			func(e *schemas.JobEvent) { e.Name, e.WorkDir = "sweep Lr=0.1 Seed=7 x", "/home/alice/Run=3 B=2" }, ""},
		{"a field a later Slurm adds", strings.Replace(head+times+tail, " Cluster=unknown", " Cluster=unknown Comment=hi there", 1),
			func(*schemas.JobEvent) {}, ""},
		{"a known key inside a name", strings.Replace(head+times+tail, "Name=wrap", "Name=a Partition=x", 1),
			nil, "field Partition appears twice"},
		{"array task", strings.Replace(head+times+tail, " DerivedExitCode", " ArrayJobId=3 ArrayTaskId=1 DerivedExitCode", 1),
			func(e *schemas.JobEvent) { e.JobID, e.ArrayJobID, e.ArrayTaskID = "3_1", "3", 1 }, ""},
		{"signal", strings.Replace(head+times+tail, "ExitCode=3:0 ", "ExitCode=0:9 ", 1),
			func(e *schemas.JobEvent) { e.ExitCode = 137 }, ""},
		{"unlimited, cancelled while pending", strings.NewReplacer("TimeLimit=5", "TimeLimit=UNLIMITED", "JobState=FAILED", "JobState=CANCELLED",
			"NodeList=gpu[1-2]", "NodeList=(null)", "ExitCode=3:0 ", "ExitCode=0:0 ").Replace(head + times + tail),
			func(e *schemas.JobEvent) {
				e.TimeLimitS, e.State, e.Nodes, e.StartMillis, e.ExitCode = schemas.Unknown, schemas.StateCancelled, nil, 0, 0
			}, ""},
		{"cancelled by uid", strings.Replace(head+times+tail, "JobState=FAILED", "JobState=CANCELLED by 0", 1),
			func(e *schemas.JobEvent) { e.State = schemas.StateCancelled }, ""},
		// A run requeued on request: Slurm 22.05 writes the state the job
		// was left in.
		{"requeued, as 22.05 writes it", strings.Replace(head+times+tail, "JobState=FAILED", "JobState=PENDING", 1),
			func(e *schemas.JobEvent) { e.State = requeuedState }, ""},
		{"requeued", strings.Replace(head+times+tail, "JobState=FAILED", "JobState=REQUEUED", 1),
			func(e *schemas.JobEvent) { e.State = requeuedState }, ""},
		{"preempted and requeued", strings.Replace(head+times+tail, "JobState=FAILED", "JobState=PREEMPTED", 1),
			func(e *schemas.JobEvent) { e.State = schemas.StatePreempted }, ""},
		{"gpus in tres", strings.Replace(head+times+tail, "billing=4", "billing=4,gres/gpu=16", 1),
			func(e *schemas.JobEvent) { e.GPUs = 16 }, ""},
		{"time before 1970", strings.Replace(head+times+tail, "SubmitTime=2026-11-21T23:35:25", "SubmitTime=1969-12-31T23:00:00", 1), nil, "field SubmitTime: \"1969-12-31T23:00:00\": -3600000 ms is before 1970"},
		{"time after 2106", strings.Replace(head+times+tail, "EndTime=2026-11-21T23:35:40", "EndTime=2107-01-01T00:00:00", 1), nil, "field EndTime: \"2107-01-01T00:00:00\": 4323283200000 ms is after 2106"},
		{"bad time", strings.Replace(head+times+tail, "EndTime=2026-11-21T23:35:40", "EndTime=yesterday", 1), nil, "field EndTime"},
		{"no job id", strings.Replace(head+times+tail, "JobId=8 ", "", 1), nil, "field JobId is missing"},
		{"bad user", strings.Replace(head+times+tail, "alice(1001)", "alice", 1), nil, "field UserId"},
		{"running state", strings.Replace(head+times+tail, "JobState=FAILED", "JobState=RUNNING", 1), nil, "not a final state"},
		{"unknown state", strings.Replace(head+times+tail, "JobState=FAILED", "JobState=EXPLODED", 1), nil, "unknown job state"},
		{"bad hostlist", strings.Replace(head+times+tail, "gpu[1-2]", "gpu[2-1]", 1), nil, "field NodeList"},
		{"bad exit code", strings.Replace(head+times+tail, "ExitCode=3:0 ", "ExitCode=3 ", 1), nil, "field ExitCode"},
		{"duplicate key", head + head, nil, "appears twice"},
		{"garbage", "hello world\n", nil, "before the first Key=value"},
		{"empty", "   \n", nil, "no Key=value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseJobCompLine(tc.line, loc)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("parseJobCompLine(%q) error = %v; want one containing %q", tc.line, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseJobCompLine(%q): %v", tc.line, err)
			}
			want := schemas.JobEvent{
				JobID: "8", ArrayTaskID: schemas.Unknown, Name: "wrap", User: "alice", UID: 1001, Group: "users",
				Account: "ml", Partition: "batch", QOS: "normal", State: schemas.StateFailed, ExitCode: 3,
				Priority: schemas.Unknown, SubmitMillis: ms("2026-11-21T23:35:25"), EligibleMillis: ms("2026-11-21T23:35:26"),
				StartMillis: ms("2026-11-21T23:35:35"), EndMillis: ms("2026-11-21T23:35:40"), TimeLimitS: 300,
				NodeCount: 2, Nodes: []string{"gpu1", "gpu2"}, CPUs: 4, GPUs: schemas.Unknown, MemReqBytes: 2000 << 20,
				WorkDir: "/home/alice",
			}
			tc.want(&want)
			if !eventsEqual(o.ev, want) {
				t.Errorf("parseJobCompLine(%q)\n got %+v\nwant %+v", tc.line, o.ev, want)
			}
			if o.started != (want.StartMillis != 0) || o.kind != kindFinal {
				t.Errorf("parseJobCompLine(%q): started %v kind %d", tc.line, o.started, o.kind)
			}
		})
	}
}

// checkTimesStorable fails the test when an accepted record has a time the
// job tables' DateTime columns cannot hold.
func checkTimesStorable(t *testing.T, e *schemas.JobEvent) {
	t.Helper()
	for _, ms := range [...]int64{e.SubmitMillis, e.EligibleMillis, e.StartMillis, e.EndMillis} {
		if p := schemas.TimeProblem(ms); p != "" {
			t.Fatalf("accepted job %s with a time ClickHouse cannot store: %s", e.JobID, p)
		}
	}
}

func eventsEqual(a, b schemas.JobEvent) bool {
	return reflect.DeepEqual(a, b)
}

// TestParseJobCompFixture parses every line of a job-completion log that
// Slurm 22.05.8 wrote.
func TestParseJobCompFixture(t *testing.T) {
	f, err := os.Open("testdata/jobcomp.log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		if _, err := parseJobCompLine(sc.Text(), time.UTC); err != nil {
			t.Errorf("line %d: %v", n+1, err)
		}
		n++
	}
	if n < 10 {
		t.Errorf("fixture has %d lines; want at least 10", n)
	}
}

func TestNormalizeState(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want schemas.JobState
		kind stateKind
	}{
		{"PENDING", schemas.StatePending, kindPending},
		{"REQUEUED", schemas.StatePending, kindPending},
		{"RUNNING", schemas.StateRunning, kindRunning},
		{"COMPLETING", schemas.StateRunning, kindRunning},
		{"SUSPENDED", schemas.StateRunning, kindRunning},
		{"COMPLETED", schemas.StateCompleted, kindFinal},
		{"CANCELLED by 0", schemas.StateCancelled, kindFinal},
		{"CA", schemas.StateCancelled, kindFinal},
		{"FAILED", schemas.StateFailed, kindFinal},
		{"TIMEOUT", schemas.StateTimeout, kindFinal},
		{"DEADLINE", schemas.StateTimeout, kindFinal},
		{"BOOT_FAIL", schemas.StateNodeFail, kindFinal},
		{"OUT_OF_MEMORY", schemas.StateOutOfMemory, kindFinal},
		{"OOM", schemas.StateOutOfMemory, kindFinal},
		{"PREEMPTED", schemas.StatePreempted, kindFinal},
	} {
		got, kind, err := normalizeState(tc.in)
		if err != nil || got != tc.want || kind != tc.kind {
			t.Errorf("normalizeState(%q) = %v, %d, %v; want %v, %d", tc.in, got, kind, err, tc.want, tc.kind)
		}
	}
	if _, _, err := normalizeState("WEIRD"); err == nil {
		t.Error("normalizeState(WEIRD) = nil error; want one")
	}
}

// TestNormalizeEndState: the state of an ended run, as the completion log and
// the accounting record it; a requeued run's waiting state ends it as
// requeuedState.
func TestNormalizeEndState(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want schemas.JobState
		err  string
	}{
		{"COMPLETED", schemas.StateCompleted, ""},
		{"PREEMPTED", schemas.StatePreempted, ""},
		{"PR", schemas.StatePreempted, ""},
		{"NODE_FAIL", schemas.StateNodeFail, ""},
		{"REQUEUED", requeuedState, ""},
		{"RQ", requeuedState, ""},
		{"REQUEUE_HOLD", requeuedState, ""},
		{"PENDING", requeuedState, ""},
		{"RUNNING", 0, "not a final state"},
		{"COMPLETING", 0, "not a final state"},
		{"WEIRD", 0, "unknown job state"},
	} {
		got, err := normalizeEndState(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("normalizeEndState(%q) = %v, %v; want an error containing %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("normalizeEndState(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestExpandArrayTasks(t *testing.T) {
	for _, tc := range []struct {
		in       string
		want     []int64
		complete bool
		err      bool
	}{
		{"0-2", []int64{0, 1, 2}, true, false},
		{"1,3-7:2", []int64{1, 3, 5, 7}, true, false},
		{"0-3%2", []int64{0, 1, 2, 3}, true, false},
		{"", nil, false, true},
		{"3-1", nil, false, true},
		{"0-9:0", nil, false, true},
		{"0-99999999", nil, false, true},
		// A step past the top of int64 must end the range, not wrap around.
		{"9223372036854775800-9223372036854775807:5", []int64{9223372036854775800, 9223372036854775805}, true, false},
		// Cut short by SLURM_BITSTR_LEN (64 by default): the last item may
		// be cut ("28" of 289), so only the items before it count.
		{"1,4,9,16,25,36,49,64,81,100,121,144,169,196,225,256,28...", []int64{1, 4, 9, 16, 25, 36, 49, 64, 81, 100, 121, 144, 169, 196, 225, 256}, false, false},
		// What Slurm 22.05.8 printed for --array=1,4,…,961 (squares).
		{"1,4,9,16,25,36,49,64,81,100,121,144,169,196,225,256,289,324,...", []int64{1, 4, 9, 16, 25, 36, 49, 64, 81, 100, 121, 144, 169, 196, 225, 256, 289, 324}, false, false},
		{"0-99,200-3...%4", slices.Collect(func(yield func(int64) bool) {
			for i := range int64(100) {
				if !yield(i) {
					return
				}
			}
		}), false, false},
		{"12345...", nil, false, false},
		{"...", nil, false, false},
		{"1,x,3...", nil, false, true},
	} {
		got, complete, err := expandArrayTasks(tc.in)
		if (err != nil) != tc.err || !slices.Equal(got, tc.want) || complete != tc.complete {
			t.Errorf("expandArrayTasks(%q) = %v, %v, %v; want %v, %v (error %v)", tc.in, got, complete, err, tc.want, tc.complete, tc.err)
		}
	}
}

// TestObserveSqueueFixture reads squeue --json output that Slurm 22.05.8
// printed with a two-node job, a one-GPU job and an array running.
func TestObserveSqueueFixture(t *testing.T) {
	b, err := os.ReadFile("testdata/squeue-running.json")
	if err != nil {
		t.Fatal(err)
	}
	r, err := decodeSqueue(b)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*observation{}
	for i := range r.Jobs {
		obs, gap, err := observeSqueue(&r.Jobs[i])
		if err != nil || gap != nil {
			t.Fatalf("job %d: %v (gap %+v)", i, err, gap)
		}
		for _, o := range obs {
			got[o.ev.JobID] = o
		}
	}
	for _, tc := range []struct {
		id    string
		state schemas.JobState
		nodes []string
		gpus  int64
		idx   map[string][]int64
	}{
		{"1", schemas.StateRunning, []string{"gpu1", "gpu2"}, 16, map[string][]int64{"gpu1": {0, 1, 2, 3, 4, 5, 6, 7}, "gpu2": {0, 1, 2, 3, 4, 5, 6, 7}}},
		{"2", schemas.StateRunning, []string{"gpu3"}, 1, map[string][]int64{"gpu3": {0}}},
		{"3_0", schemas.StateRunning, []string{"gpu3"}, 2, map[string][]int64{"gpu3": {1, 2}}},
		{"3_2", schemas.StateRunning, []string{"gpu4"}, 2, map[string][]int64{"gpu4": {2, 3}}},
		{"4", schemas.StatePending, nil, 16, nil},
	} {
		o := got[tc.id]
		if o == nil {
			t.Errorf("job %s not observed", tc.id)
			continue
		}
		if o.ev.State != tc.state || !slices.Equal(o.ev.Nodes, tc.nodes) || o.ev.GPUs != tc.gpus || len(o.gpuIdx) != len(tc.idx) {
			t.Errorf("job %s: state %v nodes %v gpus %d idx %v; want %v %v %d %v", tc.id, o.ev.State, o.ev.Nodes, o.ev.GPUs, o.gpuIdx, tc.state, tc.nodes, tc.gpus, tc.idx)
		}
		for n, want := range tc.idx {
			if !slices.Equal(o.gpuIdx[n], want) {
				t.Errorf("job %s node %s GPU indices %v; want %v", tc.id, n, o.gpuIdx[n], want)
			}
		}
		if o.ev.User != "root" || o.ev.UID != 0 || o.ev.SubmitMillis == 0 || o.ev.EndMillis != 0 || o.restarts != 0 {
			t.Errorf("job %s: user %q uid %d submit %d end %d restarts %d", tc.id, o.ev.User, o.ev.UID, o.ev.SubmitMillis, o.ev.EndMillis, o.restarts)
		}
	}
	// The pending array of the other fixture is one record for three tasks.
	b, err = os.ReadFile("testdata/squeue-pending.json")
	if err != nil {
		t.Fatal(err)
	}
	if r, err = decodeSqueue(b); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range r.Jobs {
		obs, _, err := observeSqueue(&r.Jobs[i])
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range obs {
			ids = append(ids, o.ev.JobID)
		}
	}
	if want := []string{"1", "2", "3_0", "3_1", "3_2", "4"}; !slices.Equal(ids, want) {
		t.Errorf("pending fixture gives jobs %v; want %v", ids, want)
	}
}

func TestDecodeSqueueErrors(t *testing.T) {
	for _, tc := range []struct {
		in, err string
	}{
		{`{"jobs": [`, "offset"},
		{`{"errors": [{"error": "boom"}], "jobs": []}`, "boom"},
		{`{"meta": {}}`, "no \"jobs\""},
		{`{"jobs": [{"job_id": "x"}]}`, "job_id"},
	} {
		if _, err := decodeSqueue([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("decodeSqueue(%q) error = %v; want one containing %q", tc.in, err, tc.err)
		}
	}
	// Later OpenAPI versions wrap numbers and lists states.
	r, err := decodeSqueue([]byte(`{"jobs": [{"job_id": 7, "job_state": ["RUNNING", "COMPLETING"], "time_limit": {"set": true, "infinite": false, "number": 10},
		"priority": {"set": false, "number": 0}, "submit_time": {"set": true, "number": 100},
		"exit_code": {"status": ["SIGNALED"], "return_code": {"set": true, "infinite": false, "number": 0}, "signal": {"id": {"set": true, "infinite": false, "number": 9}, "name": "KILL"}}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	j := r.Jobs[0]
	if j.JobState.Base() != "RUNNING" || j.TimeLimit != (slurmfmt.Int{V: 10, Set: true}) || j.Priority.Set || j.SubmitTime.V != 100 || j.ExitCode.Or(-1) != 137 {
		t.Errorf("decoded %+v", j)
	}
	// The restart count, in both shapes; a record without one has no
	// known count.
	for _, tc := range []struct {
		field string
		want  int64
	}{
		{`, "restart_cnt": 2`, 2},
		{`, "restart_cnt": {"set": true, "infinite": false, "number": 3}`, 3},
		{`, "restart_cnt": null`, schemas.Unknown},
		{``, schemas.Unknown},
	} {
		r, err := decodeSqueue([]byte(`{"jobs": [{"job_id": 7, "job_state": "PENDING", "submit_time": 100` + tc.field + `}]}`))
		if err != nil {
			t.Fatal(err)
		}
		obs, _, err := observeSqueue(&r.Jobs[0])
		if err != nil || len(obs) != 1 || obs[0].restarts != tc.want {
			t.Errorf("observeSqueue(restart_cnt%s) = %v, %v; want restarts %d", tc.field, obs, err, tc.want)
		}
	}
}

// TestObserveSqueueTimeRange: a time after the last second ClickHouse's
// DateTime holds is refused with the field and value, even one so large that
// it would wrap into range in milliseconds.
func TestObserveSqueueTimeRange(t *testing.T) {
	for _, tc := range []struct{ fields, err string }{
		{`"job_state": "PENDING", "submit_time": 4294967296`, "submit_time 4294967296 is after 2106"},
		{`"job_state": "PENDING", "submit_time": 1, "eligible_time": 9223372036854775807`, "eligible_time 9223372036854775807 is after 2106"},
		{`"job_state": "RUNNING", "submit_time": 1, "start_time": 18446744073709552, "nodes": "a1"`, "start_time 18446744073709552 is after 2106"},
		{`"job_state": "COMPLETED", "submit_time": 1, "start_time": 2, "end_time": 4294967296, "nodes": "a1"`, "end_time 4294967296 is after 2106"},
	} {
		r, err := decodeSqueue([]byte(`{"jobs": [{"job_id": 7, ` + tc.fields + `}]}`))
		if err != nil {
			t.Fatalf("decodeSqueue(%s): %v", tc.fields, err)
		}
		if _, _, err := observeSqueue(&r.Jobs[0]); err == nil || !strings.Contains(err.Error(), "job 7: "+tc.err) {
			t.Errorf("observeSqueue(%s) error = %v; want one containing %q", tc.fields, err, tc.err)
		}
	}
}

func FuzzDecodeSqueue(f *testing.F) {
	for _, p := range []string{"testdata/squeue-running.json", "testdata/squeue-pending.json"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"jobs":[{"job_id":1,"job_state":"PENDING","submit_time":1,"array_job_id":1,"array_task_string":"0-3%1"}]}`))
	f.Add([]byte(`{"jobs":[{"job_id":1,"job_state":"RUNNING","submit_time":1,"start_time":2,"nodes":"a[1-2]","gres_detail":["gpu:1(IDX:0)","gpu:2(IDX:0-1)"]}]}`))
	f.Add([]byte(`{"jobs":[{"job_id":5,"job_state":"PENDING","submit_time":9,"array_job_id":5,"array_task_string":"1,4,9,16,25,36,49,64,81,100,121,144,169,196,225,256,28...%2","restart_cnt":0}]}`))
	f.Add([]byte(`{"jobs":[{"job_id":7,"job_state":"PENDING","submit_time":9,"restart_cnt":{"set":true,"infinite":false,"number":3}}]}`))
	f.Add([]byte(`{"jobs":[{"job_id":8,"job_state":"PENDING","submit_time":9,"tres_per_socket":"gres:gpu:2","sockets_per_node":2,"node_count":2},
		{"job_id":9,"job_state":"RUNNING","submit_time":1,"start_time":2,"nodes":"a1","tres_per_node":"gres:gpu:1,gres:tmpdisk:10G","gres_detail":["gpu:1(IDX:0),tmpdisk(CNT:10737418240)"]}]}`))
	f.Add([]byte(`{"jobs":[{"job_id":10,"job_state":"RUNNING","submit_time":1,"start_time":2,"nodes":"a1","tres_per_node":"gres:gpu:7:x","tres_alloc_str":"cpu=1,gres/gpu=7","gres_detail":["gpu:7(IDX:0-6)"]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeSqueue(b)
		if err != nil {
			return
		}
		for i := range r.Jobs {
			obs, gap, err := observeSqueue(&r.Jobs[i])
			if err != nil {
				continue
			}
			if gap != nil && (gap.arrayJobID == "" || gap.above < -1) {
				t.Fatalf("gap %+v", gap)
			}
			for _, o := range obs {
				if o.ev.JobID == "" || o.ev.SubmitMillis <= 0 || o.ev.State == 0 {
					t.Fatalf("observation without id, submit time or state: %+v", o.ev)
				}
				if gap != nil && (o.ev.ArrayJobID != gap.arrayJobID || o.ev.ArrayTaskID > gap.above) {
					t.Fatalf("task %s of a list cut short above task %d of array %s", o.ev.JobID, gap.above, gap.arrayJobID)
				}
				if o.restarts < schemas.Unknown {
					t.Fatalf("job %s: restart count %d", o.ev.JobID, o.restarts)
				}
				if o.ev.GPUs < schemas.Unknown || o.ev.GPUs == schemas.Unknown && len(o.unreadable) == 0 {
					t.Fatalf("job %s: %d GPUs (unreadable %q)", o.ev.JobID, o.ev.GPUs, o.unreadable)
				}
				checkTimesStorable(t, &o.ev)
				for n := range o.gpuIdx {
					if !slices.Contains(o.ev.Nodes, n) {
						t.Fatalf("GPU indices for node %q not in %v", n, o.ev.Nodes)
					}
				}
			}
		}
	})
}

func FuzzParseJobCompLine(f *testing.F) {
	b, err := os.ReadFile("testdata/jobcomp.log")
	if err != nil {
		f.Fatal(err)
	}
	for _, line := range strings.SplitAfter(string(b), "\n")[:4] {
		f.Add(line)
	}
	f.Add("JobId=1 UserId=a(1) JobState=COMPLETED StartTime=Unknown EndTime=2026-01-01T00:00:00 SubmitTime=2026-01-01T00:00:00 NodeList=(null)")
	f.Fuzz(func(t *testing.T, line string) {
		o, err := parseJobCompLine(line, time.UTC)
		if err != nil {
			return
		}
		if o.ev.JobID == "" || o.ev.SubmitMillis == 0 || o.ev.EndMillis == 0 || !o.ev.State.Final() {
			t.Fatalf("parseJobCompLine(%q) accepted a record without id, times or final state: %+v", line, o.ev)
		}
		checkTimesStorable(t, &o.ev)
		if o.started != (len(o.ev.Nodes) > 0) {
			t.Fatalf("parseJobCompLine(%q): started %v with nodes %v", line, o.started, o.ev.Nodes)
		}
	})
}

// TestObserveSqueueGPUType checks that a job's GPU type reads the same
// whatever order Slurm lists several types in: the type requested, else the
// types of the GPUs given on each node, a mix sorted and joined by ','.
func TestObserveSqueueGPUType(t *testing.T) {
	running := job(7, "RUNNING", 1_795_000_000, 0)
	running.nodes, running.start = "gpu1,gpu2", 1_795_000_100
	for _, tc := range []struct {
		name string
		j    sqJob
		want string
	}{
		{"untyped", job(7, "PENDING", 1_795_000_000, 0), ""},
		{"one type", job(7, "PENDING", 1_795_000_000, 0).with("tres_per_node", "gres:gpu:h100:2"), "h100"},
		{"two types", job(7, "PENDING", 1_795_000_000, 0).with("tres_per_node", "gres:gpu:v100:1,gres:gpu:a100:1"), "a100,v100"},
		{"the same two types", job(7, "PENDING", 1_795_000_000, 0).with("tres_per_node", "gres:gpu:a100:1,gres:gpu:v100:1"), "a100,v100"},
		{"untyped, given one type", func() sqJob {
			j := running.with("node_count", 2)
			j.gres = []string{"gpu:a100:1(IDX:0)", "gpu:a100:1(IDX:3)"}
			return j
		}(), "a100"},
		{"untyped, given a type on each node", func() sqJob {
			j := running.with("node_count", 2)
			j.gres = []string{"gpu:v100:1(IDX:0)", "gpu:a100:1(IDX:3)"}
			return j
		}(), "a100,v100"},
		{"typed request wins over what was given", func() sqJob {
			j := running.with("node_count", 2).with("tres_per_node", "gres:gpu:a100:1")
			j.gres = []string{"gpu:a100:1(IDX:0)", "gpu:a100:1(IDX:3)"}
			return j
		}(), "a100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := observeOne(t, tc.j).ev.GPUType; got != tc.want {
				t.Errorf("gpu_type %q; want %q", got, tc.want)
			}
		})
	}
}

// observeOne decodes a listing of j alone and returns its one observation,
// failing the test if the record is not observed as one job.
func observeOne(t *testing.T, j sqJob) *observation {
	t.Helper()
	r, err := decodeSqueue(listing(t, j))
	if err != nil {
		t.Fatal(err)
	}
	obs, _, err := observeSqueue(&r.Jobs[0])
	if err != nil || len(obs) != 1 {
		t.Fatalf("observeSqueue: %d observations, %v; want the job observed", len(obs), err)
	}
	return obs[0]
}

// TestObserveSqueueByteCountGres: a job that also asks for a count-only
// GRES (a node-local disk) is read for its GPUs: in the forms Slurm 22.05
// writes (seen on the test cluster with slurmtest.Options.Gres:
// tres_per_node "gres:gpu:1,gres:tmpdisk:10G", gres_detail
// "gpu:1(IDX:0),tmpdisk(CNT:10737418240)"), and with the count in bytes
// after the name, as sinfo's gres_used writes it (not seen in a job's
// record; before 2026-11-25 that count, above any GPU count, would have
// made the record unreadable).
func TestObserveSqueueByteCountGres(t *testing.T) {
	for _, tc := range []struct{ name, tres, detail string }{
		{"22.05", "gres:gpu:1,gres:tmpdisk:10G", "gpu:1(IDX:2),tmpdisk(CNT:10737418240)"},
		{"bytes after the name", "gres/gpu:1,gres/tmpdisk:10737418240", "gpu:1(IDX:2),tmpdisk:10737418240"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := job(7, "RUNNING", 1_795_000_000, 0).with("tres_per_node", tc.tres)
			j.nodes, j.start = "gpu1", 1_795_000_100
			j.gres = []string{tc.detail}
			if o := observeOne(t, j); o.ev.GPUs != 1 || !reflect.DeepEqual(o.gpuIdx, map[string][]int64{"gpu1": {2}}) {
				t.Errorf("GPUs %d, indices %v; want 1 GPU, index 2 on gpu1", o.ev.GPUs, o.gpuIdx)
			}
		})
	}
}

// TestObserveSqueueUnreadableFields: a field in a form not known no longer
// loses the job's events (before 2026-11-25 the record was skipped as
// unparsable at every poll): the job is observed with the field unknown —
// its GPUs as Slurm allocated or reserved them where it says
// (tres_alloc_str, tres_req_str, gres_detail), else unknown; its memory
// unknown; no GPU indices — and the field is named.
func TestObserveSqueueUnreadableFields(t *testing.T) {
	const bad = "gres:gpu:7:x"
	running := func(j sqJob) sqJob {
		j.nodes, j.start = "gpu1", 1_795_000_100
		return j
	}
	pend := job(7, "PENDING", 1_795_000_000, 0)
	for _, tc := range []struct {
		name           string
		job            sqJob
		gpus           int64
		field, problem string
		noMem, noIdx   bool
	}{
		{"GPU request, nothing else says", pend.with("tres_per_node", bad), schemas.Unknown, fieldGPUs, `GPU request: tres_per_node: tres "` + bad + `"`, false, false},
		{"GPU request, reserved in tres_req_str", pend.with("tres_per_node", bad).with("tres_req_str", "cpu=1,mem=1G,node=1,billing=1,gres/gpu=7"), 7, fieldGPUs, "GPU request", false, false},
		{"GPU request, allocated", running(job(7, "RUNNING", 1_795_000_000, 0)).with("tres_per_node", bad).with("tres_alloc_str", "cpu=1,node=1,gres/gpu=7"), 7, fieldGPUs, "GPU request", false, false},
		{"GPU request, gres_detail only", func() sqJob {
			j := running(job(7, "RUNNING", 1_795_000_000, 0)).with("tres_per_node", bad)
			j.gres = []string{"gpu:7(IDX:0-6)"}
			return j
		}(), 7, fieldGPUs, "GPU request", false, false},
		{"GPU count in tres", pend.with("tres_per_node", "").with("tres_req_str", "cpu=1,gres/gpu=lots"), schemas.Unknown, fieldGPUs, `tres gres/gpu="lots"`, false, false},
		{"memory", pend.with("tres_req_str", "cpu=1,mem=lots,node=1"), 1, fieldMem, "tres_req_str", true, false},
		{"gres_detail for fewer nodes", func() sqJob {
			j := running(job(7, "RUNNING", 1_795_000_000, 0))
			j.nodes, j.gres = "gpu[1-2]", []string{"gpu:1(IDX:0)"}
			return j
		}(), 1, fieldGPUIndices, "gres_detail has 1 entries for 2 nodes", false, true},
		{"gres_detail not read", func() sqJob {
			j := running(job(7, "RUNNING", 1_795_000_000, 0))
			j.gres = []string{"gpu:1(IDX:x)"}
			return j
		}(), 1, fieldGPUIndices, "gres_detail: ", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := observeOne(t, tc.job)
			if o.ev.GPUs != tc.gpus || len(o.unreadable) != 1 || o.unreadable[0].field != tc.field || !strings.Contains(o.unreadable[0].problem, tc.problem) {
				t.Errorf("GPUs %d, unreadable %+v; want %d, field %s naming %q", o.ev.GPUs, o.unreadable, tc.gpus, tc.field, tc.problem)
			}
			if tc.noMem && o.ev.MemReqBytes != schemas.Unknown {
				t.Errorf("memory %d; want unknown", o.ev.MemReqBytes)
			}
			if tc.noIdx && o.gpuIdx != nil {
				t.Errorf("GPU indices %v; want none", o.gpuIdx)
			}
		})
	}
}
