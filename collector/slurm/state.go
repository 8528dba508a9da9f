package slurm

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/heliostat-dev/heliostat/internal/atomicfile"
	"github.com/heliostat-dev/heliostat/schemas"
)

// stateVersion is the version of the state file's layout.
const stateVersion = 1

// state is what the source has emitted, kept across restarts so that nothing
// is emitted twice.
type state struct {
	Version int `json:"version"`
	JobComp struct {
		Known  bool   `json:"known"` // Offset and Inode have been set once
		Inode  uint64 `json:"inode"`
		Offset int64  `json:"offset"` // bytes of the log fully handled
	} `json:"jobcomp"`
	Jobs map[string]*jobRecord `json:"jobs"`
	// Polled is when (Unix ms) the last complete squeue listing was taken.
	Polled int64 `json:"polled,omitempty"`
	// Accounted is the end (Unix ms, whole seconds) of the last window of
	// end times read from the accounting (--slurm.accounting).
	Accounted int64 `json:"accounted,omitempty"`
}

// jobRecord is one job's emitted history: of its current run, for a job that
// Slurm requeued (see Source.requeued).
type jobRecord struct {
	Submitted bool             `json:"submitted"`
	Started   bool             `json:"started"`
	Ended     bool             `json:"ended"`
	Last      schemas.JobEvent `json:"last"`              // the last event emitted
	Allocs    []schemas.Alloc  `json:"allocs,omitempty"`  // open allocation intervals
	Missing   int              `json:"missing,omitempty"` // complete listings in a row that did not show it
	// Listed is the last squeue listing (Unix ms) that showed the job's
	// current run, complete or not: where a lost job ends. It changes at
	// every poll without making the state dirty; the state is saved at
	// least once a minute, so that a restart knows it within a minute.
	Listed int64 `json:"listed,omitempty"`
	// SeenMillis is, in state files written before Listed, the last
	// complete listing that showed the job, noted when a listing first
	// missed it; now only noted for a job without Listed.
	SeenMillis int64 `json:"seen,omitempty"`
	Lost       bool  `json:"lost,omitempty"` // Ended by endLost, not by Slurm
	// GoneMillis is the first complete listing that did not show the job:
	// with --slurm.accounting it is ended as lost only once the accounting
	// was read after then.
	GoneMillis int64 `json:"gone,omitempty"`
	// OlderSkipped is the submit time of the last older job under this id
	// that the accounting showed and was not published (it is counted and
	// logged once, not at every read of the window holding it).
	OlderSkipped int64 `json:"older_skipped,omitempty"`
	// Restarts is squeue's restart count of the current run when the
	// source first saw it (0 when unknown): a listing of the id with a
	// later submit time and a higher count is the same job, requeued.
	Restarts int64 `json:"restarts,omitempty"`
	// FirstSubmit is, for a requeued job, the submit time of the first of
	// its runs the source tracked; 0 before any requeue. Records of its
	// runs between then and the current one are of runs already ended.
	FirstSubmit int64 `json:"first_submit,omitempty"`
	// After is the time of the last event published for the run or job
	// that had the id before this one (a requeued run, or a job whose id
	// was reused): this record's events are stamped after it, so that the
	// jobs table's latest event is this record's even when the new run's
	// submit time is the second the previous run ended in.
	After int64 `json:"after,omitempty"`
}

// earlierRun reports whether ev, a record of a run under the id, is of a run
// of the job before the tracked one: the job was requeued since, and the END
// of that run was published (or, for a run the source never saw, is not).
// Slurm's records of requeued runs keep their own submit time: the
// accounting's exactly, the completion log's in --slurm.jobcomp-timezone.
func (r *jobRecord) earlierRun(ev *schemas.JobEvent) bool {
	if ev.SubmitMillis >= r.Last.SubmitMillis {
		return false
	}
	if r.FirstSubmit != 0 && ev.SubmitMillis >= r.FirstSubmit {
		return true
	}
	// A run requeued before the source saw the job: it ended by the time
	// the tracked run was submitted.
	return r.Restarts > 0 && ev.EndMillis != 0 && ev.EndMillis <= r.Last.SubmitMillis
}

// firstSubmit returns the submit time of the first run of the job the
// source tracked.
func (r *jobRecord) firstSubmit() int64 {
	if r.FirstSubmit != 0 {
		return r.FirstSubmit
	}
	return r.Last.SubmitMillis
}

// loadState reads the state file; a missing file is an empty state.
func loadState(path string) (*state, error) {
	st := &state{Version: stateVersion, Jobs: map[string]*jobRecord{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, fmt.Errorf("slurm: read state file: %w", err)
	}
	if err := json.Unmarshal(b, st); err != nil {
		return nil, fmt.Errorf("slurm: state file %s: %w (delete it to start afresh; events may then repeat)", path, err)
	}
	if st.Version != stateVersion {
		return nil, fmt.Errorf("slurm: state file %s: version %d, want %d", path, st.Version, stateVersion)
	}
	if st.Jobs == nil {
		st.Jobs = map[string]*jobRecord{}
	}
	return st, nil
}

// save writes the state atomically: a synced temporary file renamed over the
// old one, then the directory synced.
func (st *state) save(path string) error {
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("slurm: encode state: %w", err)
	}
	if err := atomicfile.Write(path, b); err != nil {
		return fmt.Errorf("slurm: save state: %w", err)
	}
	return nil
}
