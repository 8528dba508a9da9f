// Package sim is a discrete-event simulated GPU cluster: the stand-in for
// Slurm and real GPUs on machines that have neither, and the default source
// of `heliostat up`.
//
// Nodes with GPUs, grouped into virtual clusters (VCs), run jobs from a
// Workload — a given list (a replayed trace) or a Generator that follows
// the Helios study's published figures. A scheduler starts pending jobs in
// the order of a Policy (FIFO by default, no backfill), higher priority
// first; a job of at most one node's GPUs runs on one node (best fit), a
// larger one on whole nodes. Actions change the cluster while it runs:
// SetPriority, PowerDown (refused on a busy node) and PowerUp (usable after a
// wake-up delay). With Config.AutoResume the scheduler also powers nodes up
// itself when the job at the head of a VC's queue could run on them, as
// Slurm's power saving does, and like Slurm gives that job the nodes at
// once: no other job takes them while they boot, and the job starts on them
// when they are up, even if another job has been ranked above it since.
//
// Everything happens on a virtual clock that runs Speedup times faster than
// real time, or as fast as possible. The simulator publishes what a real
// cluster's collectors would: job events (SUBMIT, START, END, UPDATE) and
// GPU allocation intervals through a collector.JobPublisher, and every
// SampleInterval one GPU sample per GPU of every powered node, on
// schemas.TopicGPUSamples keyed by host. Samples agree with allocations: a
// GPU shows load exactly while a running job holds it.
//
// When Run returns, the simulated cluster goes away and ends its jobs,
// unless Config.KeepJobs: then Snapshot gives its jobs and nodes, and a
// later Sim of the same cluster continues them (Restore), as `heliostat up`
// does across restarts; EndLost ends the jobs a killed run left open.
package sim

import (
	"container/heap"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/collector"
	"github.com/heliostat-dev/heliostat/internal/logthrottle"
	"github.com/heliostat-dev/heliostat/internal/slurmfmt"
	"github.com/heliostat-dev/heliostat/schemas"
)

// Errors of the actions and of Run. Check them with errors.Is.
var (
	// ErrUnknownNode: no node has that name.
	ErrUnknownNode = errors.New("sim: unknown node")
	// ErrUnknownJob: no pending or running job has that id (it may have
	// ended).
	ErrUnknownJob = errors.New("sim: no pending or running job with that id")
	// ErrNodeBusy: the node runs a job, so it cannot be powered down.
	ErrNodeBusy = errors.New("sim: node runs a job")
	// ErrRunning: Run or Advance is already running.
	ErrRunning = errors.New("sim: already running")
)

// NodeState is a node's power state.
type NodeState uint8

// Node power states.
const (
	NodeUp     NodeState = iota + 1 // powered, takes jobs, sends telemetry
	NodeWaking                      // powered up, usable after the wake-up delay
	NodeDown                        // powered down: no jobs, no telemetry
)

func (s NodeState) String() string {
	switch s {
	case NodeUp:
		return "up"
	case NodeWaking:
		return "waking"
	case NodeDown:
		return "down"
	}
	return "node_state(" + strconv.Itoa(int(s)) + ")"
}

const (
	// flushPeriod is how often, in real time, Run publishes what the
	// simulation produced when the clock runs at a finite speed-up.
	flushPeriod = time.Second
	// maxSamplesPerMessage bounds one node's sample message (about 100
	// bytes a sample encoded, well under the 900 KiB the collector keeps
	// to); maxEventsBuffered bounds the job events held between flushes.
	maxSamplesPerMessage = 2048
	maxEventsBuffered    = 4096
	// logInterval throttles recurring log lines: rejected jobs, failed
	// publishes (real time).
	logInterval = time.Minute
)

// Sim is a simulated GPU cluster. Its actions and Stats are safe for
// concurrent use with Run.
type Sim struct {
	cfg    Config
	pol    Policy
	logger *slog.Logger
	now    func() time.Time
	m      *metrics
	vcs    []VC

	// runMu is held by Run and Advance, which own the publishing side:
	// jp, spare, buf.
	runMu sync.Mutex
	jp    collector.JobPublisher
	pub   collector.Publisher
	spare *outbox
	buf   []byte
	logs  logthrottle.Throttle // keys: publish, reject

	mu sync.Mutex
	// The fields below are guarded by mu.
	t0, t int64 // simulated start and now, Unix seconds
	// origin is the simulated time the workload's submit times count
	// from: t0, or for a replayed job list that Restore continues, the
	// earlier run's origin moved by the time the cluster was stopped.
	origin int64
	// taken counts the jobs taken from the workload, in this run and the
	// earlier runs Restore continued.
	taken    int64
	idBase   int64
	nodes    []*node
	byName   map[string]*node
	vcNodes  map[string][]*node // "" is every node
	jobs     map[string]*job    // pending and running
	pending  []*job
	events   eventHeap
	work     Workload
	next     JobSpec
	nextAt   int64
	hasNext  bool
	nextTick int64
	seq      int64
	dirty    bool // the schedule may have changed
	out      *outbox
	view     []PendingJob
	blocked  map[string]int64 // VCs whose queue is held, and when the job holding it could start

	// typeNodes holds each VC's nodes of one GPU type, keyed by
	// typeKey (VC "" is every node); vcTypes each VC's one GPU type, ""
	// where the VC mixes types. Both are fixed at New.
	typeNodes map[string][]*node
	vcTypes   map[string]string

	live                bool // Run maps real to simulated time
	realStart           time.Time
	realBase            int64
	endT                int64 // where Run stops (its Duration), in simulated Unix seconds
	wake                chan struct{}
	submitted, finished int64
	rejected, gpusBusy  int64
	running             int
}

type node struct {
	name   string
	idx    int
	vc     string
	state  NodeState
	wakeAt int64
	gpus   []*job // the job holding each GPU, nil when free
	free   int    // GPUs a new job may take; 0 while a multi-node job reserves the node
	excl   *job   // the multi-node job reserving the whole node
	ids    []schemas.GPU
	energy []uint64  // mJ since the node powered up
	idleW  []float64 // idle power of each GPU, W
	board  board     // the GPU model of every GPU of the node (its VC's)
	// resumedFor is the job Config.AutoResume holds the node for (it woke
	// the node, or counted it among the nodes it will run on); while that
	// job is pending no other job takes the node and it is not powered
	// down.
	resumedFor *job
}

// heldForPending returns the pending job the node is held for, or nil.
func (n *node) heldForPending() *job {
	if n.resumedFor != nil && n.resumedFor.state == schemas.StatePending {
		return n.resumedFor
	}
	return nil
}

// heldForOther reports whether the node is held for a pending job other
// than j. As in Slurm, where a job that powers nodes up is allocated
// them while they boot, no other job may take such a node.
func (n *node) heldForOther(j *job) bool {
	h := n.heldForPending()
	return h != nil && h != j
}

type job struct {
	spec     JobSpec
	id       string
	seq      int64
	state    schemas.JobState
	final    schemas.JobState
	priority int64
	submit   int64
	start    int64
	end      int64
	runS     int64
	nodes    []*node
	gpus     [][]int // per node, the GPU indexes held
	util     float64 // mean GPU utilization while running, 0.4–1
	mem      float64 // share of framebuffer used while running
	uid      int64
	cmdHash  string
	// woke is set once Config.AutoResume held nodes for the job
	// (node.resumedFor); a job that never had one skips the holds' checks.
	woke bool
}

// New returns a simulated cluster for cfg (validated, zero fields
// defaulted) that runs work and publishes through pub. work nil means the
// synthetic Generator seeded with cfg.Seed; pol nil means FIFO. Metrics are
// registered on reg unless it is nil. now is the real clock (nil:
// time.Now); it also gives the default start.
func New(cfg Config, work Workload, pol Policy, pub collector.Publisher, logger *slog.Logger, reg prometheus.Registerer, now func() time.Time) (*Sim, error) {
	if pub == nil {
		return nil, errors.New("sim: no publisher")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if now == nil {
		now = time.Now
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if pol == nil {
		pol = FIFO{}
	}
	if cfg.Start.IsZero() {
		cfg.Start = now()
	}
	cfg.Start = cfg.Start.Truncate(time.Second)
	vcs := cfg.VCList()
	if work == nil {
		if cfg.Speedup == 0 && cfg.Duration == 0 {
			return nil, errors.New("sim: the synthetic workload never ends: set --sim.duration with --sim.speedup 0")
		}
		g, err := NewGenerator(GeneratorConfig{Seed: cfg.Seed, Start: cfg.Start, VCs: vcs, GPUsPerNode: cfg.GPUsPerNode, JobsPerHour: cfg.JobsPerHour})
		if err != nil {
			return nil, err
		}
		work = g
	}
	m := newMetrics()
	if reg != nil {
		if err := m.register(reg); err != nil {
			return nil, err
		}
	}
	s := &Sim{
		cfg:     cfg,
		pol:     pol,
		logs:    logthrottle.Throttle{Every: logInterval},
		logger:  logger,
		now:     now,
		m:       m,
		vcs:     vcs,
		pub:     pub,
		jp:      collector.JobPublisher{Pub: pub, Cluster: cfg.Cluster, Source: schemas.SourceSim},
		spare:   &outbox{},
		out:     &outbox{},
		t0:      cfg.Start.Unix(),
		byName:  map[string]*node{},
		vcNodes: map[string][]*node{},
		jobs:    map[string]*job{},
		work:    work,
		blocked: map[string]int64{},
		wake:    make(chan struct{}, 1),
	}
	s.typeNodes, s.vcTypes = map[string][]*node{}, map[string]string{}
	s.t = s.t0
	s.origin = s.t0
	s.nextTick = s.t0
	// Numeric ids, as Slurm's, unique across runs that start at least a
	// second apart unless one submits a thousand jobs or more.
	s.idBase = s.t0 * 1000
	idx := 0
	for _, vc := range vcs {
		b, ok := boardOf(vc.GPUType)
		if !ok {
			return nil, fmt.Errorf("sim: virtual cluster %q: GPU type %q is not one the simulator models (%s)", vc.Name, vc.GPUType, gpuTypeList())
		}
		names := [2]string{vc.Name, ""}
		keys := [2]string{typeKey(vc.Name, b.gpuType), typeKey("", b.gpuType)}
		for range vc.Nodes {
			n := s.newNode(idx, vc.Name, b)
			s.nodes = append(s.nodes, n)
			s.byName[n.name] = n
			for i, name := range names {
				s.vcNodes[name] = append(s.vcNodes[name], n)
				s.typeNodes[keys[i]] = append(s.typeNodes[keys[i]], n)
				if t, seen := s.vcTypes[name]; !seen {
					s.vcTypes[name] = b.gpuType
				} else if t != b.gpuType {
					s.vcTypes[name] = ""
				}
			}
			idx++
		}
	}
	s.out.init(len(s.nodes))
	s.spare.init(len(s.nodes))
	s.peek()
	s.updateGauges()
	return s, nil
}

func (s *Sim) newNode(idx int, vc string, b board) *node {
	n := &node{
		name:   fmt.Sprintf("sim-node-%03d", idx+1),
		idx:    idx,
		vc:     vc,
		state:  NodeUp,
		gpus:   make([]*job, s.cfg.GPUsPerNode),
		free:   s.cfg.GPUsPerNode,
		energy: make([]uint64, s.cfg.GPUsPerNode),
		board:  b,
	}
	for i := range s.cfg.GPUsPerNode {
		h := fnv.New64a()
		fmt.Fprintf(h, "%s/%s/%d", s.cfg.Cluster, n.name, i)
		id := h.Sum64()
		n.ids = append(n.ids, schemas.GPU{
			Index:         uint32(i),
			UUID:          fmt.Sprintf("GPU-%08x-%04x-%04x-%04x-%012x", uint32(id>>32), uint16(id>>16), uint16(id), i, id&0xffffffffffff),
			PCIBusID:      fmt.Sprintf("00000000:%02X:00.0", 0x18+i*0x10),
			Minor:         int32(i),
			Model:         b.model,
			DriverVersion: "550.54.15",
			GIID:          -1,
			CIID:          -1,
		})
		// Idle power differs from board to board: 60–90 W for an H100.
		n.idleW = append(n.idleW, b.idleLoW+b.idleSpanW*unit(mix(s.cfg.Seed, uint64(idx), uint64(i), 0x1d1e)))
	}
	return n
}

// Now returns the simulated time the simulation has reached.
func (s *Sim) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Unix(s.t, 0).In(s.cfg.Start.Location())
}

// Config returns the configuration in use, defaults and start filled in.
func (s *Sim) Config() Config { return s.cfg }

// peek fetches the next job of the workload.
func (s *Sim) peek() {
	s.next, s.hasNext = s.work.Next()
	if !s.hasNext {
		return
	}
	at := s.origin + int64(math.Ceil(s.next.Submit.Seconds()))
	if s.next.Submit < 0 {
		at = s.origin
	}
	s.nextAt = max(at, s.t)
}

// nextTime returns the time of the next thing to happen.
func (s *Sim) nextTime() int64 {
	t := s.nextTick
	if len(s.events) > 0 {
		t = min(t, s.events[0].t)
	}
	if s.hasNext {
		t = min(t, s.nextAt)
	}
	return t
}

// drained reports whether nothing but sample ticks is left to happen.
func (s *Sim) drained() bool { return !s.hasNext && len(s.events) == 0 }

// advance runs the simulation up to and including target, or, with
// untilIdle, until it is drained. It returns false when it stopped early
// because the outbox is full and must be flushed first.
func (s *Sim) advance(target int64, untilIdle bool) bool {
	for {
		if untilIdle && s.drained() {
			return true
		}
		t := s.nextTime()
		if t > target {
			s.t = max(s.t, target)
			s.m.simTime.Set(float64(s.t))
			return true
		}
		s.t = t
		// Same-time order: ends and wake-ups free capacity, arrivals
		// queue, the scheduler starts what fits, then the nodes report.
		// A job of zero run time ends when it starts, before the tick.
		for {
			for len(s.events) > 0 && s.events[0].t == t {
				e := heap.Pop(&s.events).(event)
				switch e.kind {
				case evEnd:
					s.endJob(e.job, e.job.final)
				case evWake:
					if e.node.state == NodeWaking && e.node.wakeAt == t {
						e.node.state = NodeUp
						s.dirty = true
					}
				}
			}
			for s.hasNext && s.nextAt == t {
				s.arrive(s.next)
				s.taken++
				s.peek()
			}
			if s.dirty {
				s.schedule()
			}
			if len(s.events) == 0 || s.events[0].t != t {
				break
			}
		}
		if s.nextTick == t {
			s.tick()
			s.nextTick += int64(s.cfg.SampleInterval / time.Second)
		}
		s.updateGauges()
		s.m.simTime.Set(float64(s.t))
		if s.out.full() {
			return false
		}
	}
}

// arrive submits spec, or rejects it if it can never run.
func (s *Sim) arrive(spec JobSpec) {
	s.seq++
	id := spec.ID
	if id == "" {
		id = strconv.FormatInt(s.idBase+s.seq, 10)
	}
	if reason := s.rejects(id, &spec); reason != "" {
		s.rejected++
		s.m.rejected.Inc()
		if n, ok := s.logs.Note("reject", s.now(), 1); ok {
			s.logger.Warn("job rejected", "job_id", id, "reason", reason, "rejected_jobs", n)
		}
		return
	}
	run := int64(math.Ceil(spec.Duration.Seconds()))
	final := spec.State
	if final == 0 {
		final = schemas.StateCompleted
	}
	if limit := int64(math.Ceil(spec.TimeLimit.Seconds())); limit > 0 && run > limit {
		run, final = limit, schemas.StateTimeout
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%s", spec.User, spec.Name)
	cmd := h.Sum64()
	h.Reset()
	h.Write([]byte(spec.User))
	j := &job{
		spec:     spec,
		id:       id,
		seq:      s.seq,
		state:    schemas.StatePending,
		final:    final,
		priority: spec.Priority,
		submit:   s.t,
		runS:     run,
		util:     0.4 + 0.6*unit(mix(s.cfg.Seed, uint64(s.seq), 0x0a11)),
		mem:      0.2 + 0.75*unit(mix(s.cfg.Seed, uint64(s.seq), 0x3e3)),
		uid:      10000 + int64(h.Sum64()%50000),
		cmdHash:  strconv.FormatUint(cmd, 16),
	}
	s.jobs[id] = j
	s.pending = append(s.pending, j)
	s.submitted++
	s.m.submitted.Inc()
	s.emit(j, schemas.JobSubmit)
	s.dirty = true
}

// rejects says why spec can never run, or "".
func (s *Sim) rejects(id string, spec *JobSpec) string {
	switch {
	case spec.GPUs < 1:
		return "no GPUs"
	case spec.Duration < 0:
		return "negative duration"
	case spec.State != 0 && !spec.State.Final():
		return "state " + spec.State.String() + " is not final"
	case s.jobs[id] != nil:
		return "duplicate job id"
	}
	if _, ok := s.vcNodes[spec.VC]; !ok {
		return "unknown virtual cluster " + strconv.Quote(spec.VC)
	}
	nodes := s.nodesFor(spec)
	if len(nodes) == 0 {
		return fmt.Sprintf("virtual cluster %q has no node with GPU type %q", spec.VC, spec.GPUType)
	}
	if spec.GPUs > len(nodes)*s.cfg.GPUsPerNode {
		what := "its virtual cluster"
		if spec.GPUType != "" {
			what += "'s " + spec.GPUType + " nodes"
		}
		return fmt.Sprintf("%d GPUs exceed the %d of %s", spec.GPUs, len(nodes)*s.cfg.GPUsPerNode, what)
	}
	for _, str := range []string{id, spec.Name, spec.User, spec.VC, spec.GPUType} {
		if len(str) > schemas.MaxStringLen {
			return "a string field is too long"
		}
	}
	return ""
}

// typeKey keys Sim.typeNodes.
func typeKey(vc, gpuType string) string { return vc + "\x00" + gpuType }

// nodesFor returns the nodes a job of spec may run on: its VC's, only those
// of its GPU type where it asks for one.
func (s *Sim) nodesFor(spec *JobSpec) []*node {
	if spec.GPUType == "" {
		return s.vcNodes[spec.VC]
	}
	return s.typeNodes[typeKey(spec.VC, spec.GPUType)]
}

// schedule starts the pending jobs that fit, in priority and policy order,
// without backfill: within a virtual cluster, a job that does not fit holds
// back the ones after it.
func (s *Sim) schedule() {
	s.dirty = false
	if len(s.pending) == 0 {
		return
	}
	s.view = s.view[:0]
	for _, j := range s.pending {
		s.view = append(s.view, j.view())
	}
	s.pol.Order(s.view)
	slices.SortStableFunc(s.view, func(a, b PendingJob) int {
		switch {
		case a.Priority > b.Priority:
			return -1
		case a.Priority < b.Priority:
			return 1
		}
		return 0
	})
	clear(s.blocked)
	started := false
	for i := range s.view {
		j := s.jobs[s.view[i].ID]
		if j == nil || j.state != schemas.StatePending {
			continue
		}
		shadow, blocked := s.blocked[j.spec.VC]
		if blocked && (!s.cfg.Backfill || s.t+j.limitS() > shadow) && !s.heldReady(j) {
			// A job whose woken nodes are up starts on them whatever
			// blocks its queue: it was given them when they powered up.
			continue
		}
		if !s.place(j) {
			if !blocked {
				// The first job of its VC that does not fit: the
				// ones after it wait for it, or with backfill may
				// start if they end before it could start.
				if s.cfg.AutoResume {
					s.resumeFor(j)
				}
				s.blocked[j.spec.VC] = s.shadow(j)
			}
			continue
		}
		s.startJob(j)
		started = true
	}
	if started {
		s.pending = slices.DeleteFunc(s.pending, func(j *job) bool { return j.state != schemas.StatePending })
	}
}

// resumeFor powers up the fewest powered-down nodes of j's virtual cluster
// that let j run once they are up, counting the waking nodes and (for a
// multi-node job) the empty nodes up that are not held for another pending
// job; it wakes none when even all of them would not do. As Slurm allocates
// a job the nodes it powers up for it, the nodes j will run on, woken or
// counted, are held for j: no other job takes them and they are not powered
// down while j is pending.
func (s *Sim) resumeFor(j *job) {
	gpn := s.cfg.GPUsPerNode
	need := 1
	if j.spec.GPUs > gpn {
		need = (j.spec.GPUs + gpn - 1) / gpn
	}
	var ready, down []*node
	for _, n := range s.nodesFor(&j.spec) {
		switch {
		case n.heldForOther(j):
		case n.state == NodeDown:
			down = append(down, n)
		case n.state == NodeWaking:
			ready = append(ready, n) // empty once up
		case n.state == NodeUp && n.free == gpn:
			ready = append(ready, n) // only for a multi-node job: place found no room
		}
	}
	if len(ready)+len(down) < need {
		return
	}
	// The nodes already held for j first, so that it keeps them.
	slices.SortStableFunc(ready, func(a, b *node) int {
		return b2i(b.heldForPending() == j) - b2i(a.heldForPending() == j)
	})
	for _, n := range ready[:min(need, len(ready))] {
		n.resumedFor, j.woke = j, true
	}
	woken := down[:max(0, need-len(ready))]
	for _, n := range woken {
		s.powerUp(n)
		n.resumedFor, j.woke = j, true
		s.m.resumed.Inc()
	}
	if len(woken) > 0 {
		s.updateGauges()
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// heldReady reports whether the nodes held for j are up, and enough
// to run it on (Sim.place puts it there).
func (s *Sim) heldReady(j *job) bool {
	if !j.woke {
		return false
	}
	gpn := s.cfg.GPUsPerNode
	need := (j.spec.GPUs + gpn - 1) / gpn
	up := 0
	for _, n := range s.nodesFor(&j.spec) {
		if n.heldForPending() == j {
			if n.state != NodeUp {
				return false
			}
			if n.free == gpn {
				up++
			}
		}
	}
	return up > 0 && up >= need
}

// limitS returns the run time the scheduler must assume for j: its time
// limit, or the longest run time when it has none.
func (j *job) limitS() int64 {
	if l := int64(math.Ceil(j.spec.TimeLimit.Seconds())); l > 0 {
		return l
	}
	return int64(maxRunS)
}

// shadow returns the earliest time j could start if the running jobs end at
// their limits (EASY backfill's shadow time), or math.MaxInt64 when the
// powered nodes can never hold it.
func (s *Sim) shadow(j *job) int64 {
	gpn := s.cfg.GPUsPerNode
	type release struct {
		at   int64
		gpus int
	}
	var times []int64
	for _, n := range s.nodesFor(&j.spec) {
		var from int64
		switch n.state {
		case NodeUp:
			from = s.t
		case NodeWaking:
			from = n.wakeAt
		default:
			continue
		}
		if h := n.heldForPending(); h != nil && h != j {
			// Given to the job it is held for: free once that
			// job has run to its limit.
			from += h.limitS()
		}
		var rel []release
		seen := map[*job]bool{}
		for _, h := range n.gpus {
			if h != nil && !seen[h] {
				seen[h] = true
				k := 0
				for _, x := range n.gpus {
					if x == h {
						k++
					}
				}
				if n.excl == h {
					k = gpn
				}
				rel = append(rel, release{h.start + h.limitS(), k})
			}
		}
		slices.SortFunc(rel, func(a, b release) int { return int(a.at - b.at) })
		free, at := n.free, from
		if n.excl != nil {
			free = 0
		}
		want := min(j.spec.GPUs, gpn) // a larger job needs whole nodes
		for _, r := range rel {
			if free >= want {
				break
			}
			free += r.gpus
			at = max(at, r.at)
		}
		if free >= want {
			times = append(times, at)
		}
	}
	need := 1
	if j.spec.GPUs > gpn {
		need = (j.spec.GPUs + gpn - 1) / gpn
	}
	if len(times) < need {
		return math.MaxInt64
	}
	slices.Sort(times)
	return times[need-1]
}

// place finds GPUs for j and takes them: one node, best fit, for a job of
// at most one node's GPUs; otherwise enough whole idle nodes, lowest names
// first. It reports whether j was placed.
func (s *Sim) place(j *job) bool {
	gpn := s.cfg.GPUsPerNode
	g := j.spec.GPUs
	// A job runs on the nodes it powered up, else on the tightest fit among
	// the nodes up and not held for another job.
	nodes := s.nodesFor(&j.spec)
	usable := func(n *node) bool { return n.state == NodeUp && !n.heldForOther(j) }
	if g <= gpn {
		var best *node
		for _, n := range nodes {
			if !usable(n) || n.free < g {
				continue
			}
			if j.woke && n.heldForPending() == j {
				best = n
				break
			}
			if best == nil || n.free < best.free {
				best = n
			}
		}
		if best == nil {
			return false
		}
		idx := make([]int, 0, g)
		for i, h := range best.gpus {
			if h == nil && len(idx) < g {
				idx = append(idx, i)
				best.gpus[i] = j
			}
		}
		best.free -= g
		j.nodes, j.gpus = []*node{best}, [][]int{idx}
		return true
	}
	need := (g + gpn - 1) / gpn
	var picked []*node
	for pass := range 2 {
		if pass == 0 && !j.woke {
			continue
		}
		for _, n := range nodes {
			if len(picked) == need {
				break
			}
			// Pass 0 takes the nodes woken for j, pass 1 the others.
			if usable(n) && n.free == gpn && (n.heldForPending() == j) == (pass == 0) {
				picked = append(picked, n)
			}
		}
	}
	if len(picked) < need {
		return false
	}
	rem := g
	for _, n := range picked {
		k := min(gpn, rem)
		rem -= k
		idx := make([]int, k)
		for i := range k {
			idx[i] = i
			n.gpus[i] = j
		}
		n.free, n.excl = 0, j
		j.nodes = append(j.nodes, n)
		j.gpus = append(j.gpus, idx)
	}
	return true
}

func (s *Sim) startJob(j *job) {
	j.state = schemas.StateRunning
	j.start = s.t
	s.running++
	s.gpusBusy += int64(j.spec.GPUs)
	s.m.started.Inc()
	s.emit(j, schemas.JobStart)
	s.emitAllocs(j)
	heap.Push(&s.events, event{t: s.t + j.runS, kind: evEnd, seq: j.seq, job: j})
}

// endJob ends j, running or pending, in state st.
func (s *Sim) endJob(j *job, st schemas.JobState) {
	wasRunning := j.state == schemas.StateRunning
	j.state = st
	j.end = s.t
	delete(s.jobs, j.id)
	if wasRunning {
		for k, n := range j.nodes {
			for _, i := range j.gpus[k] {
				n.gpus[i] = nil
			}
			if n.excl == j {
				n.excl, n.free = nil, s.cfg.GPUsPerNode
			} else {
				n.free += len(j.gpus[k])
			}
		}
		s.running--
		s.gpusBusy -= int64(j.spec.GPUs)
		s.dirty = true
	}
	s.finished++
	s.m.finished.WithLabelValues(st.String()).Inc()
	s.emit(j, schemas.JobEnd)
	if wasRunning {
		s.emitAllocs(j)
	}
}

// stop ends what is left when Run returns: the simulated cluster goes away,
// so running jobs end as NODE_FAIL and pending ones as CANCELLED, and their
// allocations close. With Config.KeepJobs the cluster is only paused: the
// jobs stay as they are, for Snapshot.
func (s *Sim) stop() {
	if s.cfg.KeepJobs {
		s.updateGauges()
		return
	}
	if s.nextTick-int64(s.cfg.SampleInterval/time.Second) == s.t && s.running > 0 {
		// The nodes reported their jobs running at this very time: the
		// jobs end a second later, so that those samples fall inside
		// their allocations.
		s.t++
	}
	left := make([]*job, 0, len(s.jobs))
	for _, j := range s.jobs {
		left = append(left, j)
	}
	slices.SortFunc(left, func(a, b *job) int { return int(a.seq - b.seq) })
	for _, j := range left {
		if j.state == schemas.StateRunning {
			s.endJob(j, schemas.StateNodeFail)
		} else {
			s.endJob(j, schemas.StateCancelled)
		}
	}
	s.pending = s.pending[:0]
	s.events = s.events[:0]
	s.updateGauges()
}

// gpuType is the GPU type on j's events: the one it asks for; else, once
// it has nodes, theirs (sorted and comma-separated where they differ, as
// sacct reports a job's allocated GPU types); else its VC's, "" where the
// VC mixes types (a pending job that asks for none has none yet).
func (s *Sim) gpuType(j *job) string {
	switch {
	case j.spec.GPUType != "":
		return j.spec.GPUType
	case len(j.nodes) == 1:
		return j.nodes[0].board.gpuType
	case len(j.nodes) > 1:
		types := make([]string, len(j.nodes))
		for i, n := range j.nodes {
			types[i] = n.board.gpuType
		}
		return slurmfmt.JoinTypes(types)
	}
	return s.vcTypes[j.spec.VC]
}

// emit queues an event of type typ for j at the current time.
func (s *Sim) emit(j *job, typ schemas.JobEventType) {
	e := schemas.JobEvent{
		Type:           typ,
		EventMillis:    s.t * 1000,
		JobID:          j.id,
		ArrayTaskID:    schemas.Unknown,
		Name:           j.spec.Name,
		User:           j.spec.User,
		UID:            j.uid,
		Account:        j.spec.VC,
		Partition:      j.spec.VC,
		State:          j.state,
		ExitCode:       schemas.Unknown,
		Priority:       j.priority,
		SubmitMillis:   j.submit * 1000,
		EligibleMillis: j.submit * 1000,
		TimeLimitS:     schemas.Unknown,
		NodeCount:      int64((j.spec.GPUs + s.cfg.GPUsPerNode - 1) / s.cfg.GPUsPerNode),
		CPUs:           schemas.Unknown,
		GPUs:           int64(j.spec.GPUs),
		GPUType:        s.gpuType(j),
		MemReqBytes:    schemas.Unknown,
		CommandHash:    j.cmdHash,
	}
	if j.spec.TimeLimit > 0 {
		e.TimeLimitS = int64(math.Ceil(j.spec.TimeLimit.Seconds()))
	}
	if j.start != 0 || j.state == schemas.StateRunning {
		e.StartMillis = j.start * 1000
		e.NodeCount = int64(len(j.nodes))
		for _, n := range j.nodes {
			e.Nodes = append(e.Nodes, n.name)
		}
	}
	if j.state.Final() {
		e.EndMillis = j.end * 1000
		switch j.state {
		case schemas.StateFailed:
			e.ExitCode = 1
		case schemas.StateOutOfMemory:
			e.ExitCode = 137
		default:
			e.ExitCode = 0
		}
	}
	s.out.jobs = append(s.out.jobs, e)
}

// emitAllocs queues j's allocation records: open (EndMillis 0) when j
// starts, closed when it ends; downstream the closed record replaces the
// open one. A job that starts and ends between two flushes has both in one
// message, open first.
func (s *Sim) emitAllocs(j *job) {
	var end int64
	if j.state.Final() {
		end = j.end * 1000
	}
	for k, n := range j.nodes {
		for _, i := range j.gpus[k] {
			s.out.allocs = append(s.out.allocs, schemas.Alloc{
				Host: n.name, GPUIndex: int64(i), GPUUUID: n.ids[i].UUID, JobID: j.id, User: j.spec.User,
				StartMillis: j.start * 1000, EndMillis: end, Source: schemas.AllocSim,
			})
		}
	}
}

func (s *Sim) updateGauges() {
	s.m.pending.Set(float64(len(s.pending)))
	s.m.running.Set(float64(s.running))
	s.m.gpusBusy.Set(float64(s.gpusBusy))
	var up, waking, down int
	for _, n := range s.nodes {
		switch n.state {
		case NodeUp:
			up++
		case NodeWaking:
			waking++
		case NodeDown:
			down++
		}
	}
	s.m.nodes.WithLabelValues(NodeUp.String()).Set(float64(up))
	s.m.nodes.WithLabelValues(NodeWaking.String()).Set(float64(waking))
	s.m.nodes.WithLabelValues(NodeDown.String()).Set(float64(down))
}

// evKind orders events of one time: ends, then wake-ups.
type evKind uint8

const (
	evEnd evKind = iota
	evWake
)

type event struct {
	t    int64
	kind evKind
	seq  int64
	job  *job
	node *node
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	a, b := &h[i], &h[j]
	if a.t != b.t {
		return a.t < b.t
	}
	if a.kind != b.kind {
		return a.kind < b.kind
	}
	return a.seq < b.seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// mix hashes its arguments into 64 well-mixed bits (splitmix64 rounds), so
// that telemetry noise depends only on what it describes, not on the order
// in which things happen.
func mix(vs ...uint64) uint64 {
	var h uint64 = 0x243f6a8885a308d3
	for _, v := range vs {
		h ^= v + 0x9e3779b97f4a7c15 + h<<6 + h>>2
		h ^= h >> 30
		h *= 0xbf58476d1ce4e5b9
		h ^= h >> 27
		h *= 0x94d049bb133111eb
		h ^= h >> 31
	}
	return h
}

// unit maps 64 random bits to [0, 1).
func unit(h uint64) float64 { return float64(h>>11) / (1 << 53) }
