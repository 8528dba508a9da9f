package sim

import (
	"context"
	"testing"
)

// TestPending lists the queue of a one-node cluster behind a running job, in
// order of submission, with priorities set by SetPriority.
func TestPending(t *testing.T) {
	s, _ := newTestSim(t, Config{Nodes: 1}, Jobs([]JobSpec{
		{ID: "a", User: "ua", VC: "vc1", GPUs: 8, Duration: sec(100)},
		{ID: "b", User: "ub", VC: "vc1", GPUs: 8, Submit: sec(1), Duration: sec(10), TimeLimit: sec(20)},
		{ID: "c", User: "uc", VC: "vc1", GPUs: 2, Submit: sec(2), Duration: sec(10)},
	}))
	if err := s.Advance(context.Background(), t0.Add(sec(5))); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPriority("c", 7); err != nil {
		t.Fatal(err)
	}
	got := s.Pending()
	if len(got) != 2 || got[0].ID != "b" || got[1].ID != "c" {
		t.Fatalf("Pending() = %+v; want b, c", got)
	}
	if b := got[0]; b.User != "ub" || b.GPUs != 8 || b.TimeLimit != sec(20) || !b.Submit.Equal(t0.Add(sec(1))) || b.Priority != 0 {
		t.Errorf("Pending()[0] = %+v", b)
	}
	if got[1].Priority != 7 {
		t.Errorf("Pending()[1].Priority = %d; want 7", got[1].Priority)
	}
}
