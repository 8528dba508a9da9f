package slurm

import (
	"reflect"
	"strings"
	"testing"

	"github.com/heliostat-dev/heliostat/schemas"
)

// sacct2205 is one job of `sacct --json --allocations` as Slurm 22.05.8
// prints it (dbv0.0.38), trimmed to the fields the source reads plus a few
// it ignores; the cases below edit it.
const sacct2205 = `{"meta": {"plugin": {"type": "openapi/dbv0.0.38"}}, "errors": [], "jobs": [{
  "account": "ml", "allocation_nodes": 2, "array": {"job_id": 0, "limits": {"max": {"running": {"tasks": 0}}}, "task": null, "task_id": null},
  "association": {"account": "ml", "cluster": "c1", "partition": null, "user": "alice"},
  "cluster": "c1", "exit_code": {"status": "FAILED", "return_code": 3},
  "derived_exit_code": {"status": "SUCCESS", "return_code": 0},
  "flags": ["CLEAR_SCHEDULING", "STARTED_ON_SCHEDULE"], "group": "users", "het": {"job_id": 0, "job_offset": null},
  "job_id": 8, "name": "train", "nodes": "gpu[1-2]", "partition": "batch", "priority": 4294901759, "qos": "normal",
  "required": {"CPUs": 4, "memory": 0},
  "state": {"current": "FAILED", "reason": "None"}, "steps": [],
  "time": {"elapsed": 5, "eligible": 1795377601, "end": 1795377610, "start": 1795377605, "submission": 1795377600,
    "suspended": 0, "limit": 5, "system": {"seconds": 0, "microseconds": 0}},
  "tres": {"allocated": [{"type": "cpu", "name": null, "id": 1, "count": 4}, {"type": "mem", "name": null, "id": 2, "count": 2000},
      {"type": "node", "name": null, "id": 4, "count": 2}, {"type": "gres", "name": "gpu", "id": 1001, "count": 16}],
    "requested": [{"type": "cpu", "name": null, "id": 1, "count": 4}, {"type": "mem", "name": null, "id": 2, "count": 2000},
      {"type": "gres", "name": "gpu", "id": 1001, "count": 16}]},
  "user": "alice", "wckey": {"wckey": "", "flags": []}, "working_directory": "/home/alice"}]}`

func TestObserveSacct(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edits []string // old, new pairs applied to sacct2205
		want  func(e *schemas.JobEvent, o *observation)
		ids   []string // job ids of the observations, when not ["8"]
		gap   *taskGap // the tasks a cut list left unknown
		err   string
	}{
		{name: "22.05", want: func(*schemas.JobEvent, *observation) {}},
		{name: "v0.0.40 shapes", edits: []string{
			`"state": {"current": "FAILED"`, `"state": {"current": ["FAILED"]`,
			`"limit": 5,`, `"limit": {"set": true, "infinite": false, "number": 5},`,
			`"exit_code": {"status": "FAILED", "return_code": 3}`, `"exit_code": {"status": ["FAILED"], "return_code": {"set": true, "infinite": false, "number": 3}, "signal": {"id": {"set": false, "infinite": false, "number": 0}, "name": ""}}`,
			`"priority": 4294901759`, `"priority": {"set": true, "infinite": false, "number": 7}`,
		}, want: func(e *schemas.JobEvent, _ *observation) { e.Priority = 7 }},
		{name: "signal 22.05", edits: []string{`{"status": "FAILED", "return_code": 3}`, `{"status": "SIGNALED", "return_code": 0, "signal": {"signal_id": 9, "name": "KILL"}}`},
			want: func(e *schemas.JobEvent, _ *observation) { e.ExitCode = 137 }},
		{name: "signal v0.0.40", edits: []string{`{"status": "FAILED", "return_code": 3}`, `{"status": ["SIGNALED"], "return_code": {"set": false, "infinite": false, "number": 0}, "signal": {"id": {"set": true, "infinite": false, "number": 15}, "name": "TERM"}}`},
			want: func(e *schemas.JobEvent, _ *observation) { e.ExitCode = 143 }},
		{name: "unlimited, typed gpus", edits: []string{`"limit": 5,`, `"limit": null,`,
			`{"type": "gres", "name": "gpu", "id": 1001, "count": 16}],
    "requested"`, `{"type": "gres", "name": "gpu:a100", "id": 1002, "count": 8}, {"type": "gres", "name": "gpu:h100", "id": 1003, "count": 8}],
    "requested"`},
			want: func(e *schemas.JobEvent, _ *observation) { e.TimeLimitS, e.GPUType = schemas.Unknown, "a100,h100" }},
		{name: "two gpu types listed the other way round", edits: []string{
			`{"type": "gres", "name": "gpu", "id": 1001, "count": 16}],
    "requested"`, `{"type": "gres", "name": "gpu:h100", "id": 1003, "count": 12}, {"type": "gres", "name": "gpu:a100", "id": 1002, "count": 4}],
    "requested"`},
			want: func(e *schemas.JobEvent, _ *observation) { e.GPUType = "a100,h100" }},
		{name: "one gpu type beside the untyped count", edits: []string{
			`{"type": "gres", "name": "gpu", "id": 1001, "count": 16}],
    "requested"`, `{"type": "gres", "name": "gpu", "id": 1001, "count": 16}, {"type": "gres", "name": "gpu:h100", "id": 1003, "count": 16}],
    "requested"`},
			want: func(e *schemas.JobEvent, _ *observation) { e.GPUType = "h100" }},
		{name: "no gpus tracked", edits: []string{`, {"type": "gres", "name": "gpu", "id": 1001, "count": 16}]`, `]`},
			want: func(e *schemas.JobEvent, _ *observation) { e.GPUs = schemas.Unknown }},
		{name: "cancelled while pending", edits: []string{`"current": "FAILED"`, `"current": "CANCELLED"`, `"nodes": "gpu[1-2]"`, `"nodes": "None assigned"`,
			`"start": 1795377605`, `"start": 0`, `"allocated": [{"type": "cpu", "name": null, "id": 1, "count": 4}, {"type": "mem", "name": null, "id": 2, "count": 2000},
      {"type": "node", "name": null, "id": 4, "count": 2}, {"type": "gres", "name": "gpu", "id": 1001, "count": 16}]`, `"allocated": []`},
			want: func(e *schemas.JobEvent, o *observation) {
				e.State, e.Nodes, e.StartMillis = schemas.StateCancelled, nil, 0
				o.started = false
			}},
		{name: "array task", edits: []string{`"array": {"job_id": 0,`, `"array": {"job_id": 5,`, `"task_id": null`, `"task_id": 2`},
			want: func(e *schemas.JobEvent, _ *observation) { e.JobID, e.ArrayJobID, e.ArrayTaskID = "5_2", "5", 2 }, ids: []string{"5_2"}},
		{name: "pending array cancelled whole", edits: []string{`"array": {"job_id": 0,`, `"array": {"job_id": 8,`, `"task": null`, `"task": "[0-2%1]"`,
			`"current": "FAILED"`, `"current": "CANCELLED"`, `"start": 1795377605`, `"start": 0`},
			ids: []string{"8_0", "8_1", "8_2"}},
		{name: "preempted (and requeued)", edits: []string{`"current": "FAILED"`, `"current": "PREEMPTED"`},
			want: func(e *schemas.JobEvent, _ *observation) { e.State = schemas.StatePreempted }},
		{name: "requeued on request", edits: []string{`"current": "FAILED"`, `"current": "REQUEUED"`},
			want: func(e *schemas.JobEvent, _ *observation) { e.State = requeuedState }},
		{name: "pending array cut short", edits: []string{`"array": {"job_id": 0,`, `"array": {"job_id": 8,`, `"task": null`, `"task": "[0-2,4,9...%1]"`,
			`"current": "FAILED"`, `"current": "CANCELLED"`, `"start": 1795377605`, `"start": 0`},
			ids: []string{"8_0", "8_1", "8_2", "8_4"}, gap: &taskGap{arrayJobID: "8", above: 4}},
		{name: "running", edits: []string{`"current": "FAILED"`, `"current": "RUNNING"`}, err: "not a final state"},
		{name: "unknown state", edits: []string{`"current": "FAILED"`, `"current": "EXPLODED"`}, err: "unknown job state"},
		{name: "no end", edits: []string{`"end": 1795377610`, `"end": 0`}, err: "time.end 0"},
		{name: "end after 2106", edits: []string{`"end": 1795377610`, `"end": 9223372036854775`}, err: "time.end 9223372036854775 is after 2106"},
		{name: "submission after 2106", edits: []string{`"submission": 1795377600`, `"submission": 4294967296`}, err: "time.submission 4294967296 is after 2106"},
		{name: "end before start", edits: []string{`"end": 1795377610`, `"end": 1795377604`}, err: "before time.start"},
		{name: "no job id", edits: []string{`"job_id": 8,`, `"job_id": 0,`}, err: "job_id 0"},
		{name: "bad hostlist", edits: []string{`gpu[1-2]`, `gpu[2-1]`}, err: "nodes:"},
		{name: "negative count", edits: []string{`"count": 16}],
    "requested"`, `"count": -16}],
    "requested"`}, err: "negative"},
		{name: "array that ran without a task", edits: []string{`"array": {"job_id": 0,`, `"array": {"job_id": 8,`}, err: "array.task_id is null"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := sacct2205
			for i := 0; i < len(tc.edits); i += 2 {
				if !strings.Contains(doc, tc.edits[i]) {
					t.Fatalf("edit %q does not apply", tc.edits[i])
				}
				doc = strings.Replace(doc, tc.edits[i], tc.edits[i+1], 1)
			}
			resp, err := decodeSacct([]byte(doc))
			if err != nil {
				t.Fatalf("decodeSacct: %v", err)
			}
			if len(resp.Jobs) != 1 {
				t.Fatalf("%d jobs; want 1", len(resp.Jobs))
			}
			obs, gap, err := observeSacct(&resp.Jobs[0])
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("observeSacct error = %v; want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("observeSacct: %v", err)
			}
			ids := tc.ids
			if ids == nil {
				ids = []string{"8"}
			}
			var got []string
			for _, o := range obs {
				got = append(got, o.ev.JobID)
			}
			if !reflect.DeepEqual(got, ids) {
				t.Fatalf("observations of jobs %v; want %v", got, ids)
			}
			if !reflect.DeepEqual(gap, tc.gap) {
				t.Errorf("tasks left unknown %+v; want %+v", gap, tc.gap)
			}
			if tc.want == nil {
				for _, o := range obs {
					if o.kind != kindFinal || o.started || o.ev.State != schemas.StateCancelled || o.ev.ArrayJobID != "8" {
						t.Errorf("%s: kind %v started %v state %v array %q; want a final CANCELLED task of array 8 that never ran",
							o.ev.JobID, o.kind, o.started, o.ev.State, o.ev.ArrayJobID)
					}
				}
				return
			}
			want := schemas.JobEvent{
				JobID: "8", ArrayTaskID: schemas.Unknown, Name: "train", User: "alice", UID: schemas.Unknown, Group: "users",
				Account: "ml", Partition: "batch", QOS: "normal", State: schemas.StateFailed, ExitCode: 3,
				Priority: 4294901759, SubmitMillis: 1795377600_000, EligibleMillis: 1795377601_000,
				StartMillis: 1795377605_000, EndMillis: 1795377610_000, TimeLimitS: 300,
				NodeCount: 2, Nodes: []string{"gpu1", "gpu2"}, CPUs: 4, GPUs: 16, MemReqBytes: 2000 << 20,
				WorkDir: "/home/alice",
			}
			wantObs := observation{kind: kindFinal, started: true}
			tc.want(&want, &wantObs)
			o := obs[0]
			if !reflect.DeepEqual(o.ev, want) {
				t.Errorf("event\n got %+v\nwant %+v", o.ev, want)
			}
			if o.kind != wantObs.kind || o.started != wantObs.started || o.slurmID != "" || o.gpuIdx != nil {
				t.Errorf("observation kind %v started %v slurmID %q gpuIdx %v; want kind %v started %v, no slurm id or GPU indices",
					o.kind, o.started, o.slurmID, o.gpuIdx, wantObs.kind, wantObs.started)
			}
		})
	}
}

func TestDecodeSacctErrors(t *testing.T) {
	for _, tc := range []struct{ name, doc, err string }{
		{"not json", `sacct: error: Problem talking to the database`, "decode sacct --json at offset"},
		{"slurm errors", `{"errors": [{"error": "Unable to connect to database"}], "jobs": []}`, "reports errors"},
		{"no jobs", `{"meta": {}}`, `no "jobs" list`},
		{"wrong type", `{"jobs": [{"job_id": "eight"}]}`, "job_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := decodeSacct([]byte(tc.doc)); err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("decodeSacct(%q) error = %v; want one containing %q", tc.doc, err, tc.err)
			}
		})
	}
	for _, doc := range []string{`{"errors": [], "jobs": []}`,
		// What 22.05.8 prints when no job ended in the window.
		`{"meta": {"plugin": {"type": "openapi/dbv0.0.38"}}, "errors": [{"description": "Nothing found", "error_number": 9003, "error": "Nothing found with query", "source": "slurmdb_jobs_get"}], "jobs": []}`,
	} {
		if r, err := decodeSacct([]byte(doc)); err != nil || len(r.Jobs) != 0 {
			t.Errorf("decodeSacct(%s) = %v, %v; want an empty list", doc, r, err)
		}
	}
	if r, err := decodeSacct([]byte(sacct2205)); err != nil || !r.legacyExitCodes() {
		t.Errorf("decodeSacct(22.05) = %v, %v; want exit codes read from the text output (dbv0.0.38)", r, err)
	}
}

func TestParseSacctExitCodes(t *testing.T) {
	got, err := parseSacctExitCodes([]byte("8|3:0\n9|0:15\n10|0:0\n"))
	if want := map[int64]int64{8: 3, 9: 143, 10: 0}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("parseSacctExitCodes = %v, %v; want %v", got, err, want)
	}
	if got, err := parseSacctExitCodes(nil); err != nil || len(got) != 0 {
		t.Errorf("parseSacctExitCodes(empty) = %v, %v; want none", got, err)
	}
	for _, bad := range []string{"8|3", "8 3:0", "x|3:0", "8|3:x", "8|-1:0", "0|0:0"} {
		if _, err := parseSacctExitCodes([]byte("7|0:0\n" + bad + "\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("parseSacctExitCodes(%q) error = %v; want one naming line 2", bad, err)
		}
	}
}

func FuzzParseSacctExitCodes(f *testing.F) {
	f.Add([]byte("8|3:0\n9|0:15\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		codes, err := parseSacctExitCodes(b)
		if err != nil {
			return
		}
		for id, c := range codes {
			if id <= 0 || c < 0 {
				t.Fatalf("job %d exit %d", id, c)
			}
		}
	})
}

// FuzzDecodeSacct: any document decodes or fails with an error, and every
// record observes or fails with one; an observation is of an ended job.
func FuzzDecodeSacct(f *testing.F) {
	f.Add([]byte(sacct2205))
	f.Add([]byte(`{"jobs": [{"job_id": 3, "array": {"job_id": 3, "task": "0-3:2%1"}, "state": {"current": ["CANCELLED"]}, "time": {"submission": 1, "end": 2}}]}`))
	f.Add([]byte(`{"jobs": [{"job_id": {"set": true, "number": 1}, "exit_code": {"status": ["SIGNALED"], "signal": {"id": {"set": true, "number": 9}}}}]}`))
	f.Add([]byte(`{"jobs": [{"job_id": 3, "array": {"job_id": 3, "task": "[0-3,7,9,1..."}, "state": {"current": "REQUEUED"}, "time": {"submission": 1, "end": 2}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		resp, err := decodeSacct(b)
		if err != nil {
			return
		}
		for i := range resp.Jobs {
			obs, gap, err := observeSacct(&resp.Jobs[i])
			if err != nil {
				continue
			}
			for _, o := range obs {
				if gap != nil && (o.ev.ArrayJobID != gap.arrayJobID || o.ev.ArrayTaskID > gap.above) {
					t.Fatalf("task %s of a list cut short above task %d of array %s", o.ev.JobID, gap.above, gap.arrayJobID)
				}
				if o.kind != kindFinal || o.ev.EndMillis <= 0 || o.ev.JobID == "" || (o.started && o.ev.StartMillis > o.ev.EndMillis) {
					t.Fatalf("observation %+v of record %d", o.ev, i)
				}
				checkTimesStorable(t, &o.ev)
			}
		}
	})
}
