package trace_test

import (
	"os"
	"reflect"
	"testing"

	"github.com/heliostat-dev/heliostat/ingest/trace"
)

// realTrace returns the path of a file in shared/data, or ends the test when
// it is missing: a failure in CI, a skip elsewhere.
func realTrace(tb testing.TB, name string) string {
	tb.Helper()
	path := "../../../shared/data/" + name
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("real trace %s: %v", path, err)
		}
		tb.Skipf("real trace %s not found (%v); set CI to make this a failure", path, err)
	}
	return path
}

// TestRealTraces reads the public traces in shared/data: every job record is
// either a job or counted as rejected.
func TestRealTraces(t *testing.T) {
	for _, tc := range []struct {
		file     string
		records  int
		maxProcs int
		states   map[string]int // jobs by State, as counted with awk on the status column
	}{
		{"swf/HPC2N-2002-2.2-cln.swf.gz", 202_871, 240, map[string]int{"COMPLETED": 201_993, "": 878}},
		{"swf/CTC-SP2-1996-3.1-cln.swf.gz", 77_222, 338, map[string]int{"COMPLETED": 60_553, "FAILED": 16_669}},
		{"helios/venus_sept_2vc.csv", 1_867, 0, map[string]int{"COMPLETED": 786, "CANCELLED": 589, "FAILED": 491, "NODE_FAIL": 1}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			tr, err := trace.Open(realTrace(t, tc.file), "")
			if err != nil {
				t.Fatalf("Open(%s) error: %v", tc.file, err)
			}
			if got := len(tr.Jobs) + tr.Rejected; got != tc.records {
				t.Errorf("Open(%s): %d jobs + %d rejected = %d; want %d records", tc.file, len(tr.Jobs), tr.Rejected, got, tc.records)
			}
			if tr.MaxProcs != tc.maxProcs {
				t.Errorf("Open(%s).MaxProcs = %d; want %d", tc.file, tr.MaxProcs, tc.maxProcs)
			}
			checkCounts(t, tc.file, tr)
			states := map[string]int{}
			for _, j := range tr.Jobs {
				states[j.State]++
			}
			if !reflect.DeepEqual(states, tc.states) {
				t.Errorf("Open(%s): jobs by state %v; want %v", tc.file, states, tc.states)
			}
			for _, e := range tr.Errors {
				t.Logf("%v", e)
			}
			t.Logf("%s: %d jobs, %d rejected %v", tc.file, len(tr.Jobs), tr.Rejected, tr.Reasons)
		})
	}
}
