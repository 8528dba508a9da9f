package sim

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/heliostat-dev/heliostat/collector"
	"github.com/heliostat-dev/heliostat/collector/sim/simtest"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

func TestMain(m *testing.M) { os.Exit(schematest.Main(m)) }

// tee publishes through pub and keeps a copy of every message it accepted.
type tee struct {
	pub collector.Publisher
	rec recorder
}

func (t *tee) Publish(ctx context.Context, topic string, key, value []byte) error {
	if err := t.pub.Publish(ctx, topic, key, value); err != nil {
		return err
	}
	return t.rec.Publish(ctx, topic, key, value)
}

// TestEndToEnd runs the simulated cluster through the publisher, a Kafka-
// protocol broker and ingest into ClickHouse, and checks in SQL that every
// busy GPU sample lies inside an allocation of a job running on that GPU,
// that no idle sample does, and that the counts of jobs, events,
// allocations and samples agree with what the simulator published.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ClickHouse and a broker; skipped with -short")
	}
	sp := simtest.New(t)
	conn, db, pub, logger := sp.Conn, sp.DB, sp.Pub, sp.Logger
	ctx := context.Background()

	// Recent enough that no retention would touch it, and always the same
	// weekday and hour, so that the diurnal submission pattern (and with the
	// seed, the whole workload) does not depend on when the test runs.
	start := time.Now().UTC().Truncate(24 * time.Hour).Add(-24 * time.Hour)
	for start.Weekday() != time.Wednesday {
		start = start.Add(-24 * time.Hour)
	}
	start = start.Add(9 * time.Hour)
	tp := &tee{pub: pub}
	cfg := Config{Cluster: "e2e", Seed: 5, VCs: "vc1:4,vc2:4", JobsPerHour: 20, Duration: 6 * time.Hour, Start: start, Backfill: true}
	s, err := New(cfg, nil, nil, tp, logger, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if err := pub.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	p := tp.rec.decode(t, "e2e")
	checkConsistent(t, p)
	st := s.Stats()
	if st.Submitted < 50 || len(p.last) != int(st.Submitted) {
		t.Fatalf("%d jobs published, %d submitted; want the same, at least 50", len(p.last), st.Submitted)
	}
	var busy uint64
	for _, smp := range p.samples {
		if u, _ := smp.s.Uint(schemas.GPUUtil); u > 0 {
			busy++
		}
	}

	waitRows(t, conn, db+".gpu_samples", uint64(len(p.samples)))
	waitRows(t, conn, db+".job_events FINAL", uint64(len(p.events)))
	// Every interval closed: an interval's opening and closing rows may
	// land in different batches, so its row alone does not say the close
	// is in.
	waitRows(t, conn, db+".gpu_allocations FINAL WHERE alloc_end IS NOT NULL", uint64(len(p.intervals())))

	if n := schematest.Count(t, conn, db+".jobs FINAL"); n != uint64(st.Submitted) {
		t.Errorf("jobs FINAL = %d rows; %d submitted", n, st.Submitted)
	}
	if n := schematest.Count(t, conn, db+".jobs FINAL WHERE last_event != 'END' OR end_time IS NULL"); n != 0 {
		t.Errorf("%d jobs not ended; Run ends every job", n)
	}
	if n := schematest.Count(t, conn, db+".gpu_allocations FINAL WHERE alloc_end IS NULL"); n != 0 {
		t.Errorf("%d allocations open; Run closes every one", n)
	}
	if n := schematest.Count(t, conn, db+".gpu_samples WHERE gpu_util > 0"); n != busy || n == 0 {
		t.Errorf("%d busy samples in ClickHouse; %d published", n, busy)
	}
	// Busy samples covered by an allocation of a job that was running then,
	// on the same host and GPU.
	covered := func(util string) uint64 {
		var n uint64
		q := `SELECT uniqExact(host, gpu_uuid, ts) FROM (
			SELECT host, gpu_uuid, ts, job_id FROM (
				SELECT cluster, host, gpu_uuid, toInt32(gpu_index) AS gpu_index, ts FROM ` + db + `.gpu_samples WHERE ` + util + `
			) AS s ALL INNER JOIN (
				SELECT cluster, host, gpu_uuid, gpu_index, job_id, alloc_start, alloc_end FROM ` + db + `.gpu_allocations FINAL
			) AS a USING (cluster, host, gpu_uuid, gpu_index)
			WHERE ts >= alloc_start AND (isNull(alloc_end) OR ts < alloc_end)
		) AS sa ALL INNER JOIN (
			SELECT job_id, start_time, end_time, nodes FROM ` + db + `.jobs FINAL WHERE cluster = 'e2e'
		) AS j USING (job_id)
		WHERE ts >= start_time AND (isNull(end_time) OR ts < end_time) AND has(nodes, host)`
		if err := conn.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatalf("covered samples: %v", err)
		}
		return n
	}
	if n := covered("gpu_util > 0"); n != busy {
		t.Errorf("%d of %d busy samples lie inside an allocation of a job running on that GPU; want all", n, busy)
	}
	if n := covered("gpu_util = 0"); n != 0 {
		t.Errorf("%d idle samples lie inside an allocation; want none", n)
	}
	var states = map[string]uint64{}
	for _, e := range p.last {
		states[e.State.String()]++
	}
	rows, err := conn.Query(ctx, "SELECT state, count() FROM "+db+".jobs FINAL GROUP BY state")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]uint64{}
	for rows.Next() {
		var st string
		var n uint64
		if err := rows.Scan(&st, &n); err != nil {
			t.Fatal(err)
		}
		got[st] = n
	}
	for st, n := range states {
		if got[st] != n {
			t.Errorf("jobs in state %s: %d in ClickHouse, %d published", st, got[st], n)
		}
	}
	t.Logf("%d jobs %v, %d events, %d allocations, %d samples (%d busy)", len(p.last), got, len(p.events), len(p.intervals()), len(p.samples), busy)
}

func waitRows(t *testing.T, conn driver.Conn, from string, want uint64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var n uint64
	for time.Now().Before(deadline) {
		if n = schematest.Count(t, conn, from); n >= want {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if n != want {
		t.Fatalf("count(%s) = %d; want %d", from, n, want)
	}
}
