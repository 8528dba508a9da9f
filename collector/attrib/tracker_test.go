package attrib

import (
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/schemas"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// at is the time of poll i, 10s apart.
func at(i int) time.Time { return t0.Add(time.Duration(i) * 10 * time.Second) }
func ms(i int) int64     { return at(i).UnixMilli() }

var (
	gpu0 = GPU{Index: 0, UUID: "GPU-0"}
	gpu1 = GPU{Index: 1, UUID: "GPU-1"}
	migA = GPU{Index: 2, UUID: "GPU-2", MIGUUID: "MIG-a"}
	migB = GPU{Index: 2, UUID: "GPU-2", MIGUUID: "MIG-b"}
)

func cg(g GPU, job, user string) Seen {
	return Seen{GPU: g, JobID: job, User: user, Source: schemas.AllocCgroup}
}
func ev(g GPU, job, user string) Seen {
	return Seen{GPU: g, JobID: job, User: user, Source: schemas.AllocEnviron}
}

// alloc is the record of job on g from poll start to poll end (-1: open).
func alloc(g GPU, job, user string, src schemas.AllocSource, start, end int) schemas.Alloc {
	a := schemas.Alloc{Host: "node1", GPUIndex: int64(g.Index), GPUUUID: g.UUID, MIGUUID: g.MIGUUID,
		JobID: job, User: user, StartMillis: ms(start), Source: src}
	if end >= 0 {
		a.EndMillis = ms(end)
	}
	return a
}

type poll struct {
	seen []Seen
	want Changes
}

func runPolls(t *testing.T, tr *Tracker, first int, polls []poll) {
	t.Helper()
	for i, p := range polls {
		got := tr.Observe(at(first+i), p.seen)
		if !reflect.DeepEqual(got, p.want) {
			t.Errorf("poll %d: Observe(%v) =\n%+v\nwant\n%+v", first+i, p.seen, got, p.want)
		}
	}
}

func TestTracker(t *testing.T) {
	C, E := schemas.AllocCgroup, schemas.AllocEnviron
	tests := []struct {
		name  string
		grace int
		polls []poll
	}{
		{
			name: "open, user learnt, grace, reopen, close",
			polls: []poll{
				0: {seen: []Seen{cg(gpu0, "1", "alice")},
					want: Changes{Opened: []schemas.Alloc{alloc(gpu0, "1", "alice", C, 0, -1)}}},
				1: {seen: []Seen{cg(gpu0, "1", "alice"), ev(gpu1, "2", "")},
					want: Changes{Opened: []schemas.Alloc{alloc(gpu1, "2", "", E, 1, -1)}}},
				// Job 1 misses one poll: still open. Job 2 learns its user.
				2: {seen: []Seen{ev(gpu1, "2", "bob")},
					want: Changes{Updated: []schemas.Alloc{alloc(gpu1, "2", "bob", E, 1, -1)}}},
				// Job 1 misses its second poll: closed at the last poll
				// that saw it. Job 2 misses one.
				3: {seen: nil,
					want: Changes{Closed: []schemas.Alloc{alloc(gpu0, "1", "alice", C, 0, 1)}}},
				// Job 2 is back in time; job 1 is back too late: a new
				// interval.
				4: {seen: []Seen{ev(gpu1, "2", "bob"), cg(gpu0, "1", "alice")},
					want: Changes{Opened: []schemas.Alloc{alloc(gpu0, "1", "alice", C, 4, -1)}}},
				5: {},
				6: {want: Changes{Closed: []schemas.Alloc{
					alloc(gpu0, "1", "alice", C, 4, 4), alloc(gpu1, "2", "bob", E, 1, 4)}}},
				7: {},
			},
		},
		{
			name:  "grace 1 closes at the first absence",
			grace: 1,
			polls: []poll{
				{seen: []Seen{cg(gpu0, "1", "")}, want: Changes{Opened: []schemas.Alloc{alloc(gpu0, "1", "", C, 0, -1)}}},
				{seen: []Seen{cg(gpu0, "1", "")}},
				{want: Changes{Closed: []schemas.Alloc{alloc(gpu0, "1", "", C, 0, 1)}}},
			},
		},
		{
			name:  "grace 0 means the default",
			grace: 0,
			polls: []poll{
				{seen: []Seen{cg(gpu0, "1", "")}, want: Changes{Opened: []schemas.Alloc{alloc(gpu0, "1", "", C, 0, -1)}}},
				{},
				{want: Changes{Closed: []schemas.Alloc{alloc(gpu0, "1", "", C, 0, 0)}}},
			},
		},
		{
			name: "one job seen by several processes: cgroup and a known user win",
			polls: []poll{
				{seen: []Seen{ev(gpu0, "1", "env-user"), cg(gpu0, "1", ""), cg(gpu0, "1", "alice"), cg(gpu0, "1", ""), ev(gpu0, "1", "x")},
					want: Changes{Opened: []schemas.Alloc{alloc(gpu0, "1", "alice", C, 0, -1)}}},
				// A later environ sighting does not change the source.
				{seen: []Seen{ev(gpu0, "1", "alice")}},
			},
		},
		{
			name: "jobs on MIG instances and GPUs are separate intervals, sorted",
			polls: []poll{
				{seen: []Seen{cg(migB, "9", ""), cg(migA, "9", ""), cg(gpu1, "3", ""), cg(gpu1, "10", ""), {GPU: gpu0}},
					want: Changes{Opened: []schemas.Alloc{
						alloc(gpu1, "10", "", C, 0, -1), alloc(gpu1, "3", "", C, 0, -1),
						alloc(migA, "9", "", C, 0, -1), alloc(migB, "9", "", C, 0, -1)}}},
				{seen: []Seen{cg(migA, "9", "")}},
				{seen: []Seen{cg(migA, "9", "")}, want: Changes{Closed: []schemas.Alloc{
					alloc(gpu1, "10", "", C, 0, 0), alloc(gpu1, "3", "", C, 0, 0), alloc(migB, "9", "", C, 0, 0)}}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runPolls(t, NewTracker("node1", tt.grace), 0, tt.polls)
		})
	}
}

func TestTrackerClockBack(t *testing.T) {
	tr := NewTracker("node1", 1)
	tr.Observe(at(5), []Seen{cg(gpu0, "1", "")})
	tr.Observe(at(3), []Seen{cg(gpu0, "1", "")}) // clock stepped back
	got := tr.Observe(at(4), nil)
	want := Changes{Closed: []schemas.Alloc{alloc(gpu0, "1", "", schemas.AllocCgroup, 5, 5)}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Observe after a clock step back = %+v; want %+v", got, want)
	}
}

// TestTrackerRestart checks that a restarted tracker, restored from the state
// file, continues an interval with its start and closes one whose job ended
// while it was down at the last poll that saw the job.
func TestTrackerRestart(t *testing.T) {
	C := schemas.AllocCgroup
	path := filepath.Join(t.TempDir(), "state", "attribution.json")
	tr := NewTracker("node1", 2)
	runPolls(t, tr, 0, []poll{
		{seen: []Seen{cg(gpu0, "1", "alice"), cg(gpu1, "2", "bob")}, want: Changes{Opened: []schemas.Alloc{
			alloc(gpu0, "1", "alice", C, 0, -1), alloc(gpu1, "2", "bob", C, 0, -1)}}},
		{seen: []Seen{cg(gpu0, "1", "alice"), cg(gpu1, "2", "bob")}},
		{seen: []Seen{cg(gpu0, "1", "alice")}}, // job 2 missed once
	})
	if err := SaveState(path, State{Open: tr.Open()}); err != nil {
		t.Fatalf("SaveState() = %v", err)
	}

	st, err := LoadState(path)
	if err != nil {
		t.Fatalf("LoadState() = %v", err)
	}
	if !reflect.DeepEqual(st.Open, tr.Open()) {
		t.Fatalf("LoadState().Open = %+v; want %+v", st.Open, tr.Open())
	}
	tr2 := NewTracker("node1", 2)
	tr2.Restore(st.Open)
	// Down for polls 3-9. Job 1 still runs: no new interval. Job 2 has
	// gone: it closes at poll 1, the last that saw it.
	runPolls(t, tr2, 10, []poll{
		{seen: []Seen{cg(gpu0, "1", "alice")}, want: Changes{Closed: []schemas.Alloc{alloc(gpu1, "2", "bob", C, 0, 1)}}},
		{},
		{want: Changes{Closed: []schemas.Alloc{alloc(gpu0, "1", "alice", C, 0, 10)}}},
	})
}

func TestTrackerRestoreKeepsOpen(t *testing.T) {
	tr := NewTracker("node1", 2)
	tr.Observe(at(3), []Seen{cg(gpu0, "1", "")})
	tr.Restore([]Interval{{GPU: gpu0, JobID: "1", Source: schemas.AllocCgroup, Start: at(0), LastSeen: at(0)}})
	if got := tr.Open(); len(got) != 1 || !got[0].Start.Equal(at(3)) {
		t.Errorf("Open() after restoring an interval already open = %+v; want the one from poll 3", got)
	}
}
