package dashboards

import (
	"context"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// submitBound is how the panels that count jobs or scored predictions ended
// in the range bound the submit times they read. jobs, predictions and
// prediction_outcomes are partitioned by month of submit, so a filter on
// end_time alone makes FINAL merge every partition; a row that ended in the
// range was submitted before its end and no earlier than the earliest submit
// among the rows (of any version) that ended in it.
var submitBound = regexp.MustCompile(` AND submit_time <= \$__toTime AND submit_time >= \(SELECT min\(submit_time\) FROM \w+ WHERE \$__timeFilter\(end_time\)\)`)

// BenchmarkEndedInRange runs the panels that read jobs or prediction
// outcomes ended in the dashboard's range, over the last 7 days of a year's
// history (1,000,000 jobs, each with a RUNNING row and its final row, a
// prediction and an outcome; one in 97 runs 30 days), as they stand
// ("bounded") and without their submit-time bound ("unbounded", what they
// read before). Both must return the same rows.
func BenchmarkEndedInRange(b *testing.B) {
	ch, conn := schematest.Database(b)
	ctx := context.Background()
	const n = 1_000_000
	to := time.Now().UTC().Truncate(time.Second)
	from := to.Add(-7 * 24 * time.Hour)
	first := to.Add(-365 * 24 * time.Hour).Unix()
	const span = 360 * 24 * 3600 // submits over 360 days; the last 5 days' jobs still run
	// job n: submitted at s, runs r seconds (10 min to a day; 30 days for
	// one in 97) after a minute in the queue, ends at e if e <= to.
	job := fmt.Sprintf(`toDateTime(%d + intDiv(number * %d, %d), 'UTC') AS s,
    if(number %% 97 = 0, 30 * 86400, 600 + (number * 7919) %% 85800) AS r,
    s + 60 + r AS e, toString(number) AS id, concat('u', toString(number %% 500)) AS u`, first, span, n)
	ended := fmt.Sprintf("e <= toDateTime(%d, 'UTC')", to.Unix())
	fills := []string{
		fmt.Sprintf(`INSERT INTO %[1]s.jobs (cluster, job_id, source, user, partition_name, state, submit_time, start_time, end_time, gpus, version)
SELECT 'c', id, 'bench', u, concat('vc', toString(number %% 4)), 'RUNNING', s, s + 60, NULL, toUInt32(1 + number %% 8), 1
FROM (SELECT number, %[2]s FROM system.numbers LIMIT %[3]d)`, ch.Database, job, n),
		fmt.Sprintf(`INSERT INTO %[1]s.jobs (cluster, job_id, source, user, partition_name, state, submit_time, start_time, end_time, gpus, version)
SELECT 'c', id, 'bench', u, concat('vc', toString(number %% 4)), ['COMPLETED', 'FAILED', 'CANCELLED'][number %% 3 + 1], s, s + 60, e, toUInt32(1 + number %% 8), 2
FROM (SELECT number, %[2]s FROM system.numbers LIMIT %[3]d) WHERE %[4]s`, ch.Database, job, n, ended),
		fmt.Sprintf(`INSERT INTO %[1]s.predictions
SELECT 'c', id, u, concat('vc', toString(number %% 4)), toUInt32(1 + number %% 8), NULL, s, 1,
    ['exact', 'user2', 'user1', 'cold'][number %% 4 + 1], 1, r * 1.3, r / 2, r * 3, r * 1.3 * (1 + number %% 8), 0, s, 1
FROM (SELECT number, %[2]s FROM system.numbers LIMIT %[3]d)`, ch.Database, job, n),
		fmt.Sprintf(`INSERT INTO %[1]s.prediction_outcomes
SELECT 'c', id, u, toUInt32(1 + number %% 8), 'COMPLETED', s, s + 60, e, 1, s, 0, 1,
    r * 1.3, r / 2, r * 3, r, r * 0.3, log(1.3), log(1.3), 1, 1, e, 1
FROM (SELECT number, %[2]s FROM system.numbers LIMIT %[3]d) WHERE %[4]s`, ch.Database, job, n, ended),
	}
	for _, q := range fills {
		if err := conn.Exec(ctx, q); err != nil {
			b.Fatalf("fill: %v\n%s", err, q)
		}
	}
	grafana, err := clickhouse.Open(&clickhouse.Options{Addr: []string{ch.Addr}, Auth: clickhouse.Auth{Database: ch.Database, Username: "default"}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { grafana.Close() })
	s := &seeded{db: ch.Database, conn: conn, grafana: grafana, from: from, to: to}

	benched := 0
	for _, d := range loadDashboards(b) {
		sel := map[string]selection{}
		for _, v := range d.Templating.List {
			sel[v.Name] = selection{all: true}
		}
		for _, p := range d.allPanels() {
			for _, tg := range p.Targets {
				if !submitBound.MatchString(tg.RawSQL) {
					continue
				}
				bounded, err := s.expand(d, tg.RawSQL, sel)
				if err != nil {
					b.Fatal(err)
				}
				unbounded, err := s.expand(d, submitBound.ReplaceAllString(tg.RawSQL, ""), sel)
				if err != nil {
					b.Fatal(err)
				}
				want, err := allRows(ctx, grafana, unbounded)
				if err != nil {
					b.Fatalf("%s: %v\n%s", panelName(d, p), err, unbounded)
				}
				got, err := allRows(ctx, grafana, bounded)
				if err != nil {
					b.Fatalf("%s: %v\n%s", panelName(d, p), err, bounded)
				}
				if len(want) == 0 || !slices.Equal(got, want) {
					b.Fatalf("%s: bounded by submit time it returns %d rows %.300q, without the bound %d rows %.300q",
						panelName(d, p), len(got), got, len(want), want)
				}
				benched++
				name := strings.TrimSuffix(d.file, ".json") + "_" + fmt.Sprint(p.ID)
				for _, v := range []struct{ name, sql string }{{"bounded", bounded}, {"unbounded", unbounded}} {
					b.Run(name+"/"+v.name, func(b *testing.B) {
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
	if benched == 0 {
		b.Fatal("no panel bounds its submit times as submitBound expects")
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
