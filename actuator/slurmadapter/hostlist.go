package slurmadapter

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/heliostat-dev/heliostat/actuator/adapter"
)

// maxHosts bounds the names one host list may expand to, so that a hostile
// or broken "n[0-999999999]" cannot exhaust memory.
const maxHosts = 100_000

// expandHostlist expands a Slurm host list such as "gpu[1-3,7],cpu05,
// rack[1-2]n[01-02]" into names. Zero-padded ranges keep their width. ""
// and "(null)" are empty.
func expandHostlist(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "(null)" {
		return nil, nil
	}
	var out []string
	depth, start := 0, 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) {
			switch s[i] {
			case '[':
				depth++
				if depth > 1 {
					return nil, fmt.Errorf("host list %q: nested '['", s)
				}
				continue
			case ']':
				depth--
				if depth < 0 {
					return nil, fmt.Errorf("host list %q: ']' without '['", s)
				}
				continue
			case ',':
				if depth > 0 {
					continue
				}
			default:
				continue
			}
		}
		if depth != 0 {
			return nil, fmt.Errorf("host list %q: '[' is not closed", s)
		}
		item := s[start:i]
		start = i + 1
		if item == "" {
			return nil, fmt.Errorf("host list %q: empty name", s)
		}
		names, err := expandItem(item, maxHosts-len(out))
		if err != nil {
			return nil, fmt.Errorf("host list %q: %w", s, err)
		}
		out = append(out, names...)
	}
	return out, nil
}

var errTooMany = errors.New("expands to too many names")

// expandItem expands one name with any number of bracketed ranges.
func expandItem(item string, room int) ([]string, error) {
	open := strings.IndexByte(item, '[')
	if open < 0 {
		if strings.ContainsAny(item, "]") {
			return nil, fmt.Errorf("stray ']' in %q", item)
		}
		if room < 1 {
			return nil, errTooMany
		}
		return []string{item}, nil
	}
	end := strings.IndexByte(item[open:], ']')
	if end < 0 {
		return nil, fmt.Errorf("'[' is not closed in %q", item)
	}
	end += open
	prefix, body, rest := item[:open], item[open+1:end], item[end+1:]
	tails, err := expandItem(rest, room)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range strings.Split(body, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		if lo == "" || isRange && hi == "" {
			return nil, fmt.Errorf("bad range %q in %q", r, item)
		}
		a, err := strconv.ParseUint(lo, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("bad range %q in %q", r, item)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(hi, 10, 32); err != nil || b < a {
				return nil, fmt.Errorf("bad range %q in %q", r, item)
			}
		}
		if (b-a+1)*uint64(len(tails)) > uint64(room-len(out)) {
			return nil, errTooMany
		}
		for v := a; v <= b; v++ {
			num := strconv.FormatUint(v, 10)
			if pad := len(lo) - len(num); pad > 0 && strings.HasPrefix(lo, "0") {
				num = strings.Repeat("0", pad) + num
			}
			for _, t := range tails {
				out = append(out, prefix+num+t)
			}
		}
	}
	return out, nil
}

func sortJobs(jobs []adapter.Job) {
	slices.SortStableFunc(jobs, func(a, b adapter.Job) int {
		if c := a.Submit.Compare(b.Submit); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
}

func sortNodes(nodes []adapter.Node) {
	slices.SortFunc(nodes, func(a, b adapter.Node) int { return strings.Compare(a.Name, b.Name) })
}

// appendNew appends the values of add that dst does not hold yet.
func appendNew(dst []string, add ...string) []string {
	for _, v := range add {
		if !slices.Contains(dst, v) {
			dst = append(dst, v)
		}
	}
	return dst
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
