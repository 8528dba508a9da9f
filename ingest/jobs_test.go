package ingest_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// testJob returns the events of one job that ran on two nodes with 8 GPUs.
func testJob(id string, submit time.Time) []schemas.JobEvent {
	base := schemas.JobEvent{
		JobID: id, ArrayTaskID: schemas.Unknown, Name: "train", User: "alice", UID: 1000, Account: "ml",
		Partition: "batch", ExitCode: schemas.Unknown, Priority: 10, SubmitMillis: submit.UnixMilli(),
		TimeLimitS: 3600, NodeCount: 2, CPUs: 4, GPUs: 16, MemReqBytes: schemas.Unknown, CommandHash: "ab12",
	}
	sub := base
	sub.Type, sub.State, sub.EventMillis = schemas.JobSubmit, schemas.StatePending, base.SubmitMillis
	start := base
	start.Type, start.State = schemas.JobStart, schemas.StateRunning
	start.StartMillis = submit.Add(time.Minute).UnixMilli()
	start.EventMillis = start.StartMillis
	start.Nodes = []string{"gpu1", "gpu2"}
	end := start
	end.Type, end.State, end.ExitCode = schemas.JobEnd, schemas.StateFailed, 3
	end.EndMillis = submit.Add(time.Hour).UnixMilli()
	end.EventMillis = end.EndMillis
	return []schemas.JobEvent{sub, start, end}
}

func produceJobs(t *testing.T, broker string, cluster string, jobs map[string][]schemas.JobEvent, allocs []schemas.Alloc) {
	t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(broker), Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll, BatchTimeout: 5 * time.Millisecond}
	defer w.Close()
	var msgs []kafka.Message
	for id, evs := range jobs {
		v, err := schemas.AppendJobEventBatch(nil, &schemas.JobEventBatch{Cluster: cluster, Source: schemas.SourceSlurm, Events: evs})
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, kafka.Message{Topic: schemas.TopicJobEvents, Key: schemas.JobKey(cluster, id), Value: v})
	}
	if len(allocs) > 0 {
		v, err := schemas.AppendAllocBatch(nil, &schemas.AllocBatch{Cluster: cluster, Allocs: allocs})
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, kafka.Message{Topic: schemas.TopicAllocations, Key: []byte("gpu1"), Value: v})
	}
	// A message that is not a job event batch goes to the dead-letter topic.
	msgs = append(msgs, kafka.Message{Topic: schemas.TopicJobEvents, Key: []byte("junk"), Value: []byte("HSJ\x01\x00")})
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

func TestJobEventsEndToEnd(t *testing.T) {
	ch, conn := schematest.Database(t)
	_, broker := schematest.Broker(t, kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err := ingest.EnsureTopics(context.Background(), []string{broker}, 2, schemas.DataTopics()...); err != nil {
		t.Fatal(err)
	}
	// Job 2 runs across a month boundary: its events land in two partitions
	// of job_events but its jobs row stays in the submit month.
	t0 := time.Date(2026, 1, 31, 23, 30, 0, 0, time.UTC)
	jobs := map[string][]schemas.JobEvent{"1": testJob("1", t0.Add(-5*time.Hour)), "2": testJob("2", t0)}
	// Job 3 is still running.
	jobs["3"] = testJob("3", t0)[:2]
	// Job 1's events are sent twice (a source restarted before saving its
	// state): job_events and jobs must collapse them.
	jobs["1"] = append(jobs["1"], jobs["1"]...)
	// Job 4 holds counts no UInt32 column takes: stored as unknown, counted.
	jobs["4"] = testJob("4", t0)
	for i := range jobs["4"] {
		jobs["4"][i].CPUs, jobs["4"][i].TimeLimitS = 1<<33, 1<<40
	}
	start := t0.Add(time.Minute).UnixMilli()
	allocs := []schemas.Alloc{
		{Host: "gpu1", GPUIndex: 0, JobID: "2", User: "alice", StartMillis: start, Source: schemas.AllocScontrol},
		{Host: "gpu1", GPUIndex: 0, JobID: "2", User: "alice", StartMillis: start, EndMillis: t0.Add(time.Hour).UnixMilli(), Source: schemas.AllocScontrol},
		{Host: "gpu1", GPUIndex: 1, GPUUUID: "GPU-1", JobID: "3", User: "alice", StartMillis: start, Source: schemas.AllocCgroup},
		{Host: "gpu2", GPUIndex: 1 << 40, GPUUUID: "GPU-2", JobID: "4", User: "alice", StartMillis: start, Source: schemas.AllocCgroup},
	}
	produceJobs(t, broker, "c1", jobs, allocs)

	ctx, cancel := context.WithCancel(context.Background())
	reg := prometheus.NewRegistry()
	done := startIngest(t, ctx, broker, ch, reg)
	// Eleven distinct events: job 1's second copies are in the same message
	// as the first, so all four messages are in once FINAL counts 11. (The
	// copies' rows may be collapsed at insert already: current ClickHouse
	// merges each inserted block, optimize_on_insert; 18.16 keeps 14 rows.)
	waitCount(t, conn, ch.Database+".job_events FINAL", 11, 60*time.Second)
	// Job 2's GPU has an open and a closing row: 3 once collapsed (at
	// insert on current ClickHouse, as job 1's events).
	waitCount(t, conn, ch.Database+".gpu_allocations FINAL", 3, 30*time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	db := ch.Database
	if n := schematest.Count(t, conn, db+".job_events FINAL"); n != 11 {
		t.Errorf("job_events FINAL = %d rows; want 11 (duplicates collapsed)", n)
	}
	if n := schematest.Count(t, conn, db+".jobs FINAL"); n != 4 {
		t.Errorf("jobs FINAL = %d rows; want 4", n)
	}
	type jobRow struct {
		state, last string
		exit        *int32
		gpus        *uint32
		nodes       []string
		start, end  *time.Time
	}
	want := map[string]jobRow{
		"1": {state: "FAILED", last: "END"},
		"2": {state: "FAILED", last: "END"},
		"3": {state: "RUNNING", last: "START"},
		"4": {state: "FAILED", last: "END"},
	}
	rows, err := conn.Query(context.Background(), "SELECT job_id, state, last_event, exit_code, gpus, nodes, start_time, end_time, user FROM "+db+".jobs FINAL ORDER BY job_id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id, user string
			r        jobRow
		)
		if err := rows.Scan(&id, &r.state, &r.last, &r.exit, &r.gpus, &r.nodes, &r.start, &r.end, &user); err != nil {
			t.Fatal(err)
		}
		w := want[id]
		if r.state != w.state || r.last != w.last || user != "alice" {
			t.Errorf("job %s: state %s, last event %s, user %s; want %s, %s, alice", id, r.state, r.last, user, w.state, w.last)
		}
		if r.gpus == nil || *r.gpus != 16 || len(r.nodes) != 2 || r.start == nil {
			t.Errorf("job %s: gpus %v nodes %v start %v; want 16 GPUs on 2 nodes with a start", id, r.gpus, r.nodes, r.start)
		}
		if w.last == "END" && (r.exit == nil || *r.exit != 3 || r.end == nil) {
			t.Errorf("job %s: exit %v end %v; want exit 3 and an end", id, r.exit, r.end)
		}
		if w.last == "START" && (r.exit != nil || r.end != nil) {
			t.Errorf("running job %s: exit %v end %v; want NULL (unknown)", id, r.exit, r.end)
		}
	}
	var open, closed uint64
	if err := conn.QueryRow(context.Background(), "SELECT countIf(alloc_end IS NULL), countIf(alloc_end IS NOT NULL) FROM "+db+".gpu_allocations FINAL").Scan(&open, &closed); err != nil {
		t.Fatal(err)
	}
	if open != 2 || closed != 1 {
		t.Errorf("gpu_allocations FINAL: %d open, %d closed; want 2 and 1 (the closing row replaces the open one)", open, closed)
	}
	var cpus, limit *uint32
	if err := conn.QueryRow(context.Background(), "SELECT cpus, time_limit_s FROM "+db+".jobs FINAL WHERE job_id = '4'").Scan(&cpus, &limit); err != nil {
		t.Fatal(err)
	}
	var idx int32
	if err := conn.QueryRow(context.Background(), "SELECT gpu_index FROM "+db+".gpu_allocations FINAL WHERE job_id = '4'").Scan(&idx); err != nil {
		t.Fatal(err)
	}
	if cpus != nil || limit != nil || idx != -1 {
		t.Errorf("job 4: cpus %v, time_limit_s %v, gpu_index %d; want NULL, NULL, -1 (too large for the columns)", cpus, limit, idx)
	}
	for col, want := range map[string]float64{"cpus": 3, "time_limit_s": 3, "gpu_index": 1, "exit_code": 0} {
		if v := metricSum(t, reg, "heliostat_ingest_values_unknown_total", "column", col); v != want {
			t.Errorf("heliostat_ingest_values_unknown_total{column=%q} = %v; want %v", col, v, want)
		}
	}
	if v := metricSum(t, reg, "heliostat_ingest_messages_total", "topic", schemas.TopicJobEvents, "outcome", "deadletter"); v != 1 {
		t.Errorf("dead-lettered messages = %v; want 1", v)
	}
}

func TestInsertJobEventsIdempotent(t *testing.T) {
	ch, conn := schematest.Database(t)
	ctx := context.Background()
	evs := append(testJob("7", time.Date(2002, 7, 1, 0, 0, 0, 0, time.UTC)), testJob("8", time.Date(2002, 7, 31, 23, 50, 0, 0, time.UTC))...)
	for range 2 {
		if err := ingest.InsertJobEvents(ctx, conn, ch.Database, "hpc2n", schemas.SourceTrace, evs); err != nil {
			t.Fatal(err)
		}
	}
	if n := schematest.Count(t, conn, ch.Database+".jobs FINAL"); n != 2 {
		t.Errorf("jobs FINAL = %d; want 2 after importing twice", n)
	}
	if n := schematest.Count(t, conn, ch.Database+".job_events FINAL"); n != 6 {
		t.Errorf("job_events FINAL = %d; want 6", n)
	}
	var parts uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM "+ch.Database+".ingest_ledger WHERE tbl = 'job_events' AND kafka_partition != 4294967295").Scan(&parts); err != nil {
		t.Fatal(err)
	}
	if parts != 0 {
		t.Errorf("direct inserts wrote %d ledger rows under a real Kafka partition number", parts)
	}
	bad := []schemas.JobEvent{{Type: schemas.JobSubmit, State: schemas.StatePending}}
	if err := ingest.InsertJobEvents(ctx, conn, ch.Database, "hpc2n", schemas.SourceTrace, bad); err == nil {
		t.Error("InsertJobEvents(event without job id) = nil; want an error")
	}
}
