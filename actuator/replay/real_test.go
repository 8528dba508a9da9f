package replay

import (
	"context"
	"os"
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

// loadReal reads a shared trace onto its cluster: Venus on its VC file, an
// SWF trace on the machine's processors.
func loadReal(tb testing.TB, name string) *Workload {
	tb.Helper()
	tr, err := trace.Open(realTrace(tb, name), "")
	if err != nil {
		tb.Fatal(err)
	}
	var cl Cluster
	if tr.Format == "helios" {
		f, err := os.Open(realTrace(tb, "helios/venus_sept_2vc_vcs.csv"))
		if err != nil {
			tb.Fatal(err)
		}
		defer f.Close()
		if cl.VCs, err = ParseVCs(f); err != nil {
			tb.Fatal(err)
		}
	}
	w, err := FromTrace(tr, cl)
	if err != nil {
		tb.Fatal(err)
	}
	if len(w.Skipped) > 0 || len(w.Jobs) != len(tr.Jobs) {
		tb.Fatalf("%s: %d of %d jobs, skipped %v; want all", name, len(w.Jobs), len(tr.Jobs), w.Skipped)
	}
	return w
}

// TestReal replays the shared traces under the four policies. FIFO and the
// oracles must match the reproductions in ANCHORS.md: Venus FIFO 16,534 s and
// SJF 6,272 s (the Helios artifact's SJF orders by true run time: sjf); the
// SWF traces' FIFO 779,109 and 33,729 s and SJF oracle 37,696 and 22,310 s,
// which order by true run time × processors (sjf-gpu: 37,688 and 22,310 s
// here; run time alone, sjf, gives 40,808 and 23,263 s — not a matter of
// ties, as this test's comment once said). QSSF must stay above floors a
// little below what it reached at the commit that added sjf-gpu, with its
// refreshed predictions read on the features of the job's submit as the
// model was trained (Venus 5,903 s, 99.96 % of the FIFO → sjf-gpu gap;
// CTC-SP2 97.8 %; HPC2N 82.7 %, 90.3 % of the FIFO → sjf gap). ANCHORS'
// goals are QSSF <= 5,895 s on Venus and >= 90 % of the FIFO → oracle gap
// on each trace: not reached on Venus, nor on HPC2N against its oracle.
// The floors catch a collapse: with 5% noise on the predictions, Venus
// QSSF can rise above FIFO (66,854 s in one of 40 seeds). With the
// predictor's recency weights (2026-11-24): Venus 5,937.72 s (99.6 %),
// CTC-SP2 97.3 %, HPC2N 82.2 %; with segments too small for all their
// features fitted on the core ones (2026-11-24): Venus 5,904.17 s
// (99.95 %), CTC-SP2 98.0 %, HPC2N 88.1 %; with the Huber threshold
// following the residuals' spread: Venus the same, CTC-SP2 99.0 %, HPC2N
// 86.6 %; fitted on up to 200,000 jobs, not 30,000 (DefaultTrainWindow):
// Venus the same, CTC-SP2 97.5 %, HPC2N 88.1 %; pending jobs re-predicted
// for users with up to 128 queued (refreshDiv, was 32): HPC2N 89.4 %.
// docs/BENCHMARKS.md has their spread under --qssf.jitter.
func TestReal(t *testing.T) {
	for _, tc := range []struct {
		file          string
		fifo, sjf     float64 // want within tol
		sjfGPU        float64 // want within tol
		tol           float64
		maxQSSF       float64 // 0: not checked
		minGap        float64 // of the FIFO → sjf-gpu gap
		skipWhenShort bool
	}{
		{file: "helios/venus_sept_2vc.csv", fifo: 16534, sjf: 6273, sjfGPU: 5899, tol: 1, maxQSSF: 5910, minGap: 0.99},
		// FIFO agrees with ANCHORS to 26 s, sjf-gpu to 8 s.
		{file: "swf/CTC-SP2-1996-3.1-cln.swf.gz", fifo: 779135, sjf: 40808, sjfGPU: 37688, tol: 1, minGap: 0.97},
		{file: "swf/HPC2N-2002-2.2-cln.swf.gz", fifo: 33727, sjf: 23263, sjfGPU: 22310, tol: 1, minGap: 0.88, skipWhenShort: true},
	} {
		t.Run(tc.file, func(t *testing.T) {
			if tc.skipWhenShort && testing.Short() {
				t.Skip("HPC2N replay takes about 15 s; skipped with -short")
			}
			w := loadReal(t, tc.file)
			got := map[Policy]Result{}
			for _, p := range Policies {
				r, err := Run(context.Background(), w, p, Config{})
				if err != nil {
					t.Fatal(err)
				}
				got[p] = r
				t.Logf("%s: avg JCT %.0f s, queue %.0f s, p99 queue %.0f s, bounded slowdown %.2f (%.2fs)", p, r.AvgJCT, r.AvgQueue, r.P99Queue, r.AvgBoundedSlowdown, r.ElapsedS)
			}
			if f := got[FIFO].AvgJCT; f < tc.fifo-tc.tol || f > tc.fifo+tc.tol {
				t.Errorf("FIFO avg JCT %.1f; want %.0f", f, tc.fifo)
			}
			if s := got[SJF].AvgJCT; s < tc.sjf-tc.tol || s > tc.sjf+tc.tol {
				t.Errorf("SJF avg JCT %.1f; want %.0f", s, tc.sjf)
			}
			if s := got[SJFGPU].AvgJCT; s < tc.sjfGPU-tc.tol || s > tc.sjfGPU+tc.tol {
				t.Errorf("sjf-gpu avg JCT %.1f; want %.0f", s, tc.sjfGPU)
			}
			q := got[QSSF].AvgJCT
			if tc.maxQSSF > 0 && q > tc.maxQSSF {
				t.Errorf("QSSF avg JCT %.0f; want <= %.0f", q, tc.maxQSSF)
			}
			t.Logf("QSSF closes %.1f%% of the FIFO → sjf gap, %.1f%% of the FIFO → sjf-gpu gap", 100*GapClosed(got[FIFO].AvgJCT, got[SJF].AvgJCT, q), 100*GapClosed(got[FIFO].AvgJCT, got[SJFGPU].AvgJCT, q))
			if g := GapClosed(got[FIFO].AvgJCT, got[SJFGPU].AvgJCT, q); g < tc.minGap {
				t.Errorf("QSSF avg JCT %.0f closes %.1f%% of the FIFO → sjf-gpu gap; want >= %.0f%%", q, 100*g, 100*tc.minGap)
			}
		})
	}
}
