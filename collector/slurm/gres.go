package slurm

import (
	"fmt"
	"strconv"
	"strings"
)

// gpuGres is what one GRES specification says about GPUs.
type gpuGres struct {
	Type    string  // "a100" in gpu:a100:2; "" when untyped
	Count   int64   // GPUs
	Indices []int64 // device indices on the node, from (IDX:…); nil when not given
}

// parseGresDetail parses one node's entry of squeue's gres_detail, e.g.
// "gpu:8(IDX:0-7)", "gpu:a100:2(IDX:0,3)" or "gpu:1(IDX:0),mps:0(0/100)".
// It returns the GPUs of that node; ok is false when the entry holds no GPU.
func parseGresDetail(s string) (g gpuGres, ok bool, err error) {
	for _, item := range splitOutside(s, ',', '(', ')') {
		spec, detail, hasDetail := strings.Cut(item, "(")
		name, typ, count, err := parseGresSpec(spec)
		if err != nil {
			return g, false, fmt.Errorf("gres detail %q: %w", s, err)
		}
		if name != "gpu" {
			continue
		}
		g.Type, g.Count, ok = typ, g.Count+count, true
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
	if ok && g.Indices != nil && int64(len(g.Indices)) != g.Count {
		return g, false, fmt.Errorf("gres detail %q: %d GPUs but %d indices", s, g.Count, len(g.Indices))
	}
	return g, ok, nil
}

// parseTRESPer parses a squeue tres_per_* field, e.g. "gres:gpu:8",
// "gres:gpu:a100:2,gres:mps:100" or the older "gpu:8", and returns the GPUs it
// asks for; ok is false when it asks for none.
func parseTRESPer(s string) (g gpuGres, ok bool, err error) {
	if s == "" {
		return g, false, nil
	}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimPrefix(strings.TrimPrefix(item, "gres:"), "gres/")
		name, typ, count, err := parseGresSpec(item)
		if err != nil {
			return g, false, fmt.Errorf("tres %q: %w", s, err)
		}
		if name == "gpu" {
			g.Type, g.Count, ok = typ, g.Count+count, true
		}
	}
	return g, ok, nil
}

// parseGresSpec splits "name[:type][:count]" (count defaults to 1).
func parseGresSpec(spec string) (name, typ string, count int64, err error) {
	parts := strings.Split(spec, ":")
	name = parts[0]
	if name == "" {
		return "", "", 0, fmt.Errorf("empty GRES name in %q", spec)
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
		for n := a; n <= b; n++ {
			out = append(out, n)
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

// tresValue returns the value of key in a TRES string such as
// "cpu=2,mem=2000M,node=2,billing=2,gres/gpu=16"; ok is false when absent.
func tresValue(s, key string) (string, bool) {
	for _, kv := range strings.Split(s, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

// parseMem parses a TRES memory amount, "2000M", "4G", "512K" or a bare
// number of megabytes, into bytes.
func parseMem(s string) (int64, error) {
	mult := int64(1 << 20)
	num := s
	if s != "" {
		switch s[len(s)-1] {
		case 'K', 'k':
			mult, num = 1<<10, s[:len(s)-1]
		case 'M', 'm':
			mult, num = 1<<20, s[:len(s)-1]
		case 'G', 'g':
			mult, num = 1<<30, s[:len(s)-1]
		case 'T', 't':
			mult, num = 1<<40, s[:len(s)-1]
		case 'P', 'p':
			mult, num = 1<<50, s[:len(s)-1]
		}
	}
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || n < 0 || n*float64(mult) > 1<<62 {
		return 0, fmt.Errorf("memory amount %q is not a size", s)
	}
	return int64(n * float64(mult)), nil
}
