package live

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// flakyConn fails the first query that contains failOnce, as a ClickHouse
// restarting under the runner would. An insert matching it lands and then
// reports the error, as one whose reply is lost (a connection reset after
// the server committed the block) does.
type flakyConn struct {
	driver.Conn
	failOnce string
	failed   bool
}

var errInjected = errors.New("connection reset by peer (injected)")

type errRow struct{ err error }

func (e errRow) Err() error           { return e.err }
func (e errRow) Scan(...any) error    { return e.err }
func (e errRow) ScanStruct(any) error { return e.err }

func (c *flakyConn) fail(q string) bool {
	if c.failed || !strings.Contains(q, c.failOnce) {
		return false
	}
	c.failed = true
	return true
}

func (c *flakyConn) Query(ctx context.Context, q string, args ...any) (driver.Rows, error) {
	if c.fail(q) {
		return nil, errInjected
	}
	return c.Conn.Query(ctx, q, args...)
}

func (c *flakyConn) PrepareBatch(ctx context.Context, q string, opts ...driver.PrepareBatchOption) (driver.Batch, error) {
	b, err := c.Conn.PrepareBatch(ctx, q, opts...)
	if err != nil || !c.fail(q) {
		return b, err
	}
	return landedBatch{b}, nil
}

// landedBatch sends its rows, then reports errInjected.
type landedBatch struct{ driver.Batch }

func (b landedBatch) Send() error {
	if err := b.Batch.Send(); err != nil {
		return err
	}
	return errInjected
}

func (c *flakyConn) QueryRow(ctx context.Context, q string, args ...any) driver.Row {
	if c.fail(q) {
		return errRow{errInjected}
	}
	return c.Conn.QueryRow(ctx, q, args...)
}

// TestLoadStateRetry: a restart whose reading back of the tables fails at
// any one query, and succeeds at the next pass, ends with the state of a
// clean restart: each outcome replayed once through the interval correction
// and counted once by the rolling gauges.
func TestLoadStateRetry(t *testing.T) {
	conn, db := historyDB(t)
	ctx := context.Background()
	now := t0.Add(30 * time.Hour)
	var pending []tjob
	for i := range 60 {
		pending = append(pending, tjob{id: fmt.Sprint("p", i), user: []string{"alice", "bob", "carol"}[i%3], gpus: 2, limit: 4 * 3600, submit: now})
	}
	insertJobs(t, conn, db, pending...)
	c := &clock{t: now.Add(time.Minute)}
	r, _ := newRunner(t, conn, db, c)
	if _, err := r.Once(ctx); err != nil {
		t.Fatal(err)
	}
	// All run 20 hours, far outside their intervals: a drift the
	// correction widens the intervals for.
	for i := range pending {
		pending[i].start = now.Add(time.Minute)
		pending[i].end = pending[i].start.Add(20 * time.Hour)
	}
	insertJobs(t, conn, db, pending...)
	c.t = c.t.Add(time.Minute)
	if pass, err := r.Once(ctx); err != nil || pass.Outcomes != len(pending) {
		t.Fatalf("pass after the ends = %+v, %v; want %d outcomes", pass, err, len(pending))
	}
	want := r.adapt.State()
	if want.Observed != len(pending) || want.Widen <= 1 {
		t.Fatalf("premise: interval correction %+v; want %d observed, widened", want, len(pending))
	}
	for _, tc := range []struct{ name, query string }{
		{"predictions", "predictions FINAL WHERE submit_time"},
		{"outcomes", "GROUP BY cluster, job_id, submit_time"},
		{"latest outcomes", "ORDER BY end_time DESC"},
		{"interval correction", "ORDER BY end_time, cluster"},
		{"model version", "max(model_version)"},
	} {
		fc := &flakyConn{Conn: conn, failOnce: tc.query}
		r2, _ := newRunner(t, fc, db, c)
		if _, err := r2.Once(ctx); !errors.Is(err, errInjected) {
			t.Fatalf("%s: first pass after the restart = %v; want the injected error", tc.name, err)
		}
		pass, err := r2.Once(ctx)
		if err != nil {
			t.Fatalf("%s: retried pass: %v", tc.name, err)
		}
		if pass.Predictions != 0 || pass.Outcomes != 0 {
			t.Errorf("%s: retried pass = %+v; want nothing written again", tc.name, pass)
		}
		if got := r2.adapt.State(); got != want {
			t.Errorf("%s: interval correction after the retried load %+v; want %+v, as before the restart", tc.name, got, want)
		}
		if got := testutil.ToFloat64(r2.m.rollingN); got != float64(len(pending)) {
			t.Errorf("%s: rolling outcomes after the retried load = %v; want %d", tc.name, got, len(pending))
		}
	}
}
