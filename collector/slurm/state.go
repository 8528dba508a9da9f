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

// jobRecord is one job's emitted history.
type jobRecord struct {
	Submitted bool             `json:"submitted"`
	Started   bool             `json:"started"`
	Ended     bool             `json:"ended"`
	Last      schemas.JobEvent `json:"last"`              // the last event emitted
	Allocs    []schemas.Alloc  `json:"allocs,omitempty"`  // open allocation intervals
	Missing   int              `json:"missing,omitempty"` // complete listings in a row that did not show it
	// SeenMillis is the last complete listing that showed the job, noted
	// when a listing first misses it.
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
