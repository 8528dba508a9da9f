package analytics

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// SyntheticJobs inserts n synthetic ended jobs of cluster into database's
// jobs and job_runs tables (one run each), submitted over days days from
// since, for benchmarks: each job as the three rows (SUBMIT, START, END
// versions) that the tables hold for it before merges, so that reading them
// FINAL costs what it costs on real data. The workload is Helios-like and
// deterministic (hashes of the job number, no random source): 1,000 users
// of 16 VCs with a skewed share of jobs, 20% CPU jobs and GPU jobs of 1-64 GPUs, log-uniform run times from 1 s
// to 10^5 s (mean 8,700 s) and queuing delays from 0 to 10^4 s, 70% completed, 18% cancelled,
// 11% failed and 1% timed out; a GPU job's GPU type is its VC's (a100, h100 or v100 by VC number,
// since 2026-11-24). ClickHouse generates the rows itself
// (INSERT … SELECT FROM numbers), in blocks of a million jobs.
func SyntheticJobs(ctx context.Context, conn driver.Conn, database, cluster string, n int, since time.Time, days int) error {
	if !identifier.MatchString(database) {
		return fmt.Errorf("analytics: database %q is not a plain identifier", database)
	}
	if !clusterName.MatchString(cluster) {
		return fmt.Errorf("analytics: synthetic jobs: cluster %q: want letters, digits, '.', '_' or '-'", cluster)
	}
	if n < 0 || days < 1 {
		return fmt.Errorf("analytics: synthetic jobs: n %d, days %d: want n >= 0 and days >= 1", n, days)
	}
	const block = 1_000_000
	for off := 0; off < n; off += block {
		m := min(block, n-off)
		q := `INSERT INTO ` + database + `.{table} (cluster, job_id, source, user, partition_name, state, submit_time,
			start_time, end_time, time_limit_s, gpus, cpus, gpu_type, last_event, updated_at, inserted_at, version)
		SELECT cluster, job_id, 'sim', user, vc, ev.1, submit, ev.2, ev.3, toUInt32(86400), g, toUInt32(8), gpu_type, ev.4, ev.5, ev.5,
			toUInt64(ev.6)
		FROM (
			SELECT
				'` + cluster + `' AS cluster,
				number + ` + strconv.Itoa(off) + ` AS id,
				toString(id) AS job_id,
				cityHash64(id, 1) AS h1, cityHash64(id, 2) AS h2, cityHash64(id, 3) AS h3, cityHash64(id, 4) AS h4,
				-- users: the square of a uniform draw skews jobs to low user ids
				concat('u', toString(toUInt32(pow((h1 % 1000000) / 1000000, 2) * 1000))) AS user,
				concat('vc', toString(toUInt32(pow((h2 % 1000000) / 1000000, 1.5) * 16))) AS vc,
				toUInt32(arrayElement([0, 0, 1, 1, 1, 1, 1, 2, 2, 4, 8, 8, 16, 32, 64, 1], (h3 % 16) + 1)) AS g,
				if(g = 0, '', arrayElement(['a100', 'h100', 'v100'], toUInt32(pow((h2 % 1000000) / 1000000, 1.5) * 16) % 3 + 1)) AS gpu_type,
				toDateTime(` + strconv.FormatInt(since.Unix(), 10) + ` + (h4 % (` + strconv.Itoa(days) + ` * 86400))) AS submit,
				toUInt32(pow(10, ((h2 % 997) / 997) * 4) - 1) AS queue,
				toUInt32(pow(10, ((h1 % 991) / 991) * 5)) AS run,
				arrayElement(['COMPLETED', 'COMPLETED', 'COMPLETED', 'COMPLETED', 'COMPLETED', 'COMPLETED', 'COMPLETED',
					'CANCELLED', 'CANCELLED', 'FAILED'], (h3 % 10) + 1) AS st0,
				if(h4 % 100 = 0, 'TIMEOUT', st0) AS st,
				submit + queue AS start,
				start + run AS end
			FROM numbers(` + strconv.Itoa(m) + `)
		)
		ARRAY JOIN [
			('PENDING', CAST(NULL AS Nullable(DateTime('UTC'))), CAST(NULL AS Nullable(DateTime('UTC'))), 'SUBMIT', submit, (toUInt64(submit) * 1000) * 8 + 1),
			('RUNNING', CAST(start AS Nullable(DateTime('UTC'))), CAST(NULL AS Nullable(DateTime('UTC'))), 'START', start, (toUInt64(start) * 1000) * 8 + 3),
			(st, CAST(start AS Nullable(DateTime('UTC'))), CAST(end AS Nullable(DateTime('UTC'))), 'END', end, (toUInt64(end) * 1000) * 8 + 4)
		] AS ev`
		for _, table := range []string{"jobs", "job_runs"} {
			if err := conn.Exec(ctx, strings.Replace(q, "{table}", table, 1)); err != nil {
				return fmt.Errorf("analytics: insert synthetic jobs into %s: %w", table, err)
			}
		}
	}
	return nil
}

var clusterName = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)
