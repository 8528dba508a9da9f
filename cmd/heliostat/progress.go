package main

import (
	"flag"
	"fmt"
	"io"
	"time"
)

// progress prints a line on stderr at most every interval, for offline
// commands whose work takes long enough that silence would look like a
// hang (a backtest of 200,000 jobs takes most of a minute).
type progress struct {
	w           io.Writer
	every       time.Duration // 0: never
	now         func() time.Time
	began, last time.Time
}

// progressFlag registers --progress-interval on fs.
func progressFlag(fs *flag.FlagSet) *time.Duration {
	return fs.Duration("progress-interval", 5*time.Second, "print progress on stderr this often during a long run (0: never)")
}

// newProgress returns a progress printing on w every interval, refusing a
// negative one, naming cmd in the error.
func newProgress(cmd string, w io.Writer, every time.Duration) (*progress, error) {
	if every < 0 {
		return nil, fmt.Errorf("%s: --progress-interval %v is negative", cmd, every)
	}
	now := time.Now()
	return &progress{w: w, every: every, now: time.Now, began: now, last: now}, nil
}

// printf prints the line, followed by the time since the start, when the
// interval has passed since the last line (or the start).
func (p *progress) printf(format string, args ...any) {
	if p.due() {
		fmt.Fprintf(p.w, format+" (%.0fs)\n", append(args, p.last.Sub(p.began).Seconds())...)
	}
}

// due reports whether the interval has passed since the last line (or the
// start), and if so counts a line as printed now: for commands that log
// their progress instead.
func (p *progress) due() bool {
	if p.every <= 0 {
		return false
	}
	now := p.now()
	if now.Sub(p.last) < p.every {
		return false
	}
	p.last = now
	return true
}

// percent is done as a whole percentage of total.
func percent(done, total int) int {
	if total <= 0 {
		return 0
	}
	return done * 100 / total
}
