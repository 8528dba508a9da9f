package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/segmentio/kafka-go"

	"github.com/heliostat-dev/heliostat/collector/sim"
	"github.com/heliostat-dev/heliostat/internal/atomicfile"
	"github.com/heliostat-dev/heliostat/schemas"
)

// simClockFile is where heliostat up keeps, in its data directory, how far
// each simulated cluster's clock got, so that the next run continues the
// same timeline instead of starting again at the wall clock, behind the jobs
// and demand an earlier run recorded (the simulated clock runs ahead of the
// wall clock).
const simClockFile = "sim-clock.json"

// simClockSaveEvery is how often up saves the simulated clock while it runs;
// after a crash the saved clock may be up to this much real time (times the
// speed-up) behind where the crashed run stopped, so the next run resumes
// after the newest job event, allocation and GPU sample of the cluster that
// ClickHouse or the brokers hold, when later (resumeSimStartFrom).
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

// lastGPUData returns the time of cluster's newest GPU sample and of its
// newest allocation record (its start or end) in ClickHouse; zero when it
// has none.
func lastGPUData(ctx context.Context, conn driver.Conn, db, cluster string) (sample, alloc time.Time, err error) {
	if sample, err = newest(ctx, conn, "SELECT count(), max(ts) FROM "+db+".gpu_samples WHERE cluster = ?", cluster, "GPU sample"); err != nil {
		return time.Time{}, time.Time{}, err
	}
	alloc, err = newest(ctx, conn, "SELECT count(), max(greatest(alloc_start, ifNull(alloc_end, alloc_start))) FROM "+db+".gpu_allocations WHERE cluster = ?", cluster, "GPU allocation")
	return sample, alloc, err
}

// newest runs q, which selects a count and a maximum time for cluster, and
// returns the time; zero when the count is 0.
func newest(ctx context.Context, conn driver.Conn, q, cluster, what string) (time.Time, error) {
	var n uint64
	var t time.Time
	if err := conn.QueryRow(ctx, q, cluster).Scan(&n, &t); err != nil {
		return time.Time{}, fmt.Errorf("read the newest %s of cluster %q: %w", what, cluster, err)
	}
	if n == 0 {
		return time.Time{}, nil
	}
	return t, nil
}

// resumeSimStart returns when cluster's simulated clock starts: a second
// after the latest of the clock saved in dir and the newest job event, GPU
// sample and allocation record ClickHouse holds for the cluster, or now
// when none is later than now. The samples count because the clock is saved
// only every simClockSaveEvery: after a run was killed, ClickHouse may hold
// up to that much (times the speed-up) of samples past the saved clock, and
// a timeline resumed before them would give each GPU two interleaved sample
// streams, its energy counter going back and forth. resumeSimStartFrom
// also counts what the brokers hold and ingest has not stored yet.
func resumeSimStart(ctx context.Context, conn driver.Conn, db, dir, cluster string, now time.Time, logger *slog.Logger) (time.Time, error) {
	return resumeSimStartFrom(ctx, conn, db, nil, dir, cluster, now, logger)
}

// resumeSimStartFrom is resumeSimStart, counting also the newest messages
// of the cluster that brokers hold (lastPublished): after a run was killed,
// the last second or so of what it published may not be in ClickHouse yet.
// No brokers: ClickHouse and the saved clock only.
func resumeSimStartFrom(ctx context.Context, conn driver.Conn, db string, brokers []string, dir, cluster string, now time.Time, logger *slog.Logger) (time.Time, error) {
	clocks, err := readSimClocks(dir)
	if err != nil {
		return time.Time{}, err
	}
	event, err := newestJobEvent(ctx, conn, db, cluster)
	if err != nil {
		return time.Time{}, err
	}
	sample, alloc, err := lastGPUData(ctx, conn, db, cluster)
	if err != nil {
		return time.Time{}, err
	}
	var published time.Time
	if len(brokers) > 0 {
		if published, err = lastPublished(ctx, brokers, cluster); err != nil {
			return time.Time{}, err
		}
	}
	saved := clocks[cluster]
	last := saved
	for _, t := range []time.Time{event, sample, alloc, published} {
		if t.After(last) {
			last = t
		}
	}
	start := now.UTC().Truncate(time.Second)
	if !last.Before(start) {
		start = last.UTC().Truncate(time.Second).Add(time.Second)
		attrs := []any{"cluster", cluster, "sim_time", start}
		for _, a := range []struct {
			key string
			t   time.Time
		}{{"saved_clock", saved}, {"newest_job_event", event}, {"newest_gpu_sample", sample},
			{"newest_gpu_allocation", alloc}, {"newest_published", published}} {
			if !a.t.IsZero() {
				attrs = append(attrs, a.key, a.t)
			}
		}
		logger.Info("the simulated clock resumes where the last run stopped", attrs...)
	}
	return start, nil
}

// lastPublished returns the time of cluster's newest job event, allocation
// record (start or end) or GPU sample in the last message of each partition
// of their topics on brokers; zero when none is the cluster's. A
// partition's messages are in the order they were published, so its last
// one holds its newest times.
func lastPublished(ctx context.Context, brokers []string, cluster string) (time.Time, error) {
	c, done := brokerClient(brokers)
	defer done()
	topics := []string{schemas.TopicJobEvents, schemas.TopicAllocations, schemas.TopicGPUSamples}
	ends, err := logEndOffsets(ctx, c, topics)
	if err != nil {
		return time.Time{}, fmt.Errorf("read the newest messages of cluster %q: %w", cluster, err)
	}
	var newestMS int64
	for topic, ps := range ends {
		for p, end := range ps {
			value, err := fetchLast(ctx, c, topic, p, end)
			if err != nil {
				return time.Time{}, fmt.Errorf("read the newest message of %s/%d: %w", topic, p, err)
			}
			newestMS = max(newestMS, newestIn(topic, value, cluster))
		}
	}
	if newestMS == 0 {
		return time.Time{}, nil
	}
	return time.UnixMilli(newestMS).UTC(), nil
}

// brokerClient returns a client of brokers with connections of its own (not
// kafka-go's shared DefaultTransport, whose pooled connections would outlive
// a broker restarted on the same address), and the func that closes them.
func brokerClient(brokers []string) (*kafka.Client, func()) {
	tr := &kafka.Transport{DialTimeout: 5 * time.Second}
	return &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second, Transport: tr}, tr.CloseIdleConnections
}

// fetchLast returns the value of the message at end-1 of topic's partition
// p; nil when there is none there (a transaction marker).
func fetchLast(ctx context.Context, c *kafka.Client, topic string, p int, end int64) ([]byte, error) {
	resp, err := c.Fetch(ctx, &kafka.FetchRequest{Topic: topic, Partition: p, Offset: end - 1,
		MinBytes: 1, MaxBytes: 64 << 20, MaxWait: time.Second})
	if err == nil {
		err = resp.Error
	}
	if err != nil {
		return nil, err
	}
	var last []byte
	for {
		r, err := resp.Records.ReadRecord()
		if errors.Is(err, io.EOF) {
			return last, nil
		}
		if err != nil {
			return nil, err
		}
		if r.Offset != end-1 || r.Value == nil {
			continue
		}
		if last, err = io.ReadAll(r.Value); err != nil {
			return nil, err
		}
	}
}

// newestIn returns the newest time, Unix ms, of cluster in value, a message
// of topic; 0 when it is another cluster's or cannot be read.
func newestIn(topic string, value []byte, cluster string) int64 {
	var t int64
	switch topic {
	case schemas.TopicJobEvents:
		var b schemas.JobEventBatch
		if schemas.DecodeJobEventBatch(value, &b) == nil && b.Cluster == cluster {
			for _, e := range b.Events {
				t = max(t, e.EventMillis)
			}
		}
	case schemas.TopicAllocations:
		var b schemas.AllocBatch
		if schemas.DecodeAllocBatch(value, &b) == nil && b.Cluster == cluster {
			for _, a := range b.Allocs {
				t = max(t, a.StartMillis, a.EndMillis)
			}
		}
	case schemas.TopicGPUSamples:
		var b schemas.SampleBatch
		if schemas.DecodeSampleBatch(value, &b) == nil && b.Cluster == cluster {
			for _, s := range b.Samples {
				t = max(t, s.TSMillis)
			}
		}
	}
	return t
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

// simStateFile is where heliostat up keeps, beside simClockFile, what each
// simulated cluster left open when up stopped: its pending and running
// jobs and its nodes (sim.State), so that the next run continues them
// instead of the cluster inventing failures at every restart. The next run
// takes its cluster's entry out of the file as it starts: after a run that
// was killed, the file holds nothing of it, and closeLostSimJobs ends the
// jobs that run left open.
const simStateFile = "sim-state.json"

// simStates maps a simulated cluster's name to what its last run left.
type simStates map[string]sim.State

// readSimStates reads dir's state file; a missing file is no states.
func readSimStates(dir string) (simStates, error) {
	path := filepath.Join(dir, simStateFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return simStates{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the simulated cluster's saved jobs: %w", err)
	}
	st := simStates{}
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("read the simulated cluster's saved jobs: %s: %w: %w", path, errDamagedClock, err)
	}
	return st, nil
}

// writeSimStates replaces dir's state file with st.
func writeSimStates(dir string, st simStates) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("save the simulated cluster's jobs: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(dir, simStateFile), append(b, '\n')); err != nil {
		return fmt.Errorf("save the simulated cluster's jobs: %w", err)
	}
	return nil
}

// saveSimState records in dir, once s has stopped, the simulated clock it
// reached (saveSimClock) and the jobs and nodes it left (sim.Config.KeepJobs),
// keeping the other clusters' entries. A damaged file is replaced.
func saveSimState(dir string, s *sim.Sim) error {
	cluster := s.Config().Cluster
	snap := s.Snapshot()
	clockErr := saveSimClock(dir, cluster, snap.Clock)
	st, err := readSimStates(dir)
	if errors.Is(err, errDamagedClock) {
		st, err = simStates{}, nil
	}
	if err == nil {
		st[cluster] = snap
		err = writeSimStates(dir, st)
	}
	return errors.Join(clockErr, err)
}

// restoreSim gives s, before it runs, the jobs and nodes the last run of its
// cluster saved in dir, when s starts after them (a run told an earlier
// --sim.start begins a new timeline, and restores nothing). It leaves the
// cluster's entry in the file: takeSimState takes it out once s is about
// to run. It returns the ids of the jobs s took over, for
// closeLostSimJobs. A damaged file restores nothing (the jobs it held are
// ended as lost) and is replaced at the stop.
func restoreSim(dir string, s *sim.Sim, logger *slog.Logger) ([]string, error) {
	cluster := s.Config().Cluster
	st, err := readSimStates(dir)
	if errors.Is(err, errDamagedClock) {
		logger.Warn("the simulated cluster's saved jobs cannot be read; they are ended as lost", "err", err)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	saved, ok := st[cluster]
	if !ok {
		return nil, nil
	}
	if start := s.Config().Start; !saved.Clock.Before(start) {
		logger.Info("the simulated clock starts before the last run stopped; its jobs are ended as lost", "cluster", cluster,
			"sim_time", start, "saved_clock", saved.Clock, "jobs", len(saved.Jobs))
		return nil, nil
	}
	restored, err := s.Restore(saved)
	if err != nil {
		return nil, fmt.Errorf("restore the simulated cluster %q: %w", cluster, err)
	}
	logger.Info("the simulated cluster continues the jobs the last run left", "cluster", cluster,
		"jobs", len(restored), "saved_jobs", len(saved.Jobs), "saved_clock", saved.Clock)
	return restored, nil
}

// takeSimState takes cluster's entry out of dir's state file once the
// simulated cluster that restoreSim gave its jobs to is about to run, with
// nothing left that can fail before it does: a later run, after this one
// was killed, does not restore them a second time, and a start that failed
// before it leaves them to the next one. A damaged file is left to be
// replaced at the stop.
func takeSimState(dir, cluster string) error {
	st, err := readSimStates(dir)
	if errors.Is(err, errDamagedClock) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, ok := st[cluster]; !ok {
		return nil
	}
	delete(st, cluster)
	return writeSimStates(dir, st)
}

// upIngestGroup is the consumer group of up's ingest (ingest's default):
// closeLostSimJobs waits for it.
const upIngestGroup = "heliostat-ingest"

// Waiting for ingest before closeLostSimJobs reads what the last run left.
const (
	// lostJobsIngestWait bounds the wait (wall time); past it the jobs
	// stay open, to be ended at the next start.
	lostJobsIngestWait = 2 * time.Minute
	// lostJobsPoll is how often the wait asks the broker.
	lostJobsPoll = 500 * time.Millisecond
)

// closeLostSimJobs ends, as lost (state UNKNOWN, at s's start), the jobs of
// earlier runs of s's cluster that ClickHouse holds open (pending or
// running) and s did not take over (restored): a run killed before it could
// save them left them open for ever, holding their GPUs. Their open
// allocations close at s's start too, and the open allocations of jobs that
// did end at their end. The records go out through s, as every simulated
// event does. It runs beside s.Run: first it waits until ingest (consumer
// group group on brokers) has stored all the job events and allocations the
// brokers held when it began, so that an end the last run published but
// ingest had not yet stored is not taken for a lost job; if that takes more
// than lostJobsIngestWait it leaves the jobs for the next start. It returns
// nil when ctx ends first.
func closeLostSimJobs(ctx context.Context, s *sim.Sim, restored []string, brokers []string, group string, conn driver.Conn, db string, logger *slog.Logger) error {
	wctx, cancel := context.WithTimeout(ctx, lostJobsIngestWait)
	defer cancel()
	err := waitIngested(wctx, brokers, group, []string{schemas.TopicJobEvents, schemas.TopicAllocations}, lostJobsPoll)
	switch {
	case ctx.Err() != nil:
		return nil
	case err != nil:
		logger.Warn("ingest has not caught up with the last run; the jobs it left open are ended at the next start", "err", err)
		return nil
	}
	cluster, at := s.Config().Cluster, s.Config().Start
	jobs, allocs, err := lostSimJobs(ctx, conn, db, cluster, at, restored)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		logger.Warn("could not read the jobs the last run left open; they are ended at the next start", "err", err)
		return nil
	}
	if len(jobs) == 0 && len(allocs) == 0 {
		return nil
	}
	n := s.EndLost(at, jobs, allocs)
	logger.Warn("jobs an earlier run left open (it was killed) ended as lost", "cluster", cluster, "jobs", n,
		"allocations", len(allocs), "state", schemas.StateUnknown.String(), "sim_time", at)
	return nil
}

// lostSimJobs returns the simulated jobs of cluster submitted before start
// that ClickHouse holds open and that are not in keep, each as its latest
// record, and the open allocations of jobs submitted before start that are
// not in keep: EndMillis 0 where the job is open, else the job's end.
func lostSimJobs(ctx context.Context, conn driver.Conn, db, cluster string, start time.Time, keep []string) ([]schemas.JobEvent, []schemas.Alloc, error) {
	kept := make(map[string]bool, len(keep))
	for _, id := range keep {
		kept[id] = true
	}
	rows, err := conn.Query(ctx, `SELECT job_id, array_job_id, array_task_id, job_name, user, uid, group_name, account,
		partition_name, qos, priority, submit_time, eligible_time, start_time, time_limit_s, node_count, nodes, cpus,
		gpus, gpu_type, mem_req_bytes, command_hash, work_dir
		FROM `+db+`.jobs FINAL
		WHERE cluster = ? AND source = ? AND last_event != 'END' AND submit_time < ?
		ORDER BY submit_time, job_id`, cluster, schemas.SourceSim.String(), start.UTC())
	if err != nil {
		return nil, nil, fmt.Errorf("read the open jobs of cluster %q: %w", cluster, err)
	}
	defer rows.Close()
	var jobs []schemas.JobEvent
	for rows.Next() {
		var (
			e                            schemas.JobEvent
			arrayTask, uid, priority     *int64
			submit                       time.Time
			eligible, started            *time.Time
			limit, nodeCount, cpus, gpus *uint32
			memReq                       *uint64
		)
		if err := rows.Scan(&e.JobID, &e.ArrayJobID, &arrayTask, &e.Name, &e.User, &uid, &e.Group, &e.Account,
			&e.Partition, &e.QOS, &priority, &submit, &eligible, &started, &limit, &nodeCount, &e.Nodes, &cpus,
			&gpus, &e.GPUType, &memReq, &e.CommandHash, &e.WorkDir); err != nil {
			return nil, nil, fmt.Errorf("read the open jobs of cluster %q: %w", cluster, err)
		}
		e.ArrayTaskID, e.UID, e.Priority = orUnknown(arrayTask), orUnknown(uid), orUnknown(priority)
		e.TimeLimitS, e.NodeCount = orUnknownU(limit), orUnknownU(nodeCount)
		e.CPUs, e.GPUs = orUnknownU(cpus), orUnknownU(gpus)
		e.MemReqBytes = schemas.Unknown
		if memReq != nil {
			e.MemReqBytes = int64(*memReq)
		}
		if kept[e.JobID] {
			continue
		}
		e.SubmitMillis = submit.UnixMilli()
		if eligible != nil {
			e.EligibleMillis = eligible.UnixMilli()
		}
		if started != nil {
			e.StartMillis = started.UnixMilli()
		}
		jobs = append(jobs, e)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("read the open jobs of cluster %q: %w", cluster, err)
	}
	rows.Close()

	arows, err := conn.Query(ctx, `SELECT a.host, a.gpu_index, a.gpu_uuid, a.mig_uuid, a.job_id, a.user, a.alloc_start,
		j.ended, j.end_time
		FROM (
			SELECT host, gpu_index, gpu_uuid, mig_uuid, job_id, user, alloc_start
			FROM `+db+`.gpu_allocations FINAL
			WHERE cluster = ? AND source = ? AND alloc_end IS NULL AND alloc_start < ?
		) AS a
		LEFT JOIN (
			SELECT job_id, toUInt8(1) AS ended, end_time
			FROM `+db+`.jobs FINAL
			WHERE cluster = ? AND last_event = 'END'
		) AS j USING (job_id)
		ORDER BY a.alloc_start, a.job_id, a.host, a.gpu_index`,
		cluster, schemas.AllocSim.String(), start.UTC(), cluster)
	if err != nil {
		return nil, nil, fmt.Errorf("read the open allocations of cluster %q: %w", cluster, err)
	}
	defer arows.Close()
	var allocs []schemas.Alloc
	for arows.Next() {
		var (
			a     = schemas.Alloc{Source: schemas.AllocSim}
			index int32
			from  time.Time
			ended uint8
			end   *time.Time
		)
		if err := arows.Scan(&a.Host, &index, &a.GPUUUID, &a.MIGUUID, &a.JobID, &a.User, &from, &ended, &end); err != nil {
			return nil, nil, fmt.Errorf("read the open allocations of cluster %q: %w", cluster, err)
		}
		if kept[a.JobID] {
			continue
		}
		a.GPUIndex, a.StartMillis = int64(index), from.UnixMilli()
		if ended == 1 && end != nil {
			a.EndMillis = max(end.UnixMilli(), a.StartMillis)
		}
		allocs = append(allocs, a)
	}
	if err := arows.Err(); err != nil {
		return nil, nil, fmt.Errorf("read the open allocations of cluster %q: %w", cluster, err)
	}
	return jobs, allocs, nil
}

func orUnknown(v *int64) int64 {
	if v == nil {
		return schemas.Unknown
	}
	return *v
}

func orUnknownU(v *uint32) int64 {
	if v == nil {
		return schemas.Unknown
	}
	return int64(*v)
}

// waitIngested waits until consumer group has committed, on every partition
// of topics, the log end the brokers gave when it began: then ingest has
// stored all that those partitions held. It asks again every poll and
// returns ctx's error if ctx ends first.
func waitIngested(ctx context.Context, brokers []string, group string, topics []string, poll time.Duration) error {
	c, done := brokerClient(brokers)
	defer done()
	var ends map[string]map[int]int64
	tick := time.NewTicker(poll)
	defer tick.Stop()
	var last error
	for {
		if ends == nil {
			ends, last = logEndOffsets(ctx, c, topics)
			if last != nil {
				ends = nil
			}
		}
		if ends != nil {
			var behind string
			if behind, last = behindOffsets(ctx, c, group, ends); last == nil && behind == "" {
				return nil
			} else if last == nil {
				last = fmt.Errorf("ingest group %s has not stored %s yet", group, behind)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for ingest: %w (%w)", ctx.Err(), last)
		case <-tick.C:
		}
	}
}

// logEndOffsets returns the log end of every partition of topics that
// holds messages, by topic and partition.
func logEndOffsets(ctx context.Context, c *kafka.Client, topics []string) (map[string]map[int]int64, error) {
	md, err := c.Metadata(ctx, &kafka.MetadataRequest{Topics: topics})
	if err != nil {
		return nil, fmt.Errorf("read the partitions of %v: %w", topics, err)
	}
	// One request for the first offsets and one for the ends: a partition
	// asked for twice in one request is an invalid request.
	var offsets [2]map[string]map[int]int64
	for i, at := range []func(int) kafka.OffsetRequest{kafka.FirstOffsetOf, kafka.LastOffsetOf} {
		req := &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{}}
		for _, t := range md.Topics {
			if t.Error != nil {
				return nil, fmt.Errorf("read the partitions of %s: %w", t.Name, t.Error)
			}
			for _, p := range t.Partitions {
				req.Topics[t.Name] = append(req.Topics[t.Name], at(p.ID))
			}
		}
		resp, err := c.ListOffsets(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("list the offsets of %v: %w", topics, err)
		}
		offsets[i] = map[string]map[int]int64{}
		for topic, ps := range resp.Topics {
			offsets[i][topic] = map[int]int64{}
			for _, po := range ps {
				if po.Error != nil {
					return nil, fmt.Errorf("list the offsets of %s/%d: %w", topic, po.Partition, po.Error)
				}
				offsets[i][topic][po.Partition] = max(po.FirstOffset, po.LastOffset, 0)
			}
		}
	}
	ends := map[string]map[int]int64{}
	for topic, ps := range offsets[1] {
		for p, end := range ps {
			if end > offsets[0][topic][p] {
				if ends[topic] == nil {
					ends[topic] = map[int]int64{}
				}
				ends[topic][p] = end
			}
		}
	}
	return ends, nil
}

// behindOffsets returns the partitions of ends whose committed offset in
// group is short of their end ("" when none is), as topic/partition.
func behindOffsets(ctx context.Context, c *kafka.Client, group string, ends map[string]map[int]int64) (string, error) {
	req := &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{}}
	for topic, ps := range ends {
		for p := range ps {
			req.Topics[topic] = append(req.Topics[topic], p)
		}
	}
	if len(req.Topics) == 0 {
		return "", nil
	}
	resp, err := c.OffsetFetch(ctx, req)
	if err == nil {
		err = resp.Error
	}
	if err != nil {
		return "", fmt.Errorf("read the committed offsets of group %s: %w", group, err)
	}
	committed := map[string]map[int]int64{}
	for topic, ps := range resp.Topics {
		committed[topic] = map[int]int64{}
		for _, po := range ps {
			if po.Error == nil {
				committed[topic][po.Partition] = po.CommittedOffset
			}
		}
	}
	for topic, ps := range ends {
		for p, end := range ps {
			if off, ok := committed[topic][p]; !ok || off < end {
				return fmt.Sprintf("%s/%d (committed %d, log end %d)", topic, p, off, end), nil
			}
		}
	}
	return "", nil
}
