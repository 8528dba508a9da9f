package main

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/heliostat-dev/heliostat/actuator/replay"
	"github.com/heliostat-dev/heliostat/ingest/trace"
)

// sweepOutput is the JSON of `heliostat sim --capacity-sweep`.
type sweepOutput struct {
	traceRead
	// BaseCluster is the cluster the factors scale.
	BaseCluster []replay.VC `json:"base_cluster"`
	Policy      string      `json:"policy"`
	Backfill    bool        `json:"backfill"`
	// FitLargest says no VC was made smaller than its widest job.
	FitLargest bool `json:"fit_largest"`
	// Sizes holds one replay per cluster size, in the order asked.
	Sizes []replay.SweepPoint `json:"sizes"`
}

// runSweep replays tr on each size of sc and prints what each gave; rejects
// are the rejected rows of tr already printed.
func runSweep(ctx context.Context, e *env, path string, tr *trace.Trace, rejects []rejectedRow, cl replay.Cluster, sc replay.SweepConfig, began time.Time, asJSON bool) error {
	w, base, err := replay.SweepWorkload(tr, cl)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "sim: %s: %d jobs to replay on %d sizes of %s (%d rows rejected; skipped: %s), read in %.2fs\n",
		path, len(w.Jobs), len(sc.Sizes), clusterString(base), tr.Rejected, skippedString(w), time.Since(began).Seconds())
	if len(w.Jobs) == 0 {
		return fmt.Errorf("sim: %s: no job of the trace can be replayed (skipped: %s)", path, skippedString(w))
	}
	warnSkipped(e, len(tr.Jobs), w)
	sc.Progress = func(i int, p replay.SweepPoint) {
		fmt.Fprintf(e.stderr, "sim: size %d/%d %s (%s): avg queue %.0f s, %d never run, %.2fs\n",
			i+1, len(sc.Sizes), p.Size, clusterString(p.Cluster), p.AvgQueue, p.NeverRun, p.ElapsedS)
	}
	pts, err := replay.Sweep(ctx, w, base, sc)
	if err != nil {
		return err
	}
	out := sweepOutput{
		traceRead:   newTraceRead(path, tr, rejects, w),
		BaseCluster: base, Policy: string(sc.Policy), Backfill: sc.Replay.Backfill, FitLargest: sc.FitLargest, Sizes: pts,
	}
	if asJSON {
		return json.NewEncoder(e.stdout).Encode(out)
	}
	queue := "blocking queue"
	if sc.Replay.Backfill {
		queue = "backfill"
	}
	fit := "no VC below its widest job"
	if !sc.FitLargest {
		fit = "scaled exactly"
	}
	fmt.Fprintf(e.stdout, "%s (%s): %d jobs, %s, %s; base %s; %s\n", path, tr.Format, out.NJobs, sc.Policy, queue, clusterString(base), fit)
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "size\tnodes\tGPUs\tjobs\tnever run\tavg queue s\tmedian s\tp95 s\tp99 s\tqueued\tavg JCT s\tutilization\t")
	for _, p := range pts {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t%.1f%%\t%.0f\t%.1f%%\t\n", p.Size, p.Nodes, p.GPUs, p.NJobs, p.NeverRun,
			p.AvgQueue, p.MedianQueue, p.P95Queue, p.P99Queue, 100*p.QueuedShare, p.AvgJCT, 100*p.Utilization)
	}
	return tw.Flush()
}
