package loop

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/heliostat-dev/heliostat/actuator/adapter"
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

	// jobs, when the store can read job records, rebuilds each
	// partition's history from before the saved one, once.
	jobs     JobRecords
	rebuilds map[string]int // attempts, by partition; rebuildDone once done
}

// JobRecords reads the job records the demand history is rebuilt from, for
// the time before the saved history: *demandlog.Log.
type JobRecords interface {
	PastJobs(ctx context.Context, cluster, partition string, since, until time.Time) (demandlog.Records, error)
}

// rebuildDone marks a partition rebuilt (or given up on) in
// storedDemand.rebuilds; rebuildTries is how many passes try.
const (
	rebuildDone  = -1
	rebuildTries = 3
)

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

// rebuildDemand rebuilds, once per partition, the demand history from before
// the saved one (all of it on a new installation) from the job records, over
// the span the loop keeps, so that the model forecasts from the records the
// pipeline already holds instead of watching the cluster for
// Config.ForecastMinHistory first. Partitions are taken as this pass's
// snapshot shows them (pools, from partitionNodes): their usable nodes and
// GPUs per node turn the records into node demand the way plan measures it.
// A failed read is retried for rebuildTries passes.
func (l *Loop) rebuildDemand(ctx context.Context, now time.Time, pools map[string][]adapter.Node) {
	s := &l.stored
	if s.jobs == nil || !s.loaded || l.cfg.Forecast != ForecastModel {
		return
	}
	if s.rebuilds == nil {
		s.rebuilds = map[string]int{}
	}
	step := l.cfg.forecasterConfig().Model.Step
	for _, pool := range demandPools(pools) {
		part := pool.Partition
		if s.rebuilds[part] == rebuildDone {
			continue
		}
		until := now.Truncate(step)
		since := until.Add(step - maxDemandHistory)
		if p := s.pending[part]; len(p) > 0 && p[0].Step.Before(until) {
			until = p[0].Step
		}
		if ps := l.pool[part]; ps != nil && ps.model != nil && len(ps.model.steps.Values) > 0 && ps.model.steps.Start.Before(until) {
			until = ps.model.steps.Start
		}
		if pool.Nodes == 0 {
			continue // no usable node to measure demand against yet
		}
		if !until.After(since) {
			s.rebuilds[part] = rebuildDone
			continue
		}
		recs, err := s.jobs.PastJobs(ctx, l.cfg.Cluster, part, since, until)
		if err != nil {
			l.m.demandStore.WithLabelValues("rebuild").Inc()
			s.rebuilds[part]++
			if s.rebuilds[part] >= rebuildTries {
				s.rebuilds[part] = rebuildDone
				l.logger.Warn("could not read the job records to rebuild the demand history; the demand model starts from what is saved and recorded", "partition", part, "err", err)
			} else {
				l.logger.Warn("could not read the job records to rebuild the demand history; trying again next pass", "partition", part, "err", err)
			}
			continue
		}
		s.rebuilds[part] = rebuildDone
		if !recs.Newest.IsZero() && recs.Newest.Before(until) {
			// The records end there (ingest lags, or the jobs stopped
			// coming): the steps after are left unknown, not rebuilt
			// as if nothing had changed.
			l.logger.Info("the job records end before the demand history to rebuild does; the steps after them are not rebuilt",
				"partition", part, "newest_job_event", recs.Newest, "until", until)
			until = recs.Newest
		}
		marks := demandlog.Rebuild(recs.Jobs, pool, since, until, step)
		if len(marks) == 0 {
			l.logger.Info("no job records to rebuild the demand history from", "partition", part, "before", until)
			continue
		}
		l.m.demandRebuilt.Add(float64(len(marks)))
		if ps := l.pool[part]; ps != nil && ps.model != nil {
			for _, m := range marks {
				ps.model.put(m.Step, m.Demand, true)
			}
		} else {
			s.pending[part] = append(s.pending[part], marks...)
		}
		l.logger.Info("rebuilt the demand history from the job records", "partition", part, "jobs", len(recs.Jobs), "steps", len(marks),
			"from", marks[0].Step, "until", until, "nodes", pool.Nodes, "gpus_per_node", pool.GPUsPerNode)
	}
}

// demandPools returns the partitions plan makes power plans for, with the
// nodes that can serve their demand and their GPUs per node.
func demandPools(pools map[string][]adapter.Node) []demandlog.Pool {
	out := make([]demandlog.Pool, 0, len(pools))
	for part, nodes := range pools {
		p := demandlog.Pool{Partition: part}
		for _, n := range nodes {
			if n.Unusable {
				continue
			}
			p.Nodes++
			p.GPUsPerNode = max(p.GPUsPerNode, n.GPUs)
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b demandlog.Pool) int { return cmp.Compare(a.Partition, b.Partition) })
	return out
}
