package ingest

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuClock reads CPU time (user+system) of this process and, when pid > 0, of
// another local process, so the bench can say where the time went.
type cpuClock struct{ pid int }

func (c cpuClock) self() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// other returns the CPU time of pid from /proc, or 0 when unknown.
func (c cpuClock) other() time.Duration {
	if c.pid <= 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(c.pid) + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the parenthesised command: state is field 3, utime 14,
	// stime 15 (in clock ticks of 1/100 s on Linux).
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}
