package attrib

import (
	"cmp"
	"slices"
	"time"

	"github.com/heliostat-dev/heliostat/schemas"
)

// DefaultGrace is the number of consecutive polls a job must be absent from
// a GPU before its interval closes.
const DefaultGrace = 2

// GPU identifies a GPU or MIG instance of the host.
type GPU struct {
	Index   int    // device index; a MIG instance carries its GPU's
	UUID    string // the whole GPU's UUID
	MIGUUID string // "" for a whole GPU
}

// Seen is one job seen on one GPU in a poll.
type Seen struct {
	GPU    GPU
	JobID  string
	User   string // "" when unknown
	Source schemas.AllocSource
}

// Interval is an open allocation interval: a job on a GPU since Start, last
// seen at LastSeen and absent from the Misses polls since.
type Interval struct {
	GPU      GPU
	JobID    string
	User     string
	Source   schemas.AllocSource
	Start    time.Time
	LastSeen time.Time
	Misses   int
}

// Changes are the allocation records one poll produced, ready to publish.
type Changes struct {
	// Opened are the intervals that opened (EndMillis 0).
	Opened []schemas.Alloc
	// Updated are open intervals published again because they learnt their
	// user (EndMillis 0; the record replaces the earlier one).
	Updated []schemas.Alloc
	// Closed are the intervals that closed.
	Closed []schemas.Alloc
}

// Allocs returns all records of c: opened, updated, then closed.
func (c Changes) Allocs() []schemas.Alloc {
	out := make([]schemas.Alloc, 0, len(c.Opened)+len(c.Updated)+len(c.Closed))
	out = append(out, c.Opened...)
	out = append(out, c.Updated...)
	return append(out, c.Closed...)
}

type intervalKey struct {
	uuid, mig, job string
	index          int // only tells GPUs apart that have no UUID
}

func keyOf(g GPU, job string) intervalKey {
	k := intervalKey{uuid: g.UUID, mig: g.MIGUUID, job: job}
	if g.UUID == "" {
		k.index = g.Index
	}
	return k
}

// Tracker turns the jobs seen on each GPU at each poll into allocation
// intervals. It is deterministic: time comes only from Observe's argument,
// and records come out sorted by GPU and job. It is not safe for concurrent
// use.
type Tracker struct {
	host  string
	grace int
	open  map[intervalKey]*Interval
}

// NewTracker returns a Tracker stamping host on its records and closing an
// interval after grace polls without its job (at least 1; less means
// DefaultGrace).
func NewTracker(host string, grace int) *Tracker {
	if grace < 1 {
		grace = DefaultGrace
	}
	return &Tracker{host: host, grace: grace, open: make(map[intervalKey]*Interval)}
}

// Restore adds intervals saved by an earlier Tracker (Open), so that a
// restarted collector continues them with their start instead of opening new
// ones. An interval whose GPU and job are already open is ignored.
func (t *Tracker) Restore(open []Interval) {
	for _, iv := range open {
		k := keyOf(iv.GPU, iv.JobID)
		if _, ok := t.open[k]; ok {
			continue
		}
		t.open[k] = &iv
	}
}

// Open returns the open intervals, sorted by GPU and job.
func (t *Tracker) Open() []Interval {
	out := make([]Interval, 0, len(t.open))
	for _, iv := range t.open {
		out = append(out, *iv)
	}
	slices.SortFunc(out, func(a, b Interval) int { return compareGPUJob(a.GPU, a.JobID, b.GPU, b.JobID) })
	return out
}

// Observe records the poll taken at now, in which the jobs in seen were on
// their GPUs; a GPU missing from seen had no job. A pair seen for the first
// time opens an interval starting at now. An open interval not in seen
// closes once it has missed grace polls in a row, ending at the last poll
// that saw it. When one pair is seen twice (two processes), the cgroup's
// attribution wins over the environment's, and a known user over "".
//
// An interval keeps the source it opened with, so that its closing record
// has the key of its opening one; its user is filled in, and the interval
// published again, if it was unknown.
func (t *Tracker) Observe(now time.Time, seen []Seen) Changes {
	var ch Changes
	got := make(map[intervalKey]Seen, len(seen))
	for _, s := range seen {
		if s.JobID == "" {
			continue
		}
		k := keyOf(s.GPU, s.JobID)
		if prev, ok := got[k]; ok && !better(s, prev) {
			continue
		}
		got[k] = s
	}
	for k, s := range got {
		iv, ok := t.open[k]
		if !ok {
			iv = &Interval{GPU: s.GPU, JobID: s.JobID, User: s.User, Source: s.Source, Start: now, LastSeen: now}
			t.open[k] = iv
			ch.Opened = append(ch.Opened, t.alloc(iv, false))
			continue
		}
		// A clock stepped back must not end an interval before its start.
		if now.After(iv.LastSeen) {
			iv.LastSeen = now
		}
		iv.Misses = 0
		if iv.User == "" && s.User != "" {
			iv.User = s.User
			ch.Updated = append(ch.Updated, t.alloc(iv, false))
		}
	}
	for k, iv := range t.open {
		if _, ok := got[k]; ok {
			continue
		}
		iv.Misses++
		if iv.Misses >= t.grace {
			ch.Closed = append(ch.Closed, t.alloc(iv, true))
			delete(t.open, k)
		}
	}
	for _, s := range [][]schemas.Alloc{ch.Opened, ch.Updated, ch.Closed} {
		slices.SortFunc(s, compareAlloc)
	}
	return ch
}

// better reports whether a is a better attribution of its pair than b.
func better(a, b Seen) bool {
	if a.Source != b.Source {
		return a.Source == schemas.AllocCgroup
	}
	return b.User == "" && a.User != ""
}

func (t *Tracker) alloc(iv *Interval, closed bool) schemas.Alloc {
	a := schemas.Alloc{
		Host:        t.host,
		GPUIndex:    int64(iv.GPU.Index),
		GPUUUID:     iv.GPU.UUID,
		MIGUUID:     iv.GPU.MIGUUID,
		JobID:       iv.JobID,
		User:        iv.User,
		StartMillis: iv.Start.UnixMilli(),
		Source:      iv.Source,
	}
	if closed {
		a.EndMillis = iv.LastSeen.UnixMilli()
	}
	return a
}

func compareGPUJob(ag GPU, aj string, bg GPU, bj string) int {
	return cmp.Or(
		cmp.Compare(ag.Index, bg.Index),
		cmp.Compare(ag.UUID, bg.UUID),
		cmp.Compare(ag.MIGUUID, bg.MIGUUID),
		cmp.Compare(aj, bj),
	)
}

func compareAlloc(a, b schemas.Alloc) int {
	return cmp.Or(
		cmp.Compare(a.GPUIndex, b.GPUIndex),
		cmp.Compare(a.GPUUUID, b.GPUUUID),
		cmp.Compare(a.MIGUUID, b.MIGUUID),
		cmp.Compare(a.JobID, b.JobID),
		cmp.Compare(a.StartMillis, b.StartMillis),
	)
}
