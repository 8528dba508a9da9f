package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// cpuTimes are the machine's CPU counters from /proc/stat, in clock ticks:
// all time, and the time the hypervisor ran something else on our virtual
// CPUs (steal).
type cpuTimes struct{ total, steal uint64 }

// readCPUTimes reads /proc/stat; ok is false where there is none (not Linux).
func readCPUTimes() (cpuTimes, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}, false
	}
	t, err := parseProcStat(b)
	return t, err == nil
}

// parseProcStat reads the aggregate "cpu" line of /proc/stat: user, nice,
// system, idle, iowait, irq, softirq and steal (guest time is already in
// user); kernels before 2.6.11 print no steal column, read as 0.
func parseProcStat(b []byte) (cpuTimes, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "cpu" {
			continue
		}
		if len(f) < 5 {
			return cpuTimes{}, fmt.Errorf("/proc/stat: cpu line has %d counters, want at least 4", len(f)-1)
		}
		var t cpuTimes
		for i, s := range f[1:min(len(f), 9)] {
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return cpuTimes{}, fmt.Errorf("/proc/stat: cpu counter %d: %w", i+1, err)
			}
			if t.total+v < t.total {
				return cpuTimes{}, fmt.Errorf("/proc/stat: cpu counters overflow")
			}
			t.total += v
			if i == 7 {
				t.steal = v
			}
		}
		return t, nil
	}
	if err := sc.Err(); err != nil {
		return cpuTimes{}, fmt.Errorf("/proc/stat: %w", err)
	}
	return cpuTimes{}, fmt.Errorf("/proc/stat: no aggregate cpu line")
}

// stealPct is the share of CPU time stolen between a and b, in percent; ok is
// false when no time passed or the counters went backwards.
func stealPct(a, b cpuTimes) (float64, bool) {
	if b.total <= a.total || b.steal < a.steal {
		return 0, false
	}
	return 100 * float64(b.steal-a.steal) / float64(b.total-a.total), true
}
