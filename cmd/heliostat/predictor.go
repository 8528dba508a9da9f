package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/heliostat-dev/heliostat/ingest/trace"
	"github.com/heliostat-dev/heliostat/predictor/demand"
	"github.com/heliostat-dev/heliostat/predictor/duration"
)

func runPredictor(ctx context.Context, args []string, e *env) error {
	if len(args) > 0 {
		switch args[0] {
		case "backtest":
			return runBacktest(ctx, args[1:], e)
		case "backtest-demand":
			return runBacktestDemand(ctx, args[1:], e)
		case "run":
			return runPredictorRun(ctx, args[1:], e)
		}
	}
	return subcommandUsage(e, "predictor", args, form{"predictor backtest --trace FILE", "job durations"},
		form{"predictor backtest-demand --series FILE", "node demand"}, form{"predictor run", "the live predictor"})
}

// backtestOutput is the JSON of `predictor backtest`: the figures of DESIGN.md
// at the top level (heliostat's, or the --baseline's), the rest beside them.
type backtestOutput struct {
	Trace    string `json:"trace"`
	Format   string `json:"format"`
	Jobs     int    `json:"jobs"`
	Rejected int    `json:"rejected"`
	// Reasons counts the rejected rows by reason; Errors are the first
	// shownRejects of them, as in import's JSON.
	Reasons map[string]int `json:"reasons"`
	Errors  []rejectedRow  `json:"errors"`
	Model   string         `json:"model"`
	duration.Result
}

func runBacktest(ctx context.Context, args []string, e *env) error {
	fs := newFlagSet("predictor backtest", e)
	path := fs.String("trace", "", "trace file (.swf, .swf.gz, Helios .csv)")
	format := fs.String("format", "", "swf or helios (default: from the file name)")
	trainFrac := fs.Float64("train-frac", 0.7, "chronological share of jobs used for training")
	baseline := fs.String("baseline", "", "report a baseline at the top level instead of heliostat's model: reqtime, last1 or last2 (cold_start, segments and error_by_run_time stay heliostat's)")
	refit := fs.Int("refit-every", 5000, "refit after this many more test jobs have ended (negative: never)")
	adapt := fs.Float64("adapt-rate", duration.DefaultAdaptRate, "step per ended test job of the online interval correction, in log space (negative: off)")
	jobsOut := fs.String("jobs-out", "", "also write every test job to this CSV file, in submit order (job, user, queue, submit, procs, req_s, segment, fitted, predicted_s, lower_s, upper_s, actual_s, log_ratio, within_2x), for per-job analysis of the errors")
	asJSON := fs.Bool("json", false, "print one JSON object on stdout")
	every := progressFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("predictor backtest: unexpected argument %q (one trace, given with --trace)", fs.Arg(0))
	}
	if *path == "" {
		return fmt.Errorf("predictor backtest: --trace is required")
	}
	if err := refuseZero(fs, "train-frac", "refit-every", "adapt-rate"); err != nil {
		return fmt.Errorf("predictor backtest: %w", err)
	}
	// Checked before the trace is read: the backtest takes half a minute.
	if err := checkBaseline(*baseline); err != nil {
		return err
	}
	prog, err := newProgress("predictor backtest", e.stderr, *every)
	if err != nil {
		return err
	}
	var (
		jobsFile *outFile
		perJob   *backtestJobs
	)
	if *jobsOut != "" {
		if jobsFile, err = createOut(*jobsOut); err != nil {
			return fmt.Errorf("predictor backtest: --jobs-out: %w", err)
		}
		defer jobsFile.discard()
		perJob = newBacktestJobs(jobsFile)
	}
	tr, err := trace.Open(*path, *format)
	if err != nil {
		return err
	}
	rejects := printRejects(e.stderr, *path, tr)
	jobs := durationJobs(tr)
	cfg := duration.BacktestConfig{TrainFrac: *trainFrac, RefitEvery: *refit, AdaptRate: *adapt,
		Progress: func(p duration.BacktestProgress) {
			prog.printf("predictor backtest: %d of %d jobs (%d%%), refits so far: %d", p.Done, p.Total, percent(p.Done, p.Total), p.Refits)
		}}
	if perJob != nil {
		cfg.OnPredict = perJob.add
	}
	res, err := duration.Backtest(ctx, jobs, cfg)
	if err != nil {
		return fmt.Errorf("predictor backtest %s: %w", *path, err)
	}
	if perJob != nil {
		if err := perJob.finish(); err != nil {
			return fmt.Errorf("predictor backtest: --jobs-out %s: %w", *jobsOut, err)
		}
		if err := jobsFile.commit(); err != nil {
			return fmt.Errorf("predictor backtest: --jobs-out: %w", err)
		}
		fmt.Fprintf(e.stderr, "predictor backtest: wrote %d test jobs to %s\n", perJob.n, *jobsOut)
	}
	out := backtestOutput{Trace: *path, Format: tr.Format, Jobs: len(tr.Jobs), Rejected: tr.Rejected, Reasons: tr.Reasons, Errors: rejects,
		Model: "heliostat", Result: res}
	if *baseline != "" {
		out.Model, out.Metrics = *baseline, res.Baselines[*baseline]
	}
	if *asJSON {
		return json.NewEncoder(e.stdout).Encode(out)
	}
	fmt.Fprintf(e.stdout, "%s: %d jobs (%d rejected), %d train / %d test, model %s\n", *path, out.Jobs, out.Rejected, res.NTrain, res.NTest, out.Model)
	fmt.Fprintf(e.stdout, "  %-10s within 2x %.3f  R² (log) %6.3f  MAE %8.0f s\n", "heliostat", res.Within2x, res.R2Log, res.MAES)
	for _, name := range backtestBaselines() {
		m := res.Baselines[name]
		fmt.Fprintf(e.stdout, "  %-10s within 2x %.3f  R² (log) %6.3f  MAE %8.0f s\n", name, m.Within2x, m.R2Log, m.MAES)
	}
	if limited := withLimit(jobs); limited < len(jobs) {
		// The baselines fall back to the limit, then to the training jobs'
		// median run time: say so where that is what was scored.
		what := "none of its jobs has a time limit"
		if limited > 0 {
			what = fmt.Sprintf("%d of its %d jobs have no time limit", len(jobs)-limited, len(jobs))
		}
		fmt.Fprintf(e.stdout, "  (the trace: %s; reqtime for those, and last1/last2 for a user's first job, is the training jobs' median run time)\n", what)
	}
	fmt.Fprintf(e.stdout, "  heliostat on cold starts: %d jobs, within 2x %.3f\n", res.Cold.N, res.Cold.Within2x)
	fmt.Fprintf(e.stdout, "  heliostat by history at submit (segment: jobs, within 2x, 80%% interval coverage, median upper/lower):\n")
	for s := duration.SegExact; s <= duration.SegCold; s++ {
		if m, ok := res.Segments[s.String()]; ok && m.IntervalCoverage != nil && m.IntervalRatio != nil {
			fmt.Fprintf(e.stdout, "    %-6s %7d  %.3f  %.3f  %.1f\n", s, m.N, m.Within2x, *m.IntervalCoverage, *m.IntervalRatio)
		}
	}
	fmt.Fprintf(e.stdout, "  heliostat by true run time (range: jobs, within 2x, share of the squared log error, of it over-predicted):\n")
	for _, b := range res.ByRunTime {
		fmt.Fprintf(e.stdout, "    %-6s %7d  %.3f  %.3f  %.3f\n", b.Bucket, b.N, b.Within2x, b.SSEShare, b.OverSSEShare)
	}
	return nil
}

// backtestBaselines are the values of predictor backtest --baseline, the
// keys of duration.Result.Baselines.
func backtestBaselines() []string { return []string{"reqtime", "last1", "last2"} }

// checkBaseline returns an error naming --baseline unless name is "" or one
// of backtestBaselines.
func checkBaseline(name string) error {
	if name == "" || slices.Contains(backtestBaselines(), name) {
		return nil
	}
	return fmt.Errorf("predictor backtest: --baseline %q: want reqtime, last1 or last2", name)
}

// withLimit counts the jobs that carry a time limit.
func withLimit(jobs []duration.Job) int {
	n := 0
	for i := range jobs {
		if jobs[i].ReqTime > 0 {
			n++
		}
	}
	return n
}

// durationJobs maps a trace's jobs to what the predictor knows at submit time.
// A job without a known start ends, for history purposes, at submit + run:
// the earliest it could have ended (trace slices such as Venus' carry no
// queueing times).
func durationJobs(tr *trace.Trace) []duration.Job {
	out := make([]duration.Job, 0, len(tr.Jobs))
	for i := range tr.Jobs {
		t := &tr.Jobs[i]
		if t.Run <= 0 {
			continue
		}
		j := duration.Job{ID: t.ID, User: t.User, Executable: t.Executable, Queue: t.Queue, Submit: t.Submit, ReqTime: t.ReqTime, Run: t.Run, Mem: t.ReqMem}
		switch {
		case t.GPUs > 0:
			j.Procs = t.GPUs
		case t.ReqProcs > 0:
			j.Procs = t.ReqProcs
		default:
			j.Procs = t.Procs
		}
		switch {
		case !t.End.IsZero():
			j.End = t.End
		case !t.Start.IsZero():
			j.End = t.Start.Add(t.Run)
		case t.Wait >= 0:
			j.End = t.Submit.Add(t.Wait + t.Run)
		default:
			j.End = t.Submit.Add(t.Run)
		}
		out = append(out, j)
	}
	return out
}

func runBacktestDemand(ctx context.Context, args []string, e *env) error {
	fs := newFlagSet("predictor backtest-demand", e)
	path := fs.String("series", "", "node-demand series CSV (time, active, total; .csv or .csv.gz), e.g. philly_node_sequence.csv")
	var cfg demand.Config
	cfg.RegisterFlags(fs)
	// --test-from is the evaluation interface's name for --demand.test-from.
	fs.Var(fs.Lookup("demand.test-from").Value, "test-from", "first decision time of the backtest (alias of --demand.test-from)")
	fs.Var(fs.Lookup("demand.test-until").Value, "test-until", "the backtest takes decisions before this time (alias of --demand.test-until, the name sim ces uses)")
	asJSON := fs.Bool("json", false, "print one JSON object on stdout")
	every := progressFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("predictor backtest-demand: unexpected argument %q (one series, given with --series)", fs.Arg(0))
	}
	if *path == "" {
		return fmt.Errorf("predictor backtest-demand: --series is required")
	}
	if err := refuseZero(fs, "horizon", "demand.step", "demand.refit-every", "demand.ridge"); err != nil {
		return fmt.Errorf("predictor backtest-demand: %w", err)
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	prog, err := newProgress("predictor backtest-demand", e.stderr, *every)
	if err != nil {
		return err
	}
	series, err := demand.OpenSeries(*path)
	if err != nil {
		return fmt.Errorf("predictor backtest-demand: %w", err)
	}
	res, err := cfg.Backtest(ctx, series, func(p demand.BacktestProgress) {
		prog.printf("predictor backtest-demand: %d of %d decisions (%d%%), models trained: %d", p.Done, p.Total, percent(p.Done, p.Total), p.Refits)
	})
	if err != nil {
		return fmt.Errorf("predictor backtest-demand %s: %w", *path, err)
	}
	if *asJSON {
		return json.NewEncoder(e.stdout).Encode(res)
	}
	fmt.Fprintf(e.stdout, "%s: %d forecasts %s ahead in %s steps, %s .. %s\n", *path, res.N, res.Horizon, res.Step,
		res.TestFrom.Format("2006-01-02 15:04"), res.TestUntil.Format("2006-01-02 15:04"))
	fmt.Fprintf(e.stdout, "  %-10s RMSE %6.2f nodes  sMAPE %.4f\n", "heliostat", res.RMSENodes, res.SMAPE)
	for _, name := range []string{"last", "day_ago"} {
		m := res.Baselines[name]
		fmt.Fprintf(e.stdout, "  %-10s RMSE %6.2f nodes  sMAPE %.4f\n", name, m.RMSENodes, m.SMAPE)
	}
	return nil
}
