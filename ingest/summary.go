package ingest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/internal/health"
	"github.com/heliostat-dev/heliostat/internal/metricsreg"
)

// Jobstats-style thresholds that operators already use (FIELDS.md).
const (
	// LowUtilPercent: a job whose mean GPU utilization is below it is flagged
	// "low_util".
	LowUtilPercent = 15
	// PoorLimitFraction: a job that ran for less than this share of its time
	// limit is flagged "poor_time_limit".
	PoorLimitFraction = 0.10
)

// Summary flags.
const (
	FlagLowUtil       = "low_util"        // mean utilization below LowUtilPercent
	FlagIdleAllocated = "idle_allocated"  // some GPU at 0% for the whole job
	FlagPoorLimit     = "poor_time_limit" // ran under PoorLimitFraction of its limit
	FlagNoSamples     = "no_samples"      // GPUs allocated, but no sample of them found
)

// SummaryConfig configures a Summarizer.
type SummaryConfig struct {
	// Database holds the tables.
	Database string
	// Interval between passes; 0 disables the summarizer (the flag defaults
	// to 15s).
	Interval time.Duration
	// Delay is how long after a job's END event reached ClickHouse the
	// summarizer waits for the job's last GPU samples (the flag defaults to
	// 1m; it should exceed the collectors' publish interval plus ingest lag).
	Delay time.Duration
	// Batch caps the job runs summarized per query; default 5000.
	Batch int
	// FullEvery is how often a pass looks at every ended run instead of
	// only those whose END reached ClickHouse since the last pass (the flag
	// defaults to 1h; 0 makes every pass a full one). A full pass costs time
	// linear in the runs and summaries kept; it catches an END whose insert
	// became visible later than SummaryOverlap after it was stamped.
	FullEvery time.Duration
}

// SummaryOverlap is how far before the previous pass's cutoff an incremental
// pass starts looking, so that an END whose insert took a while to become
// visible, or a ClickHouse clock a little behind ingest's, is still seen.
const SummaryOverlap = 10 * time.Minute

// RegisterFlags adds the summarizer flags to fs.
func (c *SummaryConfig) RegisterFlags(fs *flag.FlagSet) {
	fs.DurationVar(&c.Interval, "summary.interval", 15*time.Second, "how often to summarize ended jobs (0 disables)")
	fs.DurationVar(&c.Delay, "summary.delay", time.Minute, "wait this long after a job's end reached ClickHouse for its last GPU samples")
	fs.IntVar(&c.Batch, "summary.batch", 5000, "jobs summarized per query")
	fs.DurationVar(&c.FullEvery, "summary.full-every", time.Hour, "look at every ended job this often; other passes read only the jobs that ended since the last (0: every pass is full)")
}

// Validate reports a configuration error.
func (c SummaryConfig) Validate() error {
	var errs []error
	if c.Interval < 0 || c.Delay < 0 || c.FullEvery < 0 {
		errs = append(errs, errors.New("--summary.interval, --summary.delay and --summary.full-every must not be negative"))
	}
	if c.Batch < 0 {
		errs = append(errs, errors.New("--summary.batch must not be negative"))
	}
	return errors.Join(errs...)
}

// Summarizer writes job_run_summary rows for ended job runs: GPU hours,
// per-GPU mean and max utilization from the samples that fall inside the run
// on the GPUs allocated to that run, energy, and the jobstats flags. A run is
// a row of job_runs, (cluster, job ID, submit time): Slurm requeues a job
// under its ID with a new submit time per run, and two jobs can share an ID
// (slurmctld restarted clean), and each run gets its own summary. Each pass
// picks ended runs that have no summary of their current end yet: a run whose
// job_runs row ends later or in another state than its summary (a lost job
// that Slurm listed again) is summarized again, and the rewrite replaces the
// run's older summary. The first pass, and one every FullEvery, looks at every
// ended run; the others only at runs whose END row reached ClickHouse after
// the previous complete pass's cutoff less SummaryOverlap, which keeps a pass
// cheap however many runs the tables hold. The watermark lives in memory only,
// so a restart begins with a full pass, and several replicas only duplicate
// work (job_run_summary keeps one row per run). job_summary, one row per job
// ID, is no longer written. Once is not safe for concurrent use.
type Summarizer struct {
	cfg    SummaryConfig
	conn   driver.Conn
	logger *slog.Logger
	now    func() time.Time
	jobs   prometheus.Counter
	errs   prometheus.Counter
	passes *prometheus.CounterVec

	// since is the cutoff (Unix seconds) of the last pass that found
	// every job of its window; 0 before the first. lastFull is when the last
	// complete full pass ran.
	since    int64
	lastFull time.Time

	// health holds the outcome of the last pass Run made, for Ready.
	health *health.Status
	passOK *health.Cond
}

// NewSummarizer returns a Summarizer writing through conn.
func NewSummarizer(cfg SummaryConfig, conn driver.Conn, logger *slog.Logger, reg prometheus.Registerer, now func() time.Time) (*Summarizer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Batch == 0 {
		cfg.Batch = 5000
	}
	s := &Summarizer{cfg: cfg, conn: conn, logger: logger, now: now,
		jobs: prometheus.NewCounter(prometheus.CounterOpts{Name: "heliostat_ingest_job_summaries_total", Help: "Job run summaries written."}),
		errs: prometheus.NewCounter(prometheus.CounterOpts{Name: "heliostat_ingest_job_summary_errors_total", Help: "Summarizer passes that failed."}),
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "heliostat_ingest_job_summary_passes_total",
			Help: "Summarizer passes by kind: full (every ended job run) or incremental (runs ended since the last pass)."}, []string{"kind"}),
	}
	if err := metricsreg.Register(reg, s.jobs, s.errs, s.passes); err != nil {
		return nil, fmt.Errorf("ingest: register summarizer metrics: %w", err)
	}
	s.health = health.New(time.Now)
	s.passOK = s.health.Add("job summaries", "waiting for the first pass")
	return s, nil
}

// Ready returns nil once the last pass Run made succeeded, and otherwise
// why it failed and since when. A zero Interval (no schedule) is ready.
func (s *Summarizer) Ready() error {
	if s.cfg.Interval == 0 {
		return nil
	}
	return s.health.Err()
}

// Run summarizes every Interval until ctx is done. A failed pass is logged
// and retried at the next tick.
func (s *Summarizer) Run(ctx context.Context) error {
	if s.cfg.Interval == 0 {
		return nil
	}
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		// A pass that fills its batch is followed at once by another; a
		// backlog (a first start on a cluster with history) says how far it
		// has got.
		backlog := 0
		for {
			n, err := s.Once(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				s.errs.Inc()
				s.passOK.Report(err)
				s.logger.Warn("job summary pass failed", "err", err)
				break
			}
			s.passOK.OK()
			backlog += n
			if n < s.cfg.Batch {
				if backlog > n {
					s.logger.Info("job summary backlog done", "jobs", backlog)
				}
				break
			}
			s.logger.Info("summarizing a backlog of ended jobs", "jobs_so_far", backlog)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

type summaryJob struct {
	cluster, jobID, user, account, partition, state string
	gpus                                            *uint32
	submit, start, end                              time.Time
	limit                                           *uint32
}

// key returns the run's key in the maps allocations and priorSummaries
// return: its cluster, job ID and submit time.
func (j summaryJob) key() string {
	return j.idKey() + "\x00" + strconv.FormatInt(j.submit.Unix(), 10)
}

// idKey returns the key of the run's job ID, shared by every run of it.
func (j summaryJob) idKey() string { return j.cluster + "\x00" + j.jobID }

type gpuStats struct {
	host                 string
	index                int32
	samples, zero        uint64
	utilMean, utilMax    *float64
	smMean               *float64
	fbMax                *uint64
	powerMeanMW          *float64
	energyMin, energyMax *uint64
	// energyFirst and energyLast are the energy counter at the GPU's first
	// and last sample (by the millisecond) that has one.
	energyFirst, energyLast *uint64
	firstSec, lastSec       int64
}

// Once summarizes up to Batch ended job runs and returns how many it wrote.
func (s *Summarizer) Once(ctx context.Context) (int, error) {
	db := s.cfg.Database
	now := s.now()
	cutoff := now.Add(-s.cfg.Delay).Unix()
	full := s.since == 0 || now.Sub(s.lastFull) >= s.cfg.FullEvery
	// A run is done when a summary of its current end exists: a summary
	// written before the run ended again (a lost job listed again) does not
	// count. The summaries are matched by a hash of (cluster, job ID, submit,
	// end, state): at a million jobs and summaries (18.16, 2 cores) a full
	// pass's query took 0.5 s against 1.2 s with the set of (cluster, job
	// ID) it used before and 1.35 s with a set of the tuples. A false match,
	// about one chance in 2^64 / (summaries kept) per run, would leave that
	// run's end unsummarized.
	kind, window, done := "full", "", fmt.Sprintf("SELECT cityHash64(cluster, job_id, submit_time, end_time, state) FROM %s.job_run_summary", db)
	if !full {
		// The runs whose END row arrived in the window, found on the raw
		// rows (no FINAL, no set of every summary), then read FINAL by key.
		// The key is the job ID's, not the run's: it lets in the other runs
		// of those IDs too, which the hash leaves out once summarized, and
		// at a million runs the pass took 120 ms against 150 ms with sets
		// of (cluster, job ID, submit time).
		kind = "incremental"
		recent := fmt.Sprintf("SELECT cluster, job_id FROM %s.job_runs WHERE inserted_at >= %d AND last_event = 'END'",
			db, s.since-int64(SummaryOverlap/time.Second))
		window = "(cluster, job_id) IN (" + recent + ") AND "
		done += " WHERE (cluster, job_id) IN (" + recent + ")"
	}
	// end_time is Nullable in job_runs, not in job_run_summary:
	// assumeNotNull gives both sides of the hash the same type.
	rows, err := s.conn.Query(ctx, fmt.Sprintf(`SELECT cluster, job_id, user, account, partition_name, state, gpus, submit_time, start_time, end_time, time_limit_s
FROM %[1]s.job_runs FINAL
WHERE %[2]slast_event = 'END' AND start_time IS NOT NULL AND end_time IS NOT NULL AND toUInt32(inserted_at) <= %[3]d
  AND cityHash64(cluster, job_id, submit_time, assumeNotNull(end_time), state) NOT IN (%[4]s)
LIMIT %[5]d`, db, window, cutoff, done, s.cfg.Batch))
	if err != nil {
		return 0, fmt.Errorf("select ended job runs (%s pass): %w", kind, err)
	}
	s.passes.WithLabelValues(kind).Inc()
	var jobs []summaryJob
	for rows.Next() {
		var j summaryJob
		var start, end *time.Time
		if err := rows.Scan(&j.cluster, &j.jobID, &j.user, &j.account, &j.partition, &j.state, &j.gpus, &j.submit, &start, &end, &j.limit); err != nil {
			rows.Close()
			return 0, fmt.Errorf("scan ended job run: %w", err)
		}
		j.start, j.end = *start, *end
		jobs = append(jobs, j)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("select ended job runs: %w", err)
	}
	if len(jobs) == 0 {
		s.passDone(full, now, cutoff, 0)
		return 0, nil
	}
	allocs, err := s.allocations(ctx, jobs)
	if err != nil {
		return 0, err
	}
	versions, err := s.supersede(ctx, jobs, now)
	if err != nil {
		return 0, err
	}
	batch, err := s.conn.PrepareBatch(ctx, "INSERT INTO "+db+".job_run_summary (cluster, job_id, user, account, partition_name, state, gpus, "+
		"submit_time, start_time, end_time, elapsed_s, time_limit_s, gpu_hours, gpu_hosts, gpu_indexes, gpu_util_mean, gpu_util_max, samples, "+
		"util_mean, util_max, sm_active_mean, util_source, fb_used_max_bytes, power_mean_w, energy_j, zero_util_gpu_hours, flags, computed_at, version)")
	if err != nil {
		return 0, fmt.Errorf("prepare job_run_summary insert: %w", err)
	}
	defer batch.Abort()
	stats, err := s.sampleStats(ctx, jobs, allocs)
	if err != nil {
		return 0, err
	}
	for i, j := range jobs {
		r := summarize(j, len(allocs[j.key()]), stats[i])
		if err := batch.Append(j.cluster, j.jobID, j.user, j.account, j.partition, j.state, r.gpus,
			j.submit, j.start, j.end, r.elapsed, j.limit, r.gpuHours, r.hosts, r.indexes, r.utilMean, r.utilMax, r.samples,
			r.mean, r.max, r.smMean, r.utilSource, r.fbMax, r.powerW, r.energyJ, r.zeroHours, r.flags, now, versions[i]); err != nil {
			return 0, fmt.Errorf("append job_run_summary row for job %s submitted at %s: %w", j.jobID, j.submit.UTC().Format(time.DateTime), err)
		}
	}
	if err := batch.Send(); err != nil {
		return 0, fmt.Errorf("send %d job run summaries: %w", len(jobs), err)
	}
	s.jobs.Add(float64(len(jobs)))
	s.passDone(full, now, cutoff, len(jobs))
	return len(jobs), nil
}

// passDone moves the watermark to the pass's cutoff once the pass has found
// every job of its window (fewer than Batch); a full pass also restarts the
// FullEvery clock. A pass that filled its batch leaves both alone, so the
// next one looks at the same window again.
func (s *Summarizer) passDone(full bool, now time.Time, cutoff int64, n int) {
	if n >= s.cfg.Batch {
		return
	}
	s.since = cutoff
	if full {
		s.lastFull = now
	}
}

type gpuKey struct {
	host  string
	index int32
}

// allocations returns the GPUs allocated to each run (by summaryJob.key), one
// entry per host and GPU index whatever the number of sources that saw it, in
// queries of at most about sampleChunk of job IDs each. The allocation rows
// carry the job ID, not the run: a requeued job keeps its ID across runs, and
// a reused ID is another job's, so only the intervals that belong to a run's
// own [start, end] (inRun) count for it, each interval for one run at most
// (owner), and none for a run of the pass that another run of its ID outside
// the pass owns (otherRuns).
func (s *Summarizer) allocations(ctx context.Context, jobs []summaryJob) (map[string][]gpuKey, error) {
	byID := make(map[string][]*summaryJob, len(jobs))
	for i := range jobs {
		k := jobs[i].idKey()
		byID[k] = append(byID[k], &jobs[i])
	}
	out, seen := map[string][]gpuKey{}, map[jobGPUKey]bool{}
	err := inChunks(jobs, func(ids []string) error { return s.allocationsOf(ctx, ids, byID, seen, out) })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// inChunks calls f with the quoted IDs of jobs, each once, as many at a time
// as fit in about sampleChunk of query text.
func inChunks(jobs []summaryJob, f func(ids []string) error) error {
	var ids []string
	listed := map[string]bool{}
	size := 0
	for n, j := range jobs {
		if q := quote(j.jobID); !listed[q] {
			listed[q] = true
			ids = append(ids, q)
			size += len(q) + 1
		}
		if size < sampleChunk && n < len(jobs)-1 || len(ids) == 0 {
			continue
		}
		if err := f(ids); err != nil {
			return err
		}
		ids, size = ids[:0], 0
		clear(listed)
	}
	return nil
}

// jobGPUKey is a GPU of the run of summaryJob.key job.
type jobGPUKey struct {
	job string
	gpu gpuKey
}

// allocationsOf adds to out, under summaryJob.key, the GPUs allocated to the
// runs of the jobs of ids (quoted) that seen does not hold yet, byID holding
// the runs by summaryJob.idKey.
//
// Each interval is read as FINAL would show it (its row of the highest
// version, so that a closed interval's open row does not count), but by
// argMax over the rows of these jobs: FINAL would merge the whole table, in
// whose sorting key job_id is not a prefix, on every pass. An open interval
// (alloc_end NULL, read as -1) runs on.
//
// The pass holds only the runs not summarized yet, but an earlier run of the
// ID outside it (summarized by an earlier pass, or whose END never came) may
// own an interval that owner gives to a later run of the pass: one that the
// earlier run left open (its closing row lost) overlaps every later run. Such
// an interval begins before the run it was given to; one that begins at or
// after that run's start is the run's whatever other runs the ID has (owner).
// So only the intervals that begin before their run are settled against the
// ID's other runs, which otherRuns reads for them alone: most passes have
// none, and need no query more.
func (s *Summarizer) allocationsOf(ctx context.Context, ids []string, byID map[string][]*summaryJob, seen map[jobGPUKey]bool, out map[string][]gpuKey) error {
	claim := func(run *summaryJob, k gpuKey) {
		if jk := (jobGPUKey{run.key(), k}); !seen[jk] {
			seen[jk] = true
			out[jk.job] = append(out[jk.job], k)
		}
	}
	early, err := s.readAllocations(ctx, ids, byID, claim)
	if err != nil {
		return err
	}
	if len(early) == 0 {
		return nil
	}
	others, err := s.otherRuns(ctx, early, byID)
	if err != nil {
		return err
	}
	for _, a := range early {
		other := others[a.idKey]
		run := owner(slices.Concat(byID[a.idKey], other), a.from, a.to)
		if run != nil && !slices.Contains(other, run) {
			claim(run, a.gpu)
		}
	}
	return nil
}

// earlyAllocation is an allocation interval of a GPU to a job ID (by
// summaryJob.idKey) that began before the start of run, the run of the pass
// that owner gave it to.
type earlyAllocation struct {
	cluster, jobID, idKey string
	gpu                   gpuKey
	from, to              int64
	run                   *summaryJob
}

// readAllocations reads the allocation intervals of the job IDs of ids
// (quoted), calls claim for those that belong to a run of byID from its
// start on, and returns those that began before the start of the run of
// byID they belong to (see allocationsOf).
func (s *Summarizer) readAllocations(ctx context.Context, ids []string, byID map[string][]*summaryJob, claim func(*summaryJob, gpuKey)) ([]earlyAllocation, error) {
	rows, err := s.conn.Query(ctx, fmt.Sprintf(`SELECT cluster, job_id, host, gpu_index, toInt64(alloc_start), argMax(ifNull(toInt64(alloc_end), toInt64(-1)), version)
FROM %s.gpu_allocations
WHERE gpu_index >= 0 AND job_id IN (%s)
GROUP BY cluster, host, gpu_index, gpu_uuid, mig_uuid, job_id, alloc_start, source`,
		s.cfg.Database, strings.Join(ids, ",")))
	if err != nil {
		return nil, fmt.Errorf("select allocations: %w", err)
	}
	defer rows.Close()
	var early []earlyAllocation
	for rows.Next() {
		var a earlyAllocation
		if err := rows.Scan(&a.cluster, &a.jobID, &a.gpu.host, &a.gpu.index, &a.from, &a.to); err != nil {
			return nil, fmt.Errorf("scan allocation: %w", err)
		}
		a.idKey = summaryJob{cluster: a.cluster, jobID: a.jobID}.idKey()
		a.run = owner(byID[a.idKey], a.from, a.to)
		switch {
		case a.run == nil:
		case a.from < a.run.start.Unix():
			early = append(early, a)
		default:
			claim(a.run, a.gpu)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("select allocations: %w", err)
	}
	return early, nil
}

// otherRuns returns, by summaryJob.idKey, the runs outside byID of the job
// IDs of early that can own one of early's intervals: those submitted before
// the latest start of early's runs (a run submits before it starts, and only
// a run that starts before a run of the pass takes an interval from it: see
// owner). Each comes with its start and its end, zero for a run not ended,
// read at its highest version, as FINAL would show it, by argMax over the
// rows of these IDs (see allocationsOf); the sorting key (cluster, job_id,
// submit_time) finds them. The query lists clusters and IDs apart, not as
// pairs, so that its text stays within the chunk's IDs (inChunks) and a few
// cluster names; the pairs of a cluster and another cluster's ID it lets in
// are dropped here.
func (s *Summarizer) otherRuns(ctx context.Context, early []earlyAllocation, byID map[string][]*summaryJob) (map[string][]*summaryJob, error) {
	var clusters, ids []string
	hasCluster, hasID, listed := map[string]bool{}, map[string]bool{}, map[string]bool{}
	var before int64
	for _, a := range early {
		before = max(before, a.run.start.Unix())
		if !hasCluster[a.cluster] {
			hasCluster[a.cluster] = true
			clusters = append(clusters, quote(a.cluster))
		}
		if !hasID[a.jobID] {
			hasID[a.jobID] = true
			ids = append(ids, quote(a.jobID))
		}
		listed[a.idKey] = true
	}
	rows, err := s.conn.Query(ctx, fmt.Sprintf(`SELECT cluster, job_id, submit_time, argMax(ifNull(toInt64(start_time), toInt64(-1)), version), argMax(ifNull(toInt64(end_time), toInt64(-1)), version)
FROM %s.job_runs
WHERE cluster IN (%s) AND job_id IN (%s) AND submit_time < toDateTime(%d)
GROUP BY cluster, job_id, submit_time`, s.cfg.Database, strings.Join(clusters, ","), strings.Join(ids, ","), before))
	if err != nil {
		return nil, fmt.Errorf("select the other runs of %d job IDs: %w", len(ids), err)
	}
	defer rows.Close()
	out := map[string][]*summaryJob{}
	for rows.Next() {
		j := &summaryJob{}
		var start, end int64
		if err := rows.Scan(&j.cluster, &j.jobID, &j.submit, &start, &end); err != nil {
			return nil, fmt.Errorf("scan another run of a job ID: %w", err)
		}
		// A run not started yet holds no GPU; a run of the pass is there.
		if !listed[j.idKey()] || start < 0 || slices.ContainsFunc(byID[j.idKey()], func(r *summaryJob) bool { return r.key() == j.key() }) {
			continue
		}
		j.start = time.Unix(start, 0)
		if end >= 0 {
			j.end = time.Unix(end, 0)
		}
		out[j.idKey()] = append(out[j.idKey()], j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("select the other runs of %d job IDs: %w", len(ids), err)
	}
	return out, nil
}

// owner returns the run of runs (those of one job ID; a zero end: not ended)
// that the allocation interval [from, to] (Unix seconds, to < 0: still open)
// belongs to, or nil: of the runs inRun accepts it for, the last to start at
// or before from (the run that held the GPUs when the interval began), else
// the first to start. The runs of one ID follow each other, so a closed
// interval fits one of them at most; an open one that an earlier run left
// open (its closing row lost) would fit every later run too, and goes to the
// earlier. A run that starts later than a run r the interval fits starts
// after r ends, so after from, and never takes the interval from r; one that
// starts earlier takes it only if r starts after from.
func owner(runs []*summaryJob, from, to int64) *summaryJob {
	var best *summaryJob
	for _, r := range runs {
		start, end := r.start.Unix(), r.end.Unix()
		if r.end.IsZero() {
			end = math.MaxInt64
		}
		if !inRun(from, to, start, end) {
			continue
		}
		switch b := best; {
		case b == nil:
			best = r
		case start <= from && (b.start.Unix() > from || start > b.start.Unix()):
			best = r
		case start > from && b.start.Unix() > from && start < b.start.Unix():
			best = r
		}
	}
	return best
}

// inRun reports whether the allocation interval [from, to] (to < 0: still
// open) belongs to the run [start, end], all in Unix seconds: it overlaps the
// run by more than an instant, or begins with it (a run that ended as it
// started). An interval that ends as the run starts is an earlier run's (a
// requeued job can start again within the second), one that begins as it
// ends a later one's.
func inRun(from, to, start, end int64) bool {
	return from == start || from < end && (to < 0 || to > start)
}

// priorSummary is what job_run_summary holds of one run at one end.
type priorSummary struct {
	end     int64  // end_time, Unix seconds
	version uint64 // the highest of those rows
}

// priorSummaries returns the summaries already written of the runs, by
// summaryJob.key, in queries of at most about sampleChunk of job IDs each.
// The other runs of the same IDs come along; no run of the pass looks them up.
func (s *Summarizer) priorSummaries(ctx context.Context, jobs []summaryJob) (map[string][]priorSummary, error) {
	out := map[string][]priorSummary{}
	err := inChunks(jobs, func(ids []string) error {
		rows, err := s.conn.Query(ctx, fmt.Sprintf(`SELECT cluster, job_id, submit_time, toInt64(end_time), max(version)
FROM %s.job_run_summary
WHERE job_id IN (%s)
GROUP BY cluster, job_id, submit_time, end_time`, s.cfg.Database, strings.Join(ids, ",")))
		if err != nil {
			return fmt.Errorf("select earlier job run summaries: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var j summaryJob
			var p priorSummary
			if err := rows.Scan(&j.cluster, &j.jobID, &j.submit, &p.end, &p.version); err != nil {
				return fmt.Errorf("scan earlier job run summary: %w", err)
			}
			out[j.key()] = append(out[j.key()], p)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("select earlier job run summaries: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// supersede prepares the rewrite of runs summarized before (a lost job listed
// again and ended later): it returns each run's summary version, the
// computation time in ms but above every earlier summary's of the same run
// so that the rewrite replaces them, and deletes the run's earlier summaries
// at another end than its new one. The summaries of the other runs of the
// same job ID (a requeued job's earlier runs, another job that had the ID)
// are summaries in their own right and stay.
//
// FINAL alone does not hide a superseded summary. A query that filters on
// end_time skips the parts whose end_time range (and partitions, by end
// month) miss the filter before FINAL merges: a range that holds the old end
// but not the new one shows the old summary, until a background merge joins
// the two rows, which never happens across months. The delete is a mutation,
// one per pass and chunk of such runs, that ClickHouse runs in the
// background: on 18.16 it rewrites only the parts that hold such rows, after
// reading the key and end of every part (0.1-0.2 s at a million summaries).
// It is sent before the new summaries, so a failed insert leaves the run
// without a summary of its end, for the next pass to write.
func (s *Summarizer) supersede(ctx context.Context, jobs []summaryJob, now time.Time) ([]uint64, error) {
	prior, err := s.priorSummaries(ctx, jobs)
	if err != nil {
		return nil, err
	}
	versions := make([]uint64, len(jobs))
	var stale []string
	size := 0
	for i, j := range jobs {
		versions[i] = uint64(now.UnixMilli())
		for _, p := range prior[j.key()] {
			versions[i] = max(versions[i], p.version+1)
			if p.end == j.end.Unix() {
				continue
			}
			t := fmt.Sprintf("(%s, %s, %d, %d)", quote(j.cluster), quote(j.jobID), j.submit.Unix(), p.end)
			stale = append(stale, t)
			size += len(t) + 2
			if size >= sampleChunk {
				if err := s.deleteSummaries(ctx, stale); err != nil {
					return nil, err
				}
				stale, size = stale[:0], 0
			}
		}
	}
	if len(stale) > 0 {
		if err := s.deleteSummaries(ctx, stale); err != nil {
			return nil, err
		}
	}
	return versions, nil
}

// deleteSummaries deletes the job_run_summary rows of the (cluster, job ID,
// submit, end, both in Unix seconds) tuples.
func (s *Summarizer) deleteSummaries(ctx context.Context, tuples []string) error {
	q := fmt.Sprintf("ALTER TABLE %s.job_run_summary DELETE WHERE (cluster, job_id, toInt64(submit_time), toInt64(end_time)) IN (%s)",
		s.cfg.Database, strings.Join(tuples, ", "))
	if err := s.conn.Exec(ctx, q); err != nil {
		return fmt.Errorf("delete %d superseded job run summaries: %w", len(tuples), err)
	}
	s.logger.Info("deleting job summaries superseded by a later end", "summaries", len(tuples))
	return nil
}

// sampleChunk bounds the query text of one allocations or sampleStats
// query, keeping it well under ClickHouse's max_query_size (256 KiB).
const sampleChunk = 64 << 10

// jobGPU is one GPU allocated to jobs[job].
type jobGPU struct {
	job int
	gpu gpuKey
}

// sampleStats aggregates, for each job with allocated GPUs, the samples of
// those GPUs during its run: out[i] holds jobs[i]'s per-GPU aggregates, by
// host and GPU index.
//
// One query covers many jobs' GPUs, all of one cluster (as many as fit in
// sampleChunk, taken in start order so that their runs are close in time; a
// job with more GPUs than that spans queries), and reads each host's samples
// once, over the span of that host's jobs. A sample is filed under every job
// of the query that held its GPU at its time. A query per job instead read
// whole index granules of samples around each job's run:
// BenchmarkSummarizerBacklog's 2,000 jobs took 12 s that way, 1 s this way.
func (s *Summarizer) sampleStats(ctx context.Context, jobs []summaryJob, allocs map[string][]gpuKey) ([][]gpuStats, error) {
	var order []int
	for i, j := range jobs {
		if len(allocs[j.key()]) > 0 {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := strings.Compare(jobs[a].cluster, jobs[b].cluster); c != 0 {
			return c
		}
		return jobs[a].start.Compare(jobs[b].start)
	})
	out := make([][]gpuStats, len(jobs))
	var chunk []jobGPU
	size := 0
	for n, i := range order {
		for _, g := range allocs[jobs[i].key()] {
			chunk = append(chunk, jobGPU{i, g})
			size += len(g.host) + 40 // its key, the job and its run in the lists
			if size >= sampleChunk {
				if err := s.sampleQuery(ctx, jobs, chunk, out); err != nil {
					return nil, err
				}
				chunk, size = chunk[:0], 0
			}
		}
		if len(chunk) > 0 && (n+1 == len(order) || jobs[order[n+1]].cluster != jobs[i].cluster) {
			if err := s.sampleQuery(ctx, jobs, chunk, out); err != nil {
				return nil, err
			}
			chunk, size = chunk[:0], 0
		}
	}
	for _, st := range out {
		// The per-GPU arrays of the summary list GPUs by host, then index.
		slices.SortFunc(st, func(a, b gpuStats) int {
			if c := strings.Compare(a.host, b.host); c != 0 {
				return c
			}
			return int(a.index - b.index)
		})
	}
	return out, nil
}

// sampleQuery aggregates the samples of the GPUs in chunk, all of one
// cluster, into out.
func (s *Summarizer) sampleQuery(ctx context.Context, jobs []summaryJob, chunk []jobGPU, out [][]gpuStats) error {
	// Each GPU's runs in the chunk as three aligned lists (job number, start,
	// end), the GPUs numbered from 1 in keys.
	type runs struct{ jobs, from, to []string }
	var (
		keys  []string // host ":" GPU index (unambiguous: the index has no ':')
		byKey = map[string]*runs{}
		hosts []string
		spans = map[string][2]int64{} // host → first start, last end
	)
	for _, e := range chunk {
		from, to := jobs[e.job].start.Unix(), jobs[e.job].end.Unix()
		key := fmt.Sprintf("%s:%d", e.gpu.host, e.gpu.index)
		r := byKey[key]
		if r == nil {
			r = &runs{}
			byKey[key] = r
			keys = append(keys, key)
		}
		r.jobs = append(r.jobs, strconv.Itoa(e.job))
		r.from = append(r.from, strconv.FormatInt(from, 10))
		r.to = append(r.to, strconv.FormatInt(to, 10))
		sp, ok := spans[e.gpu.host]
		if !ok {
			hosts = append(hosts, e.gpu.host)
			sp = [2]int64{from, to}
		}
		spans[e.gpu.host] = [2]int64{min(sp[0], from), max(sp[1], to)}
	}
	var where []string
	for _, h := range hosts {
		where = append(where, fmt.Sprintf("host = %s AND ts >= %d AND ts <= %d", quote(h), spans[h][0], spans[h][1]))
	}
	quoted, nums := make([]string, len(keys)), make([]string, len(keys))
	var jobLists, fromLists, toLists []string
	for k, key := range keys {
		quoted[k], nums[k] = quote(key), strconv.Itoa(k+1)
		r := byKey[key]
		jobLists = append(jobLists, "["+strings.Join(r.jobs, ", ")+"]")
		fromLists = append(fromLists, "["+strings.Join(r.from, ", ")+"]")
		toLists = append(toLists, "["+strings.Join(r.to, ", ")+"]")
	}
	q := fmt.Sprintf(`SELECT toUInt32(j), host, toInt32(gpu_index), count(), countIf(gpu_util = 0), avg(gpu_util), toFloat64(max(gpu_util)), avg(sm_active),
  max(fb_used_bytes), avg(power_mw), min(energy_mj), max(energy_mj), argMin(energy_mj, ms), argMax(energy_mj, ms), toInt64(min(ts)), toInt64(max(ts))
FROM (
  SELECT ts, toUInt64(ts) * 1000 + ts_millis AS ms, host, gpu_index, gpu_util, sm_active, fb_used_bytes, power_mw, energy_mj,
    arrayJoin(arrayFilter((x, a, b) -> toInt64(ts) >= a AND toInt64(ts) <= b, arrayElement([%[5]s], p), arrayElement([%[6]s], p), arrayElement([%[7]s], p))) AS j
  FROM (
    SELECT ts, ts_millis, host, gpu_index, gpu_util, sm_active, fb_used_bytes, power_mw, energy_mj,
      transform(concat(host, ':', toString(gpu_index)), [%[3]s], CAST([%[4]s] AS Array(UInt32)), toUInt32(0)) AS p
    FROM %[1]s.gpu_samples
    WHERE cluster = %[2]s AND (%[8]s)
  )
  WHERE p > 0
)
GROUP BY j, host, gpu_index`, s.cfg.Database, quote(jobs[chunk[0].job].cluster), strings.Join(quoted, ", "), strings.Join(nums, ", "),
		strings.Join(jobLists, ", "), strings.Join(fromLists, ", "), strings.Join(toLists, ", "), strings.Join(where, " OR "))
	rows, err := s.conn.Query(ctx, q)
	if err != nil {
		return fmt.Errorf("aggregate the samples of %d job GPUs: %w", len(chunk), err)
	}
	defer rows.Close()
	for rows.Next() {
		var i uint32
		var g gpuStats
		if err := rows.Scan(&i, &g.host, &g.index, &g.samples, &g.zero, &g.utilMean, &g.utilMax, &g.smMean,
			&g.fbMax, &g.powerMeanMW, &g.energyMin, &g.energyMax, &g.energyFirst, &g.energyLast, &g.firstSec, &g.lastSec); err != nil {
			return fmt.Errorf("scan a sample aggregate: %w", err)
		}
		if int(i) >= len(jobs) {
			return fmt.Errorf("sample aggregate for job number %d of %d", i, len(jobs))
		}
		out[i] = append(out[i], g)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("aggregate the samples of %d job GPUs: %w", len(chunk), err)
	}
	return nil
}

// quote returns s as a ClickHouse string literal.
func quote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

type summaryRow struct {
	gpus               uint32
	elapsed            uint32
	gpuHours           float64
	hosts              []string
	indexes            []int32
	utilMean, utilMax  []float32
	samples            uint64
	mean, max, smMean  *float32
	utilSource         string
	fbMax              *uint64
	powerW             *float32
	energyJ, zeroHours *float64
	flags              []string
}

// summarize computes a job's summary from its record, the number of GPUs
// allocated to its run and the per-GPU sample aggregates.
func summarize(j summaryJob, allocated int, stats []gpuStats) summaryRow {
	r := summaryRow{hosts: []string{}, indexes: []int32{}, utilMean: []float32{}, utilMax: []float32{}, flags: []string{}}
	if j.end.After(j.start) {
		r.elapsed = uint32(min(j.end.Sub(j.start)/time.Second, math.MaxUint32))
	}
	switch {
	case j.gpus != nil:
		r.gpus = *j.gpus
	default:
		r.gpus = uint32(allocated)
	}
	hours := float64(r.elapsed) / 3600
	r.gpuHours = float64(r.gpus) * hours
	if j.limit != nil && *j.limit > 0 && float64(r.elapsed) < PoorLimitFraction*float64(*j.limit) {
		r.flags = append(r.flags, FlagPoorLimit)
	}
	if allocated > 0 && len(stats) == 0 {
		r.flags = append(r.flags, FlagNoSamples)
	}
	var (
		sumUtil, sumSM, sumPower float64
		nUtil, nSM, nPower       int
		maxUtil                  float64
		energy, zeroHours        float64
		haveEnergy, idle         bool
		fbMax                    uint64
		haveFB                   bool
	)
	for _, g := range stats {
		r.samples += g.samples
		r.hosts = append(r.hosts, g.host)
		r.indexes = append(r.indexes, g.index)
		if g.utilMean != nil && g.utilMax != nil {
			r.utilMean = append(r.utilMean, float32(*g.utilMean))
			r.utilMax = append(r.utilMax, float32(*g.utilMax))
			sumUtil += *g.utilMean
			nUtil++
			maxUtil = max(maxUtil, *g.utilMax)
			if *g.utilMax == 0 {
				idle = true
			}
			zeroHours += float64(g.zero) / float64(g.samples) * hours
		} else {
			r.utilMean = append(r.utilMean, float32(math.NaN()))
			r.utilMax = append(r.utilMax, float32(math.NaN()))
		}
		if g.smMean != nil {
			sumSM += *g.smMean
			nSM++
		}
		if g.powerMeanMW != nil {
			sumPower += *g.powerMeanMW
			nPower++
		}
		if g.fbMax != nil {
			fbMax, haveFB = max(fbMax, *g.fbMax), true
		}
		// The energy counter counts from the driver's load, and a reload
		// starts it again from 0. Its rise is used only where it rose
		// throughout the run, as far as the first sample being its lowest
		// and the last its highest tells; one that reset in the run is
		// left out rather than guessed, the GPU counted as one without a
		// counter. (Before, max − min took a reset counter's whole age as
		// the run's energy.) The rise covers the span from the GPU's first
		// to its last sample in the run; the rest of the run (before the
		// first sample and after the last, up to a sample interval each,
		// or all of a run shorter than one) is counted at the GPU's mean
		// power, so that a short run's energy is not 0 and a long one's
		// not one interval short.
		uncovered := max(0, float64(r.elapsed)-float64(g.lastSec-g.firstSec))
		switch {
		case g.energyMin != nil && g.energyMax != nil && g.energyFirst != nil && g.energyLast != nil &&
			*g.energyFirst == *g.energyMin && *g.energyLast == *g.energyMax:
			energy += float64(*g.energyMax-*g.energyMin) / 1000
			if g.powerMeanMW != nil {
				energy += *g.powerMeanMW / 1000 * uncovered
			}
			haveEnergy = true
		case g.powerMeanMW != nil:
			energy += *g.powerMeanMW / 1000 * float64(r.elapsed)
			haveEnergy = true
		}
	}
	if nUtil > 0 {
		m, x := float32(sumUtil/float64(nUtil)), float32(maxUtil)
		r.mean, r.max = &m, &x
		r.zeroHours = &zeroHours
		r.utilSource = "gpu_util"
	}
	efficiency := math.NaN()
	if r.mean != nil {
		efficiency = float64(*r.mean)
	}
	if nSM > 0 && nSM == len(stats) {
		sm := float32(sumSM / float64(nSM))
		r.smMean = &sm
		r.utilSource = "sm_active"
		efficiency = float64(sm) * 100
	}
	if !math.IsNaN(efficiency) && efficiency < LowUtilPercent {
		r.flags = append(r.flags, FlagLowUtil)
	}
	if idle {
		r.flags = append(r.flags, FlagIdleAllocated)
	}
	if haveFB {
		r.fbMax = &fbMax
	}
	if nPower > 0 {
		w := float32(sumPower / float64(nPower) / 1000)
		r.powerW = &w
	}
	if haveEnergy {
		r.energyJ = &energy
	}
	return r
}
