package main

import (
	"syscall"
	"time"
)

// preciseSleep sleeps for d with nanosleep(2), which wakes within
// microseconds; Go's timers are driven by epoll_wait's millisecond timeout
// when nothing else runs, and wake up to a millisecond late.
func preciseSleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
	}
}
