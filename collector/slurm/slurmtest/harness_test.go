package slurmtest

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// TestCluster submits jobs to the shared cluster and checks that they run on
// the fake GPUs and end in the states Slurm reports for them.
func TestCluster(t *testing.T) {
	c := Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"one gpu", []string{"--gres=gpu:1", "--wrap", "true"}, "COMPLETED"},
		{"two nodes", []string{"--gres=gpu:8", "-N2", "--wrap", "true"}, "COMPLETED"},
		{"exit 3", []string{"--wrap", "exit 3"}, "FAILED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := c.Submit(ctx, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			states, err := c.WaitJob(ctx, id)
			if err != nil {
				t.Fatalf("%v\n%s", err, c.LogTail(20))
			}
			if states[0] != tc.want {
				t.Errorf("job %s state = %q; want %q", id, states[0], tc.want)
			}
		})
	}
	// The jobs above are in the completion log once they ended.
	b, err := os.ReadFile(c.JobCompLog())
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "JobId="); n != 3 {
		t.Errorf("job completion log has %d records; want 3:\n%s", n, b)
	}
	if s, err := c.State(ctx, "999999"); err != nil || s != "" {
		t.Errorf("State(unknown job) = %q, %v; want \"\", nil", s, err)
	}
}
