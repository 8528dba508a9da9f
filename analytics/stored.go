package analytics

import (
	"context"
	"fmt"
	"sort"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// ReadTimeZone returns the time zone that window w's stored results were
// computed in (analytics_utilization.tz), "" when w has no such rows.
func ReadTimeZone(ctx context.Context, conn driver.Conn, database string, w Window) (string, error) {
	if !identifier.MatchString(database) {
		return "", fmt.Errorf("analytics: database %q is not a plain identifier", database)
	}
	var tz string
	if err := conn.QueryRow(ctx, "SELECT any(tz) FROM "+database+".analytics_utilization WHERE window_id = ?", w.ID()).Scan(&tz); err != nil {
		return "", fmt.Errorf("analytics: read the time zone of window %s: %w", w.ID(), err)
	}
	return tz, nil
}

// Compare says which settings Runner.StoredDifferences compares.
type Compare struct {
	// TimeZone compares the time zone (Config.TimeZone).
	TimeZone bool
	// Capacity compares the configured capacities (Config.Capacity and
	// Config.CapacityFile) with those the stored results used.
	Capacity bool
}

// StoredDifferences compares the results stored for window w with what the
// runner's settings would give, as far as c asks, and describes each
// difference; none means that re-running w on the same data would compute
// the same figures. A window with no stored results has no differences.
// The capacity comparison covers the configured capacities only: a stored
// capacity from gpu_inventory or the peak is not compared (re-running
// reads the data again anyway).
func (r *Runner) StoredDifferences(ctx context.Context, w Window, c Compare) ([]string, error) {
	var out []string
	if c.TimeZone {
		tz, err := ReadTimeZone(ctx, r.conn, r.cfg.Database, w)
		if err != nil {
			return nil, err
		}
		if want := r.loc.String(); tz != "" && tz != want {
			out = append(out, fmt.Sprintf("time zone %s, not %s", tz, want))
		}
	}
	if c.Capacity {
		diffs, err := r.capacityDifferences(ctx, w)
		if err != nil {
			return nil, err
		}
		out = append(out, diffs...)
	}
	return out, nil
}

func (r *Runner) capacityDifferences(ctx context.Context, w Window) ([]string, error) {
	rows, err := r.conn.Query(ctx, "SELECT cluster, vc, gpus, source FROM "+r.cfg.Database+".analytics_capacity WHERE window_id = ?", w.ID())
	if err != nil {
		return nil, fmt.Errorf("analytics: read the capacities of window %s: %w", w.ID(), err)
	}
	var stored []capacityRow
	for rows.Next() {
		var c capacityRow
		if err := rows.Scan(&c.cluster, &c.vc, &c.gpus, &c.source); err != nil {
			rows.Close()
			return nil, fmt.Errorf("analytics: read the capacities of window %s: %w", w.ID(), err)
		}
		stored = append(stored, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("analytics: read the capacities of window %s: %w", w.ID(), err)
	}
	// The stored rows are the window's clusters (vc "") and VCs: the pairs
	// a run resolves the configured capacities for.
	pairs := make([][2]string, len(stored))
	for i, c := range stored {
		pairs[i] = [2]string{c.cluster, c.vc}
	}
	want := map[[2]string]capacityRow{}
	for _, c := range resolveCapacities(r.cfg.Capacity, pairs) {
		want[[2]string{c.cluster, c.vc}] = c
	}
	var out []string
	for _, s := range stored {
		k := [2]string{s.cluster, s.vc}
		name := Capacity{Cluster: s.cluster, VC: s.vc}.key()
		switch cw, ok := want[k]; {
		case ok && (cw.gpus != s.gpus || cw.source != s.source):
			out = append(out, fmt.Sprintf("capacity of %s %d GPUs (%s), not %d (%s)", name, s.gpus, s.source, cw.gpus, cw.source))
		case !ok && (s.source == "config" || s.source == "config_vcs"):
			out = append(out, fmt.Sprintf("capacity of %s %d GPUs (%s), not configured now", name, s.gpus, s.source))
		}
	}
	sort.Strings(out)
	return out, nil
}
