package slurmadapter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/heliostat-dev/heliostat/actuator/adapter"
)

// Decode errors, each counted in heliostat_actuator_slurm_decode_errors_total
// under its kind. Check them with errors.Is.
var (
	// ErrSyntax: the command's output is not JSON.
	ErrSyntax = errors.New("slurmadapter: output is not JSON")
	// ErrShape: the JSON lacks the list it must hold or has a field of the
	// wrong type.
	ErrShape = errors.New("slurmadapter: unexpected JSON shape")
	// ErrReported: Slurm reported errors in the document's "errors" list.
	ErrReported = errors.New("slurmadapter: slurm reported errors")
	// ErrRecord: one job or node record is unusable (no id, bad host list,
	// bad GRES); the record is named and the document rejected, because a
	// node the actuator cannot read might be busy.
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

// num is an integer that Slurm (OpenAPI v0.0.38, 22.05) writes as a number or
// null, and later versions as {"set":…,"infinite":…,"number":…}. Unset,
// infinite, and NO_VAL-like values beyond int64 all read as unset.
type num struct {
	V   int64
	Set bool
}

func (n *num) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	*n = num{}
	switch {
	case bytes.Equal(b, []byte("null")):
		return nil
	case len(b) > 0 && b[0] == '{':
		var v struct {
			Set      *bool `json:"set"`
			Infinite bool  `json:"infinite"`
			Number   *num  `json:"number"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		if v.Number == nil {
			return typeErr("object without \"number\"", reflect.TypeFor[int64]())
		}
		if (v.Set == nil || *v.Set) && !v.Infinite {
			*n = *v.Number
		}
		return nil
	}
	if i, err := strconv.ParseInt(string(b), 10, 64); err == nil {
		*n = num{V: i, Set: true}
		return nil
	}
	if u, err := strconv.ParseUint(string(b), 10, 64); err == nil && u > math.MaxInt64 {
		return nil // NO_VAL64, INFINITE64
	}
	if f, err := strconv.ParseFloat(string(b), 64); err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		*n = num{V: int64(f), Set: true}
		return nil
	}
	return typeErr(fmt.Sprintf("value %.40s", b), reflect.TypeFor[int64]())
}

// typeErr is a type error that encoding/json completes with the field's
// name.
func typeErr(value string, t reflect.Type) error {
	return &json.UnmarshalTypeError{Value: value, Type: t}
}

// words is a state that Slurm writes as a string (22.05) or a list of
// strings (later versions).
type words []string

func (w *words) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*w = words{s}
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return typeErr(fmt.Sprintf("value %.40s", b), reflect.TypeFor[[]string]())
	}
	*w = list
	return nil
}

type squeueDoc struct {
	Errors []json.RawMessage `json:"errors"`
	Jobs   *[]squeueJob      `json:"jobs"`
}

type squeueJob struct {
	JobID          num    `json:"job_id"`
	Name           string `json:"name"`
	UserName       string `json:"user_name"`
	Partition      string `json:"partition"`
	JobState       words  `json:"job_state"`
	Priority       num    `json:"priority"`
	SubmitTime     num    `json:"submit_time"`
	TimeLimit      num    `json:"time_limit"` // minutes; null: unlimited
	NodeCount      num    `json:"node_count"`
	Nodes          string `json:"nodes"`
	RequiredNodes  string `json:"required_nodes"`
	TRESPerNode    string `json:"tres_per_node"`
	TRESPerJob     string `json:"tres_per_job"`
	TRESPerTask    string `json:"tres_per_task"`
	Tasks          num    `json:"tasks"`
	ArrayJobID     num    `json:"array_job_id"`
	ArrayTaskID    num    `json:"array_task_id"`
	ArrayTaskRange string `json:"array_task_string"`
	StateReason    string `json:"state_reason"`
}

// decodeSqueue reads `squeue --json` and returns its pending jobs in order of
// submission (then id). Jobs in other states are left out; a pending array
// of tasks not yet split is one job named by the array's id, which
// `scontrol update jobid=` applies to every pending task.
func decodeSqueue(b []byte) ([]adapter.Job, error) {
	var doc squeueDoc
	if err := unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("squeue --json: %w", err)
	}
	if len(doc.Errors) > 0 {
		return nil, fmt.Errorf("squeue --json: %w: %s", ErrReported, clip(doc.Errors))
	}
	if doc.Jobs == nil {
		return nil, fmt.Errorf("squeue --json: %w: no \"jobs\" list", ErrShape)
	}
	var out []adapter.Job
	for i, j := range *doc.Jobs {
		if len(j.JobState) == 0 || j.JobState[0] != "PENDING" {
			continue
		}
		if !j.JobID.Set || j.JobID.V <= 0 {
			return nil, fmt.Errorf("squeue --json: %w: job %d has no job_id", ErrRecord, i)
		}
		id := strconv.FormatInt(j.JobID.V, 10)
		if j.ArrayTaskID.Set && j.ArrayJobID.Set && j.ArrayJobID.V > 0 {
			id = strconv.FormatInt(j.ArrayJobID.V, 10) + "_" + strconv.FormatInt(j.ArrayTaskID.V, 10)
		}
		gpus, err := jobGPUs(j)
		if err != nil {
			return nil, fmt.Errorf("squeue --json: %w: job %s: %v", ErrRecord, id, err)
		}
		var bound []string
		for _, field := range []string{j.Nodes, j.RequiredNodes} {
			names, err := expandHostlist(field)
			if err != nil {
				return nil, fmt.Errorf("squeue --json: %w: job %s: nodes: %v", ErrRecord, id, err)
			}
			bound = append(bound, names...)
		}
		job := adapter.Job{ID: id, Name: j.Name, User: j.UserName, Partition: j.Partition, GPUs: gpus,
			Priority: j.Priority.V, Nodes: bound,
			Held: j.Priority.Set && j.Priority.V == 0 || strings.HasPrefix(j.StateReason, "JobHeld")}
		if j.SubmitTime.Set && j.SubmitTime.V > 0 {
			job.Submit = time.Unix(j.SubmitTime.V, 0).UTC()
		}
		if j.TimeLimit.Set && j.TimeLimit.V > 0 && j.TimeLimit.V < math.MaxInt64/int64(time.Minute) {
			job.TimeLimit = time.Duration(j.TimeLimit.V) * time.Minute
		}
		out = append(out, job)
	}
	sortJobs(out)
	return out, nil
}

// jobGPUs returns the GPUs a pending job asks for: per job, or per node ×
// nodes, or per task × tasks.
func jobGPUs(j squeueJob) (int, error) {
	if n, ok, err := gpuCount(j.TRESPerJob); err != nil || ok {
		return n, err
	}
	nodes := max(j.NodeCount.V, 1)
	if n, ok, err := gpuCount(j.TRESPerNode); err != nil || ok {
		return clampInt(int64(n) * nodes), err
	}
	if n, ok, err := gpuCount(j.TRESPerTask); err != nil || ok {
		return clampInt(int64(n) * max(j.Tasks.V, 1)), err
	}
	return 0, nil
}

// gpuCount reads the GPUs of a TRES or GRES list: "gres:gpu:8",
// "gres/gpu:a100:2", "gpu:8", "gpu:h100:2(IDX:0-1)", "gres:gpu:2,gres:mps:100".
// ok is false when the list names no GPU. A bare "gpu" counts 1.
func gpuCount(s string) (n int, ok bool, err error) {
	if s == "" || s == "(null)" || s == "N/A" {
		return 0, false, nil
	}
	for _, item := range splitTop(s) {
		item, _, _ = strings.Cut(item, "(")
		item = strings.TrimPrefix(strings.TrimPrefix(item, "gres:"), "gres/")
		parts := strings.Split(item, ":")
		if parts[0] != "gpu" {
			continue
		}
		ok = true
		if len(parts) == 1 {
			n++
			continue
		}
		last := parts[len(parts)-1]
		c, err := strconv.ParseInt(last, 10, 32)
		if err != nil {
			if len(parts) == 2 { // gpu:TYPE means one GPU of that type
				n++
				continue
			}
			return 0, false, fmt.Errorf("gres %q: count %q is not a number", s, last)
		}
		if c < 0 {
			return 0, false, fmt.Errorf("gres %q: negative count", s)
		}
		n = clampInt(int64(n) + c)
	}
	return n, ok, nil
}

// splitTop splits s at commas outside parentheses.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			if depth > 0 {
				depth--
			}
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

type sinfoDoc struct {
	Errors []json.RawMessage `json:"errors"`
	Nodes  *[]sinfoNode      `json:"nodes"`
}

type sinfoNode struct {
	Name       string   `json:"name"`
	State      words    `json:"state"`
	StateFlags []string `json:"state_flags"`
	Partitions []string `json:"partitions"`
	Gres       string   `json:"gres"`
	GresUsed   string   `json:"gres_used"`
	AllocCPUs  num      `json:"alloc_cpus"`
	AllocMem   num      `json:"alloc_memory"`
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
	if doc.Nodes == nil {
		return nil, fmt.Errorf("sinfo --json: %w: no \"nodes\" list", ErrShape)
	}
	seen := map[string]int{}
	var out []adapter.Node
	for i, sn := range *doc.Nodes {
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
	total, _, err := gpuCount(sn.Gres)
	if err != nil {
		return n, err
	}
	used, _, err := gpuCount(sn.GresUsed)
	if err != nil {
		return n, err
	}
	n.GPUs, n.FreeGPUs = total, max(total-used, 0)
	switch base {
	case "ALLOCATED", "ALLOC", "MIXED", "MIX", "COMPLETING", "COMP":
		n.Busy = true
	case "IDLE":
	case "DOWN", "ERROR", "FUTURE", "UNKNOWN":
		n.Unusable = true
	default:
		n.Unusable = true // a state this adapter does not know: hands off
	}
	if flags["COMPLETING"] || used > 0 || sn.AllocCPUs.V > 0 || sn.AllocMem.V > 0 {
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
		n.FreeGPUs = 0
	case flags["POWERING_DOWN"], flags["POWER_DOWN"]:
		n.Power = adapter.PowerGoingDown
		n.FreeGPUs = 0
	case flags["POWERING_UP"]:
		n.Power = adapter.PowerWaking
	default:
		n.Power = adapter.PowerOn
	}
	if n.Unusable {
		n.FreeGPUs = 0
	}
	state := []string{strings.ToLower(base)}
	for _, f := range sortedKeys(flags) {
		state = append(state, f)
	}
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
