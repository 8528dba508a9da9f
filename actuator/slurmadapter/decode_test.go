package slurmadapter

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/heliostat-dev/heliostat/actuator/adapter"
	"github.com/heliostat-dev/heliostat/internal/slurmfmt"
)

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fixtureNow is a time shortly after the fixtures were captured.
var fixtureNow = time.Unix(1795307300, 0).UTC()

// TestDecodeSqueueFixture reads squeue --json of Slurm 22.05.8 with a running
// job, a pending job bound for gpu1 and a held pending array of 3 tasks.
func TestDecodeSqueueFixture(t *testing.T) {
	jobs, _, holding, err := decodeSqueue(readFixture(t, "squeue.json"), fixtureNow)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string][]string{"gpu1": {"1"}}; !reflect.DeepEqual(holding, want) {
		t.Errorf("decodeSqueue: nodes held %v; want %v (job 1 runs on gpu1)", holding, want)
	}
	if len(jobs) != 2 {
		t.Fatalf("decodeSqueue: %d pending jobs; want 2: %+v", len(jobs), jobs)
	}
	bound, arr := jobs[0], jobs[1]
	if bound.ID != "2" || bound.Name != "bound" || bound.User != "root" || bound.Partition != "batch" || bound.GPUs != 8 ||
		bound.TimeLimit != 90*time.Minute || bound.Held || !reflect.DeepEqual(bound.Nodes, []string{"gpu1"}) || bound.Priority != 4294901758 || bound.Submit.IsZero() ||
		bound.Ineligible || bound.PendingTasks() != 1 {
		t.Errorf("job 2 = %+v", bound)
	}
	if arr.ID != "3" || arr.GPUs != 2 || !arr.Held || arr.TimeLimit != 0 || len(arr.Nodes) != 0 || arr.ArrayTasks != 3 {
		t.Errorf("array job 3 = %+v", arr)
	}
}

// TestDecodeSinfoFixture reads sinfo --json of Slurm 22.05.8: gpu1 mixed,
// gpu2 idle, gpu3 drained, gpu4 powered down.
func TestDecodeSinfoFixture(t *testing.T) {
	nodes, err := decodeSinfo(readFixture(t, "sinfo.json"))
	if err != nil {
		t.Fatal(err)
	}
	type view struct {
		name           string
		power          adapter.Power
		busy, unusable bool
		gpus, free     int
	}
	var got []view
	for _, n := range nodes {
		if !reflect.DeepEqual(n.Partitions, []string{"batch"}) {
			t.Errorf("%s partitions %v; want [batch]", n.Name, n.Partitions)
		}
		got = append(got, view{n.Name, n.Power, n.Busy, n.Unusable, n.GPUs, n.FreeGPUs})
	}
	want := []view{
		{"gpu1", adapter.PowerOn, true, false, 8, 6},
		{"gpu2", adapter.PowerOn, false, false, 8, 8},
		{"gpu3", adapter.PowerOn, false, true, 8, 0},
		{"gpu4", adapter.PowerOff, false, false, 8, 0},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decodeSinfo:\n got %+v\nwant %+v", got, want)
	}
	if nodes[3].State != "idle+POWERED_DOWN" {
		t.Errorf("gpu4 state %q; want idle+POWERED_DOWN", nodes[3].State)
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		decode func([]byte) error
		in     string
		want   error
		field  string // what the message must name
	}{
		{"squeue not json", sq, `{"jobs": [`, ErrSyntax, "offset"},
		{"squeue no jobs", sq, `{"meta": {}}`, ErrShape, `"jobs"`},
		{"squeue jobs not a list", sq, `{"jobs": 3}`, ErrShape, "jobs"},
		{"squeue slurm errors", sq, `{"errors": [{"error": "boom"}], "jobs": []}`, ErrReported, "boom"},
		{"squeue pending without id", sq, `{"jobs": [{"job_state": "PENDING"}]}`, ErrRecord, "job 0"},
		{"squeue bad priority", sq, `{"jobs": [{"job_id": 1, "job_state": "PENDING", "priority": "high"}]}`, ErrShape, "priority"},
		{"sinfo no nodes", si, `{"errors": []}`, ErrShape, `"nodes"`},
		{"sinfo record without names", si, `{"sinfo": [{"node": {"state": ["IDLE"]}, "nodes": {"nodes": []}}]}`, ErrRecord, "record 0"},
		{"sinfo record bad host", si, `{"sinfo": [{"node": {"state": ["IDLE"]}, "nodes": {"nodes": ["n[1-"]}}]}`, ErrRecord, "record 0"},
		{"sinfo record stateless", si, `{"sinfo": [{"nodes": {"nodes": ["n1"]}}]}`, ErrRecord, "n1"},
		{"sinfo record bad allocation", si, `{"sinfo": [{"nodes": {"nodes": ["n1"]}, "cpus": {"allocated": "x"}}]}`, ErrShape, "allocated"},
		{"sinfo nameless", si, `{"nodes": [{"state": "idle"}]}`, ErrRecord, "node 0"},
		{"sinfo stateless", si, `{"nodes": [{"name": "n1"}]}`, ErrRecord, "n1"},
		{"sinfo bad gres used", si, `{"nodes": [{"name": "n1", "state": "idle", "gres_used": "gpu:x:y"}]}`, ErrRecord, "n1"},
		{"sinfo state type", si, `{"nodes": [{"name": "n1", "state": 5}]}`, ErrShape, "state"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.decode([]byte(tc.in))
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("decode(%q) = %v; want %v naming %q", tc.in, err, tc.want, tc.field)
			}
		})
	}
}

// TestDecodeSqueueUnreadable: a pending job whose GPU request, bound nodes
// or array tasks cannot be read is kept, marked Unreadable with what is
// wrong and asking for no GPUs, and the jobs beside it are read as usual.
func TestDecodeSqueueUnreadable(t *testing.T) {
	for _, tc := range []struct {
		name, job, naming string
	}{
		{"bad host list", `{"job_id": 7, "job_state": "PENDING", "required_nodes": "gpu[1-", "tres_per_node": "gres:gpu:2"}`, "nodes: "},
		{"bad bound nodes", `{"job_id": 7, "job_state": "PENDING", "nodes": "gpu[x", "tres_per_job": "gres:gpu:2"}`, "nodes: "},
		{"bad gres", `{"job_id": 7, "job_state": "PENDING", "tres_per_node": "gres:gpu:a:b", "required_nodes": "gpu1"}`, "GPU request: tres_per_node"},
		{"bad array tasks", `{"job_id": 7, "array_job_id": 7, "array_task_string": "0-x", "job_state": "PENDING", "tres_per_job": "gres:gpu:2"}`, "0-x"},
		{"array tasks cut short", `{"job_id": 7, "array_job_id": 7, "array_task_string": "0-1,4,9,16,25,32...", "job_state": "PENDING"}`, "SLURM_BITSTR_LEN"},
		{"two faults", `{"job_id": 7, "job_state": "PENDING", "required_nodes": "gpu[1-", "tres_per_node": "gres:gpu:a:b"}`, "GPU request: tres_per_node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := `{"jobs": [{"job_id": 5, "job_state": "PENDING", "partition": "gpu", "tres_per_job": "gres:gpu:4", "required_nodes": "gpu2", "submit_time": 100},
				` + tc.job + `, {"job_id": 9, "job_state": "RUNNING", "nodes": "gpu3"}]}`
			jobs, _, holding, err := decodeSqueue([]byte(doc), fixtureNow)
			if err != nil {
				t.Fatalf("decodeSqueue: %v; want the document read", err)
			}
			slices.SortFunc(jobs, func(a, b adapter.Job) int { return strings.Compare(a.ID, b.ID) })
			if len(jobs) != 2 || jobs[0].ID != "5" || jobs[1].ID != "7" {
				t.Fatalf("decodeSqueue: jobs %+v; want 5 and 7", jobs)
			}
			if ok := jobs[0]; ok.Unreadable != "" || ok.GPUs != 4 || !reflect.DeepEqual(ok.Nodes, []string{"gpu2"}) {
				t.Errorf("job 5 read as %+v; want 4 GPUs bound for gpu2, readable", ok)
			}
			bad := jobs[1]
			if !strings.Contains(bad.Unreadable, tc.naming) {
				t.Errorf("job 7: Unreadable %q; want it naming %q", bad.Unreadable, tc.naming)
			}
			if strings.HasPrefix(tc.naming, "GPU") && bad.GPUs != 0 {
				t.Errorf("job 7 asks for %d GPUs; want none from a request that could not be read", bad.GPUs)
			}
			if strings.HasPrefix(tc.naming, "nodes") && len(bad.Nodes) != 0 {
				t.Errorf("job 7 bound for %v; want no nodes from a list that could not be read", bad.Nodes)
			}
			if !reflect.DeepEqual(holding, map[string][]string{"gpu3": {"9"}}) {
				t.Errorf("nodes held %v; want gpu3 by job 9", holding)
			}
		})
	}
}

func sq(b []byte) error { _, _, _, err := decodeSqueue(b, fixtureNow); return err }
func si(b []byte) error { _, err := decodeSinfo(b); return err }

// TestDecodeSqueueArrays: a pending array whose tasks are not split yet is
// one job standing for the tasks that may start — all of its task list, or
// its throttle (%N) less its running tasks — each asking for the record's
// GPUs and nodes.
func TestDecodeSqueueArrays(t *testing.T) {
	for _, tc := range []struct {
		name       string
		tasks      string // array_task_string of pending array 7
		running    int    // tasks of array 7 running
		want       int    // ArrayTasks
		ineligible bool
	}{
		{"a range", "0-99", 0, 100, false},
		{"a range with a step", "0-99:2", 0, 50, false},
		{"a list", "1,5,7-9", 0, 5, false},
		{"throttled", "0-99%10", 3, 7, false},
		{"throttled, fewer left than the throttle", "5-7%10", 2, 3, false},
		{"throttle spent", "2-9%2", 2, 1, true},
		{"throttle more than spent", "2-9%2", 3, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := `{"jobs": [`
			for i := range tc.running {
				doc += fmt.Sprintf(`{"job_id": %d, "array_job_id": 7, "array_task_id": %d, "job_state": "RUNNING", "nodes": "gpu%d"},`, 100+i, i, i)
			}
			doc += `{"job_id": 7, "array_job_id": 7, "array_task_id": null, "array_task_string": "` + tc.tasks + `", "job_state": "PENDING",
				"state_reason": "Resources", "partition": "gpu", "tres_per_node": "gres:gpu:8", "node_count": 1},
				{"job_id": 8, "array_job_id": 7, "array_task_id": 1, "job_state": "PENDING", "state_reason": "Resources"}]}`
			jobs, _, _, err := decodeSqueue([]byte(doc), fixtureNow)
			if err != nil {
				t.Fatal(err)
			}
			if len(jobs) != 2 || jobs[0].ID != "7" || jobs[1].ID != "7_1" {
				t.Fatalf("decodeSqueue = %+v; want the array 7 and its split task 7_1", jobs)
			}
			arr := jobs[0]
			if arr.ArrayTasks != tc.want || arr.Ineligible != tc.ineligible || arr.GPUs != 8 || arr.NodeCount != 1 {
				t.Errorf("array_task_string %q with %d running: ArrayTasks %d, Ineligible %v, GPUs %d, NodeCount %d; want %d, %v, 8, 1",
					tc.tasks, tc.running, arr.ArrayTasks, arr.Ineligible, arr.GPUs, arr.NodeCount, tc.want, tc.ineligible)
			}
			if split := jobs[1]; split.ArrayTasks != 0 || split.PendingTasks() != 1 {
				t.Errorf("split task %+v: PendingTasks %d; want 1", split, split.PendingTasks())
			}
		})
	}
}

// TestDecodeSqueueIneligible: a pending job that cannot start however many
// nodes are up — waiting for a dependency or a begin time, held by a QOS,
// association or array limit, with constraints no node meets, or, submitted
// to one partition, kept by that partition (down, inactive, over its node
// or time limit) — is Ineligible, with the reason it is counted under; one
// waiting for resources, priority or nodes is not, nor one submitted to
// several partitions whose reason is one partition's. The reasons are Slurm
// 22.05's state_reason.
func TestDecodeSqueueIneligible(t *testing.T) {
	for _, tc := range []struct {
		reason    string
		partition string
		eligible  int64 // eligible_time, Unix seconds
		want      bool
		wantWhy   string // Job.Reason; "": the reason as given
	}{
		{"Dependency", "", 0, true, ""},
		{"DependencyNeverSatisfied", "", 0, true, ""},
		{"BeginTime", "", fixtureNow.Unix() + 3600, true, ""},
		{"JobArrayTaskLimit", "", 0, true, ""},
		{"QOSMaxGRESPerUser", "", 0, true, ""},
		{"QOSGrpNodeLimit", "", 0, true, ""},
		{"QOSJobLimit", "", 0, true, ""},
		{"AssocGrpGRES", "", 0, true, ""},
		{"AssocMaxJobsLimit", "", 0, true, ""},
		{"AssociationResourceLimit", "", 0, true, ""},
		{"BadConstraints", "batch", 0, true, ""},
		{"PartitionDown", "batch", 0, true, ""},
		{"PartitionInactive", "batch", 0, true, ""},
		{"PartitionNodeLimit", "batch", 0, true, ""},
		{"PartitionTimeLimit", "batch", 0, true, ""},
		{"PartitionDown", "batch,other", 0, false, ""}, // the other partition may start it
		{"PartitionTimeLimit", "batch, other", 0, false, ""},
		{"None", "", fixtureNow.Unix() + 60, true, "BeginTime"}, // --begin, before Slurm set the reason
		{"", "", fixtureNow.Unix() + 60, true, "BeginTime"},
		{"Resources", "batch", 0, false, ""},
		{"Priority", "batch", fixtureNow.Unix() - 60, false, ""},
		{"ReqNodeNotAvail", "batch", 0, false, ""}, // unless a node it is bound for is down: markUnreachable
		{"None", "batch", fixtureNow.Unix(), false, ""},
	} {
		doc := fmt.Sprintf(`{"jobs": [{"job_id": 9, "job_state": "PENDING", "partition": %q, "state_reason": %q, "eligible_time": %d, "priority": 100}]}`, tc.partition, tc.reason, tc.eligible)
		jobs, _, _, err := decodeSqueue([]byte(doc), fixtureNow)
		if err != nil {
			t.Fatal(err)
		}
		why := cmp.Or(tc.wantWhy, tc.reason)
		if len(jobs) != 1 || jobs[0].Ineligible != tc.want || jobs[0].Held || jobs[0].Reason != why {
			t.Errorf("decodeSqueue(reason %s, partition %q, eligible_time %+ds) = %+v; want Ineligible %v, not held, reason %s", tc.reason, tc.partition, tc.eligible-fixtureNow.Unix(), jobs, tc.want, why)
		}
	}
}

// TestMarkUnreachable: a job waiting for a node it is bound for
// (ReqNodeNotAvail) cannot start while that node is down, drained or failed,
// whatever a plan powers; it still can when the node is busy or powered down
// (Slurm 22.05 reports both as ReqNodeNotAvail too), and a job waiting for
// another reason is left as it is.
func TestMarkUnreachable(t *testing.T) {
	nodes := []adapter.Node{
		{Name: "drained", Unusable: true, State: "idle+DRAIN"},
		{Name: "down", Unusable: true, State: "down+NOT_RESPONDING"},
		{Name: "busy", Busy: true, Power: adapter.PowerOn, State: "mixed"},
		{Name: "off", Power: adapter.PowerOff, State: "idle+POWERED_DOWN"},
		{Name: "going", Power: adapter.PowerGoingDown, State: "idle+POWERING_DOWN"},
	}
	for _, tc := range []struct {
		reason string
		bound  []string
		want   bool
	}{
		{"ReqNodeNotAvail", []string{"drained"}, true},
		{"ReqNodeNotAvail", []string{"busy", "down"}, true},
		{"ReqNodeNotAvail", []string{"busy"}, false},
		{"ReqNodeNotAvail", []string{"off"}, false},
		{"ReqNodeNotAvail", []string{"going"}, false},
		{"ReqNodeNotAvail", nil, false}, // lists the partition's unavailable nodes, needs none of them
		{"Resources", []string{"drained"}, false},
	} {
		jobs := []adapter.Job{{ID: "9", Reason: tc.reason, Nodes: tc.bound}}
		markUnreachable(jobs, nodes)
		if jobs[0].Ineligible != tc.want {
			t.Errorf("markUnreachable(reason %s, bound for %v): Ineligible = %v; want %v", tc.reason, tc.bound, jobs[0].Ineligible, tc.want)
		}
	}
}

// TestDecodeHetJobLeaders: each pending component of a heterogeneous job is
// a job of its own, named by its own job id, and the leaders (component 0,
// whose id is the het job's) are known, so that a priority change is sent to
// the leader alone. A running leader, and other jobs, are not leaders.
func TestDecodeHetJobLeaders(t *testing.T) {
	jobs, leaders, _, err := decodeSqueue([]byte(`{"jobs": [
		{"job_id": 2, "het_job_id": 2, "het_job_offset": 0, "job_state": "PENDING", "tres_per_node": "gres:gpu:2", "submit_time": 100},
		{"job_id": 3, "het_job_id": 2, "het_job_offset": 1, "job_state": "PENDING", "tres_per_node": "gres:gpu:4", "submit_time": 100},
		{"job_id": 5, "het_job_id": 5, "het_job_offset": 0, "job_state": "RUNNING"},
		{"job_id": 6, "het_job_id": 5, "het_job_offset": 1, "job_state": "PENDING", "submit_time": 101},
		{"job_id": 7, "het_job_id": 0, "het_job_offset": 0, "job_state": "PENDING", "submit_time": 102}]}`), fixtureNow)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, j := range jobs {
		ids = append(ids, fmt.Sprintf("%s:%d", j.ID, j.GPUs))
	}
	if got := strings.Join(ids, " "); got != "2:2 3:4 6:0 7:0" {
		t.Errorf("pending jobs = %s; want 2:2 3:4 6:0 7:0", got)
	}
	if !reflect.DeepEqual(leaders, map[string]bool{"2": true}) {
		t.Errorf("leaders = %v; want only 2", leaders)
	}
}

// TestDecodeSqueueHolding: the jobs that hold nodes — running, suspended
// (scontrol suspend, PreemptMode=SUSPEND: Slurm frees the CPUs of a CPU-only
// job, so the node reads idle, but it is the job's), completing,
// configuring, stopped — are read from the same squeue by node, in Slurm
// 22.05's words and later versions' lists; pending and ended jobs hold
// nothing. A held node's host list that cannot be read rejects the document.
func TestDecodeSqueueHolding(t *testing.T) {
	for _, tc := range []struct {
		name  string
		jobs  string
		want  map[string][]string
		fails bool
	}{
		{name: "running", jobs: `{"job_id": 4, "job_state": "RUNNING", "nodes": "gpu[1-2]"}`, want: map[string][]string{"gpu1": {"4"}, "gpu2": {"4"}}},
		{name: "suspended", jobs: `{"job_id": 4, "job_state": "SUSPENDED", "nodes": "gpu1"}`, want: map[string][]string{"gpu1": {"4"}}},
		{name: "completing", jobs: `{"job_id": 4, "job_state": "COMPLETING", "nodes": "gpu1"}`, want: map[string][]string{"gpu1": {"4"}}},
		{name: "configuring", jobs: `{"job_id": 4, "job_state": "CONFIGURING", "nodes": "gpu1"}`, want: map[string][]string{"gpu1": {"4"}}},
		{name: "stopped", jobs: `{"job_id": 4, "job_state": "STOPPED", "nodes": "gpu1"}`, want: map[string][]string{"gpu1": {"4"}}},
		{name: "later versions' list", jobs: `{"job_id": 4, "job_state": ["COMPLETED", "COMPLETING"], "nodes": "gpu1"}`, want: map[string][]string{"gpu1": {"4"}}},
		{name: "array task and a second job", jobs: `{"job_id": 8, "array_job_id": 7, "array_task_id": 1, "job_state": "RUNNING", "nodes": "gpu1"},
			{"job_id": 9, "job_state": "SUSPENDED", "nodes": "gpu1"}`, want: map[string][]string{"gpu1": {"7_1", "9"}}},
		{name: "pending bound for a node holds nothing", jobs: `{"job_id": 4, "job_state": "PENDING", "nodes": "gpu1"}`},
		{name: "ended jobs hold nothing", jobs: `{"job_id": 4, "job_state": "COMPLETED", "nodes": "gpu1"}, {"job_id": 5, "job_state": "CANCELLED", "nodes": "gpu2"}`},
		{name: "bad host list", jobs: `{"job_id": 4, "job_state": "SUSPENDED", "nodes": "gpu[1-"}`, fails: true},
		{name: "no job id", jobs: `{"job_state": "RUNNING", "nodes": "gpu1"}`, fails: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := `{"jobs": [` + tc.jobs + `]}`
			_, _, holding, err := decodeSqueue([]byte(doc), fixtureNow)
			if tc.fails {
				if !errors.Is(err, ErrRecord) {
					t.Errorf("decodeSqueue(%s) = %v; want %v", doc, err, ErrRecord)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(holding, tc.want) {
				t.Errorf("decodeSqueue(%s): nodes held %v, %v; want %v", doc, holding, err, tc.want)
			}
		})
	}
}

// TestDecodeLaterVersions reads the shapes of later Slurm releases: states as
// lists with the flags in them, numbers as {set, infinite, number}.
func TestDecodeLaterVersions(t *testing.T) {
	jobs, _, _, err := decodeSqueue([]byte(`{"jobs": [
		{"job_id": 9, "job_state": ["PENDING"], "priority": {"set": true, "infinite": false, "number": 40},
		 "time_limit": {"set": true, "infinite": false, "number": 30}, "submit_time": {"set": true, "number": 1700000000},
		 "tres_per_job": "gres/gpu:4", "partition": "p", "node_count": {"set": true, "infinite": false, "number": 2}},
		{"job_id": 10, "job_state": ["PENDING"], "time_limit": {"set": false, "infinite": true, "number": 0}, "array_job_id": 10, "array_task_id": 3},
		{"job_id": 11, "job_state": ["RUNNING"]}]}`), fixtureNow)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 || jobs[1].ID != "9" || jobs[1].Priority != 40 || jobs[1].TimeLimit != 30*time.Minute || jobs[1].GPUs != 4 || jobs[1].NodeCount != 2 || jobs[0].ID != "10_3" || jobs[0].TimeLimit != 0 || jobs[0].NodeCount != 0 {
		t.Errorf("decodeSqueue = %+v", jobs)
	}
	nodes, err := decodeSinfo([]byte(`{"nodes": [
		{"name": "a", "state": ["IDLE", "POWERING_UP", "NOT_RESPONDING"], "partitions": ["p"]},
		{"name": "b", "state": ["ALLOCATED", "POWER_DOWN"], "partitions": ["p", "q"]},
		{"name": "b", "state": ["ALLOCATED", "POWER_DOWN"], "partitions": ["r"]},
		{"name": "c", "state": ["DOWN", "POWERED_DOWN"]},
		{"name": "d", "state": ["IDLE", "RESERVED"]},
		{"name": "e", "state": ["IDLE"], "state_flags": ["PLANNED"], "partitions": ["p"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		p              adapter.Power
		busy, unusable bool
		parts          int
	}{"a": {adapter.PowerWaking, false, false, 1}, "b": {adapter.PowerGoingDown, true, false, 3}, "c": {adapter.PowerOff, false, true, 0}, "d": {adapter.PowerOn, false, true, 0},
		"e": {adapter.PowerOn, true, false, 1}} // planned by backfill for a pending job
	if len(nodes) != 5 {
		t.Fatalf("decodeSinfo = %+v; want 5 nodes", nodes)
	}
	for _, n := range nodes {
		w := want[n.Name]
		if n.Power != w.p || n.Busy != w.busy || n.Unusable != w.unusable || len(n.Partitions) != w.parts {
			t.Errorf("node %s = %+v; want %+v", n.Name, n, w)
		}
	}
}

// TestDecodeSinfoRecords reads the node records of `sinfo -N --json` from
// Slurm 23.11 on (OpenAPI v0.0.40): "sinfo" instead of "nodes", one record
// per node and partition, states as lists, GRES and allocations nested.
func TestDecodeSinfoRecords(t *testing.T) {
	nodes, err := decodeSinfo([]byte(`{"errors": [], "warnings": [], "sinfo": [
		{"port": 6818, "partition": {"name": "gpu"}, "node": {"state": ["IDLE"]}, "nodes": {"allocated": 0, "idle": 1, "total": 1, "nodes": ["g1"]},
		 "cpus": {"allocated": 0, "idle": 64, "total": 64}, "memory": {"minimum": 512000, "allocated": 0}, "gres": {"total": "gpu:h100:8(S:0-1)", "used": "gpu:h100:0(IDX:N/A)"}},
		{"partition": {"name": "gpu"}, "node": {"state": ["MIXED"]}, "nodes": {"nodes": ["g2"]},
		 "cpus": {"allocated": 8}, "memory": {"allocated": 0}, "gres": {"total": "gpu:h100:8(S:0-1)", "used": "gpu:h100:2(IDX:0-1)"}},
		{"partition": {"name": "debug"}, "node": {"state": ["MIXED"]}, "nodes": {"nodes": ["g2"]},
		 "cpus": {"allocated": 8}, "gres": {"total": "gpu:h100:8(S:0-1)", "used": "gpu:h100:2(IDX:0-1)"}},
		{"partition": {"name": "gpu"}, "node": {"state": ["IDLE", "POWERED_DOWN"]}, "nodes": {"nodes": ["g3"]},
		 "cpus": {"allocated": 0}, "memory": {"allocated": {"set": true, "infinite": false, "number": 0}}, "gres": {"total": "gpu:h100:8", "used": ""}},
		{"partition": {"name": "gpu"}, "node": {"state": ["IDLE", "DRAIN"]}, "nodes": {"nodes": ["g[4-5]"]},
		 "cpus": {"allocated": 0}, "gres": {"total": "gpu:8", "used": "gpu:0"}},
		{"partition": {"name": "gpu"}, "node": {"state": ["MIXED"]}, "nodes": {"nodes": ["g6"]}, "cpus": {"allocated": 2},
		 "gres": {"total": "tmpsize:7T,gpu:l40s:4(S:0-1)", "used": "gpu:l40s:1(IDX:0),tmpsize:10737418240"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []adapter.Node{
		{Name: "g1", Partitions: []string{"gpu"}, GPUs: 8, FreeGPUs: 8, Power: adapter.PowerOn, State: "idle", GPUTypes: map[string]int{"h100": 8}, FreeGPUTypes: map[string]int{"h100": 8}},
		{Name: "g2", Partitions: []string{"gpu", "debug"}, GPUs: 8, FreeGPUs: 6, Busy: true, Power: adapter.PowerOn, State: "mixed", GPUTypes: map[string]int{"h100": 8}, FreeGPUTypes: map[string]int{"h100": 6}},
		{Name: "g3", Partitions: []string{"gpu"}, GPUs: 8, Power: adapter.PowerOff, State: "idle+POWERED_DOWN", GPUTypes: map[string]int{"h100": 8}},
		{Name: "g4", Partitions: []string{"gpu"}, GPUs: 8, Unusable: true, Power: adapter.PowerOn, State: "idle+DRAIN", GPUTypes: map[string]int{"": 8}},
		{Name: "g5", Partitions: []string{"gpu"}, GPUs: 8, Unusable: true, Power: adapter.PowerOn, State: "idle+DRAIN", GPUTypes: map[string]int{"": 8}},
		// A local-disk GRES counted in bytes beside the GPUs (Slurm
		// 24.11): passed over; before 2026-11-25 its count failed the
		// whole document, and every pass with it.
		{Name: "g6", Partitions: []string{"gpu"}, GPUs: 4, FreeGPUs: 3, Busy: true, Power: adapter.PowerOn, State: "mixed", GPUTypes: map[string]int{"l40s": 4}, FreeGPUTypes: map[string]int{"l40s": 3}},
	}
	if !reflect.DeepEqual(nodes, want) {
		t.Errorf("decodeSinfo =\n%+v\nwant\n%+v", nodes, want)
	}
}

func TestJobGPUs(t *testing.T) {
	for _, tc := range []struct {
		in  string
		n   int
		typ string
		err bool
	}{
		{"", 0, "", false},
		{"gres:gpu:8", 8, "", false},
		{"gres/gpu:a100:2,gres:mps:100", 2, "a100", false},
		{"gpu:h100:2(IDX:0-1)", 2, "h100", false},
		{"gpu", 1, "", false},
		{"gpu:a100", 1, "a100", false},
		{"mps:100", 0, "", false},
		{"gpu:a:b", 0, "", true},
		{"gpu:-1", 0, "", true},
		{"gres/gpu=4", 4, "", false},
		{"cpu=2,gres/gpu:h100=2", 2, "h100", false},
		{"gres/gpu=x", 0, "", true},
		{"gres/gpu:a100=1,gres/gpu:v100=1", 2, "", false},
		{"gres/gpu:a100=1,gres/gpu:a100=2", 3, "a100", false},
		{"gres/gpu:l40s=1,gres/tmpsize=10737418240", 1, "l40s", false},
		{"gres:tmpsize:10737418240", 0, "", false},
	} {
		n, typ, err := jobGPUs(slurmfmt.Job{TRESPerJob: tc.in})
		if n != tc.n || typ != tc.typ || (err != nil) != tc.err {
			t.Errorf("jobGPUs(tres_per_job %q) = %d, %q, %v; want %d, %q, error %v", tc.in, n, typ, err, tc.n, tc.typ, tc.err)
		}
	}
	// The other fields, times what they are per; the first that names
	// GPUs counts.
	set := func(v int64) slurmfmt.Int { return slurmfmt.Int{V: v, Set: true} }
	for _, tc := range []struct {
		name string
		j    slurmfmt.Job
		n    int
		typ  string
	}{
		{"per node", slurmfmt.Job{TRESPerNode: "gres:gpu:a100:2", NodeCount: set(3)}, 6, "a100"},
		{"per socket (--gpus-per-socket)", slurmfmt.Job{TRESPerSocket: "gres:gpu:2", SocketsPerNode: set(2), NodeCount: set(2)}, 8, ""},
		{"per socket, sockets unset", slurmfmt.Job{TRESPerSocket: "gres:gpu:2", SocketsPerNode: set(65534)}, 2, ""},
		{"per task", slurmfmt.Job{TRESPerTask: "gres:gpu:2", Tasks: set(4), NodeCount: set(2)}, 8, ""},
		{"per job first", slurmfmt.Job{TRESPerJob: "gres:gpu:3", TRESPerNode: "gres:gpu:8", NodeCount: set(2)}, 3, ""},
		{"two types per node", slurmfmt.Job{TRESPerNode: "gres/gpu:a100=1,gres/gpu:v100=1", NodeCount: set(2)}, 4, ""},
	} {
		if n, typ, err := jobGPUs(tc.j); n != tc.n || typ != tc.typ || err != nil {
			t.Errorf("%s: jobGPUs = %d, %q, %v; want %d, %q", tc.name, n, typ, err, tc.n, tc.typ)
		}
	}
}

// TestDecodeGPUTypesAndFeatures: a pending job's GPU type (from whichever
// TRES field asks for GPUs) and constraint, and a node's GPUs by type (one
// node has two types) and active features, in the shapes of Slurm 22.05
// (comma-separated strings), 23.02 (lists) and 23.11's sinfo records (an object of total and active
// features). A feature field of another type rejects the document.
func TestDecodeGPUTypesAndFeatures(t *testing.T) {
	jobs, _, _, err := decodeSqueue([]byte(`{"jobs": [
		{"job_id": 1, "job_state": "PENDING", "tres_per_node": "gres:gpu:h100:2", "features": "h100&ib"},
		{"job_id": 2, "job_state": ["PENDING"], "tres_per_job": "gres/gpu:a100=4", "features": ""},
		{"job_id": 3, "job_state": ["PENDING"], "tres_per_task": "gres:gpu:1", "features": ["a", "b"]},
		{"job_id": 4, "job_state": ["PENDING"]}]}`), fixtureNow)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][2]string{}
	for _, j := range jobs {
		got[j.ID] = [2]string{j.GPUType, j.Constraint}
	}
	want := map[string][2]string{"1": {"h100", "h100&ib"}, "2": {"a100", ""}, "3": {"", "a,b"}, "4": {"", ""}}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("job %s: GPU type and constraint %q; want %q", id, got[id], w)
		}
	}

	for _, tc := range []struct {
		name, doc string
		types     map[string]int
		features  []string
		free      map[string]int // FreeGPUTypes
	}{
		{"22.05", `{"nodes": [{"name": "g1", "state": "idle", "partitions": ["p"], "gres": "gpu:a100:8(S:0-1)", "features": "a100,ib,spare", "active_features": "a100,ib"}]}`,
			map[string]int{"a100": 8}, []string{"a100", "ib"}, nil},
		{"23.02", `{"nodes": [{"name": "g1", "state": ["IDLE"], "partitions": ["p"], "gres": "gpu:8", "active_features": ["h100"]}]}`,
			map[string]int{"": 8}, []string{"h100"}, nil},
		{"23.11", `{"sinfo": [{"partition": {"name": "p"}, "node": {"state": ["IDLE"]}, "nodes": {"nodes": ["g1"]}, "gres": {"total": "gpu:h100:8(S:0-1)", "used": ""}, "features": {"total": "h100,ib", "active": "h100"}}]}`,
			map[string]int{"h100": 8}, []string{"h100"}, nil},
		{"two types", `{"nodes": [{"name": "g1", "state": "mixed", "partitions": ["p"], "gres": "gpu:a100:4(S:0),gpu:v100:2(S:1)", "gres_used": "gpu:a100:1(IDX:0),gpu:v100:0(IDX:N/A)"}]}`,
			map[string]int{"a100": 4, "v100": 2}, nil, map[string]int{"a100": 3, "v100": 2}},
		{"two types, one not in gres_used", `{"nodes": [{"name": "g1", "state": "mixed", "partitions": ["p"], "gres": "gpu:a100:4(S:0),gpu:v100:2(S:1)", "gres_used": "gpu:a100:1(IDX:0)"}]}`,
			map[string]int{"a100": 4, "v100": 2}, nil, nil},
		{"two types, powered down", `{"nodes": [{"name": "g1", "state": "idle", "state_flags": ["POWERED_DOWN"], "partitions": ["p"], "gres": "gpu:a100:4(S:0),gpu:v100:2(S:1)", "gres_used": "gpu:a100:0(IDX:N/A),gpu:v100:0(IDX:N/A)"}]}`,
			map[string]int{"a100": 4, "v100": 2}, nil, nil},
		{"none", `{"nodes": [{"name": "g1", "state": "idle", "partitions": ["p"], "active_features": null}]}`, nil, nil, nil},
	} {
		nodes, err := decodeSinfo([]byte(tc.doc))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if n := nodes[0]; !maps.Equal(n.GPUTypes, tc.types) || (n.GPUTypes == nil) != (tc.types == nil) || !slices.Equal(n.Features, tc.features) {
			t.Errorf("%s: node GPUs by type %v, features %q; want %v, %q", tc.name, n.GPUTypes, n.Features, tc.types, tc.features)
		}
		if n := nodes[0]; !maps.Equal(n.FreeGPUTypes, tc.free) || (n.FreeGPUTypes == nil) != (tc.free == nil) {
			t.Errorf("%s: free GPUs by type %v; want %v", tc.name, n.FreeGPUTypes, tc.free)
		}
	}

	for _, doc := range []string{
		`{"jobs": [{"job_id": 1, "job_state": "PENDING", "features": 7}]}`,
		`{"nodes": [{"name": "g1", "state": "idle", "active_features": {"x": 1}, "partitions": ["p"]}]}`,
	} {
		var err error
		if strings.HasPrefix(doc, `{"jobs"`) {
			_, _, _, err = decodeSqueue([]byte(doc), fixtureNow)
		} else {
			_, err = decodeSinfo([]byte(doc))
		}
		if !errors.Is(err, ErrShape) || !strings.Contains(err.Error(), "features") {
			t.Errorf("%s: error %v; want ErrShape naming the field", doc, err)
		}
	}
}

func FuzzDecodeSqueue(f *testing.F) {
	f.Add(readFixture(f, "squeue.json"))
	f.Add([]byte(`{"jobs": [{"job_id": 9, "job_state": ["PENDING"], "priority": {"set": true, "number": 4}, "nodes": "a[1-2]"}]}`))
	f.Add([]byte(`{"jobs": [{"job_id": 3, "job_state": "PENDING", "tres_per_socket": "gres:gpu:2", "sockets_per_node": 2, "node_count": 2},
		{"job_id": 2, "job_state": "PENDING", "tres_per_node": "gres:gpu:8,gres:tmpdisk:10G", "node_count": 1}]}`))
	f.Add([]byte(`{"jobs": [{"job_id": 5, "array_job_id": 5, "array_task_id": 0, "job_state": "RUNNING", "nodes": "g[1-2]"},
		{"job_id": 4, "array_job_id": 4, "array_task_string": "0-99:3,200%5", "job_state": "PENDING", "state_reason": "Resources"}]}`))
	f.Add([]byte(`{"jobs": [{"job_id": 6, "job_state": "PENDING", "partition": "side", "state_reason": "PartitionDown", "priority": 7},
		{"job_id": 7, "job_state": "PENDING", "partition": "a,b", "state_reason": "PartitionTimeLimit", "required_nodes": "g1"}]}`))
	f.Add([]byte(`{"jobs": [{"job_id": 8, "job_state": "PENDING", "tres_per_job": "gres/gpu:h100=4", "features": "h100&ib"}, {"job_id": 9, "job_state": "PENDING", "features": ["a", "b"]}]}`))
	f.Add([]byte(`{"jobs": [{"job_id": 10, "job_state": "PENDING", "tres_per_node": "gres:gpu:7:x", "required_nodes": "g[1-"}, {"job_id": 11, "array_job_id": 11, "array_task_string": "0-3,9...", "job_state": "PENDING"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		jobs, leaders, holding, err := decodeSqueue(b, fixtureNow)
		if err != nil {
			if errKind(err) == "other" {
				t.Errorf("decodeSqueue error of no kind: %v", err)
			}
			return
		}
		for _, j := range jobs {
			if j.ID == "" || j.GPUs < 0 || j.ArrayTasks < 0 || j.ArrayTasks > maxArrayTasks {
				t.Errorf("decodeSqueue accepted %+v", j)
			}
			if j.Unreadable != "" && !utf8.ValidString(j.Unreadable) {
				t.Errorf("decodeSqueue: job %s's problem %q is not valid UTF-8", j.ID, j.Unreadable)
			}
		}
		for id := range leaders {
			if !slices.ContainsFunc(jobs, func(j adapter.Job) bool { return j.ID == id }) {
				t.Errorf("decodeSqueue names %s a heterogeneous job's leader but not a pending job", id)
			}
		}
		for n, ids := range holding {
			if n == "" || len(ids) == 0 || slices.Contains(ids, "") {
				t.Errorf("decodeSqueue: node %q held by %q", n, ids)
			}
		}
	})
}

func FuzzDecodeSinfo(f *testing.F) {
	f.Add(readFixture(f, "sinfo.json"))
	f.Add([]byte(`{"nodes": [{"name": "gpu1", "state": "mixed", "partitions": ["batch"], "gres": "gpu:8,tmpdisk:100G", "gres_used": "gpu:1,tmpdisk:10737418240", "alloc_cpus": 1}]}`))
	f.Add([]byte(`{"nodes": [{"name": "b", "state": ["ALLOCATED", "POWER_DOWN"], "partitions": ["p"], "gres": "gpu:8", "gres_used": "gpu:8(IDX:0-7)"}]}`))
	f.Add([]byte(`{"sinfo": [{"partition": {"name": "p"}, "node": {"state": ["MIXED"]}, "nodes": {"nodes": ["g[1-2]"]}, "cpus": {"allocated": 8}, "gres": {"total": "gpu:h100:8(S:0-1)", "used": "gpu:h100:2(IDX:0-1)"}}]}`))
	f.Add([]byte(`{"sinfo": [{"partition": {"name": "p"}, "node": {"state": ["IDLE"]}, "nodes": {"nodes": ["g1"]}, "features": {"total": "a,b", "active": "a"}}]}`))
	f.Add([]byte(`{"nodes": [{"name": "g", "state": "idle", "partitions": ["p"], "active_features": "a100,ib", "gres": "gpu:a100:8"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		nodes, err := decodeSinfo(b)
		if err != nil {
			if errKind(err) == "other" {
				t.Errorf("decodeSinfo error of no kind: %v", err)
			}
			return
		}
		for _, n := range nodes {
			if n.Name == "" || n.FreeGPUs < 0 || n.FreeGPUs > n.GPUs || n.Power == adapter.PowerUnknown {
				t.Errorf("decodeSinfo accepted %+v", n)
			}
		}
	})
}

func TestJobGone(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		want bool
	}{
		{"scontrol: exit status 1: slurm_update error: Invalid job id specified", true},
		{"scontrol: exit status 1: slurm_update error: Job is no longer pending execution", true},
		{"scontrol: exit status 1: slurm_update error: Job/step already completing or completed", true},
		{"Job has already finished", true}, // an ended task of an array (Slurm 22.05)
		{"scontrol: exit status 1: slurm_update error: Access/permission denied", false},
		{"signal: killed", false},
	} {
		if got := jobGone(tc.msg); got != tc.want {
			t.Errorf("jobGone(%q) = %v; want %v", tc.msg, got, tc.want)
		}
	}
}

// TestClipString: a cut message stays valid UTF-8 — a character is never
// split — and says it was cut.
func TestClipString(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"abcdef", 3, "abc…"},
		{"a≤b", 2, "a…"}, // ≤ is 3 bytes: cut before it, not inside
		{"a≤b", 3, "a…"},
		{"a≤b", 4, "a≤…"},
		{"≤≤", 1, "…"},
	} {
		if got := clipString(tc.in, tc.n); got != tc.want || !utf8.ValidString(got) {
			t.Errorf("clipString(%q, %d) = %q; want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
