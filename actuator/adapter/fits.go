package adapter

import (
	"slices"
	"strconv"
	"strings"
)

// Kind names n's hardware as Fits sees it: its GPUs by type, sorted
// ("a100×4+v100×2"; GPUs given without a type are "gpu×8"; a node with none
// is "no GPU"), and its features, sorted, in brackets ("a100×8 [ib,nvme]").
// Nodes of one kind fit the same jobs, so a power plan can spread the nodes
// it keeps ready over the kinds of a partition (ces.Node.Kind).
func (n *Node) Kind() string {
	// One string allocated for the common node (one GPU type, features
	// already sorted): a pass names every node of the cluster.
	var types [4]string
	ts := types[:0]
	for t, c := range n.GPUTypes {
		if c > 0 {
			ts = append(ts, t)
		}
	}
	slices.Sort(ts)
	b := make([]byte, 0, 64)
	for i, t := range ts {
		if i > 0 {
			b = append(b, '+')
		}
		if t == "" {
			t = "gpu"
		}
		b = append(append(b, t...), "×"...)
		b = strconv.AppendInt(b, int64(n.GPUTypes[ts[i]]), 10)
	}
	if len(ts) == 0 && n.GPUs > 0 {
		b = strconv.AppendInt(append(b, "gpu×"...), int64(n.GPUs), 10)
	}
	if len(b) == 0 {
		b = append(b, "no GPU"...)
	}
	if len(n.Features) > 0 {
		fs := n.Features
		if !slices.IsSorted(fs) {
			fs = slices.Sorted(slices.Values(fs))
		}
		b = append(b, " ["...)
		for i, f := range fs {
			if i > 0 && f == fs[i-1] {
				continue
			}
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, f...)
		}
		b = append(b, ']')
	}
	return string(b)
}

// Fits reports whether node n could run j as far as j's GPUs per node (of
// j's GPU type, when it names one) and constraint go, and whether j narrows
// the nodes that could run it at all (restricted). A node with GPUs of
// several types fits a typed job only by its GPUs of that type. GPUs per
// node are GPUs ÷ NodeCount, rounded up, when both are known (a job whose
// --gpus Slurm may split unevenly across its nodes is taken as split
// evenly). The constraint forms read are one feature, features joined by "&"
// (all of them) and features joined by "|" (any of them). Slurm's other
// forms — brackets, counts ("a100*2"), parentheses, commas, mixed "&" and
// "|" — are not read: such a constraint restricts nothing here, and every
// node counts as fitting it (as it did before constraints were read), so a
// misread constraint can never keep a job's nodes from being woken.
func (j *Job) Fits(n *Node) (fits, restricted bool) {
	f, restricted := j.Fitter()
	return f(n), restricted
}

// Fitter returns Fits as a function of the node, with what j asks for read
// once (its constraint parsed), for checking many nodes against one ask;
// restricted is Fits' second result, the same for every node.
func (j *Job) Fitter() (fits func(n *Node) bool, restricted bool) {
	per := j.gpusPerNode()
	typ := j.GPUType
	restricted = per > 0 || typ != ""
	feats, all, ok := parseConstraint(j.Constraint)
	constrained := ok && len(feats) > 0
	restricted = restricted || constrained
	return func(n *Node) bool {
		if per > 0 && n.GPUs < per {
			return false
		}
		// Enough GPUs of that type: on a node with two types, the
		// other type's GPUs do not count.
		if typ != "" && n.GPUTypes[typ] < max(per, 1) {
			return false
		}
		if !constrained {
			return true
		}
		has := func(f string) bool { return slices.Contains(n.Features, f) }
		if all {
			return !slices.ContainsFunc(feats, func(f string) bool { return !has(f) })
		}
		return slices.ContainsFunc(feats, has)
	}, restricted
}

// gpusPerNode returns the GPUs j needs on each of its nodes: GPUs ÷
// NodeCount rounded up; 0 when j asks for no GPUs or its node count is
// unknown.
func (j *Job) gpusPerNode() int {
	if j.GPUs <= 0 || j.NodeCount <= 0 {
		return 0
	}
	return (j.GPUs + j.NodeCount - 1) / j.NodeCount
}

// parseConstraint splits a constraint of one feature or features joined
// by one of "&" (all: true) and "|"; ok is false for any other form (see
// Fits) and for "". Spaces around names are trimmed.
func parseConstraint(c string) (feats []string, all, ok bool) {
	c = strings.TrimSpace(c)
	if c == "" || strings.ContainsAny(c, "[]()*!,:") {
		return nil, false, false
	}
	and, or := strings.Contains(c, "&"), strings.Contains(c, "|")
	if and && or {
		return nil, false, false
	}
	sep := "|"
	if and {
		sep = "&"
	}
	for _, f := range strings.Split(c, sep) {
		f = strings.TrimSpace(f)
		if f == "" || strings.ContainsAny(f, " \t") {
			return nil, false, false
		}
		feats = append(feats, f)
	}
	return feats, and || !or, true
}
