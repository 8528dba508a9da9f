package replay

import (
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
	return w
}
