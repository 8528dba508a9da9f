//go:build !linux

package main

import "time"

// preciseSleep sleeps for d (with Go's timers outside Linux).
func preciseSleep(d time.Duration) { time.Sleep(d) }
