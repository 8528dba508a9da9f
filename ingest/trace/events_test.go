package trace_test

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/ingest/trace"
	"github.com/heliostat-dev/heliostat/schemas"
)

func TestEventState(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want schemas.JobState
		ok   bool
	}{
		{"COMPLETED", schemas.StateCompleted, true},
		{"FAILED", schemas.StateFailed, true},
		{"CANCELLED", schemas.StateCancelled, true},
		{"TIMEOUT", schemas.StateTimeout, true},
		{"NODE_FAIL", schemas.StateNodeFail, true},
		{"PREEMPTED", schemas.StatePreempted, true},
		{"OUT_OF_MEMORY", schemas.StateOutOfMemory, true},
		{"PENDING", schemas.StatePending, true},
		{"RUNNING", schemas.StateRunning, true},
		{"OUT_OF_ME+", schemas.StateOutOfMemory, true}, // sacct's truncation
		{"CANCELLED+", schemas.StateCancelled, true},
		{"", 0, false},           // the trace does not say
		{"BOOT_FAIL", 0, false},  // Slurm state schemas has no name for
		{"DEADLINE", 0, false},   // not the same as TIMEOUT
		{"completed", 0, false},  // readers upper-case; this is not one of them
		{"+", 0, false},          // truncated to nothing
		{"P+", 0, false},         // PENDING or PREEMPTED: names neither
		{"COMPLETEDX", 0, false}, // a prefix match the other way is no match
	} {
		got, ok := trace.EventState(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("EventState(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestConverterAppend(t *testing.T) {
	t0 := time.Date(2002, 7, 28, 7, 4, 5, 0, time.UTC)
	ms := func(d time.Duration) int64 { return t0.Add(d).UnixMilli() }
	// swfJob is a job as ReadSWF gives it: times, processors, ids, no GPUs or nodes.
	swfJob := func(state string, wait, run time.Duration) trace.Job {
		j := trace.Job{Line: 30, ID: "16", User: "5", Group: "1", Executable: "", Queue: "1/1", State: state,
			Submit: t0, Wait: wait, Run: run, ReqTime: 4 * time.Hour, Procs: 8, ReqProcs: 8, GPUs: -1, Nodes: -1, ReqMem: -1}
		if wait >= 0 {
			j.Start = t0.Add(wait)
			if run >= 0 {
				j.End = j.Start.Add(run)
			}
		}
		return j
	}
	swfBase := schemas.JobEvent{
		JobID: "16", ArrayTaskID: schemas.Unknown, User: "5", UID: schemas.Unknown, Group: "1", Partition: "1/1",
		ExitCode: schemas.Unknown, Priority: schemas.Unknown, SubmitMillis: ms(0), TimeLimitS: 4 * 3600,
		NodeCount: schemas.Unknown, CPUs: 8, GPUs: schemas.Unknown, MemReqBytes: schemas.Unknown,
	}
	// venusJob is a row of the Venus slice: submit and duration, no queueing time.
	venusJob := func(state string) trace.Job {
		return trace.Job{Line: 2, ID: "765563", User: "uH3om", Queue: "vcvGl", State: state, Submit: t0,
			Run: 24 * time.Second, Wait: -1, ReqTime: -1, Procs: -1, ReqProcs: -1, GPUs: 128, Nodes: 16, ReqMem: -1}
	}
	venusBase := schemas.JobEvent{
		JobID: "765563", ArrayTaskID: schemas.Unknown, User: "uH3om", UID: schemas.Unknown, Partition: "vcvGl",
		ExitCode: schemas.Unknown, Priority: schemas.Unknown, SubmitMillis: ms(0), TimeLimitS: schemas.Unknown,
		NodeCount: 16, CPUs: schemas.Unknown, GPUs: 128, MemReqBytes: schemas.Unknown,
	}

	type ev struct {
		typ        schemas.JobEventType
		at         int64
		state      schemas.JobState
		start, end int64
	}
	for _, tc := range []struct {
		name  string
		job   trace.Job
		base  schemas.JobEvent
		want  []ev
		stats trace.EventStats
	}{
		{"swf completed", swfJob("COMPLETED", 5*time.Second, time.Hour), swfBase, []ev{
			{schemas.JobSubmit, ms(0), schemas.StatePending, 0, 0},
			{schemas.JobStart, ms(5 * time.Second), schemas.StateRunning, ms(5 * time.Second), 0},
			{schemas.JobEnd, ms(time.Hour + 5*time.Second), schemas.StateCompleted, ms(5 * time.Second), ms(time.Hour + 5*time.Second)},
		}, trace.EventStats{Jobs: 1, Events: 3}},
		{"swf failed (status 0)", swfJob("FAILED", 0, 0), swfBase, []ev{
			{schemas.JobSubmit, ms(0), schemas.StatePending, 0, 0},
			{schemas.JobStart, ms(0), schemas.StateRunning, ms(0), 0},
			{schemas.JobEnd, ms(0), schemas.StateFailed, ms(0), ms(0)},
		}, trace.EventStats{Jobs: 1, Events: 3}},
		{"swf cancelled before start", swfJob("CANCELLED", -1, -1), swfBase, []ev{
			{schemas.JobSubmit, ms(0), schemas.StatePending, 0, 0},
			{schemas.JobEnd, ms(0), schemas.StateCancelled, 0, 0},
		}, trace.EventStats{Jobs: 1, Events: 2, NoStart: 1, EndTimeUnknown: 1}},
		{"swf cancelled while running, run time unknown", swfJob("CANCELLED", time.Minute, -1), swfBase, []ev{
			{schemas.JobSubmit, ms(0), schemas.StatePending, 0, 0},
			{schemas.JobStart, ms(time.Minute), schemas.StateRunning, ms(time.Minute), 0},
			{schemas.JobEnd, ms(time.Minute), schemas.StateCancelled, ms(time.Minute), 0},
		}, trace.EventStats{Jobs: 1, Events: 3, EndTimeUnknown: 1}},
		{"swf status -1: ran, outcome unknown, END UNKNOWN", swfJob("", 5*time.Second, time.Hour), swfBase, []ev{
			{schemas.JobSubmit, ms(0), schemas.StatePending, 0, 0},
			{schemas.JobStart, ms(5 * time.Second), schemas.StateRunning, ms(5 * time.Second), 0},
			{schemas.JobEnd, ms(5*time.Second + time.Hour), schemas.StateUnknown, ms(5 * time.Second), ms(5*time.Second + time.Hour)},
		}, trace.EventStats{Jobs: 1, Events: 3, EndStateUnknown: 1, UnmappedStates: map[string]int{"": 1}}},
		{"swf nothing but submit", swfJob("", -1, -1), swfBase, []ev{
			{schemas.JobSubmit, ms(0), schemas.StatePending, 0, 0},
		}, trace.EventStats{Jobs: 1, Events: 1, NoStart: 1, NoEnd: 1, UnmappedStates: map[string]int{"": 1}}},
		{"venus completed: END at submit, end time unknown", venusJob("COMPLETED"), venusBase, []ev{
			{schemas.JobSubmit, ms(0), schemas.StatePending, 0, 0},
			{schemas.JobEnd, ms(0), schemas.StateCompleted, 0, 0},
		}, trace.EventStats{Jobs: 1, Events: 2, NoStart: 1, EndTimeUnknown: 1}},
		{"venus node fail", venusJob("NODE_FAIL"), venusBase, []ev{
			{schemas.JobSubmit, ms(0), schemas.StatePending, 0, 0},
			{schemas.JobEnd, ms(0), schemas.StateNodeFail, 0, 0},
		}, trace.EventStats{Jobs: 1, Events: 2, NoStart: 1, EndTimeUnknown: 1}},
		{"helios unknown state BOOT_FAIL: no END", venusJob("BOOT_FAIL"), venusBase, []ev{
			{schemas.JobSubmit, ms(0), schemas.StatePending, 0, 0},
		}, trace.EventStats{Jobs: 1, Events: 1, NoStart: 1, NoEnd: 1, UnmappedStates: map[string]int{"BOOT_FAIL": 1}}},
		{"helios still running at the end of the log", func() trace.Job {
			j := venusJob("RUNNING")
			j.Start, j.Wait = t0.Add(time.Minute), time.Minute
			return j
		}(), venusBase, []ev{
			{schemas.JobSubmit, ms(0), schemas.StatePending, 0, 0},
			{schemas.JobStart, ms(time.Minute), schemas.StateRunning, ms(time.Minute), 0},
		}, trace.EventStats{Jobs: 1, Events: 2, NoEnd: 1}},
		{"helios out of memory, all times", func() trace.Job {
			j := venusJob("OUT_OF_ME+")
			j.Start, j.End = t0.Add(time.Minute), t0.Add(time.Minute+24*time.Second)
			return j
		}(), venusBase, []ev{
			{schemas.JobSubmit, ms(0), schemas.StatePending, 0, 0},
			{schemas.JobStart, ms(time.Minute), schemas.StateRunning, ms(time.Minute), 0},
			{schemas.JobEnd, ms(time.Minute + 24*time.Second), schemas.StateOutOfMemory, ms(time.Minute), ms(time.Minute + 24*time.Second)},
		}, trace.EventStats{Jobs: 1, Events: 3}},
		{"swf requested memory: KB per processor, times the processors", func() trace.Job {
			j := swfJob("", -1, -1)
			j.ReqMem = 2048
			return j
		}(), func() schemas.JobEvent { b := swfBase; b.MemReqBytes = 2048 * 1024 * 8; return b }(), []ev{
			{schemas.JobSubmit, ms(0), schemas.StatePending, 0, 0},
		}, trace.EventStats{Jobs: 1, Events: 1, NoStart: 1, NoEnd: 1, UnmappedStates: map[string]int{"": 1}}},
		{"requested processors when allocated unknown", func() trace.Job {
			j := swfJob("COMPLETED", -1, -1)
			j.Procs, j.ReqProcs, j.ReqTime = -1, 4, -1
			return j
		}(), func() schemas.JobEvent { b := swfBase; b.CPUs, b.TimeLimitS = 4, schemas.Unknown; return b }(), []ev{
			{schemas.JobSubmit, ms(0), schemas.StatePending, 0, 0},
			{schemas.JobEnd, ms(0), schemas.StateCompleted, 0, 0},
		}, trace.EventStats{Jobs: 1, Events: 2, NoStart: 1, EndTimeUnknown: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := trace.NewConverter()
			got := c.Append(nil, &tc.job)
			want := make([]schemas.JobEvent, len(tc.want))
			for i, w := range tc.want {
				want[i] = tc.base
				want[i].Type, want[i].EventMillis, want[i].State, want[i].StartMillis, want[i].EndMillis = w.typ, w.at, w.state, w.start, w.end
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Append(%+v) =\n%+v\nwant\n%+v", tc.job, got, want)
			}
			if tc.stats.UnmappedStates == nil {
				tc.stats.UnmappedStates = map[string]int{}
			}
			if !reflect.DeepEqual(c.Stats, tc.stats) {
				t.Errorf("Append(%+v): stats %+v; want %+v", tc.job, c.Stats, tc.stats)
			}
			// Every event must be encodable as the wire contract demands.
			if _, err := schemas.AppendJobEventBatch(nil, &schemas.JobEventBatch{Cluster: "c", Source: schemas.SourceTrace, Events: got}); err != nil {
				t.Errorf("encode events of %+v: %v", tc.job, err)
			}
		})
	}
}

func TestConverterDuplicateIDs(t *testing.T) {
	const swf = "1 0 0 10 1 -1 -1 1 60 -1 2 3 -1 -1 1 -1 -1 -1\n" + // part 1 of a checkpointed job
		"2 5 0 10 1 -1 -1 1 60 -1 1 3 -1 -1 1 -1 -1 -1\n" +
		"1 20 0 10 1 -1 -1 1 60 -1 3 3 -1 -1 1 -1 -1 -1\n" + // its last part
		"1 40 0 10 1 -1 -1 1 60 -1 1 3 -1 -1 1 -1 -1 -1\n"
	tr, err := trace.ReadSWF(strings.NewReader(swf))
	if err != nil {
		t.Fatal(err)
	}
	c := trace.NewConverter()
	var ids []string
	for i := range tr.Jobs {
		ev := c.Append(nil, &tr.Jobs[i])
		ids = append(ids, ev[0].JobID)
		for _, e := range ev {
			if e.JobID != ev[0].JobID {
				t.Errorf("job on line %d: events of jobs %q and %q", tr.Jobs[i].Line, ev[0].JobID, e.JobID)
			}
		}
	}
	if want := []string{"1", "2", "1#2", "1#3"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("job ids %q; want %q", ids, want)
	}
	if c.Stats.DuplicateIDs != 2 {
		t.Errorf("Stats.DuplicateIDs = %d; want 2", c.Stats.DuplicateIDs)
	}
}

// TestConverterRenamedIDsUnique: renaming a repeated id never gives an id
// the file (or an earlier renaming) already has, which would make one job
// overwrite another downstream.
func TestConverterRenamedIDsUnique(t *testing.T) {
	for _, tc := range []struct {
		in, want []string
		dups     int
	}{
		{[]string{"5", "5", "5#2"}, []string{"5", "5#2", "5#2#2"}, 2},
		{[]string{"5", "5#2", "5"}, []string{"5", "5#2", "5#3"}, 1},
		{[]string{"5#2", "5", "5", "5"}, []string{"5#2", "5", "5#3", "5#4"}, 2},
		{[]string{"5", "5", "5#2", "5#2", "5"}, []string{"5", "5#2", "5#2#2", "5#2#3", "5#3"}, 4},
		{[]string{"1", "2", "1", "1#2#2", "1#2", "1"}, []string{"1", "2", "1#2", "1#2#2", "1#2#3", "1#3"}, 3},
	} {
		c := trace.NewConverter()
		var got []string
		seen := map[string]bool{}
		for i, id := range tc.in {
			j := trace.Job{Line: i + 2, ID: id, Submit: time.Unix(1e9, 0), Run: -1, Wait: -1, ReqTime: -1, Procs: -1, ReqProcs: -1, GPUs: -1, Nodes: -1, ReqMem: -1}
			ev := c.Append(nil, &j)
			got = append(got, ev[0].JobID)
			if seen[ev[0].JobID] {
				t.Errorf("ids %q: job %d gets %q, which an earlier job has", tc.in, i, ev[0].JobID)
			}
			seen[ev[0].JobID] = true
		}
		if !reflect.DeepEqual(got, tc.want) || c.Stats.DuplicateIDs != tc.dups {
			t.Errorf("ids %q converted to %q, %d duplicates; want %q, %d", tc.in, got, c.Stats.DuplicateIDs, tc.want, tc.dups)
		}
	}
}

// TestConverterAppendChecked: a job whose events the encoder would refuse is
// refused with its line and the field, and leaves no trace in the Converter:
// the next job with the same id keeps it, and the stats do not count it.
func TestConverterAppendChecked(t *testing.T) {
	t0 := time.Date(2020, 9, 1, 0, 0, 0, 0, time.UTC)
	job := func(line int, id, user string) trace.Job {
		return trace.Job{Line: line, ID: id, User: user, State: "COMPLETED", Submit: t0, Start: t0, End: t0.Add(time.Minute),
			Run: time.Minute, Wait: 0, ReqTime: -1, Procs: -1, ReqProcs: -1, GPUs: 8, Nodes: 1}
	}
	c := trace.NewConverter()
	dst := []schemas.JobEvent{{JobID: "before"}}
	bad := job(7, "5", "u\xff")
	got, err := c.AppendChecked(dst, &bad)
	var le *trace.LineError
	if !errors.As(err, &le) || le.Line != 7 || le.Reason != "bad_event" || !strings.Contains(le.Detail, "user") || !strings.Contains(le.Detail, "UTF-8") {
		t.Errorf("AppendChecked(invalid user) error %v; want a bad_event LineError of line 7 naming the user", err)
	}
	if len(got) != 1 || got[0].JobID != "before" {
		t.Errorf("AppendChecked(invalid user) = %+v; want dst as it was", got)
	}
	if c.Stats.Jobs != 0 || c.Stats.Events != 0 {
		t.Errorf("after a refused job: stats %+v; want nothing counted", c.Stats)
	}
	good := job(8, "5", "u")
	got, err = c.AppendChecked(nil, &good)
	if err != nil || len(got) != 3 || got[0].JobID != "5" || c.Stats.DuplicateIDs != 0 || c.Stats.Jobs != 1 || c.Stats.Events != 3 {
		t.Errorf("AppendChecked(good job 5) = %+v, %v, stats %+v; want 3 events of job 5, no duplicate", got, err, c.Stats)
	}
}

// TestRejectUnencodable: jobs whose events the encoder refuses are rejected
// with their lines, among the reader's rejects in line order; the others are
// kept and convert to the same ids as before.
func TestRejectUnencodable(t *testing.T) {
	t0 := time.Date(2020, 9, 1, 0, 0, 0, 0, time.UTC)
	in := "job_id,user,submit_time\n1,u,2020-09-01 00:00:00\n2,u,bad\n"
	tr, err := trace.ReadHelios(strings.NewReader(in), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Jobs no reader gives: they come from elsewhere (a test, a future reader).
	tr.Jobs = append(tr.Jobs,
		trace.Job{Line: 4, ID: "1", User: "u\xff", Submit: t0, Run: -1, Wait: -1, ReqTime: -1, Procs: -1, ReqProcs: -1, GPUs: -1, Nodes: -1, ReqMem: -1},
		trace.Job{Line: 5, ID: "1", Group: strings.Repeat("g", schemas.MaxStringLen+1), Submit: t0, Run: -1, Wait: -1, ReqTime: -1, Procs: -1, ReqProcs: -1, GPUs: -1, Nodes: -1, ReqMem: -1},
		trace.Job{Line: 6, ID: "1", Submit: t0, Run: -1, Wait: -1, ReqTime: -1, Procs: -1, ReqProcs: -1, GPUs: -1, Nodes: -1, ReqMem: -1},
		trace.Job{Line: 7, ID: "1", Submit: t0, Run: -1, Wait: -1, ReqTime: -1, Procs: -1, ReqProcs: -1, GPUs: 1 << 32, Nodes: -1, ReqMem: -1},
		// 2^53 KB per processor on 2^10 processors: 2^73 bytes.
		trace.Job{Line: 8, ID: "1", Submit: t0, Run: -1, Wait: -1, ReqTime: -1, Procs: 1 << 10, ReqProcs: -1, GPUs: -1, Nodes: -1, ReqMem: 1 << 53},
	)
	if n := tr.RejectUnencodable(); n != 4 {
		t.Errorf("RejectUnencodable = %d; want 4", n)
	}
	checkRejects(t, "unencodable", tr, []reject{{3, "bad_time"}, {4, "bad_event"}, {5, "bad_event"}, {7, "bad_event"}, {8, "bad_event"}})
	c := trace.NewConverter()
	var ids []string
	for i := range tr.Jobs {
		ids = append(ids, c.Append(nil, &tr.Jobs[i])[0].JobID)
	}
	if want := []string{"1", "1#2"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("ids kept %q; want %q", ids, want)
	}
}

// TestConverterRealTraces converts the public traces whole: every job gives
// events the wire format accepts, conversion is deterministic, and the
// counts of what the traces lack match what the readers report.
func TestConverterRealTraces(t *testing.T) {
	for _, tc := range []struct {
		file  string
		stats trace.EventStats
	}{
		// HPC2N: 878 jobs of status -1 ran (wait and run known) with no
		// outcome, so they end UNKNOWN; job 149728 completed with an unknown
		// wait time, so neither its start nor its end is known.
		{"swf/HPC2N-2002-2.2-cln.swf.gz", trace.EventStats{Jobs: 202_871, Events: 3*202_871 - 1, EndStateUnknown: 878,
			NoStart: 1, EndTimeUnknown: 1, UnmappedStates: map[string]int{"": 878}}},
		{"swf/CTC-SP2-1996-3.1-cln.swf.gz", trace.EventStats{Jobs: 77_222, Events: 3 * 77_222, UnmappedStates: map[string]int{}}},
		// Venus: submit and duration only, every state known.
		{"helios/venus_sept_2vc.csv", trace.EventStats{Jobs: 1_867, Events: 2 * 1_867, NoStart: 1_867, EndTimeUnknown: 1_867,
			UnmappedStates: map[string]int{}}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			tr, err := trace.Open(realTrace(t, tc.file), "")
			if err != nil {
				t.Fatalf("Open(%s) error: %v", tc.file, err)
			}
			encode := func() ([]byte, *trace.Converter) {
				c := trace.NewConverter()
				var out []byte
				var ev []schemas.JobEvent
				for i := range tr.Jobs {
					ev = c.Append(ev[:0], &tr.Jobs[i])
					out, err = schemas.AppendJobEventBatch(out, &schemas.JobEventBatch{Cluster: "x", Source: schemas.SourceTrace, Events: ev})
					if err != nil {
						t.Fatalf("%s: job on line %d: %v", tc.file, tr.Jobs[i].Line, err)
					}
				}
				return out, c
			}
			a, c := encode()
			if !reflect.DeepEqual(c.Stats, tc.stats) {
				t.Errorf("%s: stats %+v; want %+v", tc.file, c.Stats, tc.stats)
			}
			if b, _ := encode(); !bytes.Equal(a, b) {
				t.Errorf("%s: two conversions differ", tc.file)
			}
		})
	}
}
