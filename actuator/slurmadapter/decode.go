package slurmadapter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/heliostat-dev/heliostat/actuator/adapter"
	"github.com/heliostat-dev/heliostat/internal/slurmfmt"
)

// Decode errors, each counted in heliostat_actuator_slurm_decode_errors_total
// under its kind. Check them with errors.Is.
var (
	// ErrSyntax: the command's output is not JSON.
	ErrSyntax = errors.New("slurmadapter: output is not JSON")
	// ErrShape: the JSON lacks the list it must hold or has a field of the
	// wrong type; or `scontrol show config` lacks a setting it must print.
	ErrShape = errors.New("slurmadapter: unexpected JSON shape")
	// ErrReported: Slurm reported errors in the document's "errors" list.
	ErrReported = errors.New("slurmadapter: slurm reported errors")
	// ErrRecord: one job or node record is unusable (no id, bad host list,
	// bad GRES); the record is named and the document rejected, because a
	// node the actuator cannot read might be busy. A pending job's GPU
	// request, bound nodes or array tasks that cannot be read do not
	// reject the document: the job is returned with Unreadable saying what
	// (see adapter.Job.Unreadable), and counted under this kind too. Also
	// a power-saving setting of `scontrol show config` that cannot be read
	// (a node the actuator cannot tell is excluded might be), and a line of
	// scontrol's answer to a priority update that is not Slurm's answer for
	// a job or its tasks; SetPriority then reads the answer as a whole.
	ErrRecord = errors.New("slurmadapter: bad record")
)

// errKind names a decode error for the metric's kind label.
func errKind(err error) string {
	switch {
	case errors.Is(err, ErrSyntax):
		return "syntax"
	case errors.Is(err, ErrShape):
		return "shape"
	case errors.Is(err, ErrReported):
		return "reported"
	case errors.Is(err, ErrRecord):
		return "record"
	}
	return "other"
}

type squeueDoc struct {
	Errors []json.RawMessage `json:"errors"`
	Jobs   *[]squeueJob      `json:"jobs"`
}

// squeueJob is a squeue job record with the fields only the actuator reads.
type squeueJob struct {
	slurmfmt.Job
	// Features is the job's --constraint ("a100&ib"); Slurm writes a
	// string.
	Features words `json:"features"`
}

// decodeSqueue reads `squeue --json` and returns its pending jobs in order of
// submission (then id), and in holding the jobs that hold nodes (see
// holdsNodes) by node name, each node's job ids in squeue's order. Jobs in
// other states are left out; a pending array
// of tasks not yet split is one job named by the array's id, which
// `scontrol update jobid=` applies to every pending task, standing for the
// tasks of its array_task_string that may start (ArrayTasks). A job that
// cannot start yet (ineligibleReason, or an eligible_time after now) is
// marked Ineligible. leaders holds the ids of the pending heterogeneous
// jobs' leaders (see hetTarget); nil when there are none.
func decodeSqueue(b []byte, now time.Time) (jobs []adapter.Job, leaders map[string]bool, holding map[string][]string, err error) {
	var doc squeueDoc
	if err := unmarshal(b, &doc); err != nil {
		return nil, nil, nil, fmt.Errorf("squeue --json: %w", err)
	}
	if len(doc.Errors) > 0 {
		return nil, nil, nil, fmt.Errorf("squeue --json: %w: %s", ErrReported, clip(doc.Errors))
	}
	if doc.Jobs == nil {
		return nil, nil, nil, fmt.Errorf("squeue --json: %w: no \"jobs\" list", ErrShape)
	}
	running := runningTasks(*doc.Jobs)
	var out []adapter.Job
	for i, sj := range *doc.Jobs {
		j := sj.Job
		if holdsNodes(j.JobState) {
			if !j.JobID.Set || j.JobID.V <= 0 {
				return nil, nil, nil, fmt.Errorf("squeue --json: %w: job %d has no job_id", ErrRecord, i)
			}
			id := jobID(j)
			names, err := slurmfmt.ExpandHostlist(j.Nodes)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("squeue --json: %w: job %s: nodes: %v", ErrRecord, id, err)
			}
			for _, n := range names {
				if holding == nil {
					holding = map[string][]string{}
				}
				if !slices.Contains(holding[n], id) {
					holding[n] = append(holding[n], id)
				}
			}
		}
		if len(j.JobState) == 0 || j.JobState[0] != "PENDING" {
			continue
		}
		if !j.JobID.Set || j.JobID.V <= 0 {
			return nil, nil, nil, fmt.Errorf("squeue --json: %w: job %d has no job_id", ErrRecord, i)
		}
		id := jobID(j)
		// A pending job's request or binding that cannot be read leaves
		// the job Unreadable rather than the document: the other jobs
		// are still ranked, and the Guard powers no node down that the
		// job might need.
		var unreadable []string
		gpus, gpuType, err := jobGPUs(j)
		if err != nil {
			gpus, gpuType = 0, ""
			unreadable = append(unreadable, "GPU request: "+err.Error())
		}
		var bound []string
		for _, field := range []string{j.Nodes, j.RequiredNodes} {
			names, err := slurmfmt.ExpandHostlist(field)
			if err != nil {
				bound = nil
				unreadable = append(unreadable, "nodes: "+err.Error())
				break
			}
			bound = append(bound, names...)
		}
		job := adapter.Job{ID: id, Name: j.Name, User: j.UserName, Partition: j.Partition, GPUs: gpus,
			NodeCount: clampInt(j.NodeCount.V), Priority: j.Priority.V, Nodes: bound,
			Held:       j.Priority.Set && j.Priority.V == 0 || strings.HasPrefix(j.StateReason, "JobHeld"),
			Ineligible: ineligibleReason(j.StateReason) || partitionReason(j.StateReason) && len(adapter.SplitPartitions(j.Partition)) == 1,
			Reason:     j.StateReason, GPUType: gpuType, Constraint: strings.Join(sj.Features, ",")}
		if !now.IsZero() && j.EligibleTime.Set && j.EligibleTime.V > now.Unix() {
			job.Ineligible = true
			job.Reason = orReason(job.Reason, "BeginTime") // --begin, before Slurm set the reason
		}
		if !j.ArrayTaskID.Set && j.ArrayJobID.Set && j.ArrayJobID.V > 0 && j.ArrayTaskString != "" {
			n, throttle, err := arrayTasks(j.ArrayTaskString)
			if err != nil {
				n, throttle = 1, 0
				unreadable = append(unreadable, err.Error())
			}
			if throttle > 0 {
				// Only throttle − running tasks may start; none while
				// the throttle is spent (Slurm's JobArrayTaskLimit).
				n = min(n, max(throttle-running[j.ArrayJobID.V], 0))
			}
			if n == 0 {
				job.Ineligible = true
				job.Reason = orReason(job.Reason, "JobArrayTaskLimit")
			}
			job.ArrayTasks = max(n, 1)
		}
		if j.HetJobID.V > 0 && j.HetJobID.V == j.JobID.V && j.HetJobOffset.V == 0 {
			if leaders == nil {
				leaders = map[string]bool{}
			}
			leaders[id] = true
		}
		job.Unreadable = clipString(strings.Join(unreadable, "; "), 300)
		if j.SubmitTime.Set && j.SubmitTime.V > 0 {
			job.Submit = time.Unix(j.SubmitTime.V, 0).UTC()
		}
		if j.TimeLimit.Set && j.TimeLimit.V > 0 && j.TimeLimit.V < math.MaxInt64/int64(time.Minute) {
			job.TimeLimit = time.Duration(j.TimeLimit.V) * time.Minute
		}
		out = append(out, job)
	}
	sortJobs(out)
	return out, leaders, holding, nil
}

// jobID returns the id the adapter names j by: J, or A_T for a task of a
// job array that squeue lists on its own.
func jobID(j slurmfmt.Job) string {
	if j.ArrayTaskID.Set && j.ArrayJobID.Set && j.ArrayJobID.V > 0 {
		return strconv.FormatInt(j.ArrayJobID.V, 10) + "_" + strconv.FormatInt(j.ArrayTaskID.V, 10)
	}
	return strconv.FormatInt(j.JobID.V, 10)
}

// holdsNodes reports whether a job in state st holds the nodes squeue lists
// for it: it runs, is suspended (scontrol suspend, PreemptMode=SUSPEND: its
// CPUs read as free, but the node is the job's until it resumes or ends), is
// completing, is being configured (its nodes booting) or is stopped. Slurm
// 22.05 writes one word (a flag, such as COMPLETING, in place of the base
// state); later versions a list of the base state and flags.
func holdsNodes(st slurmfmt.States) bool {
	for _, w := range st {
		switch w {
		case "RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING", "STOPPED":
			return true
		}
	}
	return false
}

// ineligibleReason reports whether a pending job's state_reason says it
// cannot start however many nodes are up: it waits for a dependency or a
// begin time, a QOS, association or array throttle limit holds it
// (QOSMax…, QOSGrp…, AssocMax…, AssocGrp… and the older generic names), or
// no node can meet its constraints (BadConstraints; Slurm 22.05 also sets
// such a job's priority to 0, which reads as held). Reasons that more or
// other nodes could resolve (Resources, Priority, ReqNodeNotAvail, …) are
// not among them: a job waiting for powered-down nodes says Resources, with
// "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher
// priority partitions" as its description. See also partitionReason and
// markUnreachable.
func ineligibleReason(r string) bool {
	switch r {
	case "Dependency", "DependencyNeverSatisfied", "BeginTime", "JobArrayTaskLimit", "BadConstraints",
		"QOSJobLimit", "QOSResourceLimit", "QOSTimeLimit", "AssociationJobLimit", "AssociationResourceLimit", "AssociationTimeLimit":
		return true
	}
	for _, p := range []string{"QOSMax", "QOSGrp", "AssocMax", "AssocGrp"} {
		if strings.HasPrefix(r, p) {
			return true
		}
	}
	return false
}

// partitionReason reports whether a pending job's state_reason says its
// partition keeps it from starting whatever nodes are up: the partition is
// down or inactive, or the job asks for more nodes (PartitionNodeLimit) or a
// longer time (PartitionTimeLimit) than the partition allows (Slurm 22.05
// queues such a job unless EnforcePartLimits refuses it). It is read only
// for a job submitted to one partition: for one submitted to several, the
// reason is of one of them, and another may start it.
func partitionReason(r string) bool {
	switch r {
	case "PartitionDown", "PartitionInactive", "PartitionNodeLimit", "PartitionTimeLimit":
		return true
	}
	return false
}

// orReason returns r, or alt when Slurm gave no reason ("" or "None").
func orReason(r, alt string) string {
	if r == "" || r == "None" {
		return alt
	}
	return r
}

// markUnreachable marks Ineligible the pending jobs that wait for a node
// they are bound for (ReqNodeNotAvail) that is unusable — down, drained,
// failed — for a reason other than power saving: no node a plan may power
// starts them. A job waiting for a bound node that is busy or powered down
// (which Slurm 22.05 reports as ReqNodeNotAvail too) still counts: it
// starts when the node is free, or woken.
func markUnreachable(jobs []adapter.Job, nodes []adapter.Node) {
	unusable := map[string]bool{}
	for _, n := range nodes {
		if n.Unusable {
			unusable[n.Name] = true
		}
	}
	for i := range jobs {
		j := &jobs[i]
		if j.Reason == "ReqNodeNotAvail" && slices.ContainsFunc(j.Nodes, func(n string) bool { return unusable[n] }) {
			j.Ineligible = true
		}
	}
}

// runningTasks counts the tasks of each job array (by array_job_id) that
// squeue lists as running or suspended: they count against the array's
// throttle.
func runningTasks(jobs []squeueJob) map[int64]int {
	out := map[int64]int{}
	for _, j := range jobs {
		if len(j.JobState) == 0 || !j.ArrayTaskID.Set || !j.ArrayJobID.Set || j.ArrayJobID.V <= 0 {
			continue
		}
		switch j.JobState[0] {
		case "RUNNING", "SUSPENDED":
			out[j.ArrayJobID.V]++
		}
	}
	return out
}

// jobGPUs returns the GPUs a pending job asks for — per job, or per node ×
// nodes, per socket × sockets per node × nodes, or per task × tasks
// (slurmfmt.Job.GPURequest) — and their type ("" for any, and for a job
// that names several, which no one type stands for: it restricts by count
// only).
func jobGPUs(j slurmfmt.Job) (int, string, error) {
	g, _, _, err := j.GPURequest()
	if len(g.ByType) > 1 {
		g.Type = ""
	}
	return clampInt(g.Count), g.Type, err
}

// words is a JSON string or list of strings — Slurm writes some fields
// (features) as a comma-separated string in 22.05 and as a list in later
// versions — or, for a node's features from 23.11 on, an object of
// "total" and "active", whose "active" member is either. null is empty.
type words []string

// UnmarshalJSON implements json.Unmarshaler.
func (w *words) UnmarshalJSON(b []byte) error {
	var str string
	if err := json.Unmarshal(b, &str); err == nil {
		*w = nil
		for _, f := range strings.Split(str, ",") {
			if f = strings.TrimSpace(f); f != "" {
				*w = append(*w, f)
			}
		}
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err == nil {
		*w = list
		return nil
	}
	var obj struct {
		Active *words          `json:"active"`
		Total  json.RawMessage `json:"total"`
	}
	if err := json.Unmarshal(b, &obj); err == nil && bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")) && (obj.Active != nil || obj.Total != nil) {
		*w = nil
		if obj.Active != nil {
			*w = *obj.Active
		}
		return nil
	}
	return &json.UnmarshalTypeError{Value: fmt.Sprintf("value %.40s", b), Type: reflect.TypeFor[[]string]()}
}

// sinfoDoc is `sinfo -N --json`: Slurm 22.05 to 23.02 write one record per
// node under "nodes"; from 23.11 (OpenAPI v0.0.40) sinfo writes its own
// records under "sinfo", one per node and partition with -N.
type sinfoDoc struct {
	Errors []json.RawMessage `json:"errors"`
	Nodes  *[]sinfoNode      `json:"nodes"`
	Sinfo  *[]sinfoRecord    `json:"sinfo"`
}

// sinfoRecord is the part of a 23.11+ sinfo record the adapter reads. Without
// -N a record may stand for several nodes of the same state and shape; its
// allocation counts are then the group's, so every node of a group with
// anything allocated reads as busy.
type sinfoRecord struct {
	Node struct {
		State slurmfmt.States `json:"state"`
	} `json:"node"`
	Nodes struct {
		Nodes []string `json:"nodes"`
	} `json:"nodes"`
	Partition struct {
		Name string `json:"name"`
	} `json:"partition"`
	Gres struct {
		Total string `json:"total"`
		Used  string `json:"used"`
	} `json:"gres"`
	Features words `json:"features"`
	CPUs     struct {
		Allocated slurmfmt.Int `json:"allocated"`
	} `json:"cpus"`
	Memory struct {
		Allocated slurmfmt.Int `json:"allocated"`
	} `json:"memory"`
}

// nodes returns the record as one sinfoNode per node it names.
func (r sinfoRecord) nodes() ([]sinfoNode, error) {
	var names []string
	for _, n := range r.Nodes.Nodes {
		more, err := slurmfmt.ExpandHostlist(n)
		if err != nil {
			return nil, err
		}
		names = append(names, more...)
	}
	if len(names) == 0 {
		return nil, errors.New("no node names")
	}
	out := make([]sinfoNode, len(names))
	for i, name := range names {
		out[i] = sinfoNode{Name: name, State: r.Node.State, Gres: r.Gres.Total, GresUsed: r.Gres.Used, ActiveFeatures: r.Features,
			AllocCPUs: r.CPUs.Allocated, AllocMem: r.Memory.Allocated}
		if r.Partition.Name != "" {
			out[i].Partitions = []string{r.Partition.Name}
		}
	}
	return out, nil
}

type sinfoNode struct {
	Name       string          `json:"name"`
	State      slurmfmt.States `json:"state"`
	StateFlags []string        `json:"state_flags"`
	Partitions []string        `json:"partitions"`
	Gres       string          `json:"gres"`
	GresUsed   string          `json:"gres_used"`
	AllocCPUs  slurmfmt.Int    `json:"alloc_cpus"`
	AllocMem   slurmfmt.Int    `json:"alloc_memory"`
	// ActiveFeatures are the node's features now (with a node_features
	// plugin, a subset of those it can have).
	ActiveFeatures words `json:"active_features"`
}

// decodeSinfo reads `sinfo --json` and returns the nodes by name, each once.
func decodeSinfo(b []byte) ([]adapter.Node, error) {
	var doc sinfoDoc
	if err := unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("sinfo --json: %w", err)
	}
	if len(doc.Errors) > 0 {
		return nil, fmt.Errorf("sinfo --json: %w: %s", ErrReported, clip(doc.Errors))
	}
	var records []sinfoNode
	switch {
	case doc.Nodes != nil:
		records = *doc.Nodes
	case doc.Sinfo != nil:
		for i, r := range *doc.Sinfo {
			nodes, err := r.nodes()
			if err != nil {
				return nil, fmt.Errorf("sinfo --json: %w: record %d: %v", ErrRecord, i, err)
			}
			records = append(records, nodes...)
		}
	default:
		return nil, fmt.Errorf("sinfo --json: %w: neither a \"nodes\" nor a \"sinfo\" list", ErrShape)
	}
	seen := map[string]int{}
	var out []adapter.Node
	for i, sn := range records {
		if sn.Name == "" {
			return nil, fmt.Errorf("sinfo --json: %w: node %d has no name", ErrRecord, i)
		}
		n, err := node(sn)
		if err != nil {
			return nil, fmt.Errorf("sinfo --json: %w: node %s: %v", ErrRecord, sn.Name, err)
		}
		if k, dup := seen[n.Name]; dup {
			// One record per partition in some versions: merge.
			out[k].Partitions = appendNew(out[k].Partitions, n.Partitions...)
			continue
		}
		seen[n.Name] = len(out)
		out = append(out, n)
	}
	sortNodes(out)
	return out, nil
}

// node interprets one sinfo node record. Slurm 22.05 writes the base state
// in lower case ("idle", "mixed", "allocated", "down", …) and the flags in
// state_flags ("POWERED_DOWN", "POWERING_UP", "DRAIN", …); later versions
// put both in the state list.
func node(sn sinfoNode) (adapter.Node, error) {
	n := adapter.Node{Name: sn.Name, Partitions: appendNew(nil, sn.Partitions...)}
	var base string
	flags := map[string]bool{}
	for i, w := range sn.State {
		w = strings.ToUpper(strings.TrimSpace(w))
		if i == 0 {
			base = w
			continue
		}
		flags[w] = true
	}
	for _, f := range sn.StateFlags {
		flags[strings.ToUpper(strings.TrimSpace(f))] = true
	}
	if base == "" {
		return n, errors.New("no state")
	}
	total, _, err := slurmfmt.ParseTRES(sn.Gres)
	if err != nil {
		return n, err
	}
	usedG, _, err := slurmfmt.ParseTRES(sn.GresUsed)
	if err != nil {
		return n, err
	}
	used := clampInt(usedG.Count)
	n.GPUs = clampInt(total.Count)
	n.FreeGPUs = max(n.GPUs-used, 0)
	for typ, c := range total.ByType {
		if n.GPUTypes == nil {
			n.GPUTypes = map[string]int{}
		}
		n.GPUTypes[typ] = clampInt(c)
	}
	// Free by type where gres_used names each type the node has (Slurm
	// writes "gpu:v100:0(IDX:N/A)" for a type none of whose GPUs is in
	// use); an untyped or partial list says nothing per type.
	if len(n.GPUTypes) > 0 && n.GPUTypes[""] == 0 && len(usedG.ByType) > 0 {
		free := make(map[string]int, len(n.GPUTypes))
		for typ, c := range n.GPUTypes {
			u, named := usedG.ByType[typ]
			if !named {
				free = nil
				break
			}
			free[typ] = max(c-clampInt(u), 0)
		}
		n.FreeGPUTypes = free
	}
	n.Features = slices.Clone(sn.ActiveFeatures)
	switch base {
	case "ALLOCATED", "ALLOC", "MIXED", "MIX", "COMPLETING", "COMP":
		n.Busy = true
	case "IDLE":
	case "DOWN", "ERROR", "FUTURE", "UNKNOWN":
		n.Unusable = true
	default:
		n.Unusable = true // a state this adapter does not know: hands off
	}
	// PLANNED (Slurm 22.05 on): the backfill scheduler has reserved the idle
	// node for a pending job, which squeue does not show as bound to it.
	if flags["COMPLETING"] || flags["PLANNED"] || used > 0 || sn.AllocCPUs.V > 0 || sn.AllocMem.V > 0 {
		n.Busy = true
	}
	for _, f := range []string{"DRAIN", "DRAINED", "DRAINING", "FAIL", "FAILING", "MAINTENANCE", "REBOOT_REQUESTED", "REBOOT_ISSUED", "INVALID_REG", "NOT_RESPONDING", "RESERVED"} {
		if flags[f] && !(f == "NOT_RESPONDING" && flags["POWERING_UP"]) {
			n.Unusable = true
		}
	}
	switch {
	case flags["POWERED_DOWN"]:
		n.Power = adapter.PowerOff
		n.FreeGPUs, n.FreeGPUTypes = 0, nil
	case flags["POWERING_DOWN"], flags["POWER_DOWN"]:
		n.Power = adapter.PowerGoingDown
		n.FreeGPUs, n.FreeGPUTypes = 0, nil
	case flags["POWERING_UP"]:
		n.Power = adapter.PowerWaking
	default:
		n.Power = adapter.PowerOn
	}
	if n.Unusable {
		n.FreeGPUs, n.FreeGPUTypes = 0, nil
	}
	state := append([]string{strings.ToLower(base)}, sortedKeys(flags)...)
	n.State = strings.Join(state, "+")
	return n, nil
}

// unmarshal decodes b into v, naming the offset of a syntax error and the
// field of a type error.
func unmarshal(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return fmt.Errorf("%w at offset %d: %v", ErrSyntax, se.Offset, se)
		case errors.As(err, &te):
			return fmt.Errorf("%w: field %q: %v", ErrShape, te.Field, te)
		}
		return fmt.Errorf("%w: %v", ErrShape, err)
	}
	return nil
}

func clip(rs []json.RawMessage) string {
	var sb strings.Builder
	for i, r := range rs {
		if i > 0 {
			sb.WriteString("; ")
		}
		sb.Write(r)
		if sb.Len() > 300 {
			return sb.String()[:300] + "…"
		}
	}
	return sb.String()
}

func clampInt(v int64) int {
	return int(min(max(v, 0), math.MaxInt32))
}
