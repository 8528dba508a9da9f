package slurmadapter

import (
	"cmp"
	"slices"
	"strings"

	"github.com/heliostat-dev/heliostat/actuator/adapter"
)

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
