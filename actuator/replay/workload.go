package replay

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/heliostat-dev/heliostat/ingest/trace"
	"github.com/heliostat-dev/heliostat/internal/bom"
)

// Job is one job of a replay. Times are whole seconds.
type Job struct {
	ID         string
	User       string
	Executable string // job name or executable; "" when unknown
	Queue      string // the trace's queue or VC, for the predictor
	VC         int    // index into Workload.VCs
	Submit     int64  // Unix seconds
	Run        int64  // run time, seconds, >= 0
	GPUs       int    // GPUs (or processors) held, >= 1
	ReqTime    int64  // requested time limit, seconds; <= 0 when unknown
	ReqProcs   int    // requested GPUs or processors, for the predictor; <= 0 when unknown
	ReqMem     int64  // requested memory, for the predictor; <= 0 when unknown
}

// VC is a virtual cluster: nodes of equal size that only its own jobs use.
type VC struct {
	Name        string `json:"name"`
	Nodes       int    `json:"nodes"`
	GPUsPerNode int    `json:"gpus_per_node"`
}

// Workload is what a replay runs: jobs in order of submission and the
// virtual clusters they run on.
type Workload struct {
	Jobs []Job
	VCs  []VC
	// Skipped counts the trace's jobs left out, by reason.
	Skipped map[string]int
	// UnknownVCs counts the jobs left out as SkipUnknownVC by the VC
	// their trace names ("" when it names none); empty without a VC file.
	UnknownVCs map[string]int
}

// Bounds of a cluster description.
const (
	maxNodes       = 1 << 20
	maxGPUsPerNode = 1 << 20
	maxVCs         = 10000
)

// ErrBadVCs is wrapped by the errors of ParseVCs.
var ErrBadVCs = errors.New("replay: bad virtual cluster file")

// ParseVCs reads a virtual cluster file: a CSV with the header
// vc,nodes,gpus_per_node (the last column optional: 8 when absent) and one
// row per VC, as shared/data/helios/venus_sept_2vc_vcs.csv; a UTF-8
// byte-order mark before the header is dropped. Errors name the line and the
// field.
func ParseVCs(r io.Reader) ([]VC, error) {
	cr := csv.NewReader(bom.Skip(r)) // a quoted first cell after the mark would be a bare quote
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: empty file, want the header vc,nodes,gpus_per_node", ErrBadVCs)
		}
		return nil, fmt.Errorf("%w: line 1: %v", ErrBadVCs, err)
	}
	col := map[string]int{}
	for i, h := range header {
		h = strings.ToLower(strings.TrimSpace(h))
		if _, dup := col[h]; dup {
			return nil, fmt.Errorf("%w: line 1: column %q twice", ErrBadVCs, h)
		}
		col[h] = i
	}
	for _, need := range []string{"vc", "nodes"} {
		if _, ok := col[need]; !ok {
			return nil, fmt.Errorf("%w: line 1: no column %q (want vc,nodes,gpus_per_node)", ErrBadVCs, need)
		}
	}
	gpnCol, hasGPN := col["gpus_per_node"]
	var vcs []VC
	seen := map[string]bool{}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadVCs, err) // a *csv.ParseError names the line
		}
		line, _ := cr.FieldPos(0)
		if len(rec) != len(header) {
			return nil, fmt.Errorf("%w: line %d: %d cells; the header has %d", ErrBadVCs, line, len(rec), len(header))
		}
		name := strings.TrimSpace(rec[col["vc"]])
		if name == "" || len(name) > 256 || !utf8.ValidString(name) {
			return nil, fmt.Errorf("%w: line %d: vc %.40q is empty, longer than 256 bytes or not UTF-8", ErrBadVCs, line, name)
		}
		if seen[name] {
			return nil, fmt.Errorf("%w: line %d: vc %q appears twice", ErrBadVCs, line, name)
		}
		seen[name] = true
		nodes, err := strconv.Atoi(strings.TrimSpace(rec[col["nodes"]]))
		if err != nil || nodes < 1 || nodes > maxNodes {
			return nil, fmt.Errorf("%w: line %d: nodes %.40q is not an integer from 1 to %d", ErrBadVCs, line, rec[col["nodes"]], maxNodes)
		}
		gpn := 8
		if hasGPN {
			gpn, err = strconv.Atoi(strings.TrimSpace(rec[gpnCol]))
			if err != nil || gpn < 1 || gpn > maxGPUsPerNode {
				return nil, fmt.Errorf("%w: line %d: gpus_per_node %.40q is not an integer from 1 to %d", ErrBadVCs, line, rec[gpnCol], maxGPUsPerNode)
			}
		}
		if len(vcs) == maxVCs {
			return nil, fmt.Errorf("%w: line %d: more than %d virtual clusters", ErrBadVCs, line, maxVCs)
		}
		vcs = append(vcs, VC{Name: name, Nodes: nodes, GPUsPerNode: gpn})
	}
	if len(vcs) == 0 {
		return nil, fmt.Errorf("%w: no virtual clusters", ErrBadVCs)
	}
	return vcs, nil
}

// Cluster says what a trace's jobs run on. VCs, when given, are the virtual
// clusters, each job on the one named by its queue (a Helios trace's VC).
// Otherwise Nodes × GPUsPerNode is one pool for every job; with those zero
// too, an SWF trace runs on one pool of the machine's processors from its
// header (MaxProcs, else MaxNodes), which FromTrace refuses above 2^20
// processors as it does --gpus-per-node.
type Cluster struct {
	VCs         []VC
	Nodes       int
	GPUsPerNode int
}

// Reasons a trace's job is left out of a replay (Workload.Skipped).
const (
	SkipNoRun       = "no_run_time"         // run time unknown
	SkipNoGPUs      = "no_gpus"             // no GPUs (a Helios CPU job) or processors unknown
	SkipUnknownVC   = "unknown_vc"          // its VC is not in the VC file
	SkipTooLarge    = "larger_than_cluster" // more GPUs than its VC (or the machine) has
	SkipBeforeEpoch = "bad_submit"          // submit time out of range
)

// FromTrace returns the jobs of tr that can run on cl, in order of
// submission (ties in file order), and counts the others by reason. A
// Helios job uses its GPUs; an SWF job its allocated processors, else the
// requested ones.
func FromTrace(tr *trace.Trace, cl Cluster) (*Workload, error) {
	w := &Workload{Skipped: map[string]int{}, UnknownVCs: map[string]int{}}
	switch {
	case len(cl.VCs) > 0:
		w.VCs = cl.VCs
	case cl.Nodes > 0 || cl.GPUsPerNode > 0:
		if cl.Nodes < 1 || cl.GPUsPerNode < 1 || cl.Nodes > maxNodes || cl.GPUsPerNode > maxGPUsPerNode {
			return nil, fmt.Errorf("replay: cluster of %d nodes × %d GPUs: want both from 1 (nodes up to %d, GPUs a node up to %d)", cl.Nodes, cl.GPUsPerNode, maxNodes, maxGPUsPerNode)
		}
		w.VCs = []VC{{Name: "all", Nodes: cl.Nodes, GPUsPerNode: cl.GPUsPerNode}}
	case tr.Format == "swf" && tr.MaxProcs > maxGPUsPerNode:
		return nil, fmt.Errorf("replay: the SWF header gives a machine of %d processors (MaxProcs, else MaxNodes), more than the %d a replay models: give --nodes and --gpus-per-node", tr.MaxProcs, maxGPUsPerNode)
	case tr.Format == "swf" && tr.MaxProcs > 0:
		w.VCs = []VC{{Name: "all", Nodes: 1, GPUsPerNode: tr.MaxProcs}}
	case tr.Format == "swf":
		return nil, errors.New("replay: the SWF header gives no machine size (MaxProcs, MaxNodes): give --nodes and --gpus-per-node")
	default:
		return nil, errors.New("replay: no cluster: give a VC file (--vcs) or --nodes and --gpus-per-node")
	}
	byName := map[string]int{}
	for i, vc := range w.VCs {
		byName[vc.Name] = i
	}
	pooled := len(cl.VCs) == 0
	for i := range tr.Jobs {
		t := &tr.Jobs[i]
		run := t.Run
		if run < 0 && !t.Start.IsZero() && !t.End.IsZero() {
			run = t.End.Sub(t.Start)
		}
		if run < 0 {
			w.Skipped[SkipNoRun]++
			continue
		}
		gpus := t.GPUs
		req := t.GPUs
		if tr.Format == "swf" {
			gpus, req = t.Procs, t.ReqProcs
			if gpus <= 0 {
				gpus = t.ReqProcs
			}
		}
		if gpus <= 0 {
			w.Skipped[SkipNoGPUs]++
			continue
		}
		vc := 0
		if !pooled {
			k, ok := byName[t.Queue]
			if !ok {
				w.Skipped[SkipUnknownVC]++
				w.UnknownVCs[t.Queue]++
				continue
			}
			vc = k
		}
		if v := w.VCs[vc]; int64(gpus) > int64(v.Nodes)*int64(v.GPUsPerNode) {
			w.Skipped[SkipTooLarge]++
			continue
		}
		sub := t.Submit.Unix()
		if sub < 0 || sub > math.MaxInt64/4 {
			w.Skipped[SkipBeforeEpoch]++
			continue
		}
		reqTime := int64(-1)
		if t.ReqTime > 0 {
			reqTime = int64(math.Ceil(t.ReqTime.Seconds()))
		}
		w.Jobs = append(w.Jobs, Job{
			ID: t.ID, User: t.User, Executable: t.Executable, Queue: t.Queue, VC: vc,
			Submit: sub, Run: int64(math.Ceil(run.Seconds())), GPUs: gpus, ReqTime: reqTime, ReqProcs: req, ReqMem: t.ReqMem,
		})
	}
	sortBySubmit(w.Jobs)
	return w, nil
}
