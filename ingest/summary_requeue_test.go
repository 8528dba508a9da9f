package ingest_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// jobRow is one row of jobs as jobs_mv writes it for an event of a job of
// cluster c1. A zero start or end is NULL.
type jobRow struct {
	id, event, state   string
	submit, start, end time.Time
	gpus               *uint32
	at, inserted       time.Time // the event's time; when it reached ClickHouse
}

// insertJobRows writes rows to db.jobs, each versioned as jobs_mv versions
// its event.
func insertJobRows(t testing.TB, conn driver.Conn, db string, rows ...jobRow) {
	t.Helper()
	b, err := conn.PrepareBatch(context.Background(), "INSERT INTO "+db+".jobs (cluster, job_id, user, partition_name, state, submit_time, start_time, end_time, gpus, last_event, updated_at, inserted_at, version)")
	if err != nil {
		t.Fatal(err)
	}
	order := map[string]uint64{"SUBMIT": 1, "UPDATE": 2, "START": 3, "END": 4}
	for _, r := range rows {
		var start, end *time.Time
		if !r.start.IsZero() {
			start = &r.start
		}
		if !r.end.IsZero() {
			end = &r.end
		}
		if err := b.Append("c1", r.id, "u1", "gpu", r.state, r.submit, start, end, r.gpus, r.event, r.at, r.inserted,
			uint64(r.at.UnixMilli())*8+order[r.event]); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
}

// allocRow is an allocation interval of GPUs 0..gpus-1 of host to a job of
// cluster c1; a zero to leaves it open.
type allocRow struct {
	host     string
	gpus     int
	job      string
	from, to time.Time
}

// insertAllocs writes each interval as a source does: its open row (version
// 0, no end) and, for a closed one, the closing row (version = end in ms).
// The rows stay unmerged, as they are until a background merge.
func insertAllocs(t testing.TB, conn driver.Conn, db string, allocs ...allocRow) {
	t.Helper()
	b, err := conn.PrepareBatch(context.Background(), "INSERT INTO "+db+".gpu_allocations (cluster, host, gpu_index, gpu_uuid, mig_uuid, job_id, user, alloc_start, alloc_end, source, version)")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range allocs {
		for g := range a.gpus {
			if err := b.Append("c1", a.host, int32(g), "", "", a.job, "u1", a.from, (*time.Time)(nil), "slurm", uint64(0)); err != nil {
				t.Fatal(err)
			}
			if !a.to.IsZero() {
				if err := b.Append("c1", a.host, int32(g), "", "", a.job, "u1", a.from, &a.to, "slurm", uint64(a.to.UnixMilli())); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
}

// insertSamples writes a sample a minute in [from, to) of GPUs 0..gpus-1 of
// host, at util percent.
func insertSamples(t testing.TB, conn driver.Conn, db, host string, gpus int, from, to time.Time, util uint8) {
	t.Helper()
	q := fmt.Sprintf(`INSERT INTO %[1]s.gpu_samples (ts, ts_millis, cluster, host, gpu_index, gpu_uuid, mig_uuid, gpu_util, kafka_partition, kafka_offset)
SELECT toDateTime(%[3]d + k * 60), 0, 'c1', %[2]s, toUInt16(g), '', '', toUInt8(%[5]d), 0, 0
FROM (SELECT arrayJoin(range(toUInt64(%[6]d))) AS g, arrayJoin(range(toUInt64(%[4]d))) AS k)`,
		db, "'"+host+"'", from.Unix(), int(to.Sub(from)/time.Minute), util, gpus)
	if err := conn.Exec(context.Background(), q); err != nil {
		t.Fatal(err)
	}
}

// jobSummary is the job_summary FINAL row of a job, as far as these tests
// read it.
type jobSummary struct {
	state     string
	gpus      uint32
	end       time.Time
	elapsed   uint32
	gpuHours  float64
	hosts     []string
	utilMean  *float32
	zeroHours *float64
	flags     []string
}

func (s jobSummary) String() string {
	f := func(p any) string {
		switch v := p.(type) {
		case *float32:
			if v != nil {
				return fmt.Sprint(*v)
			}
		case *float64:
			if v != nil {
				return fmt.Sprint(*v)
			}
		}
		return "NULL"
	}
	return fmt.Sprintf("{%s gpus %d end %s elapsed %d gpu_hours %v hosts %v util_mean %s zero_util_gpu_hours %s flags %v}",
		s.state, s.gpus, s.end.UTC().Format(time.DateTime), s.elapsed, s.gpuHours, s.hosts, f(s.utilMean), f(s.zeroHours), s.flags)
}

// readSummary returns the job_summary FINAL row of job id, failing the test
// unless there is exactly one.
func readSummary(t testing.TB, conn driver.Conn, db, id string) jobSummary {
	t.Helper()
	rows, err := conn.Query(context.Background(), "SELECT state, gpus, end_time, elapsed_s, gpu_hours, gpu_hosts, util_mean, zero_util_gpu_hours, flags FROM "+
		db+".job_summary FINAL WHERE cluster = 'c1' AND job_id = '"+id+"'")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []jobSummary
	for rows.Next() {
		var s jobSummary
		if err := rows.Scan(&s.state, &s.gpus, &s.end, &s.elapsed, &s.gpuHours, &s.hosts, &s.utilMean, &s.zeroHours, &s.flags); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 {
		t.Fatalf("job_summary FINAL holds %d rows of job %s: %v; want 1", len(out), id, out)
	}
	return out[0]
}

func u32(n uint32) *uint32 { return &n }

// TestSummarizerRequeuedJob: job 100 ran on 4 GPUs of h1 until it was
// preempted, was requeued, and ran 4 h on 4 GPUs of h2 at 90 %; job 200 then
// held h1's GPUs, idle. The summary of job 100 is its latest run's: the GPUs
// of h2 only, at 90 %, with no idle GPU hours, and where Slurm gave no GPU
// count, 4 GPUs (those of the run), not 8. Both runs' allocation rows are
// unmerged (an open row and the closing one), as ingest leaves them.
func TestSummarizerRequeuedJob(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	for _, tc := range []struct {
		name string
		gpus *uint32 // job 100's GPU count in jobs
	}{
		{"gpus recorded", u32(4)},
		{"gpus unknown", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, conn := schematest.Database(t)
			db := ch.Database
			insertJobRows(t, conn, db,
				// Run 1: preempted after an hour on h1.
				jobRow{id: "100", event: "END", state: "PREEMPTED", submit: t0, start: at(time.Minute), end: at(time.Hour), gpus: tc.gpus, at: at(time.Hour), inserted: at(time.Hour)},
				// Run 2: requeued at its end, ran 4 h on h2.
				jobRow{id: "100", event: "END", state: "COMPLETED", submit: at(time.Hour), start: at(2 * time.Hour), end: at(6 * time.Hour), gpus: tc.gpus, at: at(6 * time.Hour), inserted: at(6 * time.Hour)},
				jobRow{id: "200", event: "END", state: "COMPLETED", submit: at(time.Hour), start: at(time.Hour + 5*time.Minute), end: at(7 * time.Hour), gpus: u32(4), at: at(7 * time.Hour), inserted: at(7 * time.Hour)},
			)
			insertAllocs(t, conn, db,
				allocRow{"h1", 4, "100", at(time.Minute), at(time.Hour)},
				allocRow{"h2", 4, "100", at(2 * time.Hour), at(6 * time.Hour)},
				allocRow{"h1", 4, "200", at(time.Hour + 5*time.Minute), at(7 * time.Hour)},
			)
			insertSamples(t, conn, db, "h1", 4, t0, at(time.Hour), 80)
			insertSamples(t, conn, db, "h1", 4, at(time.Hour), at(8*time.Hour), 0)
			insertSamples(t, conn, db, "h2", 4, t0, at(2*time.Hour), 0)
			insertSamples(t, conn, db, "h2", 4, at(2*time.Hour), at(6*time.Hour+time.Minute), 90)
			insertSamples(t, conn, db, "h2", 4, at(6*time.Hour+time.Minute), at(8*time.Hour), 0)

			sum, err := ingest.NewSummarizer(ingest.SummaryConfig{Database: db}, conn, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), time.Now)
			if err != nil {
				t.Fatal(err)
			}
			if n, err := sum.Once(context.Background()); err != nil || n != 2 {
				t.Fatalf("Once = %d, %v; want 2 jobs summarized", n, err)
			}
			got := readSummary(t, conn, db, "100")
			if got.state != "COMPLETED" || got.gpus != 4 || got.elapsed != 4*3600 || got.gpuHours != 16 ||
				!slices.Equal(got.hosts, []string{"h2", "h2", "h2", "h2"}) ||
				got.utilMean == nil || *got.utilMean != 90 || got.zeroHours == nil || *got.zeroHours != 0 || len(got.flags) != 0 {
				t.Errorf("summary of job 100 = %v; want its run on h2: COMPLETED, 4 GPUs, 14400 s, 16 GPU hours, util_mean 90, no zero-util hours, no flags", got)
			}
			got = readSummary(t, conn, db, "200")
			if !slices.Equal(got.hosts, []string{"h1", "h1", "h1", "h1"}) || got.utilMean == nil || *got.utilMean != 0 ||
				!slices.Contains(got.flags, ingest.FlagIdleAllocated) {
				t.Errorf("summary of job 200 = %v; want h1's 4 GPUs, idle", got)
			}
		})
	}
}

// TestSummarizerNewEnd: a job summarized at one end and ended again later —
// a lost job (UNKNOWN at its last listing) that Slurm listed again and that
// then completed, also across a month end, and a requeued job whose later
// run ended after its first run's end was summarized — is summarized again by
// the next (incremental) pass, and job_summary shows only the new end, under
// FINAL and, once the superseded row is deleted, read by end time too. Later
// passes, incremental and full, leave it.
func TestSummarizerNewEnd(t *testing.T) {
	d := func(s string) time.Time {
		v, err := time.Parse(time.DateTime, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		name        string
		first, then []jobRow // the jobs rows summarized first; those that came later
		allocs      []allocRow
		want1, want jobSummary // state, gpus, end, elapsed, gpu_hours, hosts
	}{
		{
			name: "lost job listed again",
			first: []jobRow{
				{event: "START", state: "RUNNING", submit: d("2026-03-02 09:00:00"), start: d("2026-03-02 10:00:00"), gpus: u32(2), at: d("2026-03-02 10:00:00")},
				{event: "END", state: "UNKNOWN", submit: d("2026-03-02 09:00:00"), start: d("2026-03-02 10:00:00"), end: d("2026-03-02 11:00:00"), gpus: u32(2), at: d("2026-03-02 11:00:00")},
			},
			then: []jobRow{
				{event: "UPDATE", state: "RUNNING", submit: d("2026-03-02 09:00:00"), start: d("2026-03-02 10:00:00"), gpus: u32(2), at: d("2026-03-02 11:00:00").Add(time.Millisecond)},
				{event: "END", state: "COMPLETED", submit: d("2026-03-02 09:00:00"), start: d("2026-03-02 10:00:00"), end: d("2026-03-02 20:00:00"), gpus: u32(2), at: d("2026-03-02 20:00:00")},
			},
			// Closed when the job was lost; they stay closed.
			allocs: []allocRow{{"h1", 2, "", d("2026-03-02 10:00:00"), d("2026-03-02 11:00:00")}},
			want1:  jobSummary{state: "UNKNOWN", gpus: 2, end: d("2026-03-02 11:00:00"), elapsed: 3600, gpuHours: 2, hosts: []string{"h1", "h1"}},
			want:   jobSummary{state: "COMPLETED", gpus: 2, end: d("2026-03-02 20:00:00"), elapsed: 36000, gpuHours: 20, hosts: []string{"h1", "h1"}},
		},
		{
			name: "lost job completed in the next month",
			first: []jobRow{
				{event: "END", state: "UNKNOWN", submit: d("2026-03-31 21:00:00"), start: d("2026-03-31 22:00:00"), end: d("2026-03-31 23:00:00"), gpus: u32(2), at: d("2026-03-31 23:00:00")},
			},
			then: []jobRow{
				{event: "UPDATE", state: "RUNNING", submit: d("2026-03-31 21:00:00"), start: d("2026-03-31 22:00:00"), gpus: u32(2), at: d("2026-03-31 23:00:00").Add(time.Millisecond)},
				{event: "END", state: "COMPLETED", submit: d("2026-03-31 21:00:00"), start: d("2026-03-31 22:00:00"), end: d("2026-04-01 02:00:00"), gpus: u32(2), at: d("2026-04-01 02:00:00")},
			},
			allocs: []allocRow{{"h1", 2, "", d("2026-03-31 22:00:00"), d("2026-03-31 23:00:00")}},
			want1:  jobSummary{state: "UNKNOWN", gpus: 2, end: d("2026-03-31 23:00:00"), elapsed: 3600, gpuHours: 2, hosts: []string{"h1", "h1"}},
			want:   jobSummary{state: "COMPLETED", gpus: 2, end: d("2026-04-01 02:00:00"), elapsed: 4 * 3600, gpuHours: 8, hosts: []string{"h1", "h1"}},
		},
		{
			name: "requeued job's later run",
			first: []jobRow{
				{event: "END", state: "PREEMPTED", submit: d("2026-03-02 09:00:00"), start: d("2026-03-02 10:00:00"), end: d("2026-03-02 11:00:00"), at: d("2026-03-02 11:00:00")},
			},
			then: []jobRow{
				{event: "SUBMIT", state: "PENDING", submit: d("2026-03-02 11:00:00"), at: d("2026-03-02 11:00:00").Add(time.Millisecond)},
				{event: "END", state: "COMPLETED", submit: d("2026-03-02 11:00:00"), start: d("2026-03-02 12:00:00"), end: d("2026-03-02 14:00:00"), at: d("2026-03-02 14:00:00")},
			},
			allocs: []allocRow{
				{"h1", 2, "", d("2026-03-02 10:00:00"), d("2026-03-02 11:00:00")},
				{"h3", 1, "", d("2026-03-02 12:00:00"), d("2026-03-02 14:00:00")},
			},
			want1: jobSummary{state: "PREEMPTED", gpus: 2, end: d("2026-03-02 11:00:00"), elapsed: 3600, gpuHours: 2, hosts: []string{"h1", "h1"}},
			want:  jobSummary{state: "COMPLETED", gpus: 1, end: d("2026-03-02 14:00:00"), elapsed: 7200, gpuHours: 2, hosts: []string{"h3"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, conn := schematest.Database(t)
			ctx := context.Background()
			db := ch.Database
			const id = "42"
			clock := time.Now().UTC().Truncate(time.Second)
			stamp := func(rows []jobRow, inserted time.Time) []jobRow {
				out := slices.Clone(rows)
				for i := range out {
					out[i].id, out[i].inserted = id, inserted
				}
				return out
			}
			insertJobRows(t, conn, db, stamp(tc.first, clock.Add(-time.Hour))...)
			for _, a := range tc.allocs {
				a.job = id
				insertAllocs(t, conn, db, a)
				insertSamples(t, conn, db, a.host, a.gpus, a.from, a.to, 50)
			}
			reg := prometheus.NewRegistry()
			sum, err := ingest.NewSummarizer(ingest.SummaryConfig{Database: db, FullEvery: time.Hour}, conn, slog.New(slog.DiscardHandler), reg, func() time.Time { return clock })
			if err != nil {
				t.Fatal(err)
			}
			check := func(step string, want jobSummary) {
				t.Helper()
				got := readSummary(t, conn, db, id)
				if got.state != want.state || got.gpus != want.gpus || !got.end.Equal(want.end) || got.elapsed != want.elapsed ||
					got.gpuHours != want.gpuHours || !slices.Equal(got.hosts, want.hosts) {
					t.Fatalf("%s: summary = %v; want %v", step, got, want)
				}
			}
			once := func(step string, advance time.Duration, wantN int, wantKind string) {
				t.Helper()
				clock = clock.Add(advance)
				before := passes(t, reg)
				n, err := sum.Once(ctx)
				if err != nil {
					t.Fatalf("%s: Once: %v", step, err)
				}
				if kind := passes(t, reg); n != wantN || kind[wantKind] != before[wantKind]+1 {
					t.Fatalf("%s: Once = %d, passes %v (before %v); want %d by a %s pass", step, n, kind, before, wantN, wantKind)
				}
			}
			once("first pass", 0, 1, "full")
			check("first pass", tc.want1)

			insertJobRows(t, conn, db, stamp(tc.then, clock.Add(time.Minute))...)
			once("pass after the new end", 2*time.Minute, 1, "incremental")
			check("pass after the new end", tc.want)
			once("next incremental pass", time.Minute, 0, "incremental")
			once("next full pass", time.Hour, 0, "full")
			check("after the later passes", tc.want)

			// The superseded summary is gone, not only under FINAL, once
			// ClickHouse has run the delete (in the background): a read
			// that filters on end_time skips the new row's part, or month,
			// before FINAL merges.
			stale := fmt.Sprintf("%s.job_summary WHERE job_id = '%s' AND end_time != toDateTime(%d)", db, id, tc.want.end.Unix())
			deadline := time.Now().Add(30 * time.Second)
			for schematest.Count(t, conn, stale) != 0 && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
			}
			if n := schematest.Count(t, conn, stale); n != 0 {
				t.Errorf("%d job_summary rows of job %s at another end than %s; want the superseded one deleted", n, id, tc.want.end)
			}
			var states []string
			rows, err := conn.Query(ctx, "SELECT state FROM "+db+".job_summary FINAL WHERE job_id = '"+id+"' AND end_time < toDateTime('"+
				tc.want.end.Format(time.DateTime)+"')")
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var s string
				if err := rows.Scan(&s); err != nil {
					t.Fatal(err)
				}
				states = append(states, s)
			}
			rows.Close()
			if len(states) != 0 {
				t.Errorf("job_summary FINAL ending before %s shows %v; want nothing (the old end superseded)", tc.want.end, states)
			}
		})
	}
}

// passes returns heliostat_ingest_job_summary_passes_total by kind.
func passes(t testing.TB, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "heliostat_ingest_job_summary_passes_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	return out
}
