package main

import (
	"strings"
	"testing"
	"time"
)

// TestProgress: a line at most every interval, each with the time since the
// start; none with interval 0; a negative interval refused.
func TestProgress(t *testing.T) {
	var out strings.Builder
	p, err := newProgress("sim", &out, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	now := p.began
	p.now = func() time.Time { return now }
	for _, step := range []struct {
		after time.Duration
		want  string // the line printed, "" for none
	}{
		{0, ""},
		{4 * time.Second, ""},
		{time.Second, "sim: 5 of 10 (5s)\n"},
		{4 * time.Second, ""},
		{6 * time.Second, "sim: 5 of 10 (15s)\n"},
	} {
		now = now.Add(step.after)
		out.Reset()
		p.printf("sim: %d of %d", 5, 10)
		if out.String() != step.want {
			t.Errorf("at %v: printed %q; want %q", now.Sub(p.began), out.String(), step.want)
		}
	}

	never, err := newProgress("sim", &out, 0)
	if err != nil {
		t.Fatal(err)
	}
	never.now = func() time.Time { return never.began.Add(time.Hour) }
	if never.due() {
		t.Error("interval 0 is due; want never")
	}
	if _, err := newProgress("sim", &out, -time.Second); err == nil || !strings.Contains(err.Error(), "--progress-interval -1s is negative") {
		t.Errorf("negative interval: %v; want it refused, naming the flag", err)
	}
	for _, c := range []struct{ done, total, want int }{{0, 0, 0}, {1, 3, 33}, {3, 3, 100}, {5, -1, 0}} {
		if got := percent(c.done, c.total); got != c.want {
			t.Errorf("percent(%d, %d) = %d; want %d", c.done, c.total, got, c.want)
		}
	}
}
