package slurmadapter

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// maxArrayTasks bounds the tasks one array record may stand for: Slurm's
// MaxArraySize is at most 4000001.
const maxArrayTasks = 4_000_001

// arrayTasks counts the tasks of a pending array's array_task_string, as
// squeue writes it for the record of the tasks not yet split off: items
// separated by commas, each an index, a range "A-B", or a range with a step
// "A-B:S"; then, when the array is throttled (--array=…%N), "%N". It returns
// the count and N (0: no throttle). A string squeue cut short ("…,32...",
// without SLURM_BITSTR_LEN=0) is an error: its count is unknown.
func arrayTasks(s string) (n, throttle int, err error) {
	list, limit, throttled := strings.Cut(s, "%")
	if throttled {
		t, err := strconv.ParseUint(limit, 10, 32)
		if err != nil || t == 0 {
			return 0, 0, fmt.Errorf("array_task_string %q: throttle %q is not a positive integer", s, limit)
		}
		throttle = int(min(t, maxArrayTasks))
	}
	if strings.HasSuffix(list, "...") {
		return 0, 0, fmt.Errorf("array_task_string %q: cut short by squeue (SLURM_BITSTR_LEN)", s)
	}
	if list == "" {
		return 0, 0, errors.New("array_task_string is empty")
	}
	for item := range strings.SplitSeq(list, ",") {
		k, err := arrayItem(item)
		if err != nil {
			return 0, 0, fmt.Errorf("array_task_string %q: %v", s, err)
		}
		n = min(n+k, maxArrayTasks)
	}
	return n, throttle, nil
}

// arrayItem counts the indices of one item of an array_task_string.
func arrayItem(item string) (int, error) {
	rng, stepStr, stepped := strings.Cut(item, ":")
	step := uint64(1)
	if stepped {
		s, err := strconv.ParseUint(stepStr, 10, 32)
		if err != nil || s == 0 {
			return 0, fmt.Errorf("item %q: step %q is not a positive integer", item, stepStr)
		}
		step = s
	}
	loStr, hiStr, ranged := strings.Cut(rng, "-")
	if !ranged {
		hiStr = loStr
	}
	if stepped && !ranged {
		return 0, fmt.Errorf("item %q: a step without a range", item)
	}
	lo, err1 := strconv.ParseUint(loStr, 10, 32)
	hi, err2 := strconv.ParseUint(hiStr, 10, 32)
	if err1 != nil || err2 != nil || hi < lo {
		return 0, fmt.Errorf("item %q: not an index or a range A-B of indices with A ≤ B", item)
	}
	return int(min((hi-lo)/step+1, maxArrayTasks)), nil
}
