// Package demandlog keeps the actuator's recorded node demand in ClickHouse
// (table actuator_demand, schemas/sql/0020_actuator_demand.sql): the largest
// demand each partition had within each step of the control loop's demand
// model. The loop saves a step whenever a pass raises it and, after a
// restart, loads the last days back, so its demand model does not have to
// watch the cluster for another day before it forecasts again.
//
// A step may have several rows (a pass raised it, or the actuator restarted
// within it); Load returns the largest value of each step. Rows read back
// are checked, and a row that is not a demand (a negative, NaN or infinite
// value, an empty partition, a time after the read's end) is rejected and
// counted, never used.
package demandlog

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Mark is the largest demand, in nodes, one partition had within the step
// that starts at Step.
type Mark struct {
	Partition string
	Step      time.Time
	Demand    float64
}

// Check says what is wrong with m as a recorded demand, nil if nothing.
// until is the end of the period being read; a step at or after it cannot
// have been observed yet (a clock that went back, or another writer).
func (m Mark) Check(until time.Time) error {
	switch {
	case m.Partition == "":
		return errors.New("empty partition")
	case m.Step.IsZero() || m.Step.Unix() <= 0:
		return fmt.Errorf("partition %q: no step time", m.Partition)
	case !until.IsZero() && !m.Step.Before(until):
		return fmt.Errorf("partition %q step %s: at or after %s, the end of the read", m.Partition, m.Step.UTC().Format(time.RFC3339), until.UTC().Format(time.RFC3339))
	case math.IsNaN(m.Demand) || math.IsInf(m.Demand, 0) || m.Demand < 0:
		return fmt.Errorf("partition %q step %s: demand %v is not a node count", m.Partition, m.Step.UTC().Format(time.RFC3339), m.Demand)
	}
	return nil
}

// Log writes and reads the actuator_demand table of one database.
type Log struct {
	conn driver.Conn
	db   string
	now  func() time.Time
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// New returns the Log of database db on conn. now stamps recorded_at (nil:
// time.Now).
func New(conn driver.Conn, db string, now func() time.Time) (*Log, error) {
	if conn == nil {
		return nil, errors.New("demandlog: no ClickHouse connection")
	}
	if !identifier.MatchString(db) {
		return nil, fmt.Errorf("demandlog: database %q is not a plain identifier", db)
	}
	if now == nil {
		now = time.Now
	}
	return &Log{conn: conn, db: db, now: now}, nil
}

// Save writes marks for cluster. A mark that fails Check is refused before
// anything is written.
func (l *Log) Save(ctx context.Context, cluster string, marks []Mark) error {
	if len(marks) == 0 {
		return nil
	}
	for _, m := range marks {
		if err := m.Check(time.Time{}); err != nil {
			return fmt.Errorf("demandlog: save: %w", err)
		}
	}
	batch, err := l.conn.PrepareBatch(ctx, "INSERT INTO "+l.db+".actuator_demand (cluster, partition_name, step, demand, recorded_at)")
	if err != nil {
		return fmt.Errorf("demandlog: prepare insert into %s.actuator_demand: %w", l.db, err)
	}
	now := l.now().UTC().Truncate(time.Second)
	for _, m := range marks {
		if err := batch.Append(cluster, m.Partition, m.Step.UTC().Truncate(time.Second), m.Demand, now); err != nil {
			_ = batch.Abort()
			return fmt.Errorf("demandlog: append partition %q step %s: %w", m.Partition, m.Step.UTC().Format(time.RFC3339), err)
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("demandlog: insert %d steps into %s.actuator_demand: %w", len(marks), l.db, err)
	}
	return nil
}

// Loaded is what Load read back.
type Loaded struct {
	// Marks are the good steps, by partition then step, one per step.
	Marks []Mark
	// Rejected counts the steps that failed Check; Reasons says why, for
	// the first few.
	Rejected int
	Reasons  []string
}

// maxReasons bounds Loaded.Reasons.
const maxReasons = 5

// Load returns cluster's steps in [since, until): the largest demand
// recorded for each partition and step.
func (l *Log) Load(ctx context.Context, cluster string, since, until time.Time) (Loaded, error) {
	if !until.After(since) {
		return Loaded{}, fmt.Errorf("demandlog: load: empty period %s .. %s", since.UTC().Format(time.RFC3339), until.UTC().Format(time.RFC3339))
	}
	// The upper bound is left to Check, so that rows after it are counted
	// as rejected rather than unseen.
	rows, err := l.conn.Query(ctx, "SELECT partition_name, step, max(demand) FROM "+l.db+".actuator_demand "+
		"WHERE cluster = ? AND step >= toDateTime(?, 'UTC') GROUP BY partition_name, step ORDER BY partition_name, step",
		cluster, max(since.Unix(), 0))
	if err != nil {
		return Loaded{}, fmt.Errorf("demandlog: read %s.actuator_demand: %w", l.db, err)
	}
	defer rows.Close()
	var out Loaded
	for rows.Next() {
		var m Mark
		if err := rows.Scan(&m.Partition, &m.Step, &m.Demand); err != nil {
			return Loaded{}, fmt.Errorf("demandlog: read a step: %w", err)
		}
		m.Step = m.Step.UTC()
		if err := m.Check(until); err != nil {
			out.Rejected++
			if len(out.Reasons) < maxReasons {
				out.Reasons = append(out.Reasons, err.Error())
			}
			continue
		}
		out.Marks = append(out.Marks, m)
	}
	if err := rows.Err(); err != nil {
		return Loaded{}, fmt.Errorf("demandlog: read %s.actuator_demand: %w", l.db, err)
	}
	return out, nil
}
