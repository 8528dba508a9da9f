package sim

import (
	"container/heap"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/heliostat-dev/heliostat/schemas"
)

// State is what a Sim leaves for a later Sim of the same cluster to go on
// from (Restore): the simulated time it reached, its pending and running
// jobs and its nodes. Its JSON is what `heliostat up` keeps in its data
// directory across restarts.
type State struct {
	// Clock is the simulated time reached.
	Clock time.Time `json:"clock"`
	// Jobs are the pending and running jobs, in order of submission.
	Jobs []OpenJob `json:"jobs"`
	// Nodes are the nodes' power states and energy counters.
	Nodes []SavedNode `json:"nodes"`
	// Replay is how far a replayed job list (Jobs: a trace) got, so that
	// a later Sim given the same list goes on with the jobs not submitted
	// yet instead of submitting the list again from its first job under
	// the same ids; nil for any other workload.
	Replay *Replay `json:"replay,omitempty"`
}

// Replay is the progress of a replayed job list.
type Replay struct {
	// List identifies the list (its jobs' ids and submit times).
	List string `json:"list"`
	// Taken is how many of its jobs have been submitted (or rejected).
	Taken int64 `json:"taken"`
	// Origin is the simulated time its submit times counted from.
	Origin time.Time `json:"origin"`
}

// OpenJob is a pending or running job of a State: enough to continue it
// where it was, with the identity, times and telemetry it was published
// with.
type OpenJob struct {
	ID   string `json:"id"`
	Seq  int64  `json:"seq"` // order of submission
	Name string `json:"name,omitempty"`
	User string `json:"user,omitempty"`
	VC   string `json:"vc,omitempty"`
	GPUs int    `json:"gpus"`
	// GPUType is the GPU type the job asks for; "" for any.
	GPUType string `json:"gpu_type,omitempty"`
	// State is PENDING or RUNNING; Final is the state the job ends in.
	State string `json:"state"`
	Final string `json:"final_state"`
	// RunS is the job's run time once started, in seconds: a running job
	// ends at Start plus RunS.
	RunS       int64     `json:"run_s"`
	TimeLimitS int64     `json:"time_limit_s,omitempty"` // 0: none
	Priority   int64     `json:"priority,omitempty"`
	Submit     time.Time `json:"submit"`
	Start      time.Time `json:"start,omitzero"` // zero while pending
	// Placement is where a running job runs: the GPUs it holds on each of
	// its nodes.
	Placement []Placement `json:"placement,omitempty"`
	// Util and Mem are the job's mean GPU utilization and framebuffer share
	// while it runs; UID and CommandHash as on its events.
	Util        float64 `json:"util"`
	Mem         float64 `json:"mem"`
	UID         int64   `json:"uid"`
	CommandHash string  `json:"command_hash"`
}

// Placement is the GPUs, by index, a running job holds on one node.
type Placement struct {
	Node string `json:"node"`
	GPUs []int  `json:"gpus"`
}

// SavedNode is one node of a State.
type SavedNode struct {
	Name  string `json:"name"`
	State string `json:"state"` // up, waking or down
	// WakeAt is when a waking node becomes usable.
	WakeAt time.Time `json:"wake_at,omitzero"`
	// EnergyMJ is each GPU's energy counter, so that it goes on rising
	// rather than start again from zero under a running job.
	EnergyMJ []uint64 `json:"energy_mj,omitempty"`
	// ResumedFor is the pending job the node is held for (Config.AutoResume).
	ResumedFor string `json:"resumed_for,omitempty"`
}

// errRestoreAfterStart: Restore was called on a Sim that has run.
var errRestoreAfterStart = errors.New("sim: restore: the simulation has already run")

// Snapshot returns the simulation's state at the simulated time reached:
// with Config.KeepJobs, once Run has returned, the jobs it left open.
func (s *Sim) Snapshot() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	loc := time.UTC
	st := State{Clock: time.Unix(s.t, 0).In(loc), Jobs: []OpenJob{}}
	if l, ok := s.work.(*jobList); ok {
		st.Replay = &Replay{List: l.fingerprint(), Taken: s.taken, Origin: time.Unix(s.origin, 0).In(loc)}
	}
	open := make([]*job, 0, len(s.jobs))
	for _, j := range s.jobs {
		open = append(open, j)
	}
	slices.SortFunc(open, func(a, b *job) int { return int(a.seq - b.seq) })
	for _, j := range open {
		oj := OpenJob{
			ID: j.id, Seq: j.seq, Name: j.spec.Name, User: j.spec.User, VC: j.spec.VC, GPUs: j.spec.GPUs, GPUType: j.spec.GPUType,
			State: j.state.String(), Final: j.final.String(), RunS: j.runS, Priority: j.priority,
			Submit: time.Unix(j.submit, 0).In(loc), Util: j.util, Mem: j.mem, UID: j.uid, CommandHash: j.cmdHash,
		}
		if l := j.spec.TimeLimit; l > 0 {
			oj.TimeLimitS = int64(math.Ceil(l.Seconds()))
		}
		if j.state == schemas.StateRunning {
			oj.Start = time.Unix(j.start, 0).In(loc)
			for k, n := range j.nodes {
				oj.Placement = append(oj.Placement, Placement{Node: n.name, GPUs: slices.Clone(j.gpus[k])})
			}
		}
		st.Jobs = append(st.Jobs, oj)
	}
	for _, n := range s.nodes {
		sn := SavedNode{Name: n.name, State: n.state.String()}
		if n.state != NodeDown {
			sn.EnergyMJ = slices.Clone(n.energy)
		}
		if n.state == NodeWaking {
			sn.WakeAt = time.Unix(n.wakeAt, 0).In(loc)
		}
		if h := n.heldForPending(); h != nil {
			sn.ResumedFor = h.id
		}
		st.Nodes = append(st.Nodes, sn)
	}
	return st
}

// Restore takes over st, the Snapshot of an earlier Sim of this cluster,
// before s runs: its nodes get their power states and energy counters
// back, its running jobs hold their GPUs again and end when they would
// have (or at s's start, if that is later), and its pending jobs queue
// again ahead of s's workload. Nothing is published for them until they
// start or end: their earlier events stand. When s replays the job list
// (Jobs) that st's run replayed, it goes on with the jobs not taken yet
// (State.Replay) rather than from the first. A job or node that does not
// fit s's configuration (an unknown node or virtual cluster, GPUs taken or
// out of range) is left out and logged; Restore returns the ids of the jobs
// it took over. It fails if s has already run.
func (s *Sim) Restore(st State) ([]string, error) {
	if !s.runMu.TryLock() {
		return nil, ErrRunning
	}
	defer s.runMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.t != s.t0 || s.submitted > 0 || len(s.jobs) > 0 {
		return nil, errRestoreAfterStart
	}
	for _, sn := range st.Nodes {
		n := s.byName[sn.Name]
		if n == nil {
			s.logger.Warn("saved node not restored", "node", sn.Name, "reason", "no such node")
			continue
		}
		switch sn.State {
		case NodeDown.String():
			n.state = NodeDown
			clear(n.energy)
			continue
		case NodeWaking.String():
			n.state = NodeWaking
			n.wakeAt = max(sn.WakeAt.Unix(), s.t)
			heap.Push(&s.events, event{t: n.wakeAt, kind: evWake, seq: int64(n.idx), node: n})
		}
		if len(sn.EnergyMJ) == len(n.energy) {
			copy(n.energy, sn.EnergyMJ)
		}
	}
	jobs := slices.Clone(st.Jobs)
	slices.SortStableFunc(jobs, func(a, b OpenJob) int { return int(a.Seq - b.Seq) })
	var restored []string
	for i := range jobs {
		if reason := s.restoreJob(&jobs[i]); reason != "" {
			s.logger.Warn("saved job not restored; it is ended as lost", "job_id", jobs[i].ID, "reason", reason)
			continue
		}
		restored = append(restored, jobs[i].ID)
		s.m.restored.Inc()
	}
	for _, sn := range st.Nodes {
		n, j := s.byName[sn.Name], s.jobs[sn.ResumedFor]
		if n != nil && j != nil && j.state == schemas.StatePending && n.state != NodeDown {
			n.resumedFor, j.woke = j, true
		}
	}
	s.continueReplay(st)
	s.dirty = len(s.pending) > 0
	s.updateGauges()
	return restored, nil
}

// continueReplay skips the jobs of s's job list that st's run already
// took, when st replayed the same list, and submits the others at the same
// times after the earlier ones as then: the submit times count from st's
// origin moved by the time between st's clock and s's start, as if the
// cluster had been paused in between.
func (s *Sim) continueReplay(st State) {
	l, ok := s.work.(*jobList)
	if !ok || st.Replay == nil || st.Replay.List != l.fingerprint() || st.Replay.Taken <= 0 {
		return
	}
	l.i = int(min(st.Replay.Taken, int64(len(l.jobs))))
	s.taken = int64(l.i)
	s.origin = st.Replay.Origin.Unix() + max(0, s.t0-st.Clock.Unix())
	s.peek()
}

// restoreJob takes over oj, or says why it cannot.
func (s *Sim) restoreJob(oj *OpenJob) string {
	state, ok := schemas.ParseJobState(oj.State)
	if !ok || state != schemas.StatePending && state != schemas.StateRunning {
		return fmt.Sprintf("state %q is neither PENDING nor RUNNING", oj.State)
	}
	final, ok := schemas.ParseJobState(oj.Final)
	if !ok || !final.Final() {
		return fmt.Sprintf("final state %q is not a final state", oj.Final)
	}
	if oj.RunS < 0 || oj.TimeLimitS < 0 {
		return "negative run time or time limit"
	}
	spec := JobSpec{ID: oj.ID, Name: oj.Name, User: oj.User, VC: oj.VC, GPUs: oj.GPUs, GPUType: oj.GPUType,
		Duration: time.Duration(oj.RunS) * time.Second, TimeLimit: time.Duration(oj.TimeLimitS) * time.Second,
		State: final, Priority: oj.Priority}
	if oj.ID == "" {
		return "no job id"
	}
	if reason := s.rejects(oj.ID, &spec); reason != "" {
		return reason
	}
	j := &job{
		spec: spec, id: oj.ID, seq: s.seq + 1, state: state, final: final, priority: oj.Priority,
		submit: oj.Submit.Unix(), runS: oj.RunS, util: oj.Util, mem: oj.Mem, uid: oj.UID, cmdHash: oj.CommandHash,
	}
	if state == schemas.StateRunning {
		if reason := s.replace(j, oj.Placement); reason != "" {
			return reason
		}
		j.start = oj.Start.Unix()
		s.running++
		s.gpusBusy += int64(spec.GPUs)
		heap.Push(&s.events, event{t: max(j.start+j.runS, s.t), kind: evEnd, seq: j.seq, job: j})
	} else {
		s.pending = append(s.pending, j)
	}
	s.seq++
	s.jobs[j.id] = j
	return ""
}

// replace puts the running job j back on the GPUs of placement, or says why
// it cannot; it takes nothing unless it can take all.
func (s *Sim) replace(j *job, placement []Placement) string {
	gpn := s.cfg.GPUsPerNode
	multi := j.spec.GPUs > gpn
	if len(placement) == 0 || !multi && len(placement) != 1 {
		return fmt.Sprintf("placement on %d nodes for %d GPUs", len(placement), j.spec.GPUs)
	}
	total := 0
	seen := map[*node]bool{}
	for _, p := range placement {
		n := s.byName[p.Node]
		switch {
		case n == nil:
			return fmt.Sprintf("no node %q", p.Node)
		case seen[n]:
			return fmt.Sprintf("node %s placed twice", p.Node)
		case !slices.Contains(s.vcNodes[j.spec.VC], n):
			return fmt.Sprintf("node %s is not in virtual cluster %q", p.Node, j.spec.VC)
		case !slices.Contains(s.nodesFor(&j.spec), n):
			return fmt.Sprintf("node %s has no %s GPUs, which the job asks for", p.Node, j.spec.GPUType)
		case n.state != NodeUp:
			return fmt.Sprintf("node %s is %s", p.Node, n.state)
		case n.excl != nil || multi && n.free != gpn:
			return fmt.Sprintf("node %s is taken", p.Node)
		}
		seen[n] = true
		for k, i := range p.GPUs {
			if i < 0 || i >= gpn || n.gpus[i] != nil || slices.Contains(p.GPUs[:k], i) {
				return fmt.Sprintf("GPU %d of node %s is out of range or taken", i, p.Node)
			}
		}
		total += len(p.GPUs)
	}
	if total != j.spec.GPUs {
		return fmt.Sprintf("placement holds %d GPUs, the job %d", total, j.spec.GPUs)
	}
	for _, p := range placement {
		n := s.byName[p.Node]
		for _, i := range p.GPUs {
			n.gpus[i] = j
		}
		if multi {
			n.free, n.excl = 0, j
		} else {
			n.free -= len(p.GPUs)
		}
		j.nodes = append(j.nodes, n)
		j.gpus = append(j.gpus, slices.Clone(p.GPUs))
	}
	return ""
}

// EndLost ends jobs an earlier run of the cluster left open and no Sim took
// over (a run killed before it could save them): each job, given as its
// last known record, ends at at in state UNKNOWN, and each open allocation
// closes at at, or at its own EndMillis when set (its job ended, but the
// closing record was lost). They are published with the simulator's other
// messages, at Run's next flush (or Advance's). Jobs and allocations of
// jobs s holds are left out; EndLost returns how many jobs it ended.
func (s *Sim) EndLost(at time.Time, jobs []schemas.JobEvent, allocs []schemas.Alloc) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	ms := at.Truncate(time.Second).UnixMilli()
	n := 0
	for _, e := range jobs {
		if e.JobID == "" || s.jobs[e.JobID] != nil {
			continue
		}
		e.Type = schemas.JobEnd
		e.State = schemas.StateUnknown
		e.ExitCode = schemas.Unknown
		e.EventMillis = max(ms, e.SubmitMillis, e.StartMillis)
		e.EndMillis = e.EventMillis
		e.Nodes = slices.Clone(e.Nodes)
		s.out.jobs = append(s.out.jobs, e)
		s.m.finished.WithLabelValues(schemas.StateUnknown.String()).Inc()
		n++
	}
	for _, a := range allocs {
		if a.JobID == "" || s.jobs[a.JobID] != nil {
			continue
		}
		if a.EndMillis == 0 {
			a.EndMillis = max(ms, a.StartMillis)
		}
		s.out.allocs = append(s.out.allocs, a)
	}
	s.poke()
	return n
}
