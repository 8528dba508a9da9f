package trace_test

import (
	"reflect"
	"testing"

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
