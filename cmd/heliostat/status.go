package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// clusterStatus is what `heliostat up` reports: the jobs ClickHouse holds by
// state, and the GPU samples and job run summaries written so far.
type clusterStatus struct {
	submitted, pending, running, finished uint64
	completed, failed, cancelled, other   uint64
	samples, summaries                    uint64
}

func (s clusterStatus) String() string {
	return fmt.Sprintf("jobs: %d submitted, %d pending, %d running, %d finished (%d completed, %d failed, %d cancelled, %d other) · %d GPU samples · %d job summaries",
		s.submitted, s.pending, s.running, s.finished, s.completed, s.failed, s.cancelled, s.other, s.samples, s.summaries)
}

// queryStatus reads the current status from ClickHouse, so that the line shows
// what reached the tables, not what a source believes it sent.
func queryStatus(ctx context.Context, conn driver.Conn, db string) (clusterStatus, error) {
	var s clusterStatus
	err := conn.QueryRow(ctx, `SELECT count(), countIf(state = 'PENDING'), countIf(state = 'RUNNING'), countIf(last_event = 'END'),
  countIf(state = 'COMPLETED'), countIf(state = 'FAILED'), countIf(state = 'CANCELLED'),
  countIf(last_event = 'END' AND state NOT IN ('COMPLETED', 'FAILED', 'CANCELLED'))
FROM `+db+`.jobs FINAL`).Scan(&s.submitted, &s.pending, &s.running, &s.finished, &s.completed, &s.failed, &s.cancelled, &s.other)
	if err != nil {
		return s, fmt.Errorf("count jobs: %w", err)
	}
	if err := conn.QueryRow(ctx, "SELECT count() FROM "+db+".gpu_samples").Scan(&s.samples); err != nil {
		return s, fmt.Errorf("count gpu samples: %w", err)
	}
	// One summary per run of a job (a requeued job's runs, the jobs of a
	// reused id); job_summary, one per job id, is no longer written.
	if err := conn.QueryRow(ctx, "SELECT count() FROM "+db+".job_run_summary FINAL").Scan(&s.summaries); err != nil {
		return s, fmt.Errorf("count job summaries: %w", err)
	}
	return s, nil
}

// reportStatus prints the status line every interval until ctx is done.
//
// extra, when not nil, adds the source's own view (the simulated clock) to
// the line.
func reportStatus(ctx context.Context, conn driver.Conn, db string, every time.Duration, w io.Writer, extra func() string, logger *slog.Logger) error {
	if every <= 0 {
		return nil
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		s, err := queryStatus(ctx, conn, db)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			logger.Warn("status query failed", "err", err)
			continue
		}
		line := time.Now().Format("15:04:05") + "  " + s.String()
		if extra != nil {
			line += " · " + extra()
		}
		fmt.Fprintln(w, line)
	}
}
