package slurm

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/heliostat-dev/heliostat/collector/publish"
	"github.com/heliostat-dev/heliostat/collector/slurm/slurmtest"
	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestEndToEnd follows real Slurm jobs through the source, the Kafka
// publisher, a Kafka-protocol broker and ingest into ClickHouse, and checks
// the jobs and GPU allocations there against what Slurm reports.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ClickHouse; skipped with -short")
	}
	c := slurmtest.Shared(t)
	ch, conn := schematest.Database(t)
	_, broker := schematest.Broker(t, kfake.GroupMinSessionTimeout(100*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := ingest.EnsureTopics(ctx, []string{broker}, 2, schemas.DataTopics()...); err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	// ingest: Kafka → ClickHouse.
	inConn, err := ch.Open(ctx, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	in, err := ingest.New(ingest.Config{Brokers: []string{broker}, Group: "g-" + ch.Database, ClickHouse: ch,
		BatchRows: 10_000, BatchInterval: 200 * time.Millisecond, SessionTimeout: time.Second}, inConn, logger, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	inCtx, stopIn := context.WithCancel(ctx)
	inDone := make(chan error, 1)
	go func() { inDone <- in.Run(inCtx); inConn.Close() }()

	// The source and its publisher: Slurm → Kafka.
	pub, err := publish.New(publish.Config{Brokers: []string{broker}, SpoolDir: filepath.Join(t.TempDir(), "spool")}, logger, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	pubCtx, stopPub := context.WithCancel(ctx)
	pubDone := make(chan error, 1)
	go func() { pubDone <- pub.Run(pubCtx) }()
	src, err := New(testConfig(t, c, filepath.Join(t.TempDir(), "state.json")), pub, logger, prometheus.NewRegistry(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	srcCtx, stopSrc := context.WithCancel(ctx)
	srcDone := make(chan error, 1)
	go func() { srcDone <- src.Run(srcCtx) }()

	type want struct {
		args  []string
		state string
		exit  int32
		gpus  uint32
		nodes int
		id    string
	}
	jobs := []*want{
		{args: []string{"--gres=gpu:8", "-N2", "--wrap", "sleep 1"}, state: "COMPLETED", exit: 0, gpus: 16, nodes: 2},
		{args: []string{"--gres=gpu:1", "--wrap", "sleep 1; exit 3"}, state: "FAILED", exit: 3, gpus: 1, nodes: 1},
	}
	var ids []string
	for _, j := range jobs {
		if j.id, err = c.Submit(ctx, j.args...); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.id)
	}
	if _, err := c.WaitJob(ctx, ids...); err != nil {
		t.Fatal(err)
	}
	// Wait until ClickHouse has every job's END and every allocation closed.
	db := ch.Database
	for {
		var ended, closed uint64
		err := conn.QueryRow(ctx, "SELECT (SELECT count() FROM "+db+".jobs FINAL WHERE has(?, job_id) AND last_event = 'END'), "+
			"(SELECT count() FROM "+db+".gpu_allocations FINAL WHERE has(?, job_id) AND alloc_end IS NOT NULL)", ids, ids).Scan(&ended, &closed)
		if err != nil {
			t.Fatal(err)
		}
		if ended == uint64(len(jobs)) && closed == 17 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("ClickHouse has %d ended jobs and %d closed allocations; want %d and 17", ended, closed, len(jobs))
		case <-time.After(200 * time.Millisecond):
		}
	}
	stopSrc()
	<-srcDone
	stopPub()
	if err := <-pubDone; err != nil {
		t.Errorf("publisher Run: %v", err)
	}
	if err := pub.Close(); err != nil {
		t.Errorf("publisher Close: %v", err)
	}
	stopIn()
	if err := <-inDone; err != nil {
		t.Errorf("ingest Run: %v", err)
	}

	for _, j := range jobs {
		var (
			state, user, last          string
			exit                       *int32
			gpus                       *uint32
			nodes                      []string
			submit                     time.Time
			start, end                 *time.Time
			events, allocs, allocHosts uint64
		)
		err := conn.QueryRow(ctx, "SELECT state, user, last_event, exit_code, gpus, nodes, submit_time, start_time, end_time FROM "+db+".jobs FINAL WHERE job_id = ?", j.id).
			Scan(&state, &user, &last, &exit, &gpus, &nodes, &submit, &start, &end)
		if err != nil {
			t.Fatalf("job %s: %v", j.id, err)
		}
		wSubmit, wStart, wEnd, wUser := slurmTimes(ctx, t, c, j.id)
		if state != j.state || user != wUser || exit == nil || *exit != j.exit || gpus == nil || *gpus != j.gpus || len(nodes) != j.nodes {
			t.Errorf("job %s in ClickHouse: state %s user %s exit %v gpus %v nodes %v; want %s %s %d %d on %d nodes",
				j.id, state, user, deref(exit), deref(gpus), nodes, j.state, wUser, j.exit, j.gpus, j.nodes)
		}
		if submit.UnixMilli() != wSubmit || start == nil || start.UnixMilli() != wStart || end == nil || end.UnixMilli() != wEnd {
			t.Errorf("job %s in ClickHouse: submit %v start %v end %v; want Slurm's %v %v %v", j.id, submit, start, end,
				time.UnixMilli(wSubmit).UTC(), time.UnixMilli(wStart).UTC(), time.UnixMilli(wEnd).UTC())
		}
		if err := conn.QueryRow(ctx, "SELECT count() FROM "+db+".job_events FINAL WHERE job_id = ?", j.id).Scan(&events); err != nil {
			t.Fatal(err)
		}
		if events != 3 {
			t.Errorf("job %s: %d rows in job_events; want 3 (SUBMIT, START, END)", j.id, events)
		}
		err = conn.QueryRow(ctx, "SELECT count(), uniqExact(host) FROM "+db+".gpu_allocations FINAL WHERE job_id = ? AND alloc_start = ? AND alloc_end = ?",
			j.id, time.UnixMilli(wStart).UTC(), time.UnixMilli(wEnd).UTC()).Scan(&allocs, &allocHosts)
		if err != nil {
			t.Fatal(err)
		}
		if allocs != uint64(j.gpus) || allocHosts != uint64(j.nodes) {
			t.Errorf("job %s: %d closed allocations on %d hosts; want %d on %d", j.id, allocs, allocHosts, j.gpus, j.nodes)
		}
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
