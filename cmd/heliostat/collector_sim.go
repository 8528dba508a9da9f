package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/heliostat-dev/heliostat/actuator/replay"
	"github.com/heliostat-dev/heliostat/collector/publish"
	"github.com/heliostat-dev/heliostat/collector/sim"
	"github.com/heliostat-dev/heliostat/ingest/trace"
	"github.com/heliostat-dev/heliostat/internal/web"
	"github.com/heliostat-dev/heliostat/schemas"
)

// simFlags are the flags of `collector --source sim`: the simulator's
// --sim.* flags and the trace to replay.
type simFlags struct {
	cfg    sim.Config
	trace  string
	format string
	fs     *flag.FlagSet
}

// registerSimFlags registers the --sim.* flags on fs.
// simPositiveFlags are the --sim.* flags whose 0 would mean their default.
func simPositiveFlags() []string {
	return []string{"sim.nodes", "sim.gpus-per-node", "sim.sample-interval", "sim.wake-delay"}
}

func registerSimFlags(fs *flag.FlagSet, getenv func(string) string) *simFlags {
	f := &simFlags{fs: fs}
	f.cfg.RegisterFlags(fs, getenv)
	fs.StringVar(&f.trace, "sim.trace", "", "replay this trace instead of the synthetic workload: Helios CSV (GPU jobs only, their VCs must be in --sim.vcs) or SWF (processors stand for GPUs, jobs run on any node)")
	fs.StringVar(&f.format, "sim.trace-format", "", "format of --sim.trace: helios or swf; empty guesses it from the name")
	return f
}

// runSimSource runs `collector --source sim`: the simulated cluster and its
// publisher, until ctx ends (or the simulation does). The cluster is named
// by --sim.cluster when given, else by --collector.cluster.
func runSimSource(ctx context.Context, f *simFlags, cluster string, pc publish.Config, wf webFlags, logger *slog.Logger) error {
	explicit := false
	f.fs.Visit(func(fl *flag.Flag) { explicit = explicit || fl.Name == "sim.cluster" })
	if !explicit {
		f.cfg.Cluster = cluster
	}
	if err := f.cfg.Validate(); err != nil {
		return err
	}
	work, err := f.workload(logger)
	if err != nil {
		return err
	}
	reg, srv, err := serveMetrics(wf, logger)
	if err != nil {
		return err
	}
	pub, err := publish.New(pc, logger, reg)
	if err != nil {
		return err
	}
	s, err := sim.New(f.cfg, work, nil, pub, logger, reg, time.Now)
	if err != nil {
		_ = pub.Close()
		return err
	}
	logger.Info("collector running", "source", "sim", "cluster", s.Config().Cluster, "brokers", pc.Brokers,
		"spool", pc.SpoolDir, "metrics", srv.URL("/metrics"))
	srv.AddCheck(pub.Ready)
	srv.SetReady(true)
	return runSimParts(ctx, s, pub, srv)
}

// workload returns the trace to replay, or nil for the synthetic workload.
func (f *simFlags) workload(logger *slog.Logger) (sim.Workload, error) {
	if f.trace == "" {
		return nil, nil
	}
	tr, err := trace.Open(f.trace, f.format)
	if err != nil {
		return nil, err
	}
	logRejects(logger, f.trace, tr)
	jobs, skipped := traceJobSpecs(tr)
	vcs, err := sim.ParseVCs(f.cfg.VCs)
	if err != nil {
		return nil, err
	}
	// The simulator rejects, one by one, the jobs it can never run: count
	// them here too, so that a trace none of whose jobs can run is refused
	// rather than replayed as an idle cluster.
	unfit := unfitJobs(jobs, f.cfg, vcs)
	if n := sumCounts(skipped); n > 0 {
		logger.Warn("trace jobs skipped", "trace", f.trace, "jobs", n, "of", len(tr.Jobs), "reasons", countsString(skipped))
	}
	if n := sumCounts(unfit); n > 0 {
		logger.Warn("trace jobs the simulated cluster cannot run will be rejected", "trace", f.trace, "jobs", n, "of", len(jobs), "reasons", countsString(unfit))
	}
	if missing := missingVCs(jobs, vcs); len(missing) > 0 {
		logger.Warn("the trace's jobs in these virtual clusters will be rejected; add them to --sim.vcs", "vcs", missing)
	}
	if len(jobs) == sumCounts(unfit) {
		for k, n := range unfit {
			skipped[k] += n
		}
		return nil, fmt.Errorf("collector: --sim.trace %s: no job of the trace can run on the simulated cluster: %d jobs read, skipped: %s; %d rows rejected (%s)",
			f.trace, len(tr.Jobs), countsString(skipped), tr.Rejected, countsString(tr.Reasons))
	}
	logger.Info("replaying trace", "trace", f.trace, "jobs", len(jobs), "skipped", sumCounts(skipped), "rejected_rows", tr.Rejected)
	return sim.Jobs(jobs), nil
}

// unfitJobs counts the jobs the simulator of cfg (with virtual clusters vcs,
// as sim.ParseVCs gives them) will reject: in a virtual cluster it lacks
// (unknown_vc), or needing more GPUs than theirs has (larger_than_cluster).
func unfitJobs(jobs []sim.JobSpec, cfg sim.Config, vcs []sim.VC) map[string]int {
	gpn, nodes := cfg.GPUsPerNode, cfg.Nodes
	if gpn == 0 {
		gpn = sim.DefaultGPUsPerNode
	}
	if nodes == 0 {
		nodes = sim.DefaultNodes
	}
	size := map[string]int{"": nodes * gpn}
	if vcs == nil {
		size["vc1"] = nodes * gpn
	}
	for _, vc := range sim.MergeVCs(vcs) {
		size[vc.Name] = vc.Nodes * gpn
	}
	out := map[string]int{}
	for i := range jobs {
		switch n, ok := size[jobs[i].VC]; {
		case !ok:
			out[replay.SkipUnknownVC]++
		case jobs[i].GPUs > n:
			out[replay.SkipTooLarge]++
		}
	}
	return out
}

// runSimParts runs the simulator, its publisher, the extra parts (up's
// actuator) and (when srv is not nil) the metrics server until ctx ends or
// the simulation does, then stops in order: the simulator ends what runs and
// publishes it and the extra parts return, then the publisher delivers or
// spools what it holds, then closes.
func runSimParts(ctx context.Context, s *sim.Sim, pub *publish.Publisher, srv *web.Server, extra ...func(context.Context) error) error {
	pubCtx, stopPub := context.WithCancel(context.WithoutCancel(ctx))
	pubDone := make(chan error, 1)
	go func() { pubDone <- pub.Run(pubCtx) }()
	g, gctx := errgroup.WithContext(ctx)
	if srv != nil {
		g.Go(func() error { return srv.Run(gctx) })
	}
	g.Go(func() error {
		err := s.Run(gctx)
		if err == nil && ctx.Err() == nil {
			// The simulation ended (--sim.duration, or a replay that is
			// done): stop the metrics server too.
			return errSimDone
		}
		return err
	})
	for _, run := range extra {
		g.Go(func() error { return run(gctx) })
	}
	err := g.Wait()
	if errors.Is(err, errSimDone) {
		err = nil
	}
	stopPub()
	if perr := <-pubDone; perr != nil && err == nil {
		err = perr
	}
	if cerr := pub.Close(); cerr != nil && err == nil {
		err = cerr
	}
	return err
}

var errSimDone = errors.New("simulation done")

// traceJobSpecs converts a trace's GPU jobs into the simulator's job specs,
// submit times relative to the trace's first job. An SWF trace has
// processors, not GPUs: its allocated processors (else the requested ones)
// stand for GPUs, as in `heliostat sim`, and its queue numbers are no
// virtual clusters, so its jobs run on any node. Jobs without GPUs or
// without a run time are skipped and counted by reason (no_gpus,
// no_run_time, as `heliostat sim` names them); a state the trace does not
// give, or that is not final, counts as COMPLETED.
func traceJobSpecs(tr *trace.Trace) (jobs []sim.JobSpec, skipped map[string]int) {
	skipped = map[string]int{}
	var first time.Time
	for i := range tr.Jobs {
		if j := &tr.Jobs[i]; first.IsZero() || j.Submit.Before(first) {
			first = j.Submit
		}
	}
	swf := tr.Format == "swf"
	for i := range tr.Jobs {
		j := &tr.Jobs[i]
		run := j.Run
		if run < 0 && !j.Start.IsZero() && !j.End.IsZero() {
			run = j.End.Sub(j.Start)
		}
		gpus, vc := j.GPUs, j.Queue
		if swf {
			gpus, vc = j.Procs, ""
			if gpus <= 0 {
				gpus = j.ReqProcs
			}
		}
		switch {
		case run < 0:
			skipped[replay.SkipNoRun]++
			continue
		case gpus < 1:
			skipped[replay.SkipNoGPUs]++
			continue
		}
		st, ok := trace.EventState(j.State)
		if !ok || !st.Final() {
			st = schemas.StateCompleted
		}
		spec := sim.JobSpec{
			ID:       j.ID,
			Name:     j.Executable,
			User:     j.User,
			VC:       vc,
			GPUs:     gpus,
			Submit:   j.Submit.Sub(first),
			Duration: run,
			State:    st,
		}
		if j.ReqTime > 0 {
			spec.TimeLimit = j.ReqTime
		}
		jobs = append(jobs, spec)
	}
	return jobs, skipped
}

// missingVCs returns the virtual clusters of jobs that vcs lacks (nil vcs
// is the single VC "vc1").
func missingVCs(jobs []sim.JobSpec, vcs []sim.VC) []string {
	have := map[string]bool{"": true}
	if vcs == nil {
		have["vc1"] = true
	}
	for _, vc := range vcs {
		have[vc.Name] = true
	}
	var missing []string
	for _, j := range jobs {
		if !have[j.VC] && !slices.Contains(missing, j.VC) {
			missing = append(missing, j.VC)
		}
	}
	return missing
}
