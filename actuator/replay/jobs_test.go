package replay

import (
	"bytes"
	"encoding/csv"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestWriteJobs: one row per job and policy, the simulated start and end as
// the replay gave them, and QSSF's prediction at submit (here the jobs'
// limits: no job of these users had ended, so QSSF answers with the limit).
func TestWriteJobs(t *testing.T) {
	w := workload([]VC{{Name: "vc", Nodes: 1, GPUsPerNode: 4}}, []hj{
		{id: "a", submit: 0, gpus: 4, run: 100, req: 100},
		{id: "b", submit: 1, gpus: 4, run: 20, req: 20},
		{id: "c", submit: 2, gpus: 1, run: 30, req: 45},
	})
	var results []Result
	for _, p := range []Policy{FIFO, QSSF} {
		r, err := Run(t.Context(), w, p, Config{})
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, r)
	}
	var buf bytes.Buffer
	if err := WriteJobs(&buf, w, results); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1+2*len(w.Jobs) || !slices.Equal(rows[0], JobsHeader()) {
		t.Fatalf("%d rows, header %v; want %d rows under %v", len(rows), rows[0], 1+2*len(w.Jobs), JobsHeader())
	}
	// FIFO: a 0–100, b 100–120, c 120–150. QSSF: c (45 GPU·s) before b
	// (80): c 100–130, b 130–150.
	want := [][]string{
		{"fifo", "a", "u-a", "vc", "4", "1700000000", "1700000000", "1700000100", "100", "0", ""},
		{"fifo", "b", "u-b", "vc", "4", "1700000001", "1700000100", "1700000120", "20", "99", ""},
		{"fifo", "c", "u-c", "vc", "1", "1700000002", "1700000120", "1700000150", "30", "118", ""},
		{"qssf", "a", "u-a", "vc", "4", "1700000000", "1700000000", "1700000100", "100", "0", "100.0"},
		{"qssf", "b", "u-b", "vc", "4", "1700000001", "1700000130", "1700000150", "20", "129", "20.0"},
		{"qssf", "c", "u-c", "vc", "1", "1700000002", "1700000100", "1700000130", "30", "98", "45.0"},
	}
	for i, wr := range want {
		if !slices.Equal(rows[1+i], wr) {
			t.Errorf("row %d = %v; want %v", 1+i, rows[1+i], wr)
		}
	}
	// The rows agree with the results they were written from.
	for k, r := range results {
		for i := range w.Jobs {
			row := rows[1+k*len(w.Jobs)+i]
			if s, _ := strconv.ParseInt(row[6], 10, 64); s != r.Start[i] {
				t.Errorf("%s job %d: start %s; the result has %d", r.Policy, i, row[6], r.Start[i])
			}
		}
	}

	short := results[1]
	short.Start = short.Start[:1]
	err = WriteJobs(&bytes.Buffer{}, w, []Result{short})
	if err == nil || !strings.Contains(err.Error(), "qssf") {
		t.Errorf("a result for fewer jobs: error %v; want one naming the policy", err)
	}
}
