package trace_test

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/ingest/trace"
	"github.com/heliostat-dev/heliostat/schemas"
)

// seeds adds the testdata files matching pattern to the corpus.
func seeds(f *testing.F, pattern string) {
	paths, err := filepath.Glob(filepath.Join("testdata", pattern))
	if err != nil || len(paths) == 0 {
		f.Fatalf("no seeds for %s: %v", pattern, err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// checkFuzzed checks what must hold for any input a reader accepts.
func checkFuzzed(t *testing.T, tr *trace.Trace) {
	checkCounts(t, "fuzz", tr)
	for i, j := range tr.Jobs {
		if j.Submit.IsZero() || j.Line < 1 || j.ID == "" {
			t.Fatalf("job %d: %+v: zero Submit, no line or no ID", i, j)
		}
		if j.Run < -1 || j.Wait < -1 || j.ReqTime < -1 {
			t.Fatalf("job %d: %+v: negative duration other than -1", i, j)
		}
		if j.Procs < -1 || j.ReqProcs < -1 || j.GPUs < -1 || j.Nodes < -1 {
			t.Fatalf("job %d: %+v: negative count other than -1", i, j)
		}
		if i > 0 && j.Line <= tr.Jobs[i-1].Line {
			t.Fatalf("job %d: line %d after line %d", i, j.Line, tr.Jobs[i-1].Line)
		}
	}
	for _, e := range tr.Errors {
		if e.Line < 1 || e.Reason == "" {
			t.Fatalf("rejected row without line or reason: %+v", e)
		}
	}
	// What RejectTimesOutside takes out it counts: no row is lost, and every
	// job kept has its times in range.
	rows := len(tr.Jobs) + tr.Rejected
	from, to := time.Unix(0, 0), time.Unix(math.MaxUint32, 0)
	n := tr.RejectTimesOutside(from, to)
	checkCounts(t, "fuzz after RejectTimesOutside", tr)
	if len(tr.Jobs)+tr.Rejected != rows || tr.Reasons["time_out_of_range"] != n {
		t.Fatalf("RejectTimesOutside = %d: %d jobs + %d rejected; want %d rows, %d of them time_out_of_range", n, len(tr.Jobs), tr.Rejected, rows, tr.Reasons["time_out_of_range"])
	}
	for _, j := range tr.Jobs {
		for _, at := range []time.Time{j.Submit, j.Start, j.End} {
			if !at.IsZero() && (at.Before(from) || at.After(to)) {
				t.Fatalf("job on line %d kept with time %s", j.Line, at)
			}
		}
	}
	checkConverted(t, tr)
}

// checkConverted converts every job a reader accepted, as import does: every
// event must be one the encoder takes, each job's times in order (submit <=
// start <= end), and no two jobs may share an id. What a reader accepts must
// never stop an import at the encoder, nor leave a job RUNNING for ever, nor
// overwrite another.
func checkConverted(t *testing.T, tr *trace.Trace) {
	c := trace.NewConverter()
	ids := make(map[string]int, len(tr.Jobs))
	var ev []schemas.JobEvent
	for _, j := range tr.Jobs {
		if !j.Start.IsZero() && j.Start.Before(j.Submit) || !j.End.IsZero() && (j.End.Before(j.Submit) || !j.Start.IsZero() && j.End.Before(j.Start)) {
			t.Fatalf("job on line %d: times out of order: submit %s, start %s, end %s", j.Line, j.Submit, j.Start, j.End)
		}
		ev = c.Append(ev[:0], &j)
		if len(ev) == 0 {
			t.Fatalf("job on line %d: no event", j.Line)
		}
		id := ev[0].JobID
		if line, dup := ids[id]; dup {
			t.Fatalf("jobs on lines %d and %d: both converted to id %q", line, j.Line, id)
		}
		ids[id] = j.Line
		for k := range ev {
			e := &ev[k]
			if err := schemas.CheckJobEvent(e); err != nil {
				t.Fatalf("job on line %d: %s event: %v", j.Line, e.Type, err)
			}
			if e.JobID != id {
				t.Fatalf("job on line %d: events of ids %q and %q", j.Line, id, e.JobID)
			}
			if k > 0 && e.EventMillis < ev[k-1].EventMillis {
				t.Fatalf("job on line %d: %s event at %d ms before %s event at %d ms", j.Line, e.Type, e.EventMillis, ev[k-1].Type, ev[k-1].EventMillis)
			}
			for _, v := range [...]int64{e.TimeLimitS, e.NodeCount, e.CPUs, e.GPUs} {
				if v > math.MaxUint32 {
					t.Fatalf("job on line %d: %+v: a count or limit above what job_events stores", j.Line, *e)
				}
			}
		}
		// A time the trace gives is never sent as 0, which a job event
		// reads as unknown (a job starting at the epoch was stored as
		// never started).
		for _, e := range ev {
			if e.Type == schemas.JobStart && !j.Start.IsZero() && e.StartMillis == 0 ||
				e.Type == schemas.JobEnd && !j.End.IsZero() && e.EndMillis == 0 {
				t.Fatalf("job on line %d: %s event with its time as unknown; the trace gives start %s, end %s", j.Line, e.Type, j.Start, j.End)
			}
		}
		if last := ev[len(ev)-1]; last.Type == schemas.JobEnd && !j.End.IsZero() && last.EndMillis < last.SubmitMillis {
			t.Fatalf("job on line %d: ends at %d ms, before its submit at %d ms", j.Line, last.EndMillis, last.SubmitMillis)
		}
	}
	// Nothing is left for the check at the border to find.
	if n := tr.RejectUnencodable(); n != 0 {
		t.Fatalf("RejectUnencodable = %d after the reader; first: %v", n, tr.Errors)
	}
}

func FuzzReadSWF(f *testing.F) {
	seeds(f, "*.swf.in")
	f.Add([]byte("5 0 1 2 3 -1 -1 3 60 -1 1 1 1 1 1 -1 -1 -1\n5 0 1 2 3 -1 -1 3 60 -1 1 1 1 1 1 -1 -1 -1\n05 0 1 2 3 -1 -1 3 60 -1 1 1 1 1 1 -1 -1 -1\n"))
	f.Add([]byte("1 0 1 2 4294967296 -1 -1 3 60 -1 1 1 1 1 1 -1 -1 -1\n"))
	f.Add([]byte("1 0 0 0 4 -1 -1 4 60 -1 1 1 1 1 1 -1 -1 -1\n")) // starts and ends at the epoch
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := trace.ReadSWF(bytes.NewReader(data))
		if err != nil {
			return // a bad header
		}
		checkFuzzed(t, tr)
	})
}

func FuzzReadHelios(f *testing.F) {
	seeds(f, "*.csv")
	f.Add([]byte("job_id,user,job_name,submit_time,start_time,end_time,duration,queue,gpu_num\n" +
		"5,u\xff,n,2020-01-02 00:00:00,2020-01-02 00:00:00,2020-01-01 00:00:00,10,,8\n" +
		"5,u,n,2020-01-02 00:00:00,,2020-01-01 00:00:00,,60,4294967296\n" +
		"5#2,u,n,2020-01-02 00:00:00,,,10,,8\n5,u,n,2020-01-02 00:00:00,,,,,\n"))
	f.Add([]byte("\uFEFF\"job_id\",\"submit_time\"\r\n1,2020-01-02 00:00:00\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := trace.ReadHelios(bytes.NewReader(data), nil)
		if err != nil {
			return // no usable header
		}
		checkFuzzed(t, tr)
	})
}
