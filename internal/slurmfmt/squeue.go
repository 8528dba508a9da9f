package slurmfmt

import "fmt"

// Job is one job record of `squeue --json`: the fields the collector and the
// actuator read. Times are Unix seconds, 0 when unset; time_limit is in
// minutes and unset when unlimited. A job that has not started may name the
// nodes it must run on in required_nodes. A pending array is one record whose
// array_task_string lists the tasks still pending ("0-2", "1,3-5%2"); each
// task that starts gets its own record with its own job_id. Each component
// of a heterogeneous job is a record with its own job_id; het_job_id is the
// first component's job_id (the leader's) and het_job_offset the
// component's place, 0 for the leader; both are 0 for other jobs.
type Job struct {
	JobID           Int      `json:"job_id"`
	ArrayJobID      Int      `json:"array_job_id"`
	ArrayTaskID     Int      `json:"array_task_id"`
	ArrayTaskString string   `json:"array_task_string"`
	HetJobID        Int      `json:"het_job_id"`
	HetJobOffset    Int      `json:"het_job_offset"`
	Name            string   `json:"name"`
	UserName        string   `json:"user_name"`
	UserID          Int      `json:"user_id"`
	GroupName       string   `json:"group_name"`
	Account         string   `json:"account"`
	Partition       string   `json:"partition"`
	QOS             string   `json:"qos"`
	JobState        States   `json:"job_state"`
	ExitCode        ExitCode `json:"exit_code"`
	Priority        Int      `json:"priority"`
	SubmitTime      Int      `json:"submit_time"`
	EligibleTime    Int      `json:"eligible_time"`
	StartTime       Int      `json:"start_time"`
	EndTime         Int      `json:"end_time"`
	TimeLimit       Int      `json:"time_limit"`
	NodeCount       Int      `json:"node_count"`
	Nodes           string   `json:"nodes"`
	CPUs            Int      `json:"cpus"`
	Tasks           Int      `json:"tasks"`
	GresDetail      []string `json:"gres_detail"`
	TRESPerJob      string   `json:"tres_per_job"`
	TRESPerNode     string   `json:"tres_per_node"`
	TRESPerTask     string   `json:"tres_per_task"`
	TRESPerSocket   string   `json:"tres_per_socket"`
	SocketsPerNode  Int      `json:"sockets_per_node"`
	RequiredNodes   string   `json:"required_nodes"`
	StateReason     string   `json:"state_reason"`
	TRESReqStr      string   `json:"tres_req_str"`
	TRESAllocStr    string   `json:"tres_alloc_str"`
	MemoryPerNode   Int      `json:"memory_per_node"`
	MemoryPerCPU    Int      `json:"memory_per_cpu"`
	Command         string   `json:"command"`
	BatchFlag       bool     `json:"batch_flag"`
	WorkDir         string   `json:"current_working_directory"`
}

// GPURequest returns the GPUs the job asks for in all, from the first of
// tres_per_job, tres_per_node (× its nodes), tres_per_socket (--gpus-per-
// socket, × sockets per node × nodes) and tres_per_task (× its tasks) that
// names GPUs, with ByType multiplied alike; field names the one read. ok is
// false when none does. A node, socket or task count that is unset (or,
// for sockets, Slurm 22.05's NO_VAL16) counts as one.
func (j *Job) GPURequest() (g GPUs, field string, ok bool, err error) {
	// Each count is held just above the range a product may reach, so
	// that the products below cannot overflow and still fail the check.
	const most = 1 << 20
	nodes := min(max(j.NodeCount.Or(1), 1), most+1)
	tasks := min(max(j.Tasks.Or(1), 1), most+1)
	sockets := j.SocketsPerNode.Or(1)
	if sockets < 1 || sockets >= 0xfffe {
		sockets = 1
	}
	for _, r := range []struct {
		field string
		s     string
		mult  int64
	}{
		{"tres_per_job", j.TRESPerJob, 1},
		{"tres_per_node", j.TRESPerNode, nodes},
		{"tres_per_socket", j.TRESPerSocket, sockets * nodes},
		{"tres_per_task", j.TRESPerTask, tasks},
	} {
		g, ok, err := ParseTRES(r.s)
		if err != nil {
			return GPUs{}, r.field, false, fmt.Errorf("%s: %w", r.field, err)
		}
		if !ok {
			continue
		}
		if r.mult > most {
			return GPUs{}, r.field, false, fmt.Errorf("%s: %d GPUs times %d is out of range", r.field, g.Count, r.mult)
		}
		g.Count *= r.mult
		for typ := range g.ByType {
			g.ByType[typ] *= r.mult
		}
		return g, r.field, true, nil
	}
	return GPUs{}, "", false, nil
}
