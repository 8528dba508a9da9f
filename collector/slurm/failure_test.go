package slurm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"github.com/heliostat-dev/heliostat/collector/slurm/slurmtest"
)

// TestPublishFailure makes the publisher refuse part of a poll's messages:
// the poll fails, the state keeps only what was published, and the next poll
// publishes the rest without repeating anything.
func TestPublishFailure(t *testing.T) {
	c := slurmtest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ids []string
	for i := 0; i < 3; i++ {
		id, err := c.Submit(ctx, "--hold", "--wrap", "true")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	defer c.Run(context.Background(), "scancel", ids...)

	stateFile := filepath.Join(t.TempDir(), "state.json")
	rec := newRecorder(t, testCluster)
	reg := prometheus.NewRegistry()
	src, err := New(testConfig(t, c, stateFile), rec, testLogger(t), reg, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Ready(); err == nil || !strings.Contains(err.Error(), "slurm: waiting for the first poll") {
		t.Errorf("Ready() before a poll = %v; want waiting for the first poll", err)
	}
	rec.failAfter = 1
	if err := src.Poll(ctx); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("Poll with a failing publisher = %v; want the publish error", err)
	}
	if err := src.Ready(); err == nil || !strings.Contains(err.Error(), "slurm: failing for") || !strings.Contains(err.Error(), "refused") {
		t.Errorf("Ready() after a failed poll = %v; want slurm failing with the publish error", err)
	}
	if got := testutil.ToFloat64(src.m.pollErrors); got != 1 {
		t.Errorf("heliostat_slurm_poll_errors_total = %v; want 1", got)
	}
	b, err := os.ReadFile(stateFile)
	if err != nil {
		t.Fatalf("state file after a partly published poll: %v", err)
	}
	saved := strings.Count(string(b), `"submitted":true`)
	if saved != 1 {
		t.Errorf("state file records %d published jobs; want the 1 that was published", saved)
	}

	// A new source on the state file, with the publisher working again.
	rec.failAfter = 0
	src2, err := New(testConfig(t, c, stateFile), rec, testLogger(t), prometheus.NewRegistry(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if err := src2.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if err := src2.Ready(); err != nil {
		t.Errorf("Ready() after a poll that succeeded = %v; want nil", err)
	}
	for _, id := range ids {
		if got := types(rec.jobEvents(id)); got != "SUBMIT" {
			t.Errorf("job %s: events %q; want one SUBMIT", id, got)
		}
	}

	problems, err := promlint.NewWithMetricFamilies(mustGather(t, reg)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("metric %s: %s", p.Metric, p.Text)
	}
}

func mustGather(t *testing.T, g prometheus.Gatherer) []*dto.MetricFamily {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}
