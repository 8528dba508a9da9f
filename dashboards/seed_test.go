package dashboards

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/heliostat-dev/heliostat/actuator/adapter"
	"github.com/heliostat-dev/heliostat/actuator/audit"
	"github.com/heliostat-dev/heliostat/actuator/ces"
	"github.com/heliostat-dev/heliostat/actuator/loop"
	"github.com/heliostat-dev/heliostat/actuator/simadapter"
	"github.com/heliostat-dev/heliostat/analytics"
	"github.com/heliostat-dev/heliostat/collector"
	"github.com/heliostat-dev/heliostat/collector/attrib"
	"github.com/heliostat-dev/heliostat/collector/nvml"
	"github.com/heliostat-dev/heliostat/collector/publish"
	"github.com/heliostat-dev/heliostat/collector/sim"
	"github.com/heliostat-dev/heliostat/collector/slurm"
	"github.com/heliostat-dev/heliostat/collector/synthetic"
	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/internal/buildinfo"
	"github.com/heliostat-dev/heliostat/internal/health"
	"github.com/heliostat-dev/heliostat/predictor/live"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

func TestMain(m *testing.M) { os.Exit(schematest.Main(m)) }

const seedCluster = "dash"

// seeded is a ClickHouse database filled through heliostat's own pipeline,
// and the metric registries of the components that filled it.
type seeded struct {
	db   string
	conn driver.Conn
	// grafana is a connection whose default database is db, as the
	// plugin's (defaultDatabase): the dashboards name tables unqualified.
	grafana  driver.Conn
	from, to time.Time // a time range that covers the data
	// registries by component, built as the commands build them.
	registries map[string]*prometheus.Registry
}

// counter is a collector.Publisher that passes messages on and counts the
// rows each should land in ClickHouse, so that the test can wait for ingest.
type counter struct {
	pub  collector.Publisher
	mu   sync.Mutex
	rows map[string]uint64 // table → rows
}

func (c *counter) Publish(ctx context.Context, topic string, key, value []byte) error {
	if err := c.pub.Publish(ctx, topic, key, value); err != nil {
		return err
	}
	table, n := "", 0
	switch topic {
	case schemas.TopicGPUSamples:
		var b schemas.SampleBatch
		if schemas.DecodeSampleBatch(value, &b) == nil {
			table, n = "gpu_samples", len(b.Samples)
		}
	case schemas.TopicGPUEvents:
		var b schemas.EventBatch
		if schemas.DecodeEventBatch(value, &b) == nil {
			table, n = "gpu_events", len(b.Events)
		}
	case schemas.TopicJobEvents:
		var b schemas.JobEventBatch
		if schemas.DecodeJobEventBatch(value, &b) == nil {
			table, n = "job_events", len(b.Events)
		}
	case schemas.TopicAllocations:
		var b schemas.AllocBatch
		if schemas.DecodeAllocBatch(value, &b) == nil {
			table, n = "gpu_allocations", len(b.Allocs)
		}
	}
	c.mu.Lock()
	if table != "" {
		c.rows[table] += uint64(n)
	}
	c.mu.Unlock()
	return nil
}

// waitIngested waits until ingest_ledger holds every row published so far.
func (c *counter) waitIngested(t *testing.T, conn driver.Conn, db string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		c.mu.Lock()
		want := make(map[string]uint64, len(c.rows))
		for k, v := range c.rows {
			want[k] = v
		}
		c.mu.Unlock()
		got := map[string]uint64{}
		rows, err := conn.Query(context.Background(), "SELECT tbl, sum(rows) FROM "+db+".ingest_ledger GROUP BY tbl")
		if err != nil {
			t.Fatalf("read ingest ledger: %v", err)
		}
		for rows.Next() {
			var tbl string
			var n uint64
			if err := rows.Scan(&tbl, &n); err != nil {
				t.Fatal(err)
			}
			got[tbl] = n
		}
		rows.Close()
		done := true
		for k, v := range want {
			if got[k] != v {
				done = false
			}
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ingest did not catch up: ledger %v, published %v", got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// seed fills a fresh database the way a running heliostat would: the
// simulated cluster publishes six hours of jobs, allocations and GPU samples
// through the Kafka publisher to a Kafka-protocol broker, ingest writes them
// to ClickHouse, and the live predictor runs after every simulated hour (so
// that it sees jobs before they end). Added through the same publisher: XID
// and ECC events on two simulated GPUs, a job that sat on two GPUs without
// using them (idle-allocated), and one undecodable message (a dead letter).
// Then the job summarizer and the characterization runs (the day and the
// month windows) write their tables. The actuator's control loop runs on the
// simulated cluster throughout, every action in the audit table.
func seed(t *testing.T) *seeded {
	t.Helper()
	ctx := context.Background()
	ch, conn := schematest.Database(t)
	db := ch.Database
	_, broker := schematest.Broker(t, kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err := ingest.EnsureTopics(ctx, []string{broker}, 2, schemas.DataTopics()...); err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s := &seeded{db: db, conn: conn, registries: map[string]*prometheus.Registry{}}
	reg := func(name string) *prometheus.Registry {
		r := prometheus.NewRegistry()
		// Every command registers heliostat_ready and
		// heliostat_build_info beside its components' metrics
		// (serveMetrics, the actuator command); heliostat_ready's values
		// are tested with the probes in cmd/heliostat.
		r.MustRegister(health.Gauge(func() error { return nil }), buildinfo.Collector())
		// The parts that wait for ClickHouse at start-up, and have it.
		if name == "ingest" || name == "predictor" || name == "actuator" || name == "analytics" {
			w := health.StartWaiting()
			w.WithLabelValues("clickhouse").Set(0)
			r.MustRegister(w)
		}
		s.registries[name] = r
		return r
	}

	// collector --source sim: the publisher and the simulator on one registry.
	simReg := reg("collector --source sim")
	pub, err := publish.New(publish.Config{Brokers: []string{broker}, SpoolDir: t.TempDir()}, logger, simReg)
	if err != nil {
		t.Fatal(err)
	}
	pubCtx, stopPub := context.WithCancel(ctx)
	pubDone := make(chan error, 1)
	go func() { pubDone <- pub.Run(pubCtx) }()
	defer func() {
		stopPub()
		if err := <-pubDone; err != nil {
			t.Errorf("publisher Run: %v", err)
		}
		if err := pub.Close(); err != nil {
			t.Errorf("publisher Close: %v", err)
		}
	}()
	cnt := &counter{pub: pub, rows: map[string]uint64{}}

	// The same weekday and hour every run, so that the workload (diurnal and
	// seeded) does not depend on when the test runs, and at least a day old.
	start := time.Now().UTC().Truncate(24 * time.Hour).Add(-24 * time.Hour)
	for start.Weekday() != time.Wednesday {
		start = start.Add(-24 * time.Hour)
	}
	start = start.Add(9 * time.Hour)
	const hours = 6
	simu, err := sim.New(sim.Config{Cluster: seedCluster, Seed: 11, VCs: "vc1:4,vc2:4", JobsPerHour: 30, SampleInterval: 30 * time.Second, Start: start, Duration: 24 * time.Hour, Backfill: true},
		nil, nil, cnt, logger, simReg, nil)
	if err != nil {
		t.Fatal(err)
	}

	// ingest, with its job summarizer on the same registry.
	ingReg := reg("ingest")
	in, err := ingest.New(ingest.Config{Brokers: []string{broker}, Group: "g-" + db, ClickHouse: ch,
		BatchRows: 50_000, BatchInterval: 100 * time.Millisecond, SessionTimeout: time.Second}, conn, logger, ingReg)
	if err != nil {
		t.Fatal(err)
	}
	// As the ingest command does at start: the topics' retention (kfake's
	// default, 7 days), for the panel and the alert that compare the lag
	// with it.
	if err := in.CheckRetention(ctx); err != nil {
		t.Fatal(err)
	}
	summ, err := ingest.NewSummarizer(ingest.SummaryConfig{Database: db}, conn, logger, ingReg, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stopIngest := context.WithCancel(ctx)
	ingDone := make(chan error, 1)
	go func() { ingDone <- in.Run(runCtx) }()
	defer func() {
		stopIngest()
		if err := <-ingDone; err != nil {
			t.Errorf("ingest Run: %v", err)
		}
	}()

	// predictor run, retraining at every pass.
	pred, err := live.New(live.Config{Database: db, Interval: time.Millisecond, RetrainInterval: time.Millisecond},
		conn, logger, reg("predictor"), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	// actuator: the control loop on the simulated cluster, applying (the
	// simulator is its scheduler), with the live predictor's estimates and
	// the audit table, a pass every 10 simulated minutes.
	guard, err := adapter.NewGuard(adapter.GuardConfig{Apply: true, Partitions: []string{"*"}, Nodes: []string{"sim-node-*"}},
		simadapter.New(simu), simu.Now)
	if err != nil {
		t.Fatal(err)
	}
	auditLog, err := audit.New(conn, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	lc := loop.Config{Cluster: seedCluster, PeakWindow: 30 * time.Minute, CES: ces.DefaultConfig()}
	act, err := loop.New(lc, guard, auditLog, pred, nil, logger, reg("actuator"), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	var outcomes, predictions, actions int
	for h := 1; h <= hours; h++ {
		for m := 10; m <= 60; m += 10 {
			if err := simu.Advance(ctx, start.Add(time.Duration(h-1)*time.Hour+time.Duration(m)*time.Minute)); err != nil {
				t.Fatal(err)
			}
			rep, err := act.Once(ctx)
			if err != nil {
				t.Fatalf("actuator pass at %v: %v", simu.Now(), err)
			}
			actions += len(rep.Actions)
		}
		if err := pub.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		cnt.waitIngested(t, conn, db)
		if h == 1 {
			publishExtras(t, cnt, conn, db, start)
			if err := pub.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			cnt.waitIngested(t, conn, db)
		}
		p, err := pred.Once(ctx)
		if err != nil {
			t.Fatalf("predictor pass after hour %d: %v", h, err)
		}
		predictions += p.Predictions
		outcomes += p.Outcomes
	}
	if predictions == 0 || outcomes == 0 || actions == 0 {
		t.Fatalf("the predictor wrote %d predictions and %d outcomes, the actuator %d actions; want some of each", predictions, outcomes, actions)
	}
	for {
		n, err := summ.Once(ctx)
		if err != nil {
			t.Fatalf("job summarizer: %v", err)
		}
		if n == 0 {
			break
		}
	}

	// analytics: the day and the month that hold the simulated hours.
	runner, err := analytics.NewRunner(analytics.Config{Database: db, TimeZone: "UTC"}, conn, logger, reg("analytics"), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []analytics.Period{analytics.Day, analytics.Month} {
		if _, err := runner.RunWindow(ctx, p.Containing(start, time.UTC)); err != nil {
			t.Fatalf("analytics %s window: %v", p, err)
		}
	}

	// Components whose metrics the pipeline dashboard and the alerts read
	// but that did not take part: a GPU collector with its GPU attribution,
	// and the Slurm job source, each with its own publisher, built as their
	// commands build them.
	colReg := reg("collector")
	colPub, err := publish.New(publish.Config{Brokers: []string{broker}, SpoolDir: t.TempDir()}, logger, colReg)
	if err != nil {
		t.Fatal(err)
	}
	defer colPub.Close()
	col, err := collector.New(collector.Config{Cluster: seedCluster, Host: "gpu-host", Interval: collector.MinInterval}, synthetic.New("gpu-host", 2, 1), colPub, logger, colReg, nil)
	if err != nil {
		t.Fatal(err)
	}
	jobPub := &collector.JobPublisher{Pub: colPub, Cluster: seedCluster, Source: schemas.SourceSlurm}
	att, err := attrib.New(attrib.Config{Host: "gpu-host", StateFile: t.TempDir() + "/attribution.json"}, noProcesses{}, jobPub, logger, colReg, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Both run until ready (a tick, a poll), so their gauges say what a
	// running collector's do, not what they say before the first tick.
	runUntilReady(t, "GPU collector", col.Run, col.Ready)
	runUntilReady(t, "GPU attribution", att.Run, att.Ready)
	// The nvml source's own metrics (read errors, lost GPUs), registered as
	// runCollectorParts does, on go-nvml's 8-GPU mock.
	gpus := dgxa100.New()
	for _, d := range gpus.Devices {
		d := d.(*dgxa100.Device)
		d.GetPciInfoFunc = func() (gonvml.PciInfo, gonvml.Return) {
			var p gonvml.PciInfo
			copy(p.BusId[:], d.PciBusID)
			return p, gonvml.SUCCESS
		}
		d.GpmQueryDeviceSupportFunc = func() (gonvml.GpmSupport, gonvml.Return) { return gonvml.GpmSupport{}, gonvml.SUCCESS }
	}
	nv, err := nvml.New(gpus, logger, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer nv.Close()
	colReg.MustRegister(nv.Collector())
	slurmReg := reg("collector --source slurm")
	slurmPub, err := publish.New(publish.Config{Brokers: []string{broker}, SpoolDir: t.TempDir()}, logger, slurmReg)
	if err != nil {
		t.Fatal(err)
	}
	defer slurmPub.Close()
	if _, err := slurm.New(slurm.Config{Cluster: seedCluster, StateFile: t.TempDir() + "/slurm-state.json"}, slurmPub, logger, slurmReg, time.Now); err != nil {
		t.Fatal(err)
	}

	s.grafana, err = clickhouse.Open(&clickhouse.Options{Protocol: ch.ClientProtocol(), Addr: []string{ch.Addr}, Auth: clickhouse.Auth{Database: db, Username: "default"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.grafana.Close() })
	s.from = start.Add(-time.Hour)
	s.to = time.Now().Add(time.Minute)
	for _, table := range []string{"jobs FINAL", "job_runs FINAL", "gpu_samples", "gpu_events", "gpu_allocations FINAL", "job_run_summary FINAL", "predictions FINAL", "prediction_outcomes FINAL", "prediction_models", "actions FINAL", "analytics_headline"} {
		t.Logf("seeded %s: %d rows", table, schematest.Count(t, conn, db+"."+table))
	}
	return s
}

// runUntilReady runs a component until ready reports no error, then stops
// it and waits for run to return.
func runUntilReady(t *testing.T, what string, run func(context.Context) error, ready func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for ready() != nil && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if err := ready(); err != nil {
		t.Fatalf("%s not ready within 30s: %v", what, err)
	}
}

// noProcesses lists no GPU process: the attribution beside the GPU
// collector, for its metrics.
type noProcesses struct{}

func (noProcesses) GPUProcesses() ([]collector.GPUProcesses, error) { return nil, nil }

// publishExtras publishes, through the same publisher as the simulator, what
// the simulated cluster does not produce: XID and ECC events on GPUs of two
// simulated nodes, a job that held two GPUs of a workstation for an hour
// without using them, and a message that does not decode.
func publishExtras(t *testing.T, pub collector.Publisher, conn driver.Conn, db string, start time.Time) {
	t.Helper()
	ctx := context.Background()
	at := func(d time.Duration) int64 { return start.Add(d).UnixMilli() }
	// Device events name GPUs by UUID: the first GPU of two simulated nodes.
	events := []schemas.GPUEvent{
		{TSMillis: at(10 * time.Minute), Type: schemas.EventXID, XID: 79},
		{TSMillis: at(12 * time.Minute), Type: schemas.EventECCDoubleBit, XID: 1},
		{TSMillis: at(20 * time.Minute), Type: schemas.EventXID, XID: 13},
		{TSMillis: at(25 * time.Minute), Type: schemas.EventECCSingleBit, XID: 3},
	}
	for i, host := range []string{"sim-node-002", "sim-node-005"} {
		var uuid string
		q := fmt.Sprintf("SELECT gpu_uuid FROM %s.gpu_inventory FINAL WHERE cluster = '%s' AND host = '%s' AND gpu_index = 0", db, seedCluster, host)
		if err := conn.QueryRow(ctx, q).Scan(&uuid); err != nil {
			t.Fatalf("GPU 0 of %s: %v", host, err)
		}
		b := schemas.EventBatch{Cluster: seedCluster, Host: host}
		for _, e := range events[2*i : 2*i+2] {
			e.GPUUUID = uuid
			b.Events = append(b.Events, e)
		}
		msg, err := schemas.AppendEventBatch(nil, &b)
		if err != nil {
			t.Fatal(err)
		}
		if err := pub.Publish(ctx, schemas.TopicGPUEvents, []byte(host), msg); err != nil {
			t.Fatal(err)
		}
	}

	// The idle job: SUBMIT, START and END events, the two GPUs' allocation,
	// and an hour of samples at 0% utilization.
	const host, jobID = "dash-ws-01", "idle-1"
	jp := collector.JobPublisher{Pub: pub, Cluster: seedCluster, Source: schemas.SourceSlurm}
	base := schemas.JobEvent{JobID: jobID, ArrayTaskID: schemas.Unknown, Name: "notebook", User: "idler", UID: schemas.Unknown,
		Partition: "vc2", ExitCode: schemas.Unknown, Priority: schemas.Unknown, SubmitMillis: at(5 * time.Minute),
		TimeLimitS: 8 * 3600, NodeCount: 1, CPUs: 8, GPUs: 2, MemReqBytes: schemas.Unknown, Nodes: []string{host}}
	sub, run, end := base, base, base
	sub.Type, sub.State, sub.EventMillis, sub.Nodes = schemas.JobSubmit, schemas.StatePending, base.SubmitMillis, nil
	run.Type, run.State, run.StartMillis = schemas.JobStart, schemas.StateRunning, at(6*time.Minute)
	run.EventMillis = run.StartMillis
	end.Type, end.State, end.StartMillis, end.EndMillis, end.ExitCode = schemas.JobEnd, schemas.StateCompleted, run.StartMillis, at(66*time.Minute), 0
	end.EventMillis = end.EndMillis
	if err := jp.PublishJob(ctx, []schemas.JobEvent{sub, run, end}); err != nil {
		t.Fatal(err)
	}
	gpus := []schemas.GPU{
		{Index: 0, UUID: "GPU-ws01-0", Minor: 0, Model: "NVIDIA RTX A6000", DriverVersion: "550.54", GIID: -1, CIID: -1},
		{Index: 1, UUID: "GPU-ws01-1", Minor: 1, Model: "NVIDIA RTX A6000", DriverVersion: "550.54", GIID: -1, CIID: -1},
	}
	var allocs []schemas.Alloc
	for _, g := range gpus {
		allocs = append(allocs, schemas.Alloc{Host: host, GPUIndex: int64(g.Index), GPUUUID: g.UUID, JobID: jobID, User: "idler",
			StartMillis: run.StartMillis, EndMillis: end.EndMillis, Source: schemas.AllocScontrol})
	}
	if err := jp.PublishAllocs(ctx, string(schemas.JobKey(seedCluster, jobID)), allocs); err != nil {
		t.Fatal(err)
	}
	b := schemas.SampleBatch{Cluster: seedCluster, Host: host, GPUs: gpus}
	for ms := at(0); ms < at(90*time.Minute); ms += 10_000 {
		for i := range gpus {
			var smp schemas.Sample
			smp.TSMillis, smp.GPU = ms, uint32(i)
			smp.Set(schemas.GPUUtil, 0)
			smp.Set(schemas.MemUtil, 0)
			smp.Set(schemas.PowerUsage, 22_000)
			smp.Set(schemas.GPUTemp, 31)
			smp.Set(schemas.FBUsed, 2<<30)
			b.Samples = append(b.Samples, smp)
		}
	}
	msg, err := schemas.AppendSampleBatch(nil, &b)
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(ctx, schemas.TopicGPUSamples, []byte(host), msg); err != nil {
		t.Fatal(err)
	}

	// A message no decoder accepts: ingest sends it to the dead-letter topic.
	if err := pub.Publish(ctx, schemas.TopicJobEvents, []byte("garbage"), []byte("not a heliostat message")); err != nil {
		t.Fatal(err)
	}
}
