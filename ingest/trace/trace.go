// Package trace reads public cluster workload traces — the Standard Workload
// Format of the Parallel Workloads Archive and Helios' cluster_log.csv — into
// one job type. Bad rows are reported with their line number and reason and
// counted; nothing is invented: a field the trace lacks stays at its zero value
// (or -1 where 0 is meaningful) and is marked unknown.
package trace

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/heliostat-dev/heliostat/schemas"
)

// MaxErrors is how many rejected rows a Trace keeps in Errors; all of them are
// counted in Rejected and Reasons.
const MaxErrors = 100

const (
	// maxValue is the largest count (processors, GPUs, nodes) or time limit
	// in seconds a reader accepts: job_events stores them as UInt32, and the
	// ingest would store a larger one as unknown.
	maxValue = math.MaxUint32
	// maxIDLen is the longest job id a reader accepts: schemas.MaxStringLen
	// less room for the "#N" a Converter appends to a repeated id (N has at
	// most 19 digits).
	maxIDLen = schemas.MaxStringLen - 20
)

// stringProblem says why s cannot be a string of a job event of at most max
// bytes, or "".
func stringProblem(s string, max int) string {
	switch {
	case !utf8.ValidString(s):
		return fmt.Sprintf("%.40q: not valid UTF-8", s)
	case len(s) > max:
		return fmt.Sprintf("%.40q…: %d bytes, more than %d", s, len(s), max)
	}
	return ""
}

// Errors a reader returns for a file it cannot read as a whole (bad rows are
// not errors: they are counted in Trace.Rejected). Check them with errors.Is.
var (
	// ErrBadHeader: an SWF header value the reader uses (UnixStartTime,
	// MaxProcs, MaxNodes) is not a number in range, so every time or the
	// machine size would be wrong.
	ErrBadHeader = errors.New("trace: bad header")
	// ErrMissingColumn: a Helios file lacks job_id or submit_time (or has no
	// header at all).
	ErrMissingColumn = errors.New("trace: missing required column")
	// ErrUnknownFormat: Open was given a format it does not know, or none and
	// a file name it cannot guess from.
	ErrUnknownFormat = errors.New("trace: unknown format")
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

	Procs    int   // allocated processors (SWF) or CPUs (Helios); -1 when unknown
	ReqProcs int   // requested processors; -1 when unknown
	GPUs     int   // GPUs (Helios); -1 when unknown
	Nodes    int   // nodes; -1 when unknown
	ReqMem   int64 // requested memory (SWF: KB per processor); -1 when unknown
}

// Trace is a whole trace file, jobs in file order.
type Trace struct {
	Format string // "swf" or "helios"
	Jobs   []Job
	// MaxProcs is the machine size from the SWF header (MaxProcs, else
	// MaxNodes); 0 when the trace does not say.
	MaxProcs int
	// TimeZone is the SWF TimeZoneString header (e.g. "Europe/Stockholm"),
	// kept as text; "" when absent. Times in Jobs are UTC regardless.
	TimeZone string
	// Rejected counts rows that could not be read; Reasons counts them by
	// reason, and Errors keeps the MaxErrors of them with the lowest line
	// numbers, in line order.
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

func newTrace(format string) *Trace {
	return &Trace{Format: format, Reasons: make(map[string]int)}
}

// reject counts a bad row and keeps the MaxErrors of lowest line, in line
// order (a row of a line already kept goes after it). The readers reject in
// line order, but the checks at the border (RejectTimesOutside,
// RejectUnencodable) run after them and concern earlier lines: with
// MaxErrors kept, such a row takes the place of the latest one. detail is
// only called for the kept ones, so a file of bad rows costs no formatting.
func (t *Trace) reject(line int, reason string, detail func() string) {
	t.Rejected++
	t.Reasons[reason]++
	n := len(t.Errors)
	if n == MaxErrors && line >= t.Errors[n-1].Line {
		return
	}
	// After the kept rows of this line and before those of later lines.
	i, _ := slices.BinarySearchFunc(t.Errors, line+1, func(e *LineError, l int) int { return cmp.Compare(e.Line, l) })
	if n == MaxErrors {
		t.Errors = t.Errors[:n-1]
	}
	t.Errors = slices.Insert(t.Errors, i, &LineError{Line: line, Reason: reason, Detail: detail()})
}

// RejectTimesOutside rejects every job with a submit, start or end time before
// from or after to, as reason "time_out_of_range" with its line, and returns
// how many it rejected. The readers take any time a trace can write; a
// destination that holds less (ClickHouse's DateTime ends in 2106) calls this
// first, so that such a job is counted and named, not stored as another
// time. The kept errors stay in line order.
func (t *Trace) RejectTimesOutside(from, to time.Time) int {
	kept := t.Jobs[:0]
	n := 0
	for i := range t.Jobs {
		j := &t.Jobs[i]
		field, at := "", time.Time{}
		for _, f := range [...]struct {
			name string
			t    time.Time
		}{{"submit", j.Submit}, {"start", j.Start}, {"end", j.End}} {
			if !f.t.IsZero() && (f.t.Before(from) || f.t.After(to)) {
				field, at = f.name, f.t
				break
			}
		}
		if field == "" {
			kept = append(kept, *j)
			continue
		}
		n++
		t.reject(j.Line, "time_out_of_range", func() string {
			return fmt.Sprintf("job %s: %s time %s is outside %s..%s", j.ID, field,
				at.UTC().Format(time.RFC3339), from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))
		})
	}
	clear(t.Jobs[len(kept):])
	t.Jobs = kept
	return n
}

// interner hands out one shared string per distinct user, VC, state…, so a
// trace of 200,000 jobs holds a few hundred strings, not a million.
type interner map[string]string

func (in interner) str(s string) string {
	if v, ok := in[s]; ok {
		return v
	}
	s = strings.Clone(s) // do not pin the caller's (larger) backing string
	in[s] = s
	return s
}

// jobChunk is how many jobs a reader collects before starting a new chunk.
const jobChunk = 8192

// jobList collects jobs in chunks and hands them back as one slice of exactly
// the right length: appending HPC2N's 202,871 jobs of ~230 bytes to one slice
// copied them about four times over as it grew, and loading it took 0.52 s
// instead of 0.37 s. The first chunk grows as a slice does, so a small trace
// costs no more than its jobs.
type jobList struct {
	full [][]Job
	cur  []Job
	n    int
}

func (l *jobList) add(j *Job) {
	if len(l.cur) == jobChunk {
		l.full = append(l.full, l.cur)
		l.cur = make([]Job, 0, jobChunk)
	}
	l.cur = append(l.cur, *j)
	l.n++
}

// jobs returns all jobs in order; nil when there are none.
func (l *jobList) jobs() []Job {
	if l.n == 0 {
		return nil
	}
	if len(l.full) == 0 {
		return l.cur
	}
	out := make([]Job, 0, l.n)
	for _, c := range l.full {
		out = append(out, c...)
	}
	return append(out, l.cur...)
}
