package live

import (
	"container/heap"
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/heliostat-dev/heliostat/predictor/duration"
	"github.com/heliostat-dev/heliostat/schemas"
)

// key identifies a job.
type key struct{ cluster, jobID string }

// rec is one job of the window as the jobs table has it now.
type rec struct {
	key
	user, partition, state string
	// arrayJobID is the id of the Slurm job array the job is a task of; ""
	// outside an array.
	arrayJobID string
	gpus       uint32 // 0 when unknown
	limit      *uint32
	start      *time.Time
	ended      bool // the latest event is END and carries an end time
	version    uint64
	job        duration.Job // submit-time fields, and Run/End once ended
	// predictable is false for a job that had already ended when the runner
	// first loaded the window: the backlog is history, not work.
	predictable bool
	// atSubmit is the user's submissions as the History held them just
	// before the job was counted as submitted, set by replay: what the
	// job's own features counted at its submit.
	atSubmit duration.SubmitState
}

// run is the job's run time; 0 unless it ended after a known start.
func (r *rec) run() time.Duration { return r.job.Run }

// finish sets what the run's latest event says of its end (r.state and
// r.start set): ended when that event is its END with an end time, with a
// run time unless the system cut the run short (cutShort) or a live
// source stamped its end more than maxAhead after ClickHouse's now()
// (endAhead; see below).
func (r *rec) finish(source, lastEvent string, end *time.Time, endAhead bool) {
	if lastEvent != "END" || end == nil {
		return
	}
	r.ended = true
	r.job.End = *end
	if r.start != nil && end.After(*r.start) && !cutShort(source, r.state) && !endAhead {
		r.job.Run = end.Sub(*r.start)
	}
}

// aheadSQL is the condition, on a row of jobs or job_runs, that a live
// source (not the simulator, not a trace) stamped its time column (a
// Nullable one counts as not ahead when NULL) more than maxAhead after
// ClickHouse's now().
func aheadSQL(column string) string {
	return fmt.Sprintf("source NOT IN ('%s', '%s') AND ifNull(%s > now() + %d, 0)", schemas.SourceSim, schemas.SourceTrace, column, int64(maxAhead/time.Second))
}

// loadJobs reads the jobs of the window (submit_time >= from) from jobs FINAL;
// with since > 0 only those with an event that reached ClickHouse at or after
// since (Unix seconds), which may include a job whose latest state is older
// (a late copy of an earlier event): callers keep the higher version. It
// returns the rows and the newest inserted_at seen.
//
// A job's features take its request (time limit, GPUs or CPUs, memory, GPU
// type, partition) as it was at submit, from the run's first event in
// job_events, as its prediction did: jobs holds the latest, and Slurm
// publishes a limit raised after the job started (scontrol update) as an
// UPDATE. The GPU type is the first the run's events name (the latest
// event's, jobs', where none does). rec's gpus, limit and partition stay the
// latest, what the tables' rows show.
func loadJobs(ctx context.Context, conn driver.Conn, db string, from time.Time, since int64) ([]*rec, int64, error) {
	keys := ""
	if since > 0 {
		// The keys are found on the raw rows and only those are merged:
		// filtering the merged rows on inserted_at merges the whole window
		// first, about 4 times slower (BenchmarkLoadJobs).
		keys = fmt.Sprintf(" AND (cluster, job_id) IN (SELECT cluster, job_id FROM %s.jobs WHERE submit_time >= %d AND inserted_at >= %d)",
			db, from.Unix(), since)
	}
	// A run's events are stamped at or after its submit: event_ts >= from
	// prunes job_events' partitions (by event month).
	q := fmt.Sprintf(`SELECT j.cluster, j.job_id, j.source, j.array_job_id, j.user, j.job_name, j.command_hash, j.partition_name, j.state, j.last_event,
  j.gpus, j.cpus, j.time_limit_s, j.submit_time, j.start_time, j.end_time, j.version, toInt64(toUInt32(j.inserted_at)),
  j.end_ahead,
  s.found, s.partition_name, s.gpus, s.cpus, s.time_limit_s, j.mem_req_bytes, s.mem_req_bytes, j.gpu_type, s.gpu_type
FROM (SELECT cluster, job_id, source, array_job_id, user, job_name, command_hash, partition_name, state, last_event, gpus, cpus,
    time_limit_s, submit_time, start_time, end_time, version, inserted_at, mem_req_bytes, gpu_type, %[1]s AS end_ahead
  FROM %[2]s.jobs FINAL WHERE submit_time >= %[3]d%[4]s) AS j
LEFT JOIN (
  SELECT cluster, job_id, submit_time, toUInt8(1) AS found, argMin(partition_name, (event_ts, event_ms)) AS partition_name,
    argMin(gpus, (event_ts, event_ms)) AS gpus, argMin(cpus, (event_ts, event_ms)) AS cpus, argMin(time_limit_s, (event_ts, event_ms)) AS time_limit_s,
    argMin(mem_req_bytes, (event_ts, event_ms)) AS mem_req_bytes,
    argMinIf(gpu_type, (event_ts, event_ms), gpu_type != '') AS gpu_type
  FROM %[2]s.job_events
  WHERE submit_time >= %[3]d AND event_ts >= toDateTime(%[3]d, 'UTC')%[4]s
  GROUP BY cluster, job_id, submit_time
) AS s ON j.cluster = s.cluster AND j.job_id = s.job_id AND j.submit_time = s.submit_time
SETTINGS join_use_nulls = 0`, aheadSQL("end_time"), db, from.Unix(), keys)
	rows, err := conn.Query(ctx, q)
	if err != nil {
		return nil, 0, fmt.Errorf("select jobs: %w", err)
	}
	defer rows.Close()
	var (
		out    []*rec
		newest int64
	)
	for rows.Next() {
		r := &rec{}
		var (
			source, name, hash string
			lastEvent          string
			gpus, cpus         *uint32
			end                *time.Time
			inserted           int64
			endAhead, found    uint8
			subPartition       string
			subGPUs, subCPUs   *uint32
			subLimit           *uint32
			mem, subMem        *uint64
			gpuType, subType   string
		)
		if err := rows.Scan(&r.cluster, &r.jobID, &source, &r.arrayJobID, &r.user, &name, &hash, &r.partition, &r.state, &lastEvent, &gpus, &cpus,
			&r.limit, &r.job.Submit, &r.start, &end, &r.version, &inserted, &endAhead,
			&found, &subPartition, &subGPUs, &subCPUs, &subLimit, &mem, &subMem, &gpuType, &subType); err != nil {
			return nil, 0, fmt.Errorf("scan job: %w", err)
		}
		newest = max(newest, inserted)
		if gpus != nil {
			r.gpus = *gpus
		}
		limit := r.limit
		r.job.Queue = r.partition
		if found == 1 {
			// The request at submit; where the run's first event did not
			// know a field, the first event that did (argMin skips NULLs).
			r.job.Queue, gpus, cpus, limit, mem = subPartition, subGPUs, subCPUs, subLimit, subMem
			if subType != "" {
				// The type asked for at submit; the latest event's where
				// no event of the run named one (a job first seen ended).
				gpuType = subType
			}
		}
		r.job.GPUType = gpuType
		// History is per cluster: clusters that share a database have
		// their own users and partitions, whatever their names.
		r.job.User, r.job.Queue = scoped(r.cluster, r.user), scoped(r.cluster, r.job.Queue)
		// The command hash names a recurring job better than its name; the
		// name is the fallback (Helios matches on it).
		r.job.Executable = hash
		if hash == "" {
			r.job.Executable = name
		}
		switch {
		case gpus != nil && *gpus > 0:
			r.job.Procs = int(*gpus)
		case cpus != nil && *cpus > 0:
			r.job.Procs = int(*cpus)
		}
		if limit != nil && *limit > 0 {
			r.job.ReqTime = time.Duration(*limit) * time.Second
		}
		if mem != nil && *mem > 0 && *mem <= math.MaxInt64 {
			r.job.Mem = int64(*mem)
		}
		r.finish(source, lastEvent, end, endAhead == 1)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("select jobs: %w", err)
	}
	return out, newest, nil
}

// A live source's job whose end is stamped more than maxAhead after
// ClickHouse's now() (a node's clock, a bad record; the data clock leaves
// such events out, see dataClock) also counts as ended with no run time: a
// year-long run would train the model and join its user's history. A
// simulator's or a trace's end keeps its run time (they keep their own time).

// cutShort reports whether a live job's run (Slurm's or the simulator's)
// was ended by the system rather than by the job, so that its run time is
// only a lower bound on what the job needed:
//   - UNKNOWN: the collector lost track of the job (gone from squeue without
//     an end, see collector/slurm; a simulated job a killed `up` left open)
//     and ended it at the last listing that showed it;
//   - NODE_FAIL: a node of the job failed (or the simulator stopped under
//     it);
//   - PREEMPTED: the scheduler stopped it for another job.
//
// Such a run counts as ended with no run time: it neither trains the model
// nor joins a user's history, and a prediction for it is recorded as not
// scored (ran = 0). A requeued job's next run is predicted and scored on its
// own. Traces keep the run time they give whatever the state: the offline
// backtests score them so.
func cutShort(source, state string) bool {
	if source == schemas.SourceTrace.String() {
		return false
	}
	switch state {
	case schemas.StateUnknown.String(), schemas.StateNodeFail.String(), schemas.StatePreempted.String():
		return true
	}
	return false
}

// endHeap orders jobs by end time.
type endHeap []*rec

func (q endHeap) Len() int           { return len(q) }
func (q endHeap) Less(i, j int) bool { return q[i].job.End.Before(q[j].job.End) }
func (q endHeap) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *endHeap) Push(x any)        { *q = append(*q, x.(*rec)) }
func (q *endHeap) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// replaysBefore reports whether replay takes x before y: by submit time,
// then cluster and job id.
func replaysBefore(x, y *rec) bool {
	if !x.job.Submit.Equal(y.job.Submit) {
		return x.job.Submit.Before(y.job.Submit)
	}
	if x.cluster != y.cluster {
		return x.cluster < y.cluster
	}
	return x.jobID < y.jobID
}

// replay walks the jobs in submit order the way the offline backtest does:
// before a job's features are computed, every job that ended strictly before
// its submit time has joined the History, and no other job has. visit gets
// the features of each job for which want returns true. Every job counts as
// submitted (for the user's in-flight and time-since-submit features) at its
// submit time, whatever its fate, so that no feature depends on how another
// job ends later. The History returned holds every ended job: the state for a
// job submitted now. Each job's atSubmit is set, for a later ad-hoc
// prediction of it (openRecords).
func replay(recs []*rec, want func(*rec) bool, visit func(*rec, duration.Features)) *duration.History {
	sorted := append([]*rec(nil), recs...)
	sort.Slice(sorted, func(a, b int) bool { return replaysBefore(sorted[a], sorted[b]) })
	h := duration.NewHistory()
	q := &endHeap{}
	for _, r := range sorted {
		for q.Len() > 0 && (*q)[0].job.End.Before(r.job.Submit) {
			h.Add(&heap.Pop(q).(*rec).job)
		}
		r.atSubmit = h.SubmitState(r.job.User)
		if want(r) {
			visit(r, h.FeaturesAt(&r.job, r.atSubmit))
		}
		h.Submitted(&r.job)
		if r.ended {
			// Also a job that never ran: it leaves its user's in-flight count.
			heap.Push(q, r)
		}
	}
	for q.Len() > 0 {
		h.Add(&heap.Pop(q).(*rec).job)
	}
	return h
}
