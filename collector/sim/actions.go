package sim

import (
	"container/heap"
	"fmt"
	"slices"
	"time"

	"github.com/heliostat-dev/heliostat/schemas"
)

// SetPriority sets a pending or running job's priority, effective at the
// current simulated time: pending jobs of higher priority start first. A
// change is published as an UPDATE event.
func (s *Sim) SetPriority(jobID string, p int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.catchUp()
	j := s.jobs[jobID]
	if j == nil {
		return fmt.Errorf("sim: set priority of job %q: %w", jobID, ErrUnknownJob)
	}
	if j.priority == p {
		return nil
	}
	j.priority = p
	s.emit(j, schemas.JobUpdate)
	if j.state == schemas.StatePending {
		s.schedule()
		s.updateGauges()
	}
	s.poke()
	return nil
}

// PowerDown powers a node down at the current simulated time: from then on
// it sends no telemetry and takes no jobs. It is refused, with an error
// wrapping ErrNodeBusy, while a job holds any of the node's GPUs. Powering
// down a node that is down does nothing; a waking node goes back down.
func (s *Sim) PowerDown(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.catchUp()
	n := s.byName[name]
	if n == nil {
		return fmt.Errorf("sim: power down %q: %w", name, ErrUnknownNode)
	}
	if n.free < s.cfg.GPUsPerNode {
		return fmt.Errorf("sim: power down %s: %w (jobs %v)", name, ErrNodeBusy, n.jobIDs())
	}
	if j := n.heldForPending(); j != nil {
		return fmt.Errorf("sim: power down %s: %w (held for pending job %s, which woke it or counted it for its run)", name, ErrNodeBusy, j.id)
	}
	if n.state == NodeDown {
		return nil
	}
	n.state, n.wakeAt, n.resumedFor = NodeDown, 0, nil
	clear(n.energy)
	s.updateGauges()
	s.poke()
	return nil
}

// PowerUp powers a node up at the current simulated time; it takes jobs and
// sends telemetry after the configured wake-up delay. Powering up a node
// that is up or waking does nothing.
func (s *Sim) PowerUp(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.catchUp()
	n := s.byName[name]
	if n == nil {
		return fmt.Errorf("sim: power up %q: %w", name, ErrUnknownNode)
	}
	if n.state != NodeDown {
		return nil
	}
	s.powerUp(n)
	s.updateGauges()
	s.poke()
	return nil
}

// powerUp starts powering n up; it takes jobs after the wake-up delay.
func (s *Sim) powerUp(n *node) {
	n.state = NodeWaking
	n.wakeAt = s.t + int64(s.cfg.WakeDelay/time.Second)
	heap.Push(&s.events, event{t: n.wakeAt, kind: evWake, seq: int64(n.idx), node: n})
}

func (n *node) jobIDs() []string {
	var ids []string
	for _, j := range n.gpus {
		if j != nil && !slices.Contains(ids, j.id) {
			ids = append(ids, j.id)
		}
	}
	if n.excl != nil && len(ids) == 0 {
		ids = append(ids, n.excl.id)
	}
	return ids
}

// Stats are counts for a summary line.
type Stats struct {
	Now       time.Time // simulated time reached
	Submitted int64     // jobs submitted so far
	Pending   int       // jobs waiting
	Running   int       // jobs running
	Finished  int64     // jobs that ended
	Rejected  int64     // jobs of the workload that could never run
	GPUs      int       // GPUs of the cluster
	GPUsBusy  int64     // GPUs held by running jobs
	Nodes     int       // nodes of the cluster
	NodesDown int       // nodes powered down
	// NodesWaking are powered up but not usable yet.
	NodesWaking int
}

// Stats returns the current counts.
func (s *Sim) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{
		Now:       time.Unix(s.t, 0).In(s.cfg.Start.Location()),
		Submitted: s.submitted,
		Pending:   len(s.pending),
		Running:   s.running,
		Finished:  s.finished,
		Rejected:  s.rejected,
		GPUs:      len(s.nodes) * s.cfg.GPUsPerNode,
		GPUsBusy:  s.gpusBusy,
		Nodes:     len(s.nodes),
	}
	for _, n := range s.nodes {
		switch n.state {
		case NodeDown:
			st.NodesDown++
		case NodeWaking:
			st.NodesWaking++
		}
	}
	return st
}

// NodeInfo describes one node, for actuators that plan power states.
type NodeInfo struct {
	Name     string
	VC       string
	State    NodeState
	GPUs     int
	GPUType  string    // the GPU type of every GPU of the node
	FreeGPUs int       // GPUs a new job could take now (0 while reserved whole)
	Jobs     []string  // ids of the jobs running on it
	WakeAt   time.Time // when a waking node becomes usable; zero otherwise
	// ResumedFor is the pending job the node is held for (Config.AutoResume):
	// the scheduler powered it up for that job, or counted it, empty, among
	// the nodes the job will run on once those it woke are up; empty
	// otherwise.
	ResumedFor string
}

// Nodes returns the nodes in name order.
func (s *Sim) Nodes() []NodeInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]NodeInfo, len(s.nodes))
	for i, n := range s.nodes {
		out[i] = NodeInfo{Name: n.name, VC: n.vc, State: n.state, GPUs: len(n.gpus), GPUType: n.board.gpuType, FreeGPUs: n.free, Jobs: n.jobIDs()}
		if n.state == NodeWaking {
			out[i].WakeAt = time.Unix(n.wakeAt, 0).In(s.cfg.Start.Location())
		}
		if j := n.heldForPending(); j != nil {
			out[i].ResumedFor = j.id
		}
	}
	return out
}
