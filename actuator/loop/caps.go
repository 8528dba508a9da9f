package loop

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/heliostat-dev/heliostat/actuator/adapter"
	"github.com/heliostat-dev/heliostat/actuator/audit"
)

// History reads the audit table back: *audit.Log, and *audit.Published,
// which embeds it. When the loop's Auditor is one, the loop seeds its power
// caps at start from the power actions of the hour before (seedCaps).
type History interface {
	List(ctx context.Context, q audit.Query) ([]audit.Record, error)
}

// capHistory is what the loop reads of the actions an earlier run made, so
// that the caps on power transitions — CES's --ces.max-transitions-per-hour,
// kept in each partition's ces.State, and the guard's
// --actuator.max-power-actions-per-hour — and the guard's
// --actuator.max-priority-updates-per-minute count them after a restart as
// they would have without one.
type capHistory struct {
	history History // nil: nothing to read; the caps start empty
	read    bool    // read (or nothing to read): power-downs may go out
	start   time.Time
	// unread, until the read succeeds after a failed one, is why
	// power-downs are held.
	unread error
	// transitions are the CES transitions read, by partition, until the
	// partition's next plan takes them (ps.ces.Transitions).
	transitions map[string][]time.Time
}

// errCapsUnread is the reason of the power-downs held while the power
// actions of the hour before the start cannot be read.
var errCapsUnread = errors.New("loop: power-down held: the power actions of the hour before the actuator started could not be read from the audit table, so the power caps cannot count them (retried each pass)")

// seedCaps reads, once, the power actions recorded in the hour before the
// loop's first pass (start), and the priority changes of the minute before
// it, and counts them in the caps: CES counts the power actions sent to the
// scheduler (applied or failed), the guard the actions it let through
// (applied; for a dry run also its own dry-run advice, which a dry run's
// window counts). The actions of an earlier dry run do not count for an
// applied run: nothing was done.
//
// If the audit table cannot be read, power-downs are held — recorded as
// skipped with errCapsUnread — and the read retried each pass; power-ups go
// out, as neither cap ever holds one back. Holding is the conservative
// choice: the caps are there because a burst of power-downs is what must
// not happen, and an actuator that restarts because ClickHouse is failing
// would otherwise start with both caps unspent. Priority changes are not
// held: their cap's window is a minute, so an unread history lets through
// at most one extra minute's worth, and a priority is undone by the next
// one. The failure is counted in
// heliostat_actuator_power_history_errors_total and logged once per outage.
func (l *Loop) seedCaps(ctx context.Context, now time.Time) {
	c := &l.caps
	if c.read {
		return
	}
	if c.start.IsZero() {
		c.start = now
	}
	if c.history == nil {
		c.read = true
		return
	}
	recs, err := l.pastActions(ctx, c.start.Add(-time.Hour), c.start, adapter.PowerDown, adapter.PowerUp)
	if err == nil {
		var prio []audit.Record
		prio, err = l.pastActions(ctx, c.start.Add(-time.Minute), c.start, adapter.SetPriority)
		recs = append(recs, prio...)
	}
	if err != nil {
		l.m.powerHistoryErrors.Inc()
		if c.unread == nil {
			l.logger.Warn("actions of the last hour not read from the audit table; power-downs held until they are (retried each pass)", "err", err)
		}
		c.unread = fmt.Errorf("%w: %w", errCapsUnread, err)
		return
	}
	dry := !l.g.Config().Apply
	var guard []adapter.Action
	power, prio := 0, 0
	c.transitions = map[string][]time.Time{}
	for _, r := range recs {
		kind := adapter.Kind(r.Kind)
		sent := r.Outcome == audit.Applied || r.Outcome == audit.Failed
		if kind != adapter.SetPriority && sent && (!r.DryRun || dry) {
			c.transitions[r.Partition] = append(c.transitions[r.Partition], r.DecidedAt)
		}
		if kind == adapter.SetPriority {
			prio++
		} else {
			power++
		}
		if r.Outcome == audit.Applied && !r.DryRun ||
			dry && r.DryRun && r.Outcome == audit.Skipped && r.Error == adapter.ErrDryRun.Error() {
			a := adapter.Action{Kind: kind, Target: r.Target, At: r.DecidedAt}
			if r.Value != nil {
				// A dry run's window knows an action by its priority too.
				a.Priority = *r.Value
			}
			guard = append(guard, a)
		}
	}
	for p := range c.transitions {
		slices.SortFunc(c.transitions[p], time.Time.Compare)
	}
	l.g.Seed(guard)
	if c.unread != nil {
		for k, r := range l.seen {
			if r.unread {
				delete(l.seen, k) // sent by this pass, if the plan still asks
			}
		}
	}
	c.read, c.unread = true, nil
	l.logger.Info("rate caps seeded from the audit table", "since", c.start.Add(-time.Hour), "power_actions", power, "priority_changes", prio, "guard_units", len(guard))
}

// pastActions returns the cluster's actions of kinds decided in [since,
// until), as the audit table holds them now, page by page.
func (l *Loop) pastActions(ctx context.Context, since, until time.Time, kinds ...adapter.Kind) ([]audit.Record, error) {
	// decided_at is kept to the second: this run's first actions, decided
	// at until, read back as until truncated.
	until = until.Truncate(time.Second)
	var out []audit.Record
	for _, kind := range kinds {
		q := audit.Query{Cluster: l.cfg.Cluster, Since: since, Kind: string(kind), Limit: audit.MaxLimit}
		for {
			recs, err := l.caps.history.List(ctx, q)
			if err != nil {
				return nil, fmt.Errorf("loop: read %s actions since %s: %w", kind, since.UTC().Format(time.RFC3339), err)
			}
			for _, r := range recs {
				if !r.DecidedAt.Before(since) && r.DecidedAt.Before(until) {
					out = append(out, r)
				}
			}
			next := audit.Next(q, recs)
			if next.IsZero() || next.ID == q.Before.ID && next.DecidedAt.Equal(q.Before.DecidedAt) {
				break
			}
			q.Before = next
		}
	}
	return out, nil
}

// mergeTimes returns a and b merged, oldest first.
func mergeTimes(a, b []time.Time) []time.Time {
	out := append(slices.Clone(a), b...)
	slices.SortFunc(out, time.Time.Compare)
	return out
}
