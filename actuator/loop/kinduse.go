package loop

import (
	"context"
	"time"

	"github.com/heliostat-dev/heliostat/actuator/adapter"
	"github.com/heliostat-dev/heliostat/actuator/ces"
)

// useHalfLives is how many of Config.KindUseHalfLife back rebuildUse reads
// the job records: a step older than that weighs less than a sixteenth of
// the newest.
const useHalfLives = 4

// rebuildUse gives each partition whose usable nodes are of several kinds,
// at the first pass that sees it, its kinds' recent use as the job records
// hold it (JobRecords, when the DemandStore reads them): for each step of
// the demand model's length over the last useHalfLives half-lives, the
// nodes of each kind that a job held, folded in as observeUse folds a
// pass's busy nodes. Without it a restarted loop's kind use starts from its
// first pass, and for hours the spare nodes follow the moment's use rather
// than the last hours'. The records do not say which kind a pending job
// would have taken, so the nodes pending jobs needed are not rebuilt; nor
// are the steps after the newest job event (ingest lags, or the jobs
// stopped coming). One try per partition: a failed read is counted
// (heliostat_actuator_demand_store_errors_total{op="rebuild_kind_use"}) and
// logged, and the kind use then learns from the passes alone.
func (l *Loop) rebuildUse(ctx context.Context, now time.Time, pools map[string][]adapter.Node) {
	half := l.cfg.KindUseHalfLife
	if half <= 0 || l.stored.jobs == nil {
		return
	}
	if l.useRebuilt == nil {
		l.useRebuilt = map[string]bool{}
	}
	step := l.cfg.forecasterConfig().Model.Step
	for part, nodes := range pools {
		if l.useRebuilt[part] {
			continue
		}
		l.useRebuilt[part] = true
		if ps := l.pool[part]; ps != nil && !ps.useAt.IsZero() {
			continue // watched already
		}
		var cn []ces.Node
		index := map[string]int{}
		kinds := map[string]bool{}
		for _, n := range nodes {
			if n.Unusable {
				continue
			}
			index[n.Name] = len(cn)
			cn = append(cn, ces.Node{Name: n.Name, Kind: n.Kind()})
			kinds[n.Kind()] = true
		}
		if len(kinds) < 2 {
			continue
		}
		until := now.Truncate(step)
		if until.Equal(now) {
			until = until.Add(-step) // the pass at now counts now itself
		}
		since := until.Add(-min(useHalfLives*half, maxDemandHistory)).Truncate(step)
		recs, err := l.stored.jobs.PastJobs(ctx, l.cfg.Cluster, part, since, until)
		if err != nil {
			l.m.demandStore.WithLabelValues("rebuild_kind_use").Inc()
			l.logger.Warn("could not read the job records to rebuild each node kind's recent use; it is learnt from the passes", "partition", part, "err", err)
			continue
		}
		if recs.Newest.IsZero() {
			continue // no records: nothing to rebuild from
		}
		if recs.Newest.Before(until) {
			until = recs.Newest.Truncate(step)
		}
		ps := l.pool[part]
		if ps == nil {
			ps = &poolState{name: part, first: now, changed: map[string]time.Time{}}
			l.pool[part] = ps
		}
		steps := 0
		for t := since; t.Before(until); t = t.Add(step) {
			end := t.Add(step)
			for i := range cn {
				cn[i].Busy = false
			}
			for _, j := range recs.Jobs {
				if j.Start.IsZero() || !j.Start.Before(end) || !j.End.IsZero() && !j.End.After(t) {
					continue
				}
				for _, name := range j.Nodes {
					if i, ok := index[name]; ok {
						cn[i].Busy = true
					}
				}
			}
			ps.observeUse(end, cn, half)
			steps++
		}
		if steps > 0 {
			l.logger.Info("rebuilt each node kind's recent use from the job records", "partition", part, "since", since, "until", until, "steps", steps)
		}
	}
}
