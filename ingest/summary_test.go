package ingest_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestSummarizer runs a job on two GPUs of gpu1 — GPU 0 busy at 50%, GPU 1
// idle throughout — with samples before, during and after the job, and checks
// the summary built from what ingest wrote.
func TestSummarizer(t *testing.T) {
	ch, conn := schematest.Database(t)
	_, broker := schematest.Broker(t, kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err := ingest.EnsureTopics(context.Background(), []string{broker}, 1, schemas.DataTopics()...); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	evs := testJob("50", t0) // starts t0+1m, ends t0+1h, 16 GPUs requested
	evs = evs[:0:0]
	for _, e := range testJob("50", t0) {
		e.GPUs, e.TimeLimitS = 2, 100*3600 // ran 59 minutes of a 100 h limit
		evs = append(evs, e)
	}
	start, end := t0.Add(time.Minute), t0.Add(time.Hour)
	allocs := []schemas.Alloc{
		{Host: "gpu1", GPUIndex: 0, JobID: "50", StartMillis: start.UnixMilli(), EndMillis: end.UnixMilli(), Source: schemas.AllocScontrol},
		{Host: "gpu1", GPUIndex: 1, JobID: "50", StartMillis: start.UnixMilli(), EndMillis: end.UnixMilli(), Source: schemas.AllocScontrol},
		// The same GPU seen by node attribution too: counted once.
		{Host: "gpu1", GPUIndex: 0, GPUUUID: "GPU-0", JobID: "50", StartMillis: start.UnixMilli(), EndMillis: end.UnixMilli(), Source: schemas.AllocCgroup},
	}
	produceJobs(t, broker, "c1", map[string][]schemas.JobEvent{"50": evs}, allocs)

	// One sample per GPU per minute from t0 to t0+2h; GPU 0 is busy only
	// while the job runs, at 50% and 200 W, its energy counter rising 12 kJ a
	// minute.
	b := schemas.SampleBatch{Cluster: "c1", Host: "gpu1"}
	for i := range 2 {
		b.AddGPU(schemas.GPU{Index: uint32(i), UUID: "GPU-" + string(rune('0'+i)), Minor: int32(i), GIID: -1, CIID: -1})
	}
	var energy uint64
	for m := 0; m <= 120; m++ {
		ts := t0.Add(time.Duration(m) * time.Minute)
		busy := !ts.Before(start) && !ts.After(end)
		for g := range 2 {
			s := schemas.Sample{TSMillis: ts.UnixMilli(), GPU: uint32(g)}
			util, power := uint64(0), uint64(60_000)
			if g == 0 && busy {
				util, power = 50, 200_000
			}
			s.Set(schemas.GPUUtil, util)
			s.Set(schemas.PowerUsage, power)
			s.Set(schemas.FBUsed, 1<<30)
			if g == 0 {
				s.Set(schemas.Energy, energy)
				if busy {
					energy += 12_000_000
				} else {
					energy += 3_600_000
				}
			}
			b.Samples = append(b.Samples, s)
		}
	}
	v, err := schemas.AppendSampleBatch(nil, &b)
	if err != nil {
		t.Fatal(err)
	}
	w := &kafka.Writer{Addr: kafka.TCP(broker), Topic: schemas.TopicGPUSamples, RequiredAcks: kafka.RequireAll}
	if err := w.WriteMessages(context.Background(), kafka.Message{Key: []byte("gpu1"), Value: v}); err != nil {
		t.Fatal(err)
	}
	w.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done := startIngest(t, ctx, broker, ch, prometheus.NewRegistry())
	waitCount(t, conn, ch.Database+".gpu_samples", uint64(len(b.Samples)), 60*time.Second)
	waitCount(t, conn, ch.Database+".gpu_allocations", 3, 30*time.Second)
	waitCount(t, conn, ch.Database+".job_events", 3, 30*time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sum, err := ingest.NewSummarizer(ingest.SummaryConfig{Database: ch.Database, Delay: time.Hour}, conn, logger, prometheus.NewRegistry(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := sum.Once(context.Background()); err != nil || n != 0 {
		t.Fatalf("Once within the delay = %d, %v; want 0 (the job's samples may still be on their way)", n, err)
	}
	sum, err = ingest.NewSummarizer(ingest.SummaryConfig{Database: ch.Database}, conn, logger, prometheus.NewRegistry(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := sum.Once(context.Background()); err != nil || n != 1 {
		t.Fatalf("Once = %d, %v; want 1 job summarized", n, err)
	}
	if n, err := sum.Once(context.Background()); err != nil || n != 0 {
		t.Fatalf("second Once = %d, %v; want 0 (already summarized)", n, err)
	}
	var (
		gpus               uint32
		elapsed            uint32
		gpuHours           float64
		idx                []int32
		means, maxes       []float32
		samples            uint64
		mean               *float32
		energyJ, zeroHours *float64
		power              *float32
		flags              []string
		source             string
	)
	err = conn.QueryRow(context.Background(), "SELECT gpus, elapsed_s, gpu_hours, gpu_indexes, gpu_util_mean, gpu_util_max, samples, util_mean, energy_j, zero_util_gpu_hours, power_mean_w, flags, util_source FROM "+
		ch.Database+".job_run_summary FINAL WHERE job_id = '50'").Scan(&gpus, &elapsed, &gpuHours, &idx, &means, &maxes, &samples, &mean, &energyJ, &zeroHours, &power, &flags, &source)
	if err != nil {
		t.Fatal(err)
	}
	if gpus != 2 || elapsed != 59*60 || gpuHours < 1.96 || gpuHours > 1.97 {
		t.Errorf("gpus %d elapsed %d gpu_hours %.3f; want 2, 3540, 1.967", gpus, elapsed, gpuHours)
	}
	// 60 samples per GPU fall inside [start, end] (minutes 1..60).
	if samples != 120 {
		t.Errorf("samples = %d; want 120 (only those inside the job's run)", samples)
	}
	for i, g := range idx {
		want := float32(50)
		if g == 1 {
			want = 0
		}
		if means[i] != want || maxes[i] != want {
			t.Errorf("GPU %d util mean/max = %v/%v; want %v", g, means[i], maxes[i], want)
		}
	}
	if mean == nil || *mean != 25 || source != "gpu_util" {
		t.Errorf("util_mean = %v (%s); want 25 from gpu_util", mean, source)
	}
	// GPU 0's counter rose 59 × 12 kJ between its first and last sample in the
	// job; GPU 1 has no counter, so its energy is mean power × sample span.
	if wantJ := 59*12_000.0 + 60*59*60.0; energyJ == nil || *energyJ != wantJ {
		t.Errorf("energy_j = %v; want %v", energyJ, wantJ)
	}
	if zeroHours == nil || *zeroHours < 0.98 || *zeroHours > 0.99 {
		t.Errorf("zero_util_gpu_hours = %v; want 59/60 (GPU 1 idle the whole run)", zeroHours)
	}
	if power == nil || *power != 130 {
		t.Errorf("power_mean_w = %v; want 130", power)
	}
	slices.Sort(flags)
	if want := []string{ingest.FlagIdleAllocated, ingest.FlagPoorLimit}; !slices.Equal(flags, want) {
		t.Errorf("flags = %v; want %v", flags, want)
	}
}

// TestSummarizerIncremental checks the watermark: after the first (full)
// pass, a pass reads only the jobs whose END reached ClickHouse since the
// last pass, less SummaryOverlap; an END stamped before that window is left
// to the next full pass, which runs once FullEvery has gone by.
func TestSummarizerIncremental(t *testing.T) {
	ch, conn := schematest.Database(t)
	ctx := context.Background()
	t0 := time.Now().UTC().Truncate(time.Second)
	insert := func(id string, inserted time.Time) { insertEndedJob(t, conn, ch.Database, id, inserted) }
	clock := t0
	reg := prometheus.NewRegistry()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sum, err := ingest.NewSummarizer(ingest.SummaryConfig{Database: ch.Database, FullEvery: time.Hour}, conn, logger, reg, func() time.Time { return clock })
	if err != nil {
		t.Fatal(err)
	}
	passes := func() (full, incremental float64) {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "heliostat_ingest_job_summary_passes_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				switch m.GetLabel()[0].GetValue() {
				case "full":
					full = m.GetCounter().GetValue()
				case "incremental":
					incremental = m.GetCounter().GetValue()
				}
			}
		}
		return full, incremental
	}
	summarized := func() []string {
		t.Helper()
		rows, err := conn.Query(ctx, "SELECT job_id FROM "+ch.Database+".job_run_summary FINAL ORDER BY job_id")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		return ids
	}
	step := func(name string, advance time.Duration, wantN int, wantFull, wantInc float64, wantIDs ...string) {
		t.Helper()
		clock = clock.Add(advance)
		n, err := sum.Once(ctx)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		full, inc := passes()
		if n != wantN || full != wantFull || inc != wantInc {
			t.Fatalf("%s: Once = %d with %v full and %v incremental passes; want %d, %v, %v", name, n, full, inc, wantN, wantFull, wantInc)
		}
		if got := summarized(); !slices.Equal(got, wantIDs) {
			t.Fatalf("%s: summaries of %v; want %v", name, got, wantIDs)
		}
	}

	insert("a", t0.Add(-3*time.Hour))
	insert("future", t0.Add(30*time.Minute)) // stamped after the cutoff: not yet
	step("first pass", 0, 1, 1, 0, "a")

	// Within the overlap of the last cutoff: found by an incremental pass.
	insert("b", t0.Add(-5*time.Minute))
	step("END in the window", time.Minute, 1, 1, 1, "a", "b")
	step("END reaches the cutoff", 30*time.Minute, 1, 1, 2, "a", "b", "future")

	// Stamped before the window (an insert that stayed invisible for hours):
	// not seen until the next full pass.
	insert("late", t0.Add(-2*time.Hour))
	step("END before the window", time.Minute, 0, 1, 3, "a", "b", "future")
	step("still within FullEvery", 20*time.Minute, 0, 1, 4, "a", "b", "future")
	step("full pass after FullEvery", 10*time.Minute, 1, 2, 4, "a", "b", "future", "late")
}

// TestSummarizerManyJobs summarizes 600 ended jobs in one pass, more than
// one sample query holds: each job ran on its own GPUs, whose samples all
// read the job's own utilization, and every third job has no allocation
// between the others. Each summary must hold its own job's samples and no
// other's. Job 680 shared GPU 0 of job 1 for all of job 1's run (GPU
// sharing), so it has that GPU's samples too. Job 5000 ran on 2,000 GPUs
// (250 hosts b*) during job 2's run, more than one query holds, at 42 %.
func TestSummarizerManyJobs(t *testing.T) {
	const (
		jobs  = 600
		hosts = 12  // a host runs one job at a time: hosts*step >= 7,200 s
		step  = 600 // s between submits, as schematest.FillJobs spaces them
	)
	ch, conn := schematest.Database(t)
	ctx := context.Background()
	db := ch.Database
	last := time.Now().Add(-3 * time.Hour).Truncate(time.Second)
	schematest.FillJobs(t, conn, db, jobs, jobs*step*time.Second, last)
	base := last.Unix() - (jobs-1)*step
	// Job j starts at base + j*step + 60 and ends 7,140 s later on 1 + j%8
	// GPUs of host h(j%hosts); a sample a minute, 120 per GPU, all at j%97 %.
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO %[1]s.gpu_allocations (cluster, host, gpu_index, gpu_uuid, mig_uuid, job_id, user, alloc_start, alloc_end, source, version)
SELECT 'c1', concat('h', toString(j %% %[2]d)), toInt32(g), '', '', toString(j), 'u', toDateTime(%[3]d + j * %[4]d + 60), toDateTime(%[3]d + j * %[4]d + 7200), 'slurm', 1
FROM (SELECT j, arrayJoin(range(toUInt64(1 + j %% 8))) AS g FROM (SELECT number AS j FROM system.numbers LIMIT %[5]d)) WHERE j %% 3 != 0`, db, hosts, base, step, jobs),
		fmt.Sprintf(`INSERT INTO %[1]s.gpu_samples (ts, ts_millis, cluster, host, gpu_index, gpu_uuid, mig_uuid, gpu_util, kafka_partition, kafka_offset)
SELECT toDateTime(%[3]d + j * %[4]d + 60 + k * 60), 0, 'c1', concat('h', toString(j %% %[2]d)), toUInt16(g), '', '', toUInt8(j %% 97), 0, 0
FROM (SELECT j, arrayJoin(range(toUInt64(1 + j %% 8))) AS g, arrayJoin(range(120)) AS k FROM (SELECT number AS j FROM system.numbers LIMIT %[5]d))`, db, hosts, base, step, jobs),
		// Job 680: 680 %% 97 = 1 and 1 + 680 %% 8 = 1 GPU, as if it were job 1.
		fmt.Sprintf(`INSERT INTO %[1]s.jobs (cluster, job_id, user, partition_name, state, submit_time, start_time, end_time, gpus, last_event, updated_at, inserted_at, version)
SELECT cluster, '680', user, partition_name, state, submit_time, start_time, end_time, toUInt32(1), last_event, updated_at, inserted_at, version
FROM %[1]s.jobs WHERE job_id = '1' AND last_event = 'END'`, db),
		fmt.Sprintf(`INSERT INTO %[1]s.gpu_allocations (cluster, host, gpu_index, gpu_uuid, mig_uuid, job_id, user, alloc_start, alloc_end, source, version)
SELECT cluster, host, gpu_index, gpu_uuid, mig_uuid, '680', user, alloc_start, alloc_end, source, version FROM %[1]s.gpu_allocations WHERE job_id = '1' AND gpu_index = 0`, db),
		fmt.Sprintf(`INSERT INTO %[1]s.jobs (cluster, job_id, user, partition_name, state, submit_time, start_time, end_time, gpus, last_event, updated_at, inserted_at, version)
SELECT cluster, '5000', user, partition_name, state, submit_time, start_time, end_time, toUInt32(2000), last_event, updated_at, inserted_at, version
FROM %[1]s.jobs WHERE job_id = '2' AND last_event = 'END'`, db),
		fmt.Sprintf(`INSERT INTO %[1]s.gpu_allocations (cluster, host, gpu_index, gpu_uuid, mig_uuid, job_id, user, alloc_start, alloc_end, source, version)
SELECT 'c1', concat('b', toString(intDiv(number, 8))), toInt32(number %% 8), '', '', '5000', 'u', toDateTime(%[2]d), toDateTime(%[3]d), 'slurm', 1
FROM system.numbers LIMIT 2000`, db, base+2*step+60, base+2*step+7200),
		fmt.Sprintf(`INSERT INTO %[1]s.gpu_samples (ts, ts_millis, cluster, host, gpu_index, gpu_uuid, mig_uuid, gpu_util, kafka_partition, kafka_offset)
SELECT toDateTime(%[2]d + k * 60), 0, 'c1', concat('b', toString(intDiv(g, 8))), toUInt16(g %% 8), '', '', toUInt8(42), 0, 0
FROM (SELECT g, arrayJoin(range(120)) AS k FROM (SELECT number AS g FROM system.numbers LIMIT 2000))`, db, base+2*step+60),
	} {
		if err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	copyJobRuns(t, conn, db)
	sum, err := ingest.NewSummarizer(ingest.SummaryConfig{Database: db}, conn, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := sum.Once(ctx); err != nil || n != jobs+2 {
		t.Fatalf("Once = %d, %v; want %d", n, err, jobs+2)
	}
	rows, err := conn.Query(ctx, "SELECT toUInt64(job_id), gpus, samples, util_mean, length(gpu_hosts), flags, gpu_hosts, gpu_indexes FROM "+db+".job_run_summary FINAL")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var (
			j, samples uint64
			gpus       uint32
			mean       *float32
			hostsN     uint64
			flags      []string
			gpuHosts   []string
			gpuIndexes []int32
		)
		if err := rows.Scan(&j, &gpus, &samples, &mean, &hostsN, &flags, &gpuHosts, &gpuIndexes); err != nil {
			t.Fatal(err)
		}
		seen++
		for k := 1; k < len(gpuHosts); k++ {
			if gpuHosts[k] < gpuHosts[k-1] || gpuHosts[k] == gpuHosts[k-1] && gpuIndexes[k] <= gpuIndexes[k-1] {
				t.Errorf("job %d lists GPU %s:%d after %s:%d; want them by host, then index", j, gpuHosts[k], gpuIndexes[k], gpuHosts[k-1], gpuIndexes[k-1])
				break
			}
		}
		if j == 5000 {
			if samples != 120*2000 || mean == nil || *mean != 42 || hostsN != 2000 {
				t.Errorf("job 5000: samples %d, util_mean %v, %d GPUs listed; want %d, 42, 2000", samples, mean, hostsN, 120*2000)
			}
			continue
		}
		if j%3 == 0 {
			if samples != 0 || mean != nil || hostsN != 0 {
				t.Errorf("job %d (no allocation): samples %d, util_mean %v, %d GPUs listed; want none", j, samples, mean, hostsN)
			}
			continue
		}
		if want := uint64(120 * (1 + j%8)); samples != want || mean == nil || *mean != float32(j%97) || hostsN != 1+j%8 {
			t.Errorf("job %d: samples %d, util_mean %v, %d GPUs listed; want %d, %d, %d", j, samples, mean, hostsN, want, j%97, 1+j%8)
		}
		if slices.Contains(flags, ingest.FlagNoSamples) {
			t.Errorf("job %d flagged %v", j, flags)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if seen != jobs+2 {
		t.Errorf("%d summaries; want %d", seen, jobs+2)
	}
}

// TestSummarizerLongJobIDs: a pass's job IDs are spread over several
// allocation queries when together they would exceed ClickHouse's
// max_query_size (256 KiB): 1,000 IDs of 280 bytes.
func TestSummarizerLongJobIDs(t *testing.T) {
	const jobs = 1000
	ch, conn := schematest.Database(t)
	ctx := context.Background()
	db := ch.Database
	prefix := strings.Repeat("x", 276)
	base := time.Now().Add(-3*time.Hour).Unix() - jobs*60
	// Job j runs from base + 60j for an hour on GPU 0 of host h<j>, with two
	// samples at 7 %.
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO %[1]s.jobs (cluster, job_id, user, partition_name, state, submit_time, start_time, end_time, gpus, last_event, updated_at, inserted_at, version)
SELECT 'c1', concat('%[2]s', toString(number)), 'u', 'gpu', 'COMPLETED', toDateTime(%[3]d + number * 60), toDateTime(%[3]d + number * 60),
  toDateTime(%[3]d + number * 60 + 3600), toUInt32(1), 'END', toDateTime(%[3]d + number * 60 + 3600), toDateTime(%[3]d + number * 60 + 3600), toUInt64(4)
FROM system.numbers LIMIT %[4]d`, db, prefix, base, jobs),
		fmt.Sprintf(`INSERT INTO %[1]s.gpu_allocations (cluster, host, gpu_index, gpu_uuid, mig_uuid, job_id, user, alloc_start, alloc_end, source, version)
SELECT 'c1', concat('h', toString(number)), toInt32(0), '', '', concat('%[2]s', toString(number)), 'u', toDateTime(%[3]d + number * 60), toDateTime(%[3]d + number * 60 + 3600), 'slurm', 1
FROM system.numbers LIMIT %[4]d`, db, prefix, base, jobs),
		fmt.Sprintf(`INSERT INTO %[1]s.gpu_samples (ts, ts_millis, cluster, host, gpu_index, gpu_uuid, mig_uuid, gpu_util, kafka_partition, kafka_offset)
SELECT toDateTime(%[2]d + j * 60 + 60 * (k + 1)), 0, 'c1', concat('h', toString(j)), toUInt16(0), '', '', toUInt8(7), 0, 0
FROM (SELECT j, arrayJoin([0, 1]) AS k FROM (SELECT number AS j FROM system.numbers LIMIT %[3]d))`, db, base, jobs),
	} {
		if err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	copyJobRuns(t, conn, db)
	sum, err := ingest.NewSummarizer(ingest.SummaryConfig{Database: db}, conn, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := sum.Once(ctx); err != nil || n != jobs {
		t.Fatalf("Once = %d, %v; want %d", n, err, jobs)
	}
	var n, withSamples uint64
	if err := conn.QueryRow(ctx, "SELECT count(), countIf(samples = 2 AND length(gpu_hosts) = 1) FROM "+db+".job_run_summary FINAL").Scan(&n, &withSamples); err != nil {
		t.Fatal(err)
	}
	if n != jobs || withSamples != jobs {
		t.Errorf("%d summaries, %d with their GPU and its 2 samples; want %d, %d", n, withSamples, jobs, jobs)
	}
}

// insertEndedJob writes the jobs and job_runs row of a job that ran for the
// hour before inserted and whose END reached ClickHouse at inserted.
func insertEndedJob(t testing.TB, conn driver.Conn, db, id string, inserted time.Time) {
	t.Helper()
	for _, table := range []string{"jobs", "job_runs"} {
		b, err := conn.PrepareBatch(context.Background(), "INSERT INTO "+db+"."+table+" (cluster, job_id, user, state, submit_time, start_time, end_time, gpus, last_event, updated_at, inserted_at, version)")
		if err != nil {
			t.Fatal(err)
		}
		start := inserted.Add(-time.Hour)
		g := uint32(1)
		if err := b.Append("c1", id, "u1", "COMPLETED", start, &start, &inserted, &g, "END", inserted, inserted, uint64(inserted.Unix())); err != nil {
			t.Fatal(err)
		}
		if err := b.Send(); err != nil {
			t.Fatal(err)
		}
	}
}

// copyJobRuns copies the rows of db.jobs into db.job_runs, as the views write
// both from job_events, for tests that fill jobs with a query (each job run
// once). The two tables have the same columns in the same order.
func copyJobRuns(t testing.TB, conn driver.Conn, db string) {
	t.Helper()
	if err := conn.Exec(context.Background(), "INSERT INTO "+db+".job_runs SELECT * FROM "+db+".jobs"); err != nil {
		t.Fatalf("copy %s.jobs into job_runs: %v", db, err)
	}
}

// TestSummarizerBacklog checks that Run works through more ended jobs than
// one batch holds without waiting for the next tick, and says how far it got.
func TestSummarizerBacklog(t *testing.T) {
	ch, conn := schematest.Database(t)
	for i := range 5 {
		insertEndedJob(t, conn, ch.Database, fmt.Sprint("j", i), time.Now().Add(-time.Hour))
	}
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	sum, err := ingest.NewSummarizer(ingest.SummaryConfig{Database: ch.Database, Interval: time.Hour, Batch: 2}, conn, logger, prometheus.NewRegistry(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sum.Run(ctx) }()
	waitCount(t, conn, ch.Database+".job_run_summary", 5, 30*time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if n := strings.Count(out, "summarizing a backlog of ended jobs"); n != 2 {
		t.Errorf("%d backlog progress lines; want 2 (after 2 and 4 jobs):\n%s", n, out)
	}
	if !strings.Contains(out, "job summary backlog done") || !strings.Contains(out, "jobs=5") {
		t.Errorf("no line saying the backlog of 5 jobs is done:\n%s", out)
	}
}
