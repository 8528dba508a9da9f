package dashboards

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// submitBounds are how the panels that read jobs ended in the range, or
// jobs not ended, bound the submit times they read. jobs, job_runs,
// predictions and prediction_outcomes are partitioned by month of submit
// (job_runs: of the run's submit), and FINAL merges
// every partition a filter on end_time or state leaves possible. A row that
// FINAL keeps and that passes such a filter is one of the rows (of any
// version) that pass it, so its submit time is no earlier than their
// earliest; a job that ended in the range was submitted before its end.
// A prediction carries the submit time of the run the predictor first saw,
// an outcome and jobs' row that of the job's latest run: for a job Slurm
// requeued, the prediction's is earlier. So the predictions joined to
// outcomes, or to pending jobs, are bounded by the earliest submit time of
// the predictions (any version, read by their key (cluster, job_id)) of the
// ids the other side holds. For the pending queue those ids are read FINAL
// (and bounded as the queue is): before a month is merged, every job of it
// still has a superseded PENDING row, and a set of every id ever pending
// made the bound cost seconds.
var submitBounds = []string{
	" AND submit_time <= $__toTime AND submit_time >= (SELECT min(submit_time) FROM prediction_outcomes WHERE " + clusterFilter + " AND $__timeFilter(end_time))",
	" AND submit_time <= $__toTime AND submit_time >= (SELECT min(submit_time) FROM predictions WHERE (cluster, job_id) IN (SELECT cluster, job_id FROM prediction_outcomes WHERE " + clusterFilter + " AND $__timeFilter(end_time)))",
	" AND submit_time <= $__toTime AND submit_time >= (SELECT min(submit_time) FROM job_runs WHERE " + clusterFilter + " AND $__timeFilter(end_time))",
	"\n            AND submit_time >= (SELECT min(submit_time) FROM job_runs WHERE " + clusterFilter + " AND (end_time IS NULL OR end_time >= $__fromTime))",
	" AND submit_time >= (SELECT min(submit_time) FROM jobs WHERE " + clusterFilter + " AND state IN ('RUNNING', 'PENDING'))",
	// holds the next bound, so it is removed first (unbound removes them in order)
	" AND submit_time >= (SELECT min(submit_time) FROM predictions WHERE (cluster, job_id) IN (SELECT cluster, job_id FROM jobs FINAL WHERE " + clusterFilter + " AND state = 'PENDING' AND submit_time >= (SELECT min(submit_time) FROM jobs WHERE " + clusterFilter + " AND state = 'PENDING')))",
	" AND submit_time >= (SELECT min(submit_time) FROM jobs WHERE " + clusterFilter + " AND state = 'PENDING')",
}

// clusterFilter is the panels' cluster filter. A bound reads only the
// clusters its panel shows, so that another cluster's old pending job, or
// its long job ended in the range, does not widen it.
const clusterFilter = "('__all' IN (${cluster:singlequote}) OR cluster IN (${cluster:singlequote}))"

// unbound returns sql without its submit-time bounds, and whether it had any.
func unbound(sql string) (string, bool) {
	out := sql
	for _, b := range submitBounds {
		out = strings.ReplaceAll(out, b, "")
	}
	return out, out != sql
}

// boundedQuery is a panel target that bounds its submit times, expanded
// with every variable at All, as it stands and without its bounds.
type boundedQuery struct{ name, bounded, unbounded string }

// boundedQueries returns every dashboard target that holds a submit bound,
// with the variables named in pick set to its values (cluster, vc) and every
// other variable at All.
func (s *seeded) boundedQueries(tb testing.TB, pick map[string][]string) []boundedQuery {
	tb.Helper()
	var out []boundedQuery
	for _, d := range loadDashboards(tb) {
		sel := picked(d, pick)
		for _, p := range d.allPanels() {
			for _, tg := range p.Targets {
				raw, ok := unbound(tg.RawSQL)
				if !ok {
					continue
				}
				bounded, err := s.expand(d, tg.RawSQL, sel)
				if err != nil {
					tb.Fatal(err)
				}
				unbounded, err := s.expand(d, raw, sel)
				if err != nil {
					tb.Fatal(err)
				}
				out = append(out, boundedQuery{strings.TrimSuffix(d.file, ".json") + "_" + fmt.Sprint(p.ID), bounded, unbounded})
			}
		}
	}
	if len(out) == 0 {
		tb.Fatal("no panel bounds its submit times as submitBounds expects")
	}
	return out
}

// picked selects, for d's variables, the values pick names and All for the
// others.
func picked(d *dashboard, pick map[string][]string) map[string]selection {
	sel := map[string]selection{}
	for _, v := range d.Templating.List {
		sel[v.Name] = selection{all: true}
		if vals, ok := pick[v.Name]; ok {
			sel[v.Name] = selection{values: vals}
		}
	}
	return sel
}

// checkSubmitBounds fails unless every bounded query returns rows, the same
// with its bounds as without, with now() pinned to s.to.
func (s *seeded) checkSubmitBounds(tb testing.TB, qs []boundedQuery, state string) {
	tb.Helper()
	ctx := context.Background()
	now := fmt.Sprintf("toDateTime(%d)", s.to.Unix())
	for _, q := range qs {
		want, err := allRows(ctx, s.grafana, strings.ReplaceAll(q.unbounded, "now()", now))
		if err != nil {
			tb.Fatalf("%s: %v\n%s", q.name, err, q.unbounded)
		}
		got, err := allRows(ctx, s.grafana, strings.ReplaceAll(q.bounded, "now()", now))
		if err != nil {
			tb.Fatalf("%s: %v\n%s", q.name, err, q.bounded)
		}
		if len(want) == 0 || !slices.Equal(got, want) {
			tb.Errorf("%s (%s): bounded by submit time it returns %d rows %.300q, without the bounds %d rows %.300q",
				q.name, state, len(got), got, len(want), want)
		}
	}
}

// BenchmarkSubmitBounds runs the panels that bound their submit times
// (submitBounds) over the last 7 days of a year's history: 1,000,000 jobs,
// each with the rows its job events give it in jobs and in job_runs (one
// run each) (PENDING; RUNNING, except for
// the last 200 submitted, which still pend; the final row once ended), a
// prediction, and an outcome once ended; one job in 97 runs 30 days. Each
// runs as it stands ("bounded") and without its bounds ("unbounded", what
// it read before), first on the rows as inserted ("fresh": every
// superseded row still beside the current one, as before ClickHouse merges
// a month's parts) and then after OPTIMIZE … FINAL ("merged"). Both forms
// must return the same rows (checkSubmitBounds).
func BenchmarkSubmitBounds(b *testing.B) {
	ch, conn := schematest.Database(b)
	ctx := context.Background()
	const n = 1_000_000
	to := time.Now().UTC().Truncate(time.Second)
	from := to.Add(-7 * 24 * time.Hour)
	first := to.Add(-365 * 24 * time.Hour).Unix()
	const span = 360 * 24 * 3600 // submits over 360 days, none in the last 5
	// job n: submitted at s, runs r seconds (10 min to a day; 30 days for
	// one in 97) after a minute in the queue, ends at e if e <= to; the
	// last 200 submitted still pend.
	job := fmt.Sprintf(`toDateTime(%d + intDiv(number * %d, %d), 'UTC') AS s,
    if(number %% 97 = 0, 30 * 86400, 600 + (number * 7919) %% 85800) AS r,
    s + 60 + r AS e, toString(number) AS id, concat('u', toString(number %% 500)) AS u,
    number >= %d AS pending`, first, span, n, n-200)
	ended := fmt.Sprintf("e <= toDateTime(%d, 'UTC') AND NOT pending", to.Unix())
	var fills []string
	// jobs and job_runs hold the same rows: one run per job.
	for _, table := range []string{"jobs", "job_runs"} {
		fills = append(fills,
			fmt.Sprintf(`INSERT INTO %[1]s.%[4]s (cluster, job_id, source, user, partition_name, state, submit_time, start_time, end_time, gpus, version)
SELECT 'c', id, 'bench', u, concat('vc', toString(number %% 4)), 'PENDING', s, NULL, NULL, toUInt32(1 + number %% 8), 1
FROM (SELECT number, %[2]s FROM system.numbers LIMIT %[3]d)`, ch.Database, job, n, table),
			fmt.Sprintf(`INSERT INTO %[1]s.%[4]s (cluster, job_id, source, user, partition_name, state, submit_time, start_time, end_time, gpus, version)
SELECT 'c', id, 'bench', u, concat('vc', toString(number %% 4)), 'RUNNING', s, s + 60, NULL, toUInt32(1 + number %% 8), 2
FROM (SELECT number, %[2]s FROM system.numbers LIMIT %[3]d) WHERE NOT pending`, ch.Database, job, n, table),
			fmt.Sprintf(`INSERT INTO %[1]s.%[4]s (cluster, job_id, source, user, partition_name, state, submit_time, start_time, end_time, gpus, version)
SELECT 'c', id, 'bench', u, concat('vc', toString(number %% 4)), ['COMPLETED', 'FAILED', 'CANCELLED'][number %% 3 + 1], s, s + 60, e, toUInt32(1 + number %% 8), 3
FROM (SELECT number, %[2]s FROM system.numbers LIMIT %[3]d) WHERE %[5]s`, ch.Database, job, n, table, ended))
	}
	fills = append(fills,
		fmt.Sprintf(`INSERT INTO %[1]s.predictions
SELECT 'c', id, u, concat('vc', toString(number %% 4)), toUInt32(1 + number %% 8), NULL, s, 1,
    ['exact', 'user2', 'user1', 'cold'][number %% 4 + 1], 1, r * 1.3, r / 2, r * 3, r * 1.3 * (1 + number %% 8), 0, s, 1
FROM (SELECT number, %[2]s FROM system.numbers LIMIT %[3]d)`, ch.Database, job, n),
		fmt.Sprintf(`INSERT INTO %[1]s.prediction_outcomes
SELECT 'c', id, u, toUInt32(1 + number %% 8), 'COMPLETED', s, s + 60, e, 1, s, 0, 1,
    r * 1.3, r / 2, r * 3, r, r * 0.3, log(1.3), log(1.3), 1, 1, e, 1
FROM (SELECT number, %[2]s FROM system.numbers LIMIT %[3]d) WHERE %[4]s`, ch.Database, job, n, ended))
	for _, q := range fills {
		if err := conn.Exec(ctx, q); err != nil {
			b.Fatalf("fill: %v\n%s", err, q)
		}
	}
	grafana, err := clickhouse.Open(&clickhouse.Options{Protocol: ch.ClientProtocol(), Addr: []string{ch.Addr}, Auth: clickhouse.Auth{Database: ch.Database, Username: "default"}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { grafana.Close() })
	s := &seeded{db: ch.Database, conn: conn, grafana: grafana, from: from, to: to}

	qs := s.boundedQueries(b, nil)
	for _, state := range []string{"fresh", "merged"} {
		if state == "merged" {
			for _, t := range []string{"jobs", "job_runs", "predictions", "prediction_outcomes"} {
				if err := conn.Exec(ctx, "OPTIMIZE TABLE "+ch.Database+"."+t+" FINAL"); err != nil {
					b.Fatal(err)
				}
			}
		}
		s.checkSubmitBounds(b, qs, state)
		for _, q := range qs {
			for _, v := range []struct{ name, sql string }{{"bounded", q.bounded}, {"unbounded", q.unbounded}} {
				b.Run(state+"/"+q.name+"/"+v.name, func(b *testing.B) {
					for b.Loop() {
						if _, err := allRows(ctx, grafana, v.sql); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// allRows runs sql and returns every row, formatted, in order.
func allRows(ctx context.Context, conn driver.Conn, sql string) ([]string, error) {
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	types := rows.ColumnTypes()
	var out []string
	for rows.Next() {
		vals := make([]any, len(types))
		for i, ct := range types {
			vals[i] = reflect.New(ct.ScanType()).Interface()
		}
		if err := rows.Scan(vals...); err != nil {
			return nil, err
		}
		cells := make([]string, len(vals))
		for i, v := range vals {
			cells[i] = fmt.Sprint(reflect.ValueOf(v).Elem().Interface())
		}
		out = append(out, strings.Join(cells, "\t"))
	}
	return out, rows.Err()
}
