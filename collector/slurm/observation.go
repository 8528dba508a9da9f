package slurm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/heliostat-dev/heliostat/internal/slurmfmt"
	"github.com/heliostat-dev/heliostat/schemas"
)

// observation is what one source of truth (a squeue record, a jobcomp line)
// says about one job now.
type observation struct {
	ev      schemas.JobEvent // the record; Type and EventMillis unset
	kind    stateKind
	started bool               // the job has held nodes (StartMillis and Nodes are set)
	gpuIdx  map[string][]int64 // node → GPU indices it holds; nil when Slurm did not say
	slurmID string             // Slurm's own numeric job id, for scontrol; "" from jobcomp
	batch   bool               // a batch job whose script scontrol can print
	// exactSubmit: the submit time is slurmctld's own (squeue, sacct), so
	// another one under the same id is another run of the job (requeued)
	// or another job. The completion log's is text in a time zone, so it
	// is not compared that way.
	exactSubmit bool
	// restarts is squeue's restart_cnt, how many times Slurm requeued the
	// job; schemas.Unknown from the completion log and the accounting,
	// which do not give it.
	restarts int64
	// unreadable are the fields of the record that could not be read and
	// are published as unknown (see observeResources).
	unreadable []unreadableField
}

// taskGap names the tasks of a pending array that one squeue record left
// unknown: those of array arrayJobID with a task id above above (-1: all of
// them) that have not started (a started task has a record of its own).
type taskGap struct {
	arrayJobID string
	above      int64
}

// slurmMillis turns a Slurm time in Unix seconds into milliseconds, refusing
// one after the last second the job tables' DateTime columns hold (checked
// before multiplying, so a huge value cannot wrap into range). Slurm writes
// 0 or less for a time it does not know; callers handle that first.
func slurmMillis(id, field string, sec int64) (int64, error) {
	if sec > schemas.MaxTimeMillis/1000 {
		return 0, fmt.Errorf("job %s: %s %d is after 2106-02-07T06:28:15Z, the last time ClickHouse's DateTime holds", id, field, sec)
	}
	return sec * 1000, nil
}

// observeSqueue turns one squeue record into observations: one, or one per
// pending task of a pending array. gap is not nil for a pending array whose
// task list Slurm cut short: observations are only for the tasks listed in
// full, and gap names the others.
func observeSqueue(j *squeueJob) (obs []*observation, gap *taskGap, err error) {
	obs, gap, err = observeSqueueJob(j)
	if err != nil {
		return nil, nil, err
	}
	restarts := int64(schemas.Unknown)
	if j.RestartCnt.Set && j.RestartCnt.V >= 0 {
		restarts = j.RestartCnt.V
	}
	for _, o := range obs {
		o.restarts = restarts
	}
	return obs, gap, nil
}

// squeueRecordIDs returns whose job a squeue record is, for a record that
// cannot be read in full: its job id ("J", or "A_T" for an array task), or
// for a pending array the array's job id (its tasks have no record of their
// own). Both are "" when the record does not say.
func squeueRecordIDs(j *squeueJob) (jobID, arrayJobID string) {
	switch {
	case j.ArrayJobID.V > 0 && j.ArrayTaskID.Set:
		return strconv.FormatInt(j.ArrayJobID.V, 10) + "_" + strconv.FormatInt(j.ArrayTaskID.V, 10), ""
	case j.ArrayJobID.V > 0:
		return "", strconv.FormatInt(j.ArrayJobID.V, 10)
	case j.JobID.Set && j.JobID.V > 0:
		return strconv.FormatInt(j.JobID.V, 10), ""
	}
	return "", ""
}

// observeSqueueJob is observeSqueue but for the restart count.
func observeSqueueJob(sj *squeueJob) ([]*observation, *taskGap, error) {
	j := &sj.Job
	if !j.JobID.Set || j.JobID.V <= 0 {
		return nil, nil, fmt.Errorf("job_id %d is not a job id", j.JobID.V)
	}
	id := strconv.FormatInt(j.JobID.V, 10)
	state, kind, err := normalizeState(j.JobState.Base())
	if err != nil {
		return nil, nil, fmt.Errorf("job %s: job_state: %w", id, err)
	}
	if j.SubmitTime.V <= 0 {
		return nil, nil, fmt.Errorf("job %s: submit_time %d is not a time", id, j.SubmitTime.V)
	}
	submit, err := slurmMillis(id, "submit_time", j.SubmitTime.V)
	if err != nil {
		return nil, nil, err
	}
	ev := schemas.JobEvent{
		JobID:       id,
		ArrayTaskID: schemas.Unknown,
		Name:        j.Name,
		User:        j.UserName,
		UID:         j.UserID.Or(schemas.Unknown),
		Group:       j.GroupName,
		Account:     j.Account,
		Partition:   j.Partition,
		QOS:         j.QOS,
		State:       state,
		ExitCode:    schemas.Unknown,
		Priority:    j.Priority.Or(schemas.Unknown),

		SubmitMillis: submit,
		TimeLimitS:   schemas.Unknown,
		NodeCount:    j.NodeCount.Or(schemas.Unknown),
		CPUs:         j.CPUs.Or(schemas.Unknown),
		MemReqBytes:  schemas.Unknown,
		WorkDir:      j.WorkDir,
	}
	if j.EligibleTime.V > 0 {
		if ev.EligibleMillis, err = slurmMillis(id, "eligible_time", j.EligibleTime.V); err != nil {
			return nil, nil, err
		}
	}
	if j.TimeLimit.Set && j.TimeLimit.V >= 0 {
		ev.TimeLimitS = j.TimeLimit.V * 60
	}
	if j.Command != "" {
		sum := sha256.Sum256([]byte(j.Command))
		ev.CommandHash = hex.EncodeToString(sum[:])
	}
	o := &observation{kind: kind, slurmID: id, batch: j.BatchFlag && j.Command == "", exactSubmit: true}

	// A job holds nodes once it runs; Slurm also gives a job cancelled while
	// pending a start time (the cancel time) but no nodes.
	if kind != kindPending && j.Nodes != "" && j.StartTime.V > 0 {
		o.started = true
		if ev.StartMillis, err = slurmMillis(id, "start_time", j.StartTime.V); err != nil {
			return nil, nil, err
		}
		if ev.Nodes, err = slurmfmt.ExpandHostlist(j.Nodes); err != nil {
			return nil, nil, fmt.Errorf("job %s: nodes: %w", id, err)
		}
	}
	if kind == kindFinal {
		// While a job runs, end_time is its projected end; only now is it real.
		if ev.EndMillis, err = slurmMillis(id, "end_time", j.EndTime.V); err != nil {
			return nil, nil, err
		}
		if ev.EndMillis < ev.StartMillis {
			return nil, nil, fmt.Errorf("job %s: end_time %d before start_time %d", id, j.EndTime.V, j.StartTime.V)
		}
		ev.ExitCode = j.ExitCode.Or(schemas.Unknown)
	}
	observeResources(j, &ev, o)

	if j.ArrayJobID.V <= 0 {
		o.ev = ev
		return []*observation{o}, nil, nil
	}
	ev.ArrayJobID = strconv.FormatInt(j.ArrayJobID.V, 10)
	if j.ArrayTaskID.Set {
		ev.ArrayTaskID = j.ArrayTaskID.V
		ev.JobID = ev.ArrayJobID + "_" + strconv.FormatInt(j.ArrayTaskID.V, 10)
		o.ev = ev
		return []*observation{o}, nil, nil
	}
	// A pending array: one record for the tasks that have not started.
	if kind != kindPending && kind != kindFinal {
		return nil, nil, fmt.Errorf("job %s: array_task_id is null in state %s", id, j.JobState.Base())
	}
	tasks, complete, err := expandArrayTasks(j.ArrayTaskString)
	if err != nil {
		return nil, nil, fmt.Errorf("job %s: array_task_string: %w", id, err)
	}
	var gap *taskGap
	if !complete {
		gap = &taskGap{arrayJobID: ev.ArrayJobID, above: -1}
		if len(tasks) > 0 {
			gap.above = slices.Max(tasks)
		}
	}
	return perTask(o, ev, tasks), gap, nil
}

// perTask returns one copy of o per array task, each with ev as that task's
// record (job id ARRAY_TASK).
func perTask(o *observation, ev schemas.JobEvent, tasks []int64) []*observation {
	out := make([]*observation, 0, len(tasks))
	for _, t := range tasks {
		to := *o
		to.ev = ev
		to.ev.ArrayTaskID = t
		to.ev.JobID = ev.ArrayJobID + "_" + strconv.FormatInt(t, 10)
		out = append(out, &to)
	}
	return out
}

// observeResources fills GPUs, GPU type, memory and, for a running job, the
// GPU indices per node. A field in a form not known does not lose the job's
// events: it is published as unknown (the GPUs as Slurm allocated or
// reserved them where it says, else NULL; the memory NULL; no GPU indices),
// and named in o.unreadable for the source to count and log.
func observeResources(j *slurmfmt.Job, ev *schemas.JobEvent, o *observation) {
	// GPUs asked for: per job, per node, per socket or per task, whichever
	// is given. The request is the same whether the job waits or runs, so
	// an event re-emitted later carries the same count.
	ev.GPUs = 0
	g, _, ok, err := j.GPURequest()
	switch {
	case err != nil:
		o.unread(fieldGPUs, "GPU request: "+err.Error())
		ev.GPUs = schemas.Unknown
	case ok:
		ev.GPUs, ev.GPUType = g.Count, g.Type
	}
	if ev.GPUs == 0 || ev.GPUs == schemas.Unknown {
		for _, s := range []string{j.TRESAllocStr, j.TRESReqStr} {
			if v, ok := tresValue(s, "gres/gpu"); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil || n < 0 {
					o.unread(fieldGPUs, fmt.Sprintf("tres gres/gpu=%q is not a count", v))
					ev.GPUs = schemas.Unknown
					break
				}
				ev.GPUs = n
				break
			}
		}
	}
	if m, ok := tresValue(j.TRESReqStr, "mem"); ok {
		n, err := parseMem(m)
		if err != nil {
			o.unread(fieldMem, "tres_req_str: "+err.Error())
			n = schemas.Unknown
		}
		ev.MemReqBytes = n
	} else if j.MemoryPerNode.Set && j.NodeCount.Set {
		ev.MemReqBytes = j.MemoryPerNode.V * j.NodeCount.V << 20
	} else if j.MemoryPerCPU.Set && j.CPUs.Set {
		ev.MemReqBytes = j.MemoryPerCPU.V * j.CPUs.V << 20
	}

	// gres_detail has one entry per allocated node, in node order, while the
	// job runs; Slurm empties it once the job ends.
	if o.kind != kindRunning || len(j.GresDetail) == 0 {
		return
	}
	if len(j.GresDetail) != len(ev.Nodes) {
		o.unread(fieldGPUIndices, fmt.Sprintf("gres_detail has %d entries for %d nodes", len(j.GresDetail), len(ev.Nodes)))
		return
	}
	idx := make(map[string][]int64, len(ev.Nodes))
	var (
		total int64
		types []string // per node: an untyped request may get a different type on each
	)
	for i, d := range j.GresDetail {
		g, ok, err := slurmfmt.ParseGresDetail(d)
		if err != nil {
			o.unread(fieldGPUIndices, "gres_detail: "+err.Error())
			return
		}
		if !ok {
			continue
		}
		if g.Indices == nil {
			return // counts without indices: nothing to attribute
		}
		idx[ev.Nodes[i]] = g.Indices
		total += g.Count
		types = append(types, strings.Split(g.Type, ",")...)
	}
	if ev.GPUType == "" {
		ev.GPUType = slurmfmt.JoinTypes(types)
	}
	if ev.GPUs == 0 || ev.GPUs == schemas.Unknown && total > 0 {
		ev.GPUs = total
	}
	if len(idx) > 0 {
		o.gpuIdx = idx
	}
}

// Fields a record may be published without (observation.unreadable), as
// heliostat_slurm_fields_unreadable_total names them.
const (
	fieldGPUs       = "gpus"
	fieldMem        = "mem"
	fieldGPUIndices = "gpu_indices"
)

// unreadableField is a field of a record that could not be read, and why.
type unreadableField struct{ field, problem string }

// unread notes that field could not be read.
func (o *observation) unread(field, problem string) {
	o.unreadable = append(o.unreadable, unreadableField{field, problem})
}
