// Package trace reads public cluster workload traces — the Standard Workload
// Format of the Parallel Workloads Archive and Helios' cluster_log.csv — into
// one job type. Bad rows are reported with their line number and reason and
// counted; nothing is invented: a field the trace lacks stays at its zero value
// (or -1 where 0 is meaningful) and is marked unknown.
package trace

import (
	"strconv"
	"time"
)

// Job is one job of a trace.
type Job struct {
	Line       int    // line in the source file (1-based)
	ID         string // job id as the trace gives it
	User       string // user id or name; "" when unknown
	Group      string // SWF group; "" when unknown
	Executable string // SWF executable number or Helios job name; "" when unknown
	Queue      string // SWF queue (and partition), Helios VC; "" when unknown
	State      string // COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL, …; "" when unknown

	Submit time.Time // always known
	Start  time.Time // zero when unknown
	End    time.Time // zero when unknown

	Run     time.Duration // run time; -1 when unknown
	Wait    time.Duration // queueing delay; -1 when unknown
	ReqTime time.Duration // requested time limit; -1 when unknown

	Procs    int // allocated processors (SWF) or CPUs (Helios); -1 when unknown
	ReqProcs int // requested processors; -1 when unknown
	GPUs     int // GPUs (Helios); -1 when unknown
	Nodes    int // nodes; -1 when unknown
}

// Trace is a whole trace file, jobs in file order.
type Trace struct {
	Format string // "swf" or "helios"
	Jobs   []Job
	// MaxProcs is the machine size from the SWF header (MaxProcs, else
	// MaxNodes); 0 when the trace does not say.
	MaxProcs int
	// Rejected counts rows that could not be read; Reasons counts them by
	// reason, and Errors keeps the first 100 with their line numbers.
	Rejected int
	Reasons  map[string]int
	Errors   []*LineError
}

// LineError is one rejected row.
type LineError struct {
	Line   int
	Reason string // short, stable: "bad_field_count", "bad_number", "negative_submit", …
	Detail string
}

func (e *LineError) Error() string {
	return "trace: line " + strconv.Itoa(e.Line) + ": " + e.Reason + ": " + e.Detail
}
