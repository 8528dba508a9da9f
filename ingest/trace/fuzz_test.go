package trace_test

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/ingest/trace"
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
}

func FuzzReadSWF(f *testing.F) {
	seeds(f, "*.swf.in")
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
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := trace.ReadHelios(bytes.NewReader(data), nil)
		if err != nil {
			return // no usable header
		}
		checkFuzzed(t, tr)
	})
}
