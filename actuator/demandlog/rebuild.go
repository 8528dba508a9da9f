package demandlog

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"
)

// PastJob is what one job record says of its partition's demand.
type PastJob struct {
	Submit time.Time
	// Start and End are zero when the record has not seen the job start or
	// end: it is still pending, or still running, as far as it goes.
	Start, End time.Time
	// Nodes are the nodes the job held while it ran. A record without them
	// counts NodeCount (at least 1) nodes of its own.
	Nodes     []string
	NodeCount int
	// GPUs is what the job asked for; a pending job counts at least 1, as
	// the control loop counts it.
	GPUs int
}

// Pool is one partition as the control loop sees it now.
type Pool struct {
	Partition string
	// Nodes is how many nodes can serve demand: no step exceeds it.
	Nodes int
	// GPUsPerNode turns the pending jobs' GPUs into nodes.
	GPUsPerNode int
}

// Rebuild reconstructs pool's demand in each step of [since, until) from its
// job records, measured the way the control loop measures it at a pass: the
// nodes running a job, plus the nodes the pending jobs need: ⌈GPUs ÷
// GPUsPerNode⌉ for those that fit on one node, whole nodes (NodeCount, at
// least ⌈GPUs ÷ GPUsPerNode⌉) for each that asks for several; at most
// pool.Nodes. A step's value is the largest
// at any instant within it. Steps that start before the earliest submit time
// among the records are left out, since the records may not cover them; so is
// everything when there are no records. What the records cannot tell is not
// guessed: a held job counts as pending (the loop leaves held jobs out), and a
// job whose end never reached the records counts until until.
func Rebuild(jobs []PastJob, pool Pool, since, until time.Time, step time.Duration) []Mark {
	if len(jobs) == 0 || step <= 0 || pool.Nodes <= 0 || !until.After(since) {
		return nil
	}
	type event struct {
		at    time.Time
		gpus  int      // change of the pending GPUs of jobs that fit on one node
		whole int      // change of the nodes pending multi-node jobs need
		anon  int      // change of the nodes held by records that name none
		nodes []string // nodes taken (held > 0) or given back (held < 0)
		held  int
	}
	var ev []event
	first := until
	for _, j := range jobs {
		if j.Submit.IsZero() {
			continue
		}
		if j.Submit.Before(first) {
			first = j.Submit
		}
		pendEnd := until
		switch {
		case !j.Start.IsZero():
			pendEnd = j.Start
		case !j.End.IsZero():
			pendEnd = j.End // ended (cancelled) without starting
		}
		if pendEnd.After(j.Submit) {
			if j.NodeCount > 1 {
				w := max(j.NodeCount, ceilDiv(j.GPUs, max(pool.GPUsPerNode, 1)))
				ev = append(ev, event{at: j.Submit, whole: w}, event{at: pendEnd, whole: -w})
			} else {
				g := max(j.GPUs, 1)
				ev = append(ev, event{at: j.Submit, gpus: g}, event{at: pendEnd, gpus: -g})
			}
		}
		if j.Start.IsZero() {
			continue
		}
		runEnd := until
		if !j.End.IsZero() {
			runEnd = j.End
		}
		if !runEnd.After(j.Start) {
			continue
		}
		if len(j.Nodes) > 0 {
			ev = append(ev, event{at: j.Start, nodes: j.Nodes, held: 1}, event{at: runEnd, nodes: j.Nodes, held: -1})
		} else {
			n := max(j.NodeCount, 1)
			ev = append(ev, event{at: j.Start, anon: n}, event{at: runEnd, anon: -n})
		}
	}
	slices.SortStableFunc(ev, func(a, b event) int { return a.at.Compare(b.at) })

	gpn := max(pool.GPUsPerNode, 1)
	held := map[string]int{}
	pending, whole, anon := 0, 0, 0
	value := func() float64 {
		need := whole
		if pending > 0 {
			need += ceilDiv(pending, gpn)
		}
		return math.Min(float64(len(held)+anon+need), float64(pool.Nodes))
	}
	apply := func(e event) {
		pending += e.gpus
		whole += e.whole
		anon += e.anon
		for _, n := range e.nodes {
			held[n] += e.held
			if held[n] <= 0 {
				delete(held, n)
			}
		}
	}
	// The first whole step at or after both since and the first record.
	from := since
	if first.After(from) {
		from = first
	}
	start := from.Truncate(step)
	if start.Before(from) {
		start = start.Add(step)
	}
	var out []Mark
	k := 0
	for s := start; !s.Add(step).After(until); s = s.Add(step) {
		for k < len(ev) && !ev[k].at.After(s) {
			apply(ev[k])
			k++
		}
		v := value()
		end := s.Add(step)
		for k < len(ev) && ev[k].at.Before(end) {
			at := ev[k].at
			for k < len(ev) && ev[k].at.Equal(at) {
				apply(ev[k])
				k++
			}
			v = math.Max(v, value())
		}
		out = append(out, Mark{Partition: pool.Partition, Step: s, Demand: v})
	}
	return out
}

// ceilDiv returns ⌈a ÷ b⌉ for a ≥ 0, b > 0.
func ceilDiv(a, b int) int { return (a + b - 1) / b }

// maxJobRun bounds how long before a read's start a job record may have been
// submitted and still count: a record whose end never arrived would
// otherwise hold its nodes forever.
const maxJobRun = 30 * 24 * time.Hour

// Records are the job records of one partition, for Rebuild.
type Records struct {
	Jobs []PastJob
	// Newest is the time of the newest job event the table holds for the
	// cluster, in any partition; zero when it holds none. The records say
	// nothing of what happened after it: the jobs may have stopped coming,
	// or ingest may lag behind the scheduler.
	Newest time.Time
}

// PastJobs reads the records of cluster's jobs in partition (a pending job
// that lists several, "gpu,debug", counts in each, as the control loop counts
// it) that were
// pending or running at some time in [since, until), from the job_runs table
// (schemas/sql/0026_job_runs.sql: every run of a requeued job, where jobs
// keeps only the latest), for Rebuild, and the newest job event of the
// cluster. Only jobs submitted at most maxJobRun before since are read: an
// older one still pending or running at since is not.
func (l *Log) PastJobs(ctx context.Context, cluster, partition string, since, until time.Time) (Records, error) {
	var recs Records
	if !until.After(since) {
		return recs, fmt.Errorf("demandlog: past jobs: empty period %s .. %s", since.UTC().Format(time.RFC3339), until.UTC().Format(time.RFC3339))
	}
	var newest int64
	if err := l.conn.QueryRow(ctx, "SELECT toInt64(toUInt32(max(updated_at))) FROM "+l.db+".job_runs WHERE cluster = ?", cluster).Scan(&newest); err != nil {
		return recs, fmt.Errorf("demandlog: newest job event in %s.job_runs: %w", l.db, err)
	}
	if newest > 0 {
		recs.Newest = time.Unix(newest, 0).UTC()
	}
	rows, err := l.conn.Query(ctx, "SELECT submit_time, start_time, end_time, nodes, node_count, gpus FROM "+l.db+".job_runs FINAL "+
		"WHERE cluster = ? AND has(splitByChar(',', partition_name), ?) AND submit_time >= toDateTime(?, 'UTC') AND submit_time < toDateTime(?, 'UTC') "+
		"AND (isNull(end_time) OR end_time >= toDateTime(?, 'UTC'))",
		cluster, partition, max(since.Add(-maxJobRun).Unix(), 0), max(until.Unix(), 0), max(since.Unix(), 0))
	if err != nil {
		return recs, fmt.Errorf("demandlog: read %s.job_runs: %w", l.db, err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			j          PastJob
			start, end *time.Time
			count      *uint32
			gpus       *uint32
		)
		if err := rows.Scan(&j.Submit, &start, &end, &j.Nodes, &count, &gpus); err != nil {
			return recs, fmt.Errorf("demandlog: read a job: %w", err)
		}
		if start != nil && start.Unix() > 0 {
			j.Start = *start
		}
		if end != nil && end.Unix() > 0 {
			j.End = *end
		}
		if count != nil {
			j.NodeCount = int(*count)
		}
		if gpus != nil {
			j.GPUs = int(*gpus)
		}
		recs.Jobs = append(recs.Jobs, j)
	}
	if err := rows.Err(); err != nil {
		return recs, fmt.Errorf("demandlog: read %s.job_runs: %w", l.db, err)
	}
	return recs, nil
}
