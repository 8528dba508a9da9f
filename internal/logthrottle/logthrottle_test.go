package logthrottle

import (
	"testing"
	"time"
)

func TestThrottle(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	th := Throttle{Every: time.Minute}
	for i, step := range []struct {
		key    string
		at     time.Duration
		n      int
		wantN  int
		wantOK bool
	}{
		{"a", 0, 1, 1, true},
		{"a", time.Second, 1, 0, false},
		{"b", time.Second, 1, 1, true}, // keys are independent
		{"a", 30 * time.Second, 2, 0, false},
		{"a", time.Minute, 1, 4, true},
		{"a", time.Minute + time.Second, 1, 0, false},
		{"a", 5 * time.Minute, 1, 2, true},
	} {
		n, ok := th.Note(step.key, t0.Add(step.at), step.n)
		if n != step.wantN || ok != step.wantOK {
			t.Errorf("step %d: Note(%q, +%v, %d) = %d, %v; want %d, %v", i, step.key, step.at, step.n, n, ok, step.wantN, step.wantOK)
		}
	}
	th.Note("a", t0.Add(5*time.Minute+time.Second), 3)
	if got := th.Held("a"); got != 3 {
		t.Errorf("Held(a) = %d; want 3", got)
	}
	if got := th.Held("a"); got != 0 {
		t.Errorf("Held(a) again = %d; want 0 (Held forgets)", got)
	}
	if got := th.Held("never"); got != 0 {
		t.Errorf("Held(never) = %d; want 0", got)
	}
	var zero Throttle
	for i := range 3 {
		if n, ok := zero.Note("x", t0, 1); !ok || n != 1 {
			t.Errorf("zero Throttle, note %d = %d, %v; want 1, true", i, n, ok)
		}
	}
}
