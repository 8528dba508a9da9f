// Package simadapter is the actuator's scheduler (adapter.Scheduler) for the
// simulated cluster of collector/sim, so that `heliostat up` closes the loop
// without Slurm: the same actions — SetPriority, PowerDown, PowerUp — on the
// live simulation. A virtual cluster (VC) is a partition, and a job's GPU
// type its request (adapter.Job.GPUType), which only nodes of that type
// meet; times are the simulation's.
package simadapter

import (
	"context"
	"errors"
	"fmt"

	"github.com/heliostat-dev/heliostat/actuator/adapter"
	"github.com/heliostat-dev/heliostat/collector/sim"
)

// Scheduler acts on a running simulation. It is safe for concurrent use with
// the simulation's Run.
type Scheduler struct {
	s *sim.Sim
}

// New returns the Scheduler of s.
func New(s *sim.Sim) *Scheduler { return &Scheduler{s: s} }

// Name returns "sim".
func (*Scheduler) Name() string { return "sim" }

// Snapshot lists the pending jobs and the nodes at the simulation's current
// time. A node is busy while any of its GPUs is held or reserved. The
// simulation has no job arrays, dependencies or begin times: each job is
// one task (adapter.Job.ArrayTasks 0) and may start.
func (a *Scheduler) Snapshot(ctx context.Context) (adapter.Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return adapter.Snapshot{}, err
	}
	snap := adapter.Snapshot{At: a.s.Now()}
	for _, j := range a.s.Pending() {
		snap.Jobs = append(snap.Jobs, adapter.Job{ID: j.ID, Name: j.Name, User: j.User, Partition: j.VC,
			GPUs: j.GPUs, GPUType: j.GPUType, Submit: j.Submit, TimeLimit: j.TimeLimit, Priority: j.Priority})
	}
	for _, n := range a.s.Nodes() {
		an := adapter.Node{Name: n.Name, GPUs: n.GPUs, FreeGPUs: n.FreeGPUs, Jobs: n.Jobs, State: n.State.String(), WakeAt: n.WakeAt}
		if n.GPUType != "" && n.GPUs > 0 {
			an.GPUTypes = map[string]int{n.GPUType: n.GPUs}
		}
		if n.VC != "" {
			an.Partitions = []string{n.VC}
		}
		switch n.State {
		case sim.NodeUp:
			an.Power = adapter.PowerOn
			an.Busy = len(n.Jobs) > 0 || n.FreeGPUs < n.GPUs
		case sim.NodeWaking:
			an.Power = adapter.PowerWaking
			// Powered up for a pending job: allocated to it, as
			// Slurm shows a node its ResumeProgram wakes.
			an.Busy = n.ResumedFor != ""
		case sim.NodeDown:
			an.Power = adapter.PowerOff
		}
		snap.Nodes = append(snap.Nodes, an)
	}
	return snap, nil
}

// SetPriority sets a job's priority in the simulation.
func (a *Scheduler) SetPriority(_ context.Context, jobID string, p int64) error {
	return mapErr(a.s.SetPriority(jobID, p))
}

// PowerDown powers a node down; the simulation refuses a busy node
// (adapter.ErrNodeBusy) under the same lock that starts jobs, so no job can
// slip onto it in between.
func (a *Scheduler) PowerDown(_ context.Context, node string) error {
	return mapErr(a.s.PowerDown(node))
}

// PowerUp powers a node up; it takes jobs after the simulation's wake-up
// delay.
func (a *Scheduler) PowerUp(_ context.Context, node string) error {
	return mapErr(a.s.PowerUp(node))
}

func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sim.ErrNodeBusy):
		return fmt.Errorf("%w: %w", adapter.ErrNodeBusy, err)
	case errors.Is(err, sim.ErrUnknownNode):
		return fmt.Errorf("%w: %w", adapter.ErrUnknownNode, err)
	case errors.Is(err, sim.ErrUnknownJob):
		return fmt.Errorf("%w: %w", adapter.ErrUnknownJob, err)
	}
	return err
}

var _ adapter.Scheduler = (*Scheduler)(nil)
