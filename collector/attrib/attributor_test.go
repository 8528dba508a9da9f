package attrib

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"github.com/heliostat-dev/heliostat/collector"
	"github.com/heliostat-dev/heliostat/schemas"
)

var _ Publisher = (*collector.JobPublisher)(nil)

// fakeLister answers the lists set on it.
type fakeLister struct {
	mu    sync.Mutex
	lists []collector.GPUProcesses
	err   error
	calls int
}

func (l *fakeLister) set(lists []collector.GPUProcesses, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lists, l.err = lists, err
}

func (l *fakeLister) GPUProcesses() ([]collector.GPUProcesses, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	return l.lists, l.err
}

// fakePublisher records what it is given, or fails.
type fakePublisher struct {
	mu    sync.Mutex
	fail  error
	keys  []string
	sent  []schemas.Alloc
	calls int
}

func (p *fakePublisher) PublishAllocs(ctx context.Context, key string, allocs []schemas.Alloc) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if p.fail != nil {
		return p.fail
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	p.keys = append(p.keys, key)
	p.sent = append(p.sent, allocs...)
	return nil
}

// take returns and forgets what was sent.
func (p *fakePublisher) take() []schemas.Alloc {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.sent
	p.sent = nil
	return s
}

func procs(g GPU, pids ...uint32) collector.GPUProcesses {
	return collector.GPUProcesses{Index: g.Index, UUID: g.UUID, MIGUUID: g.MIGUUID, PIDs: pids}
}

type harness struct {
	a      *Attributor
	lister *fakeLister
	pub    *fakePublisher
	reg    *prometheus.Registry
	now    time.Time
	state  string
}

func newHarness(t *testing.T, state string) *harness {
	t.Helper()
	h := &harness{lister: &fakeLister{}, pub: &fakePublisher{}, reg: prometheus.NewPedanticRegistry(), state: state}
	cfg := Config{Host: "node1", ProcRoot: "testdata/proc-v1", StateFile: state, LookupUser: testUsers(nil)}
	a, err := New(cfg, h.lister, h.pub, slog.New(slog.NewTextHandler(t.Output(), nil)), h.reg, func() time.Time { return h.now })
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	h.a = a
	return h
}

// pollAt polls at poll time i.
func (h *harness) pollAt(i int) {
	h.now = at(i)
	h.a.poll(context.Background())
}

func (h *harness) metric(t *testing.T, c prometheus.Collector, want float64, what string) {
	t.Helper()
	if got := testutil.ToFloat64(c); got != want {
		t.Errorf("%s = %v; want %v", what, got, want)
	}
}

func TestAttributor(t *testing.T) {
	C := schemas.AllocCgroup
	state := filepath.Join(t.TempDir(), "attribution.json")
	h := newHarness(t, state)
	m := h.a.m
	ready := func(a *Attributor, step string, wants ...string) {
		t.Helper()
		err := a.Ready()
		if len(wants) == 0 && err != nil {
			t.Errorf("%s: Ready() = %v; want nil", step, err)
		}
		for _, w := range wants {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: Ready() = %v; want it to say %q", step, err, w)
			}
		}
	}
	ready(h.a, "before a poll", "gpu attribution: waiting for the first poll")

	// Poll 0: pid 1234 (job 1234) on GPU 0 and on MIG instance a, with a
	// non-Slurm process and one that vanished; pid 4000 (array task
	// 1234_7) and a process with a bad cgroup on GPU 1.
	h.lister.set([]collector.GPUProcesses{
		procs(gpu0, 1234, 3000, 9999),
		procs(gpu1, 4000, 5000),
		procs(migA, 1234),
	}, nil)
	h.pollAt(0)
	want := []schemas.Alloc{
		alloc(gpu0, "1234", "alice", C, 0, -1),
		alloc(gpu1, "1234_7", "bob", C, 0, -1),
		alloc(migA, "1234", "alice", C, 0, -1),
	}
	if got := h.pub.take(); !reflect.DeepEqual(got, want) {
		t.Errorf("poll 0 published\n%+v\nwant\n%+v", got, want)
	}
	if !reflect.DeepEqual(h.pub.keys, []string{"node1"}) {
		t.Errorf("poll 0 message keys = %q; want [node1]", h.pub.keys)
	}
	h.metric(t, m.polls, 1, "polls")
	h.metric(t, m.vanished, 1, "vanished")
	h.metric(t, m.unattributed.WithLabelValues(gpu0.UUID, ""), 1, "unattributed on GPU 0")
	h.metric(t, m.unattributed.WithLabelValues(gpu1.UUID, ""), 0, "unattributed on GPU 1")
	h.metric(t, m.errors.WithLabelValues(stageResolve), 1, "resolve errors")
	h.metric(t, m.opened, 3, "opened")
	h.metric(t, m.open, 3, "open intervals")
	h.metric(t, m.pollSuccess, 0, "poll success")
	ready(h.a, "poll 0 (one process unresolved, the others resolved)")

	// Poll 1: job 1234 left GPU 0, the publisher is down.
	h.pub.fail = errors.New("brokers unreachable")
	h.lister.set([]collector.GPUProcesses{procs(gpu0), procs(gpu1, 4000), procs(migA, 1234)}, nil)
	h.pollAt(1)
	h.metric(t, m.unattributed.WithLabelValues(gpu0.UUID, ""), 0, "unattributed on GPU 0 at poll 1")
	h.metric(t, m.pollSuccess, 1, "poll success at poll 1")
	// Poll 2: its interval closes; the record cannot be published.
	h.pollAt(2)
	h.metric(t, m.closed, 1, "closed")
	h.metric(t, m.errors.WithLabelValues(stagePublish), 1, "publish errors")
	h.metric(t, m.pending, 1, "pending")
	h.metric(t, m.pollSuccess, 0, "poll success at poll 2")
	ready(h.a, "poll 2", "gpu attribution: failing for", "publish: brokers unreachable")
	st, err := LoadState(state)
	if err != nil {
		t.Fatalf("LoadState() = %v", err)
	}
	closed := alloc(gpu0, "1234", "alice", C, 0, 0)
	if !reflect.DeepEqual(st.Pending, []schemas.Alloc{closed}) || len(st.Open) != 2 {
		t.Errorf("state after poll 2 = %+v; want 2 open intervals and pending %+v", st, closed)
	}

	// A listing failure observes nothing: no interval counts a miss.
	h.lister.set(nil, errors.New("nvml: source is closed"))
	for i := 3; i < 6; i++ {
		h.pollAt(i)
	}
	h.metric(t, m.errors.WithLabelValues(stageList), 3, "list errors")
	h.metric(t, m.open, 2, "open intervals after failed listings")
	ready(h.a, "failed listings", "list: nvml: source is closed")

	// Restart: a new Attributor on the same state file publishes the
	// pending record and continues the open intervals.
	h2 := newHarness(t, state)
	h2.lister.set([]collector.GPUProcesses{procs(gpu1, 4000), procs(migA, 1234)}, nil)
	h2.pollAt(10)
	if got := h2.pub.take(); !reflect.DeepEqual(got, []schemas.Alloc{closed}) {
		t.Errorf("after restart published %+v; want only the pending %+v", got, closed)
	}
	h2.metric(t, h2.a.m.opened, 0, "opened after restart")
	ready(h2.a, "after restart")
	h2.lister.set([]collector.GPUProcesses{procs(gpu1), procs(migA)}, nil)
	h2.pollAt(11)
	h2.pollAt(12)
	want = []schemas.Alloc{alloc(gpu1, "1234_7", "bob", C, 0, 10), alloc(migA, "1234", "alice", C, 0, 10)}
	if got := h2.pub.take(); !reflect.DeepEqual(got, want) {
		t.Errorf("after restart closed\n%+v\nwant\n%+v", got, want)
	}
	if st, err := LoadState(state); err != nil || len(st.Open) != 0 || len(st.Pending) != 0 {
		t.Errorf("final state = %+v, %v; want empty", st, err)
	}
	// Only processes that cannot be resolved: attribution fails as a whole.
	h2.lister.set([]collector.GPUProcesses{procs(gpu1, 5000)}, nil)
	h2.pollAt(13)
	ready(h2.a, "nothing resolvable", "resolve: no process on the GPUs could be resolved to a job")

	problems, err := promlint.NewWithMetricFamilies(mustGather(t, h2.reg)).Lint()
	if err != nil || len(problems) > 0 {
		t.Errorf("promlint = %v, %v", problems, err)
	}
}

func mustGather(t *testing.T, reg *prometheus.Registry) []*dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather() = %v", err)
	}
	return mfs
}

func TestAttributorPendingBound(t *testing.T) {
	h := newHarness(t, filepath.Join(t.TempDir(), "s.json"))
	h.pub.fail = errors.New("down")
	h.a.pending = make([]schemas.Alloc, maxPending)
	for i := range h.a.pending {
		h.a.pending[i] = alloc(gpu0, "old", "", schemas.AllocCgroup, 0, 0)
	}
	h.lister.set([]collector.GPUProcesses{procs(gpu0, 1234)}, nil)
	h.pollAt(1)
	h.metric(t, h.a.m.dropped, 1, "dropped")
	if n := len(h.a.pending); n != maxPending || h.a.pending[n-1].JobID != "1234" {
		t.Fatalf("pending = %d records ending with job %q; want %d ending with 1234", n, h.a.pending[n-1].JobID, maxPending)
	}
	// Once the publisher is back, everything goes in bounded messages.
	h.pub.fail = nil
	h.pollAt(2)
	if h.pub.calls != 1+maxPending/maxPerMessage {
		t.Errorf("publish calls = %d; want %d", h.pub.calls, 1+maxPending/maxPerMessage)
	}
	if got := len(h.pub.take()); got != maxPending {
		t.Errorf("published %d records; want %d", got, maxPending)
	}
}

func TestAttributorBadState(t *testing.T) {
	state := filepath.Join(t.TempDir(), "s.json")
	if err := os.WriteFile(state, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, state)
	h.metric(t, h.a.m.errors.WithLabelValues(stageState), 1, "state errors")
	h.lister.set([]collector.GPUProcesses{procs(gpu0, 1234)}, nil)
	h.pollAt(0)
	if st, err := LoadState(state); err != nil || len(st.Open) != 1 {
		t.Errorf("state after a poll = %+v, %v; want 1 open interval", st, err)
	}
}

func TestAttributorRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lister := &fakeLister{}
		lister.set([]collector.GPUProcesses{procs(gpu0, 1234)}, nil)
		pub := &fakePublisher{}
		cfg := Config{Host: "node1", ProcRoot: "testdata/proc-v1", Interval: 10 * time.Second,
			StateFile: filepath.Join(t.TempDir(), "s.json"), LookupUser: testUsers(nil)}
		a, err := New(cfg, lister, pub, nil, prometheus.NewRegistry(), nil)
		if err != nil {
			t.Fatalf("New() = %v", err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- a.Run(ctx) }()
		time.Sleep(35 * time.Second)
		synctest.Wait()
		if lister.calls != 4 {
			t.Errorf("polls after 35s = %d; want 4 (at 0, 10, 20, 30s)", lister.calls)
		}
		want := []schemas.Alloc{{Host: "node1", GPUIndex: 0, GPUUUID: "GPU-0", JobID: "1234", User: "alice",
			StartMillis: start.UnixMilli(), Source: schemas.AllocCgroup}}
		if got := pub.take(); !reflect.DeepEqual(got, want) {
			t.Errorf("published %+v; want %+v", got, want)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v; want nil", err)
		}
	})
}

func TestNewErrors(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := New(Config{Interval: time.Millisecond}, &fakeLister{}, &fakePublisher{}, nil, reg, nil); err == nil {
		t.Errorf("New with a 1ms interval = nil error")
	}
	if _, err := New(Config{}, nil, &fakePublisher{}, nil, reg, nil); err == nil {
		t.Errorf("New without a lister = nil error")
	}
	cfg := Config{Host: "h", StateFile: filepath.Join(t.TempDir(), "s.json")}
	if _, err := New(cfg, &fakeLister{}, &fakePublisher{}, nil, reg, nil); err != nil {
		t.Fatalf("New() = %v", err)
	}
	if _, err := New(cfg, &fakeLister{}, &fakePublisher{}, nil, reg, nil); err == nil || !strings.Contains(err.Error(), "register metrics") {
		t.Errorf("second New on one registry = %v; want a registration error", err)
	}
}

func TestConfigFlags(t *testing.T) {
	getenv := func(k string) string {
		if k == "HELIOSTAT_PROC_ROOT" {
			return "/host/proc"
		}
		return ""
	}
	var c Config
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	c.RegisterFlags(fs, getenv)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	want := Config{Enabled: true, Interval: DefaultInterval, ProcRoot: "/host/proc", StateFile: DefaultStateFile, Grace: DefaultGrace}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("defaults = %+v; want %+v", c, want)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate() of the defaults = %v", err)
	}
	c = Config{}
	fs = flag.NewFlagSet("t", flag.ContinueOnError)
	c.RegisterFlags(fs, nil)
	err := fs.Parse([]string{"--attribution=false", "--attribution.interval=30s", "--attribution.proc-root=/p",
		"--attribution.state-file=/var/lib/h/a.json", "--attribution.grace=3"})
	if err != nil {
		t.Fatal(err)
	}
	want = Config{Interval: 30 * time.Second, ProcRoot: "/p", StateFile: "/var/lib/h/a.json", Grace: 3}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("parsed = %+v; want %+v", c, want)
	}

	bad := []struct {
		c    Config
		flag string
	}{
		{Config{Interval: 500 * time.Millisecond}, "--attribution.interval"},
		{Config{Interval: -time.Second}, "--attribution.interval"},
		{Config{Grace: -1}, "--attribution.grace"},
		{Config{Host: "\xff"}, "--collector.host"},
	}
	for _, tt := range bad {
		if err := tt.c.Validate(); err == nil || !strings.Contains(err.Error(), tt.flag) {
			t.Errorf("Validate(%+v) = %v; want an error naming %s", tt.c, err, tt.flag)
		}
	}
}

// TestAttributorFailedListingKeepsIntervals: a listing that failed for every
// GPU observes nothing, whether the lister says so with a nil or an empty
// list; only a partial listing counts the missing GPUs' jobs absent.
func TestAttributorFailedListingKeepsIntervals(t *testing.T) {
	listErr := errors.New("nvml: gpu GPU-0: list processes: ERROR_UNKNOWN")
	tests := []struct {
		name       string
		lists      []collector.GPUProcesses
		err        error
		wantClosed int
	}{
		{name: "nil list and an error", lists: nil, err: listErr},
		{name: "empty list and an error", lists: []collector.GPUProcesses{}, err: listErr},
		{name: "partial list and an error", lists: []collector.GPUProcesses{procs(gpu1)}, err: listErr, wantClosed: 1},
		{name: "no process on any GPU", lists: []collector.GPUProcesses{procs(gpu0)}, wantClosed: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, filepath.Join(t.TempDir(), "s.json"))
			h.lister.set([]collector.GPUProcesses{procs(gpu0, 1234)}, nil)
			h.pollAt(0)
			if got := len(h.pub.take()); got != 1 {
				t.Fatalf("poll 0 published %d records; want 1 (job 1234 opened)", got)
			}
			h.lister.set(tt.lists, tt.err)
			for i := 1; i <= DefaultGrace+1; i++ {
				h.pollAt(i)
			}
			if got := len(h.pub.take()); got != tt.wantClosed {
				t.Errorf("after %d polls listing %v, %v: %d records published; want %d", DefaultGrace+1, tt.lists, tt.err, got, tt.wantClosed)
			}
			h.metric(t, h.a.m.open, float64(1-tt.wantClosed), "open intervals")
		})
	}
}

// TestAttributorMalformedEnviron: a process whose environ is malformed but
// whose cgroup names its job is attributed to that job, and the environ is
// counted by reason; without a job in the cgroup the process is not resolved.
func TestAttributorMalformedEnviron(t *testing.T) {
	h := newHarness(t, filepath.Join(t.TempDir(), "s.json"))
	// pid 5200: cgroup job 1234, SLURM_JOB_ID=abc.
	h.lister.set([]collector.GPUProcesses{procs(gpu0, 5200)}, nil)
	h.pollAt(0)
	want := []schemas.Alloc{alloc(gpu0, "1234", "", schemas.AllocCgroup, 0, -1)}
	if got := h.pub.take(); !reflect.DeepEqual(got, want) {
		t.Errorf("published %+v; want %+v", got, want)
	}
	h.metric(t, h.a.m.environ.WithLabelValues(environBadID), 1, "malformed environs{bad_id}")
	h.metric(t, h.a.m.errors.WithLabelValues(stageResolve), 0, "resolve errors")
	h.metric(t, h.a.m.pollSuccess, 1, "poll success")
	if err := h.a.Ready(); err != nil {
		t.Errorf("Ready() = %v; want nil", err)
	}

	h2 := newHarness(t, filepath.Join(t.TempDir(), "s.json"))
	h2.a.resolver = NewResolver("testdata/proc-v2", testUsers(nil))
	// pid 1820: no job in the cgroup, SLURM_ARRAY_TASK_ID alone.
	h2.lister.set([]collector.GPUProcesses{procs(gpu0, 1820)}, nil)
	h2.pollAt(0)
	if got := h2.pub.take(); len(got) != 0 {
		t.Errorf("published %+v; want nothing", got)
	}
	h2.metric(t, h2.a.m.environ.WithLabelValues(environIncompleteArray), 1, "malformed environs{incomplete_array}")
	h2.metric(t, h2.a.m.errors.WithLabelValues(stageResolve), 1, "resolve errors")
}

// TestAttributorWrongProcRoot: a proc root without the driver's PIDs (a
// container without the host's PID namespace, a wrong
// --attribution.proc-root) makes every listed process vanish at every poll;
// after vanishedPolls of them readiness fails and names the proc root. One
// such poll (the only job ended between listing and reading) is harmless.
func TestAttributorWrongProcRoot(t *testing.T) {
	h := newHarness(t, filepath.Join(t.TempDir(), "s.json"))
	// pids 9998 and 9999 are not in testdata/proc-v1; 1234 is.
	gone := []collector.GPUProcesses{procs(gpu0, 9998), procs(gpu1, 9999, 9998)}
	steps := []struct {
		lists     []collector.GPUProcesses
		wantReady bool
	}{
		{gone, true}, // a race: the processes ended
		{[]collector.GPUProcesses{procs(gpu0, 1234, 9999)}, true},
		{gone, true},
		{gone, true},
		{nil, true}, // no process listed: says nothing
		{gone, false},
		{gone, false},
		{[]collector.GPUProcesses{procs(gpu0, 1234)}, true},
	}
	for i, st := range steps {
		h.lister.set(st.lists, nil)
		h.pollAt(i)
		err := h.a.Ready()
		if (err == nil) != st.wantReady {
			t.Fatalf("poll %d: Ready() = %v; want ready %v", i, err, st.wantReady)
		}
		if success := testutil.ToFloat64(h.a.m.pollSuccess) == 1; success != st.wantReady {
			t.Errorf("poll %d: poll success = %v; want %v", i, success, st.wantReady)
		}
		if err != nil {
			for _, w := range []string{"none of the 2 processes", "testdata/proc-v1", "polls in a row", "--attribution.proc-root"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("poll %d: Ready() = %v; want it to say %q", i, err, w)
				}
			}
		}
	}
}
