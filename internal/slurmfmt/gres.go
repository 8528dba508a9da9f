package slurmfmt

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// GPUs is what a GRES or TRES string says about GPUs.
type GPUs struct {
	// Type is the GPU type named: "a100" in gpu:a100:2, "" when untyped;
	// when several are named, their names sorted and joined by ','
	// ("a100,v100", as JoinTypes writes them).
	Type    string
	Count   int64   // GPUs
	Indices []int64 // device indices on the node, from (IDX:…); nil when not given
	// ByType is Count split by type ("" for GPUs named without one), as
	// ParseTRES reads it: a node's gres "gpu:a100:4,gpu:v100:2" is
	// {a100: 4, v100: 2}. Nil where no GPU is named, and from
	// ParseGresDetail.
	ByType map[string]int64
}

// ParseGresDetail parses one node's entry of squeue's gres_detail, e.g.
// "gpu:8(IDX:0-7)", "gpu:a100:2(IDX:0,3)" or "gpu:1(IDX:0),mps:0(0/100)".
// It returns the GPUs of that node with their device indices; ok is false
// when the entry holds no GPU. The indices must match the count.
func ParseGresDetail(s string) (g GPUs, ok bool, err error) {
	var types []string
	for _, item := range splitOutside(s, ',', '(', ')') {
		spec, detail, hasDetail := strings.Cut(item, "(")
		name, typ, count, err := parseGresSpec(spec)
		if err != nil {
			return g, false, fmt.Errorf("gres detail %q: %w", s, err)
		}
		if name != "gpu" {
			continue
		}
		g.Count, ok = g.Count+count, true
		types = append(types, typ)
		if !hasDetail {
			continue
		}
		detail, closed := strings.CutSuffix(detail, ")")
		if !closed {
			return g, false, fmt.Errorf("gres detail %q: '(' is not closed", s)
		}
		idx, found := strings.CutPrefix(detail, "IDX:")
		if !found || idx == "N/A" {
			continue
		}
		ids, err := expandIndexList(idx)
		if err != nil {
			return g, false, fmt.Errorf("gres detail %q: %w", s, err)
		}
		g.Indices = append(g.Indices, ids...)
	}
	g.Type = JoinTypes(types)
	if ok && g.Indices != nil && int64(len(g.Indices)) != g.Count {
		return g, false, fmt.Errorf("gres detail %q: %d GPUs but %d indices", s, g.Count, len(g.Indices))
	}
	return g, ok, nil
}

// ParseTRES parses a GRES or TRES request list and returns the GPUs it
// names: squeue's tres_per_job/node/task ("gres:gpu:8", "gres/gpu:a100:2,
// gres:mps:100", the older "gpu:8", the TRES form "gres/gpu:a100=2") or sinfo's gres and gres_used
// ("gpu:h100:8(S:0-1)", "gpu:8(IDX:0-7)"; what is in parentheses is passed
// over). ok is false when it names no GPU; "", "(null)" and "N/A" name none.
func ParseTRES(s string) (g GPUs, ok bool, err error) {
	if s == "" || s == "(null)" || s == "N/A" {
		return g, false, nil
	}
	for _, item := range splitOutside(s, ',', '(', ')') {
		item, _, _ = strings.Cut(item, "(")
		item = strings.TrimPrefix(strings.TrimPrefix(item, "gres:"), "gres/")
		// The TRES form of a count: "gpu=4", "gpu:a100=2".
		spec, eq, hasEq := strings.Cut(item, "=")
		name, typ, count, err := parseGresSpec(spec)
		if err == nil && hasEq && name == "gpu" {
			if strings.Count(spec, ":") > 1 {
				err = fmt.Errorf("GRES %q has a count both before and after '='", item)
			} else if count, err = strconv.ParseInt(eq, 10, 64); err != nil || count < 0 || count > 1<<20 {
				err = fmt.Errorf("GRES count %q in %q is not a number in range", eq, item)
			}
		}
		if err != nil {
			return g, false, fmt.Errorf("tres %q: %w", s, err)
		}
		if name == "gpu" {
			g.Count, ok = g.Count+count, true
			if g.ByType == nil {
				g.ByType = map[string]int64{}
			}
			g.ByType[typ] += count
		}
	}
	if len(g.ByType) > 0 {
		g.Type = JoinTypes(slices.Collect(maps.Keys(g.ByType)))
	}
	return g, ok, nil
}

// JoinTypes names a job's or node's GPU types as one string, the way
// GPUs.Type and job events' gpu_type hold them: "" when none is named
// (untyped GPUs, "" in types), the type when one is, the distinct names
// sorted and joined by ',' when several are ("a100,v100"), so that every
// source names a mix of types alike whatever order it lists them in.
func JoinTypes(types []string) string {
	named := make([]string, 0, len(types))
	for _, t := range types {
		if t != "" {
			named = append(named, t)
		}
	}
	slices.Sort(named)
	return strings.Join(slices.Compact(named), ",")
}

// parseGresSpec splits "name[:type][:count]" (count defaults to 1). Only a
// GPU's type and count are read and checked: another GRES's are its own
// business and returned as "" and 0, whatever they hold — a count of bytes
// far above any GPU count (sinfo's gres_used "tmpsize:10737418240"), one
// with a unit ("tmpsize:7T"), a type.
func parseGresSpec(spec string) (name, typ string, count int64, err error) {
	parts := strings.Split(spec, ":")
	name = parts[0]
	if name == "" {
		return "", "", 0, fmt.Errorf("empty GRES name in %q", spec)
	}
	if name != "gpu" {
		return name, "", 0, nil
	}
	count = 1
	switch len(parts) {
	case 1:
	case 2:
		if n, err := strconv.ParseInt(parts[1], 10, 64); err == nil {
			count = n
		} else {
			typ = parts[1]
		}
	case 3:
		typ = parts[1]
		n, err := strconv.ParseInt(parts[2], 10, 64)
		if err != nil {
			return "", "", 0, fmt.Errorf("GRES count %q in %q is not a number", parts[2], spec)
		}
		count = n
	default:
		return "", "", 0, fmt.Errorf("GRES %q has more than name:type:count", spec)
	}
	if count < 0 || count > 1<<20 {
		return "", "", 0, fmt.Errorf("GRES count %d in %q is out of range", count, spec)
	}
	if strings.ContainsAny(typ, ",()=") {
		// Slurm's separators, never in a type name: a list read
		// wrongly (an unbalanced parenthesis), and JoinTypes could not
		// tell the name from a list.
		return "", "", 0, fmt.Errorf("GRES type %q in %q holds one of ,()=", typ, spec)
	}
	return name, typ, count, nil
}

// expandIndexList expands "0-2,5" into 0, 1, 2, 5.
func expandIndexList(s string) ([]int64, error) {
	var out []int64
	for _, item := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(item, "-")
		if !isRange {
			hi = lo
		}
		a, err1 := strconv.ParseInt(lo, 10, 64)
		b, err2 := strconv.ParseInt(hi, 10, 64)
		if err1 != nil || err2 != nil || a < 0 || b < a {
			return nil, fmt.Errorf("bad GPU index range %q", item)
		}
		if b-a >= 4096 || len(out)+int(b-a) >= 4096 {
			return nil, fmt.Errorf("GPU index range %q is too large", item)
		}
		for k := range b - a + 1 { // not n <= b: n++ would wrap at MaxInt64
			out = append(out, a+k)
		}
	}
	return out, nil
}

// splitOutside splits s at sep where it is not between open and close.
func splitOutside(s string, sep, open, close byte) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case open:
			depth++
		case close:
			depth--
		case sep:
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}
