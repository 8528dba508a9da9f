package trace_test

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/ingest/trace"
)

// checkJobs compares jobs field by field and reports each differing job.
func checkJobs(t *testing.T, name string, got, want []trace.Job) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d jobs; want %d", name, len(got), len(want))
	}
	for i := range min(len(got), len(want)) {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("%s: job %d =\n  %+v\nwant\n  %+v", name, i, got[i], want[i])
		}
	}
}

type reject struct {
	line   int
	reason string
}

// checkRejects checks the rejected rows, their reasons and the counts' agreement.
func checkRejects(t *testing.T, name string, tr *trace.Trace, want []reject) {
	t.Helper()
	var got []reject
	for _, e := range tr.Errors {
		got = append(got, reject{e.Line, e.Reason})
		if e.Detail == "" {
			t.Errorf("%s: line %d: %s has no detail", name, e.Line, e.Reason)
		}
	}
	if !reflect.DeepEqual(got, want) && (len(got) != 0 || len(want) != 0) {
		t.Errorf("%s: rejected %v; want %v", name, got, want)
	}
	if tr.Rejected != len(want) {
		t.Errorf("%s: Rejected = %d; want %d", name, tr.Rejected, len(want))
	}
	checkCounts(t, name, tr)
}

// checkCounts checks the invariants every Trace keeps.
func checkCounts(t *testing.T, name string, tr *trace.Trace) {
	t.Helper()
	sum := 0
	for _, n := range tr.Reasons {
		sum += n
	}
	if sum != tr.Rejected {
		t.Errorf("%s: Reasons %v sum to %d; Rejected = %d", name, tr.Reasons, sum, tr.Rejected)
	}
	if want := min(tr.Rejected, trace.MaxErrors); len(tr.Errors) != want {
		t.Errorf("%s: %d Errors kept; want %d", name, len(tr.Errors), want)
	}
}

// TestRejectTimesOutside: a job with a submit, start or end time outside the
// range is rejected with its line and which time, among the reader's own
// rejects in line order; the others are kept in file order.
func TestRejectTimesOutside(t *testing.T) {
	const swf = `; UnixStartTime: 0
    1      0      0     10    1   -1   -1    1    100   -1  1    5  1  -1  1  1 -1 -1
    2     x1      0     10    1   -1   -1    1    100   -1  1    5  1  -1  1  1 -1 -1
    3     60      0 4294967295    1   -1   -1    1    100   -1  1    5  1  -1  1  1 -1 -1
    4     60      0     10    1   -1   -1    1    100   -1  1    5  1  -1  1  1 -1 -1
    5 4294967296  0     10    1   -1   -1    1    100   -1  1    5  1  -1  1  1 -1 -1
`
	tr, err := trace.ReadSWF(strings.NewReader(swf))
	if err != nil {
		t.Fatal(err)
	}
	from, to := time.Unix(0, 0), time.Unix(math.MaxUint32, 0)
	if n := tr.RejectTimesOutside(from, to); n != 2 {
		t.Errorf("RejectTimesOutside = %d; want 2", n)
	}
	var ids []string
	for _, j := range tr.Jobs {
		ids = append(ids, j.ID)
	}
	if !reflect.DeepEqual(ids, []string{"1", "4"}) {
		t.Errorf("jobs kept %v; want [1 4]", ids)
	}
	checkRejects(t, "swf", tr, []reject{{3, "bad_number"}, {4, "time_out_of_range"}, {6, "time_out_of_range"}})
	for line, want := range map[int]string{4: "end time 2106-02-07T06:29:15Z", 6: "submit time 2106-02-07T06:28:16Z"} {
		for _, e := range tr.Errors {
			if e.Line == line && !strings.Contains(e.Detail, want) {
				t.Errorf("line %d: detail %q; want it to name %q", line, e.Detail, want)
			}
		}
	}
}

// TestRejectKeepsLowestLines: once MaxErrors rows are kept, a later reject of
// an earlier line (the border checks run after the reader) replaces the
// latest kept one, so Errors holds the MaxErrors lowest lines, in order.
func TestRejectKeepsLowestLines(t *testing.T) {
	var b strings.Builder
	b.WriteString("; UnixStartTime: 0\n")
	b.WriteString("1 0 0 10 1 -1 -1 1 100 -1 1 5 1 -1 1 1 -1 -1\n")          // line 2, kept by the reader
	b.WriteString("2 4294967296 0 10 1 -1 -1 1 100 -1 1 5 1 -1 1 1 -1 -1\n") // line 3, out of range for the border
	for range 150 {
		b.WriteString("1 2 3\n") // lines 4..153
	}
	tr, err := trace.ReadSWF(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		check       func() int
		first, last int
	}{
		{"reader", func() int { return 0 }, 4, 103},
		{"RejectTimesOutside", func() int { return tr.RejectTimesOutside(time.Unix(0, 0), time.Unix(math.MaxUint32, 0)) }, 3, 102},
	} {
		tc.check()
		checkCounts(t, tc.name, tr)
		if got := len(tr.Errors); got != trace.MaxErrors {
			t.Fatalf("after %s: %d errors kept; want %d", tc.name, got, trace.MaxErrors)
		}
		if first, last := tr.Errors[0].Line, tr.Errors[len(tr.Errors)-1].Line; first != tc.first || last != tc.last {
			t.Errorf("after %s: kept errors from line %d to %d; want %d to %d", tc.name, first, last, tc.first, tc.last)
		}
		for i := 1; i < len(tr.Errors); i++ {
			if tr.Errors[i].Line < tr.Errors[i-1].Line {
				t.Fatalf("after %s: error %d on line %d after line %d", tc.name, i, tr.Errors[i].Line, tr.Errors[i-1].Line)
			}
		}
	}
}
