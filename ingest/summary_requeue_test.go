package ingest_test

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// jobRow is one row of jobs and job_runs as jobs_mv and job_runs_mv write it
// for an event of a job of cluster c1 unless cluster says otherwise. A zero
// start or end is NULL.
type jobRow struct {
	cluster            string // "c1" when empty
	id, event, state   string
	user               string // "u1" when empty
	submit, start, end time.Time
	gpus               *uint32
	at, inserted       time.Time // the event's time; when it reached ClickHouse
}

// insertJobRows writes rows to db.jobs and db.job_runs, each versioned as
// jobs_mv versions its event.
func insertJobRows(t testing.TB, conn driver.Conn, db string, rows ...jobRow) {
	t.Helper()
	order := map[string]uint64{"SUBMIT": 1, "UPDATE": 2, "START": 3, "END": 4}
	for _, table := range []string{"jobs", "job_runs"} {
		b, err := conn.PrepareBatch(context.Background(), "INSERT INTO "+db+"."+table+" (cluster, job_id, user, partition_name, state, submit_time, start_time, end_time, gpus, last_event, updated_at, inserted_at, version)")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			var start, end *time.Time
			if !r.start.IsZero() {
				start = &r.start
			}
			if !r.end.IsZero() {
				end = &r.end
			}
			user := cmp.Or(r.user, "u1")
			if err := b.Append(cmp.Or(r.cluster, "c1"), r.id, user, "gpu", r.state, r.submit, start, end, r.gpus, r.event, r.at, r.inserted,
				uint64(r.at.UnixMilli())*8+order[r.event]); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Send(); err != nil {
			t.Fatal(err)
		}
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

// jobSummary is a job_run_summary FINAL row of a job, as far as these tests
// read it.
type jobSummary struct {
	user      string
	submit    time.Time
	state     string
	gpus      uint32
	end       time.Time
	elapsed   uint32
	gpuHours  float64
	hosts     []string
	samples   uint64
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
	return fmt.Sprintf("{%s submit %s %s gpus %d end %s elapsed %d gpu_hours %v hosts %v samples %d util_mean %s zero_util_gpu_hours %s flags %v}",
		s.user, s.submit.UTC().Format(time.DateTime), s.state, s.gpus, s.end.UTC().Format(time.DateTime), s.elapsed, s.gpuHours, s.hosts, s.samples,
		f(s.utilMean), f(s.zeroHours), s.flags)
}

// readSummaries returns the job_run_summary FINAL rows of job id, one per
// run, by submit time.
func readSummaries(t testing.TB, conn driver.Conn, db, id string) []jobSummary {
	t.Helper()
	rows, err := conn.Query(context.Background(), "SELECT user, submit_time, state, gpus, end_time, elapsed_s, gpu_hours, gpu_hosts, samples, util_mean, zero_util_gpu_hours, flags FROM "+
		db+".job_run_summary FINAL WHERE cluster = 'c1' AND job_id = '"+id+"' ORDER BY submit_time")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []jobSummary
	for rows.Next() {
		var s jobSummary
		if err := rows.Scan(&s.user, &s.submit, &s.state, &s.gpus, &s.end, &s.elapsed, &s.gpuHours, &s.hosts, &s.samples, &s.utilMean, &s.zeroHours, &s.flags); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func u32(n uint32) *uint32 { return &n }

// TestSummarizerEveryRun: every run of a job ID gets its own summary, with
// its own GPUs, GPU hours, samples and end. Job 100 ran on 4 GPUs of h1 at
// 80 % until it was preempted, was requeued (a new submit time) and ran 4 h
// on 4 GPUs of h2 at 90 %; job 200 then held h1's GPUs, idle. Job 7 is two
// jobs that shared an ID (slurmctld restarted clean): bob's on GPU 0 of h4 at
// 30 %, then carol's on 2 GPUs of h3 at 60 %, while h4 idled. Where Slurm
// gave no GPU count, each run has the GPUs allocated to it, not those of the
// other runs of its ID, also when bob's allocation was left open (its closing
// row lost), which overlaps carol's run too. The allocation rows stay
// unmerged (an open row and the closing one), as ingest leaves them.
func TestSummarizerEveryRun(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	at := func(h, m int) time.Time { return t0.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute) }
	for _, tc := range []struct {
		name    string
		gpus    func(n uint32) *uint32 // the GPU count in jobs and job_runs
		bobOpen bool                   // bob's allocation never closed
	}{
		{"gpus recorded", u32, false},
		{"gpus unknown", func(uint32) *uint32 { return nil }, false},
		{"gpus unknown, an earlier run's allocation left open", func(uint32) *uint32 { return nil }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, conn := schematest.Database(t)
			db := ch.Database
			end := func(id, user, state string, gpus uint32, submit, start, end time.Time) jobRow {
				return jobRow{id: id, user: user, event: "END", state: state, submit: submit, start: start, end: end, gpus: tc.gpus(gpus), at: end, inserted: end}
			}
			insertJobRows(t, conn, db,
				// Job 100, run 1: preempted after an hour on h1; run 2:
				// requeued at its end, ran 4 h on h2.
				end("100", "alice", "PREEMPTED", 4, at(8, 0), at(9, 0), at(10, 0)),
				end("100", "alice", "COMPLETED", 4, at(10, 0), at(11, 0), at(15, 0)),
				end("200", "dave", "COMPLETED", 4, at(10, 0), at(10, 5), at(12, 0)),
				// Job 7: bob's, then carol's.
				end("7", "bob", "COMPLETED", 1, at(8, 0), at(8, 0), at(9, 0)),
				end("7", "carol", "COMPLETED", 2, at(12, 0), at(12, 30), at(13, 30)),
			)
			bobEnd := at(9, 0)
			if tc.bobOpen {
				bobEnd = time.Time{}
			}
			insertAllocs(t, conn, db,
				allocRow{"h1", 4, "100", at(9, 0), at(10, 0)},
				allocRow{"h2", 4, "100", at(11, 0), at(15, 0)},
				allocRow{"h1", 4, "200", at(10, 5), at(12, 0)},
				allocRow{"h4", 1, "7", at(8, 0), bobEnd},
				allocRow{"h3", 2, "7", at(12, 30), at(13, 30)},
			)
			// A sample a minute on every GPU from 07:00 to 16:00, at the
			// utilization of the run that held it (runs take the samples of
			// [start, end]), else 0.
			for _, s := range []struct {
				host     string
				gpus     int
				from, to time.Time
				util     uint8
			}{
				{"h1", 4, at(7, 0), at(9, 0), 0}, {"h1", 4, at(9, 0), at(10, 1), 80}, {"h1", 4, at(10, 1), at(16, 0), 0},
				{"h2", 4, at(7, 0), at(11, 0), 0}, {"h2", 4, at(11, 0), at(15, 1), 90}, {"h2", 4, at(15, 1), at(16, 0), 0},
				{"h3", 2, at(7, 0), at(12, 30), 0}, {"h3", 2, at(12, 30), at(13, 31), 60}, {"h3", 2, at(13, 31), at(16, 0), 0},
				{"h4", 1, at(7, 0), at(8, 0), 0}, {"h4", 1, at(8, 0), at(9, 1), 30}, {"h4", 1, at(9, 1), at(16, 0), 0},
			} {
				insertSamples(t, conn, db, s.host, s.gpus, s.from, s.to, s.util)
			}

			sum, err := ingest.NewSummarizer(ingest.SummaryConfig{Database: db}, conn, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), time.Now)
			if err != nil {
				t.Fatal(err)
			}
			if n, err := sum.Once(context.Background()); err != nil || n != 5 {
				t.Fatalf("Once = %d, %v; want 5 runs summarized", n, err)
			}
			if n, err := sum.Once(context.Background()); err != nil || n != 0 {
				t.Fatalf("second Once = %d, %v; want 0 (every run summarized)", n, err)
			}
			f32 := func(v float32) *float32 { return &v }
			f64 := func(v float64) *float64 { return &v }
			hosts := func(h string, n int) []string { return slices.Repeat([]string{h}, n) }
			h200 := 6900 / 3600.0 // job 200's hours, summed as the summarizer sums them
			for _, want := range []struct {
				id   string
				runs []jobSummary
			}{
				{"100", []jobSummary{
					{user: "alice", submit: at(8, 0), state: "PREEMPTED", gpus: 4, end: at(10, 0), elapsed: 3600, gpuHours: 4, hosts: hosts("h1", 4),
						samples: 4 * 61, utilMean: f32(80), zeroHours: f64(0), flags: []string{}},
					{user: "alice", submit: at(10, 0), state: "COMPLETED", gpus: 4, end: at(15, 0), elapsed: 4 * 3600, gpuHours: 16, hosts: hosts("h2", 4),
						samples: 4 * 241, utilMean: f32(90), zeroHours: f64(0), flags: []string{}},
				}},
				{"200", []jobSummary{
					{user: "dave", submit: at(10, 0), state: "COMPLETED", gpus: 4, end: at(12, 0), elapsed: 6900, gpuHours: 4 * h200, hosts: hosts("h1", 4),
						samples: 4 * 116, utilMean: f32(0), zeroHours: f64(h200 + h200 + h200 + h200), flags: []string{ingest.FlagLowUtil, ingest.FlagIdleAllocated}},
				}},
				{"7", []jobSummary{
					{user: "bob", submit: at(8, 0), state: "COMPLETED", gpus: 1, end: at(9, 0), elapsed: 3600, gpuHours: 1, hosts: hosts("h4", 1),
						samples: 61, utilMean: f32(30), zeroHours: f64(0), flags: []string{}},
					{user: "carol", submit: at(12, 0), state: "COMPLETED", gpus: 2, end: at(13, 30), elapsed: 3600, gpuHours: 2, hosts: hosts("h3", 2),
						samples: 2 * 61, utilMean: f32(60), zeroHours: f64(0), flags: []string{}},
				}},
			} {
				got := readSummaries(t, conn, db, want.id)
				if fmt.Sprint(got) != fmt.Sprint(want.runs) {
					t.Errorf("summaries of job %s:\n%v\nwant one per run:\n%v", want.id, got, want.runs)
				}
			}
		})
	}
}

// TestSummarizerNewEnd: a run summarized at one end and ended again later —
// a lost job (UNKNOWN at its last listing) that Slurm listed again and that
// then completed, also across a month end — is summarized again by the next
// (incremental) pass, and job_run_summary shows only the run's new end, under
// FINAL and, once the superseded row is deleted, read by end time too. A
// requeued job's later run, which ended after its first run was summarized,
// gets a summary of its own by the next pass, and the first run's stays.
// Later passes, incremental and full, leave them.
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
		first, then []jobRow // the job rows summarized first; those that came later
		allocs      []allocRow
		want1, want []jobSummary // by run: submit, state, gpus, end, elapsed, gpu_hours, hosts
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
			want1:  []jobSummary{{submit: d("2026-03-02 09:00:00"), state: "UNKNOWN", gpus: 2, end: d("2026-03-02 11:00:00"), elapsed: 3600, gpuHours: 2, hosts: []string{"h1", "h1"}}},
			want:   []jobSummary{{submit: d("2026-03-02 09:00:00"), state: "COMPLETED", gpus: 2, end: d("2026-03-02 20:00:00"), elapsed: 36000, gpuHours: 20, hosts: []string{"h1", "h1"}}},
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
			want1:  []jobSummary{{submit: d("2026-03-31 21:00:00"), state: "UNKNOWN", gpus: 2, end: d("2026-03-31 23:00:00"), elapsed: 3600, gpuHours: 2, hosts: []string{"h1", "h1"}}},
			want:   []jobSummary{{submit: d("2026-03-31 21:00:00"), state: "COMPLETED", gpus: 2, end: d("2026-04-01 02:00:00"), elapsed: 4 * 3600, gpuHours: 8, hosts: []string{"h1", "h1"}}},
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
			want1: []jobSummary{{submit: d("2026-03-02 09:00:00"), state: "PREEMPTED", gpus: 2, end: d("2026-03-02 11:00:00"), elapsed: 3600, gpuHours: 2, hosts: []string{"h1", "h1"}}},
			want: []jobSummary{
				{submit: d("2026-03-02 09:00:00"), state: "PREEMPTED", gpus: 2, end: d("2026-03-02 11:00:00"), elapsed: 3600, gpuHours: 2, hosts: []string{"h1", "h1"}},
				{submit: d("2026-03-02 11:00:00"), state: "COMPLETED", gpus: 1, end: d("2026-03-02 14:00:00"), elapsed: 7200, gpuHours: 2, hosts: []string{"h3"}},
			},
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
			check := func(step string, want []jobSummary) {
				t.Helper()
				got := readSummaries(t, conn, db, id)
				same := len(got) == len(want)
				for i := 0; same && i < len(got); i++ {
					g, w := got[i], want[i]
					same = g.submit.Equal(w.submit) && g.state == w.state && g.gpus == w.gpus && g.end.Equal(w.end) && g.elapsed == w.elapsed &&
						g.gpuHours == w.gpuHours && slices.Equal(g.hosts, w.hosts)
				}
				if !same {
					t.Fatalf("%s: summaries = %v; want %v", step, got, want)
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
			// before FINAL merges. The other runs' summaries stay.
			var runs []string
			for _, w := range tc.want {
				runs = append(runs, fmt.Sprintf("(%d, %d)", w.submit.Unix(), w.end.Unix()))
			}
			stale := fmt.Sprintf("%s.job_run_summary WHERE job_id = '%s' AND (toInt64(submit_time), toInt64(end_time)) NOT IN (%s)", db, id, strings.Join(runs, ", "))
			deadline := time.Now().Add(30 * time.Second)
			for schematest.Count(t, conn, stale) != 0 && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
			}
			if n := schematest.Count(t, conn, stale); n != 0 {
				t.Errorf("%d job_run_summary rows of job %s at another (submit, end) than %v; want the superseded one deleted", n, id, runs)
			}
			for _, w := range tc.want {
				var states []string
				rows, err := conn.Query(ctx, "SELECT state FROM "+db+".job_run_summary FINAL WHERE job_id = '"+id+"' AND submit_time = toDateTime('"+
					w.submit.Format(time.DateTime)+"') AND end_time < toDateTime('"+w.end.Format(time.DateTime)+"')")
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
					t.Errorf("job_run_summary FINAL of the run submitted at %s ending before %s shows %v; want nothing (the old end superseded)", w.submit, w.end, states)
				}
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
