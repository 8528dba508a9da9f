package audit

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/internal/metricsreg"
	"github.com/heliostat-dev/heliostat/internal/retention"
)

// DefaultRetention is how long the actions table keeps an action by default:
// 13 months, so that a year ago can be compared with now.
const DefaultRetention = 400 * 24 * time.Hour

// RegisterRetentionFlag adds --actuator.audit-retention to fs, setting keep.
func RegisterRetentionFlag(fs *flag.FlagSet, keep *time.Duration) {
	fs.DurationVar(keep, "actuator.audit-retention", DefaultRetention,
		"drop the actions table's monthly partitions once every action in them was decided longer ago than this, checked at start and hourly (0 keeps all; the default 9600h is 400 days)")
}

// Expire drops the partitions (months of decided_at) of the actions table
// whose every action was decided more than keep before now, for every
// cluster the table holds, and returns their ids. Keep 0 keeps everything.
// now is on the clock actions are decided on, the scheduler's.
func (l *Log) Expire(ctx context.Context, keep time.Duration, now time.Time) ([]string, error) {
	dropped, err := retention.DropExpired(ctx, l.conn, l.db, retention.Rule{Table: "actions", Keep: keep}, now)
	if err != nil {
		return dropped, fmt.Errorf("audit: expire actions: %w", err)
	}
	return dropped, nil
}

// Expiry runs Log.Expire at start and then every hour.
type Expiry struct {
	l       *Log
	keep    time.Duration
	now     func() time.Time
	every   time.Duration
	logger  *slog.Logger
	dropped prometheus.Counter
	failed  prometheus.Counter
}

// NewExpiry returns an Expiry of l's actions older than keep (0: it does
// nothing) on the scheduler's clock now: a simulated cluster replaying a
// trace decides its actions in the trace's past, and a wall clock would
// expire them as soon as they are written. Metrics are registered on reg
// unless it is nil.
func NewExpiry(l *Log, keep time.Duration, now func() time.Time, logger *slog.Logger, reg prometheus.Registerer) (*Expiry, error) {
	if l == nil || now == nil {
		return nil, errors.New("audit: expiry needs a log and a clock")
	}
	if keep < 0 {
		return nil, fmt.Errorf("audit: --actuator.audit-retention %v is negative", keep)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	e := &Expiry{l: l, keep: keep, now: now, every: time.Hour, logger: logger,
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "heliostat_actuator_audit_dropped_partitions_total",
			Help: "Monthly partitions of the actions table dropped by --actuator.audit-retention.",
		}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "heliostat_actuator_audit_expire_errors_total",
			Help: "Failed attempts to drop expired partitions of the actions table (retried the next hour).",
		}),
	}
	if reg != nil {
		if err := metricsreg.Register(reg, e.dropped, e.failed); err != nil {
			return nil, fmt.Errorf("audit: register metrics: %w", err)
		}
	}
	return e, nil
}

// Run expires at once and then every hour until ctx ends. A failure is
// logged, counted and retried the next hour; Run returns nil when ctx ends.
func (e *Expiry) Run(ctx context.Context) error {
	if e.keep == 0 {
		return nil
	}
	t := time.NewTicker(e.every)
	defer t.Stop()
	for {
		dropped, err := e.l.Expire(ctx, e.keep, e.now())
		e.dropped.Add(float64(len(dropped)))
		if len(dropped) > 0 {
			e.logger.Info("audit retention dropped partitions of the actions table", "partitions", dropped, "retention", e.keep)
		}
		if err != nil && ctx.Err() == nil {
			e.failed.Inc()
			e.logger.Warn("audit retention failed; retrying in an hour", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
