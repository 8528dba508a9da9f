package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/heliostat-dev/heliostat/actuator/qssf"
	"github.com/heliostat-dev/heliostat/actuator/replay"
	"github.com/heliostat-dev/heliostat/ingest/trace"
)

// traceRead heads the JSON of `heliostat sim` and of its capacity sweep:
// the trace and what reading it gave.
type traceRead struct {
	Trace     string `json:"trace"`
	Format    string `json:"format"`
	TraceJobs int    `json:"trace_jobs"`
	// RejectedRows counts the rows of the trace that could not be read,
	// RejectedReasons counts them by reason, and RejectedErrors holds the
	// first shownRejects of them.
	RejectedRows    int            `json:"rejected_rows"`
	RejectedReasons map[string]int `json:"rejected_reasons"`
	RejectedErrors  []rejectedRow  `json:"rejected_errors"`
	NJobs           int            `json:"n_jobs"`
	Skipped         map[string]int `json:"skipped"`
	// UnknownVCs counts the jobs skipped as unknown_vc by the VC their
	// trace names: VCs the --vcs file lacks.
	UnknownVCs map[string]int `json:"unknown_vcs"`
}

// newTraceRead returns the head of the JSON for the trace at path, its
// rejected rows shown and its workload w.
func newTraceRead(path string, tr *trace.Trace, rejects []rejectedRow, w *replay.Workload) traceRead {
	return traceRead{Trace: path, Format: tr.Format, TraceJobs: len(tr.Jobs), RejectedRows: tr.Rejected,
		RejectedReasons: tr.Reasons, RejectedErrors: rejects, NJobs: len(w.Jobs), Skipped: w.Skipped, UnknownVCs: w.UnknownVCs}
}

// checkTraceJobs refuses a trace that gave no job, before any cluster is
// made of it: when every row was rejected, the --format is the likely cause
// (an SWF reader takes each line of a CSV for a bad row), not the cluster.
func checkTraceJobs(path string, tr *trace.Trace) error {
	switch {
	case len(tr.Jobs) > 0:
		return nil
	case tr.Rejected > 0:
		return fmt.Errorf("sim: %s: every row of the trace was rejected (%d rows: %s); is --format %s right?",
			path, tr.Rejected, countsString(tr.Reasons), tr.Format)
	}
	return fmt.Errorf("sim: %s: the trace holds no job", path)
}

// shownUnknownVCs is how many VCs the --vcs file lacks sim names, the
// most jobs first; the JSON has them all.
const shownUnknownVCs = 5

// skippedString writes why jobs were left out of w, with the VCs the --vcs
// file lacks: "unknown_vc 415; VCs not in --vcs: vcA 300, vcB 115".
func skippedString(w *replay.Workload) string {
	s := countsString(w.Skipped)
	if len(w.UnknownVCs) == 0 {
		return s
	}
	names := slices.Collect(maps.Keys(w.UnknownVCs))
	slices.SortFunc(names, func(a, b string) int {
		if c := cmp.Compare(w.UnknownVCs[b], w.UnknownVCs[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, name := range names[:min(len(names), shownUnknownVCs)] {
		parts = append(parts, fmt.Sprintf("%s %d", vcName(name), w.UnknownVCs[name]))
	}
	if more := len(names) - shownUnknownVCs; more > 0 {
		parts = append(parts, fmt.Sprintf("and %d more", more))
	}
	return s + "; VCs not in --vcs: " + strings.Join(parts, ", ")
}

// vcName writes a trace's VC name for people: "(none given)" for "", quoted
// and cut to 40 bytes when it is long or holds a space, a comma or what
// does not print.
func vcName(s string) string {
	if s == "" {
		return "(none given)"
	}
	if len(s) > 40 || strings.ContainsFunc(s, func(r rune) bool {
		return r == ',' || r == utf8.RuneError || !unicode.IsGraphic(r) || unicode.IsSpace(r)
	}) {
		return fmt.Sprintf("%.40q", s)
	}
	return s
}

// simOutput is the JSON of `heliostat sim`.
type simOutput struct {
	traceRead
	Cluster   []replay.VC `json:"cluster"`
	Backfill  bool        `json:"backfill"`
	AgingRate float64     `json:"qssf_aging_rate"`
	// Jitter and JitterSeed are --qssf.jitter and its seed, when set.
	Jitter     float64 `json:"qssf_jitter,omitempty"`
	JitterSeed uint64  `json:"qssf_jitter_seed,omitempty"`
	// Policies holds each policy's figures, by name.
	Policies map[string]simPolicy `json:"policies"`
	// GapClosed is QSSF's share of the FIFO → SJF gap in average JCT,
	// when all three ran and there is a gap; GapClosedGPU the same against
	// the sjf-gpu oracle (true GPU service time), when it ran.
	GapClosed    *float64 `json:"gap_closed,omitempty"`
	GapClosedGPU *float64 `json:"gap_closed_gpu,omitempty"`
}

type simPolicy struct {
	replay.Result
	GapClosed    *float64 `json:"gap_closed,omitempty"`
	GapClosedGPU *float64 `json:"gap_closed_gpu,omitempty"`
}

func runSim(ctx context.Context, args []string, e *env) error {
	if len(args) > 0 && args[0] == "ces" {
		return runSimCES(ctx, args[1:], e)
	}
	fs := newFlagSet("sim", e)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: heliostat sim --trace FILE [--format swf|helios] [--vcs FILE | --nodes N [--gpus-per-node G]] [--policy fifo,sjf,sjf-gpu,qssf] [--backfill] [--json]\n       heliostat sim --trace FILE ... --capacity-sweep 0.5,0.75,1,1.25,1.5 [--capacity-sweep.exact] [--policy fifo] (what-if: queueing on each cluster size)\n       heliostat sim ces --series FILE ... (energy saving replay; `heliostat sim ces -h`)\n\nReplays a job trace on a node/GPU model under each policy (see actuator/replay).\n\nflags:")
		fs.PrintDefaults()
	}
	path := fs.String("trace", "", "job trace: SWF (.swf, .swf.gz) or Helios CSV (.csv)")
	format := fs.String("format", "", "swf or helios (default: from the file name)")
	vcsPath := fs.String("vcs", "", "virtual clusters file (CSV vc,nodes,gpus_per_node); each job runs in the VC its trace names")
	nodes := fs.Int("nodes", 0, "one pool of this many nodes for every job, instead of --vcs (an SWF trace's default: one pool of the header's MaxProcs)")
	gpn := fs.Int("gpus-per-node", 0, "GPUs (SWF: processors) of each node of --nodes (default 8)")
	policies := fs.String("policy", "fifo,sjf,sjf-gpu,qssf", "policies to replay, comma separated: fifo, sjf (true run times, the oracle), sjf-gpu (true GPU service times, run time × GPUs: the oracle on QSSF's key), qssf (heliostat's predictor, learning online); the gap closed is reported against each oracle that ran")
	backfill := fs.Bool("backfill", false, "let jobs start ahead of a blocked one when they end, by their time limit (else their run time), before it could start")
	refit := fs.Int("refit-every", replay.DefaultRefitEvery, "qssf: refit the duration model when the ended jobs have doubled, or at the latest after this many more")
	window := fs.Int("train-window", replay.DefaultTrainWindow, "qssf: fit the duration model on at most this many of the most recently ended jobs")
	bound := fs.Duration("slowdown-bound", replay.DefaultSlowdownBound, "run time below which bounded slowdown counts a job as this long")
	jitter := fs.Float64("qssf.jitter", 0, "qssf: multiply each job's predictions by e^(jitter·u), u uniform in [-1, 1] drawn per job from --qssf.jitter-seed, to see how far the figures move with errors that small (0.01: ±1 %; 0: none)")
	jitterSeed := fs.Uint64("qssf.jitter-seed", 1, "qssf: seed of --qssf.jitter's draws")
	asJSON := fs.Bool("json", false, "print one JSON object on stdout")
	jobsOut := fs.String("jobs-out", "", "also write every job as replayed under each policy to this CSV file (policy, job, user, vc, gpus, submit, start, end, run_s, queue_s, and QSSF's predicted_s at submit), for per-job comparisons of the policies")
	sweep := fs.String("capacity-sweep", "", "what-if: replay on the cluster scaled by each of these factors, comma separated (e.g. 0.5,0.75,1,1.25,1.5: each VC's nodes × factor, rounded; a one-node pool scales its GPUs), with one policy (default fifo); see docs/CAPACITY.md")
	sweepNodes := fs.String("capacity-sweep.nodes", "", "what-if: replay on a one-pool cluster of each of these node counts, comma separated (instead of factors)")
	sweepExact := fs.Bool("capacity-sweep.exact", false, "what-if: scale exactly; by default no VC is made smaller than its widest job needs (jobs that never fit are counted either way)")
	every := progressFlag(fs)
	var qc qssf.Config
	qc.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if fs.NArg() > 0 {
		return fmt.Errorf("sim: unexpected argument %q (flags go before nothing else; `heliostat sim ces` for energy saving)", fs.Arg(0))
	}
	if *path == "" {
		return errors.New("sim: --trace is required")
	}
	var (
		sizes []replay.Size
		err   error
	)
	switch {
	case *sweep != "" && *sweepNodes != "":
		return errors.New("sim: give --capacity-sweep or --capacity-sweep.nodes, not both")
	case *sweep != "":
		if sizes, err = replay.ParseFactors(*sweep); err != nil {
			return fmt.Errorf("sim: --capacity-sweep: %w", err)
		}
	case *sweepNodes != "":
		if sizes, err = replay.ParseNodeCounts(*sweepNodes); err != nil {
			return fmt.Errorf("sim: --capacity-sweep.nodes: %w", err)
		}
	case set["capacity-sweep.exact"]:
		return errors.New("sim: --capacity-sweep.exact needs --capacity-sweep or --capacity-sweep.nodes")
	}
	if sizes != nil && !set["policy"] {
		*policies = string(replay.FIFO)
	}
	pols, err := parsePolicies(*policies)
	if err != nil {
		return err
	}
	if sizes != nil && *jobsOut != "" {
		return errors.New("sim: --jobs-out writes one replay's jobs; not with a capacity sweep")
	}
	if sizes != nil && len(pols) != 1 {
		return fmt.Errorf("sim: a capacity sweep replays one policy; --policy gives %d", len(pols))
	}
	cfg := replay.Config{Backfill: *backfill, QSSF: qc, RefitEvery: *refit, TrainWindow: *window, SlowdownBound: *bound, Jitter: *jitter, JitterSeed: *jitterSeed}
	if !(*jitter >= 0 && *jitter <= replay.MaxJitter) {
		return fmt.Errorf("sim: --qssf.jitter %v: want 0..%v (log scale: 0.01 is ±1 %%)", *jitter, replay.MaxJitter)
	}
	if set["qssf.jitter-seed"] && *jitter == 0 {
		return errors.New("sim: --qssf.jitter-seed needs --qssf.jitter > 0")
	}
	if *refit <= 0 {
		return fmt.Errorf("sim: --refit-every %d: want > 0", *refit)
	}
	if *window <= 0 {
		return fmt.Errorf("sim: --train-window %d: want > 0", *window)
	}
	if *bound <= 0 {
		return fmt.Errorf("sim: --slowdown-bound %v: want > 0", *bound)
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	prog, err := newProgress("sim", e.stderr, *every)
	if err != nil {
		return err
	}
	var cl replay.Cluster
	switch {
	case *vcsPath != "" && (*nodes != 0 || *gpn != 0):
		return errors.New("sim: give --vcs or --nodes/--gpus-per-node, not both")
	case *vcsPath != "":
		f, err := os.Open(*vcsPath)
		if err != nil {
			return fmt.Errorf("sim: --vcs: %w", err)
		}
		cl.VCs, err = replay.ParseVCs(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("sim: --vcs %s: %w", *vcsPath, err)
		}
	case *gpn != 0 && *nodes == 0:
		return errors.New("sim: --gpus-per-node needs --nodes")
	case *nodes != 0:
		cl.Nodes, cl.GPUsPerNode = *nodes, *gpn
		if cl.GPUsPerNode == 0 {
			cl.GPUsPerNode = 8
		}
		if cl.Nodes < 1 || cl.GPUsPerNode < 1 {
			return fmt.Errorf("sim: --nodes %d --gpus-per-node %d: want both >= 1", cl.Nodes, cl.GPUsPerNode)
		}
	}

	var jobsFile *outFile
	if *jobsOut != "" {
		if jobsFile, err = createOut(*jobsOut); err != nil {
			return fmt.Errorf("sim: --jobs-out: %w", err)
		}
		defer jobsFile.discard()
	}
	began := time.Now()
	tr, err := trace.Open(*path, *format)
	if err != nil {
		return err
	}
	rejects := printRejects(e.stderr, *path, tr)
	if err := checkTraceJobs(*path, tr); err != nil {
		return err
	}
	if sizes != nil {
		cfg.Progress = func(ended, total int) {
			prog.printf("sim: %s: %d of %d jobs ended (%d%%)", pols[0], ended, total, percent(ended, total))
		}
		return runSweep(ctx, e, *path, tr, rejects, cl, replay.SweepConfig{Sizes: sizes, FitLargest: !*sweepExact, Policy: pols[0], Replay: cfg}, began, *asJSON)
	}
	w, err := replay.FromTrace(tr, cl)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "sim: %s: %d jobs to replay (%d rows rejected; skipped: %s), read in %.2fs\n",
		*path, len(w.Jobs), tr.Rejected, skippedString(w), time.Since(began).Seconds())
	if len(w.Jobs) == 0 {
		return fmt.Errorf("sim: %s: no job of the trace can run on the cluster (skipped: %s)", *path, skippedString(w))
	}
	warnSkipped(e, len(tr.Jobs), w)
	out := simOutput{
		traceRead: newTraceRead(*path, tr, rejects, w),
		Cluster:   w.VCs, Backfill: *backfill, AgingRate: qc.AgingRate, Policies: map[string]simPolicy{},
	}
	if *jitter > 0 {
		out.Jitter, out.JitterSeed = *jitter, *jitterSeed
	}
	for _, p := range pols {
		if err := ctx.Err(); err != nil {
			return err
		}
		fmt.Fprintf(e.stderr, "sim: replaying %s ...\n", p)
		pc := cfg
		pc.Progress = func(ended, total int) {
			prog.printf("sim: %s: %d of %d jobs ended (%d%%)", p, ended, total, percent(ended, total))
		}
		res, err := replay.Run(ctx, w, p, pc)
		if err != nil {
			return fmt.Errorf("sim %s: %w", *path, err)
		}
		fmt.Fprintf(e.stderr, "sim: %s done in %.2fs: avg JCT %.0f s\n", p, res.ElapsedS, res.AvgJCT)
		out.Policies[string(p)] = simPolicy{Result: res}
	}
	addGapsClosed(&out)
	if jobsFile != nil {
		results := make([]replay.Result, len(pols))
		for i, p := range pols {
			results[i] = out.Policies[string(p)].Result
		}
		if err := replay.WriteJobs(jobsFile, w, results); err != nil {
			return fmt.Errorf("sim: --jobs-out %s: %w", *jobsOut, err)
		}
		if err := jobsFile.commit(); err != nil {
			return fmt.Errorf("sim: --jobs-out: %w", err)
		}
		fmt.Fprintf(e.stderr, "sim: wrote %d rows (%d jobs × %d policies) to %s\n", len(w.Jobs)*len(pols), len(w.Jobs), len(pols), *jobsOut)
	}
	if *asJSON {
		return json.NewEncoder(e.stdout).Encode(out)
	}
	queue := "blocking queue"
	if *backfill {
		queue = "backfill"
	}
	fmt.Fprintf(e.stdout, "%s (%s): %d jobs replayed on %s, %s\n", *path, tr.Format, out.NJobs, clusterString(w.VCs), queue)
	if n := sumCounts(w.Skipped); n > 0 {
		fmt.Fprintf(e.stdout, "  %d of the trace's %d jobs left out (%s)\n", n, len(tr.Jobs), skippedString(w))
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tavg JCT s\tavg queue s\tp99 queue s\tavg bounded slowdown\tgap closed (sjf)\tgap closed (sjf-gpu)\treplay s\t")
	percentOrDash := func(g *float64) string {
		if g == nil {
			return "-"
		}
		return fmt.Sprintf("%.1f%%", 100**g)
	}
	for _, p := range pols {
		r := out.Policies[string(p)]
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.0f\t%.2f\t%s\t%s\t%.2f\t\n", p, r.AvgJCT, r.AvgQueue, r.P99Queue, r.AvgBoundedSlowdown, percentOrDash(r.GapClosed), percentOrDash(r.GapClosedGPU), r.ElapsedS)
	}
	return tw.Flush()
}

// addGapsClosed sets each policy's share of the FIFO → oracle gap in average
// JCT, against sjf (GapClosed) and against sjf-gpu (GapClosedGPU), for the
// oracles that ran with FIFO, leaving the oracles themselves out; QSSF's are
// also the output's own.
func addGapsClosed(out *simOutput) {
	fifo, ok := out.Policies[string(replay.FIFO)]
	if !ok {
		return
	}
	for _, o := range []replay.Policy{replay.SJF, replay.SJFGPU} {
		oracle, ok := out.Policies[string(o)]
		if !ok {
			continue
		}
		for name, r := range out.Policies {
			g := replay.GapClosed(fifo.AvgJCT, oracle.AvgJCT, r.AvgJCT)
			if math.IsNaN(g) || name == string(replay.FIFO) || name == string(replay.SJF) || name == string(replay.SJFGPU) {
				continue
			}
			if o == replay.SJF {
				r.GapClosed = &g
			} else {
				r.GapClosedGPU = &g
			}
			out.Policies[name] = r
			if name == string(replay.QSSF) {
				out.GapClosed, out.GapClosedGPU = r.GapClosed, r.GapClosedGPU
			}
		}
	}
}

// skippedWarnShare is the share of a trace's jobs left out of a replay
// above which sim warns that its figures describe only the rest.
const skippedWarnShare = 0.1

// warnSkipped warns on stderr when a replay leaves out more than
// skippedWarnShare of the trace's jobs: a cluster too small for them (or
// a VC file that misses theirs, which it names) changes what the figures
// mean.
func warnSkipped(e *env, traceJobs int, w *replay.Workload) {
	n := sumCounts(w.Skipped)
	if traceJobs == 0 || float64(n) <= skippedWarnShare*float64(traceJobs) {
		return
	}
	fmt.Fprintf(e.stderr, "sim: warning: %d of the trace's %d jobs (%.0f%%) are left out (%s); the figures describe the other %d only. Is the cluster (--nodes, --gpus-per-node, --vcs) the trace's?\n",
		n, traceJobs, 100*float64(n)/float64(traceJobs), skippedString(w), traceJobs-n)
}

func parsePolicies(s string) ([]replay.Policy, error) {
	var out []replay.Policy
	for _, name := range strings.Split(s, ",") {
		p, err := replay.ParsePolicy(strings.TrimSpace(name))
		if err != nil {
			return nil, fmt.Errorf("sim: --policy: %w", err)
		}
		for _, q := range out {
			if q == p {
				return nil, fmt.Errorf("sim: --policy: %s given twice", p)
			}
		}
		out = append(out, p)
	}
	return out, nil
}

func clusterString(vcs []replay.VC) string {
	var parts []string
	for _, v := range vcs {
		parts = append(parts, fmt.Sprintf("%s %d×%d", v.Name, v.Nodes, v.GPUsPerNode))
	}
	return strings.Join(parts, ", ")
}
