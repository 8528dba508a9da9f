package replay

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
)

// JobsHeader is the header row of WriteJobs.
func JobsHeader() []string {
	return []string{"policy", "job", "user", "vc", "gpus", "submit", "start", "end", "run_s", "queue_s", "predicted_s"}
}

// WriteJobs writes each job of w as replayed under each of results, a CSV
// row per job and policy after JobsHeader: the trace's job id, user, VC
// name, GPUs held, submit, simulated start and end (Unix seconds), run
// time and queueing delay (seconds), and QSSF's prediction at submit
// (seconds to a tenth, empty for other policies). It is what a per-job comparison of
// policies reads: which jobs waited longer under QSSF than under the oracle,
// and what they had been predicted.
func WriteJobs(out io.Writer, w *Workload, results []Result) error {
	cw := csv.NewWriter(out)
	if err := cw.Write(JobsHeader()); err != nil {
		return fmt.Errorf("replay: jobs CSV: %w", err)
	}
	row := make([]string, len(JobsHeader()))
	for _, r := range results {
		if len(r.Start) != len(w.Jobs) || len(r.End) != len(w.Jobs) || r.Predicted != nil && len(r.Predicted) != len(w.Jobs) {
			return fmt.Errorf("replay: jobs CSV: the %s result has %d starts, %d ends and %d predictions for %d jobs", r.Policy, len(r.Start), len(r.End), len(r.Predicted), len(w.Jobs))
		}
		for i := range w.Jobs {
			j := &w.Jobs[i]
			row[0], row[1], row[2] = r.Policy, j.ID, j.User
			row[3] = w.VCs[j.VC].Name
			row[4] = strconv.Itoa(j.GPUs)
			row[5] = strconv.FormatInt(j.Submit, 10)
			row[6] = strconv.FormatInt(r.Start[i], 10)
			row[7] = strconv.FormatInt(r.End[i], 10)
			row[8] = strconv.FormatInt(j.Run, 10)
			row[9] = strconv.FormatInt(r.Start[i]-j.Submit, 10)
			row[10] = ""
			if r.Predicted != nil {
				row[10] = strconv.FormatFloat(r.Predicted[i].Seconds(), 'f', 1, 64)
			}
			if err := cw.Write(row); err != nil {
				return fmt.Errorf("replay: jobs CSV: %w", err)
			}
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("replay: jobs CSV: %w", err)
	}
	return nil
}
