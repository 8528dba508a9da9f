package main

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// countsString writes counts by reason for people: "larger_than_cluster
// 1792, no_run_time 2", the largest first (ties by name), "none" when
// there is none. A reason that is the empty string is written as "(none
// given)".
func countsString(m map[string]int) string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int {
		if c := cmp.Compare(m[b], m[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, k := range keys {
		if m[k] == 0 {
			continue
		}
		name := k
		if name == "" {
			name = "(none given)"
		}
		parts = append(parts, fmt.Sprintf("%s %d", name, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// sumCounts is the total of m.
func sumCounts(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
