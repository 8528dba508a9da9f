package slurmfmt

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
