package loop

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/heliostat-dev/heliostat/actuator/demandlog"
)

// storedDemand is the loop's side of its DemandStore: the saved history not
// yet given to a partition's model, and the steps raised since the last
// save.
type storedDemand struct {
	store   DemandStore // nil: the history lives in memory only
	loaded  bool        // the saved history has been read
	pending map[string][]demandlog.Mark
	unsaved map[stepKey]float64
}

type stepKey struct {
	part string
	at   time.Time
}

// seed gives ps's new model the saved history loaded for its partition.
func (s *storedDemand) seed(ps *poolState) {
	for _, m := range s.pending[ps.name] {
		ps.model.put(m.Step, m.Demand, true)
	}
	delete(s.pending, ps.name)
}

// raised notes that a pass raised part's step at to v, to be saved.
func (s *storedDemand) raised(part string, at time.Time, v float64) {
	if s.store == nil {
		return
	}
	if s.unsaved == nil {
		s.unsaved = map[stepKey]float64{}
	}
	k := stepKey{part, at}
	if cur, ok := s.unsaved[k]; !ok || v > cur {
		s.unsaved[k] = v
	}
}

// loadDemand reads the demand history saved by earlier runs, once: the
// model of a partition seen already gets it now, the others when they
// appear. A failed read is retried at the next pass; meanwhile the models
// read what this run has recorded.
func (l *Loop) loadDemand(ctx context.Context, now time.Time) {
	s := &l.stored
	if s.store == nil || s.loaded || l.cfg.Forecast != ForecastModel {
		return
	}
	step := l.cfg.forecasterConfig().Model.Step
	until := now.Truncate(step).Add(step)
	got, err := s.store.Load(ctx, l.cfg.Cluster, until.Add(-maxDemandHistory), until)
	if err != nil {
		l.m.demandStore.WithLabelValues("load").Inc()
		l.logger.Warn("could not read the saved demand history; trying again next pass", "err", err)
		return
	}
	s.loaded = true
	if got.Rejected > 0 {
		l.m.demandRejected.Add(float64(got.Rejected))
		l.logger.Warn("saved demand steps rejected, not used", "rejected", got.Rejected, "first_reasons", got.Reasons)
	}
	if s.pending == nil {
		s.pending = map[string][]demandlog.Mark{}
	}
	parts := map[string]bool{}
	for _, m := range got.Marks {
		parts[m.Partition] = true
		if ps := l.pool[m.Partition]; ps != nil && ps.model != nil {
			ps.model.put(m.Step, m.Demand, true)
			continue
		}
		s.pending[m.Partition] = append(s.pending[m.Partition], m)
	}
	if len(got.Marks) == 0 {
		l.logger.Info("no saved demand history; the demand model starts from what this run records", "cluster", l.cfg.Cluster)
		return
	}
	l.logger.Info("loaded the saved demand history", "cluster", l.cfg.Cluster, "steps", len(got.Marks), "partitions", len(parts),
		"from", got.Marks[0].Step, "rejected", got.Rejected)
}

// saveDemand writes the steps raised since the last save. A failed write is
// kept and retried at the next pass; steps older than the history the loop
// keeps are given up, and counted.
func (l *Loop) saveDemand(ctx context.Context, now time.Time) {
	s := &l.stored
	if s.store == nil || len(s.unsaved) == 0 {
		return
	}
	cut := now.Add(-maxDemandHistory)
	marks := make([]demandlog.Mark, 0, len(s.unsaved))
	for k, v := range s.unsaved {
		if k.at.Before(cut) {
			delete(s.unsaved, k)
			l.m.demandStore.WithLabelValues("given_up").Inc()
			continue
		}
		marks = append(marks, demandlog.Mark{Partition: k.part, Step: k.at, Demand: v})
	}
	slices.SortFunc(marks, func(a, b demandlog.Mark) int {
		return cmp.Or(cmp.Compare(a.Partition, b.Partition), a.Step.Compare(b.Step))
	})
	if err := s.store.Save(ctx, l.cfg.Cluster, marks); err != nil {
		l.m.demandStore.WithLabelValues("save").Inc()
		l.logger.Warn("could not save the recorded demand; trying again next pass", "steps", len(marks), "err", err)
		return
	}
	clear(s.unsaved)
}
