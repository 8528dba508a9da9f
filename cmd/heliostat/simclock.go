package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/heliostat-dev/heliostat/internal/atomicfile"
)

// simClockFile is where heliostat up keeps, in its data directory, how far
// each simulated cluster's clock got, so that the next run continues the
// same timeline instead of starting again at the wall clock, behind the jobs
// and demand an earlier run recorded (the simulated clock runs ahead of the
// wall clock).
const simClockFile = "sim-clock.json"

// simClockSaveEvery is how often up saves the simulated clock while it runs;
// after a crash the next run may start up to this much real time (times the
// speed-up) before where the crashed one stopped, unless ClickHouse already
// holds later job events.
const simClockSaveEvery = 5 * time.Second

// simClocks maps a simulated cluster's name to the simulated time its last
// run reached.
type simClocks map[string]time.Time

// readSimClocks reads dir's clock file; a missing file is no clocks.
func readSimClocks(dir string) (simClocks, error) {
	path := filepath.Join(dir, simClockFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return simClocks{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the simulated clock: %w", err)
	}
	c := simClocks{}
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("read the simulated clock: %s: %w: %w (delete it, or pass --sim.start)", path, errDamagedClock, err)
	}
	return c, nil
}

// errDamagedClock: the clock file is not the JSON saveSimClock writes.
var errDamagedClock = errors.New("damaged")

// saveSimClock records in dir's clock file that cluster's simulated clock
// reached t, keeping the other clusters' entries. A clock never moves back.
// A damaged file is replaced (a run told --sim.start repairs it).
func saveSimClock(dir, cluster string, t time.Time) error {
	c, err := readSimClocks(dir)
	if errors.Is(err, errDamagedClock) {
		c, err = simClocks{}, nil
	}
	if err != nil {
		return err
	}
	if prev, ok := c[cluster]; ok && !t.After(prev) {
		return nil
	}
	c[cluster] = t.UTC().Truncate(time.Second)
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("save the simulated clock: %w", err)
	}
	return atomicfile.Write(filepath.Join(dir, simClockFile), append(b, '\n'))
}

// lastJobEvent returns the time of cluster's newest job event in ClickHouse;
// zero when it has none.
func lastJobEvent(ctx context.Context, conn driver.Conn, db, cluster string) (time.Time, error) {
	var n uint64
	var t time.Time
	if err := conn.QueryRow(ctx, "SELECT count(), max(event_ts) FROM "+db+".job_events WHERE cluster = ?", cluster).Scan(&n, &t); err != nil {
		return time.Time{}, fmt.Errorf("read the newest job event of cluster %q: %w", cluster, err)
	}
	if n == 0 {
		return time.Time{}, nil
	}
	return t, nil
}

// resumeSimStart returns when cluster's simulated clock starts: a second
// after the later of the clock saved in dir and the newest job event
// ClickHouse holds for the cluster, or now when neither is later than now.
func resumeSimStart(ctx context.Context, conn driver.Conn, db, dir, cluster string, now time.Time, logger *slog.Logger) (time.Time, error) {
	clocks, err := readSimClocks(dir)
	if err != nil {
		return time.Time{}, err
	}
	event, err := lastJobEvent(ctx, conn, db, cluster)
	if err != nil {
		return time.Time{}, err
	}
	saved := clocks[cluster]
	last := saved
	if event.After(last) {
		last = event
	}
	start := now.UTC().Truncate(time.Second)
	if !last.Before(start) {
		start = last.UTC().Truncate(time.Second).Add(time.Second)
		attrs := []any{"cluster", cluster, "sim_time", start}
		if !saved.IsZero() {
			attrs = append(attrs, "saved_clock", saved)
		}
		if !event.IsZero() {
			attrs = append(attrs, "newest_job_event", event)
		}
		logger.Info("the simulated clock resumes where the last run stopped", attrs...)
	}
	return start, nil
}

// keepSimClock saves clock() as cluster's simulated clock in dir every
// simClockSaveEvery until ctx ends (up saves the final one once the
// simulation has stopped). A failed save is logged and tried again.
func keepSimClock(ctx context.Context, dir, cluster string, clock func() time.Time, logger *slog.Logger) error {
	t := time.NewTicker(simClockSaveEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := saveSimClock(dir, cluster, clock()); err != nil {
				logger.Warn("could not save the simulated clock; a restart may overlap this run's timeline", "err", err)
			}
		}
	}
}
