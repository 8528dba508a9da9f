package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/heliostat-dev/heliostat/actuator/ces"
	"github.com/heliostat-dev/heliostat/predictor/demand"
)

// simCESOutput is what `heliostat sim ces --json` prints: the figures of the
// primary run (heliostat's policy and forecaster at the first wake-up
// latency) at the top level, every run in Runs.
type simCESOutput struct {
	Series    string `json:"series"`
	TestFrom  string `json:"test_from"`
	TestUntil string `json:"test_until"`
	ces.Result
	Runs []ces.Result `json:"runs"`
}

// runSimCES is `heliostat sim ces`: the Cluster Energy Saving replay of a
// node-demand series (ANCHORS.md's protocol), dispatched from `heliostat sim`.
func runSimCES(ctx context.Context, args []string, e *env) error {
	fs := newFlagSet("sim ces", e)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: heliostat sim ces --series FILE [--test-from TIME] [--wake-latency 0s,10m] [--json]

Replays the CES power plan over a node-demand series (time,active[,total] per
minute, e.g. philly_node_sequence.csv) in 10-minute steps: demand is the max
of active within a step; at every step boundary of the test window the
forecaster (trained on everything before the decision, refitted daily, its
upper bound calibrated from its own past errors) and the policy decide, and
the step is scored against the nodes ready at its start. Strictly causal.

One run per --wake-latency value (default both 0 and 10 minutes); with
--compare (default) also the Helios policy (demand + 20 when falling and the
forecast agrees, up on a shortfall) with the same forecaster, and both
policies with the true future (oracle). --json prints one object: the first
latency's heliostat run at the top level (powered_node_util,
baseline_node_util, unmet_demand_events, node_hours_off, transitions_per_day,
wake_latency_s) and every run in "runs".

flags:
`)
		fs.PrintDefaults()
	}
	path := fs.String("series", "", "node-demand series CSV (time, active, total; .csv or .csv.gz), e.g. philly_node_sequence.csv (required)")
	testFrom := fs.String("test-from", demand.DefaultConfig().TestFrom.Format(time.DateOnly), "first decision time (YYYY-MM-DD[ HH:MM:SS], the series' clock); training uses everything before it. Default: ANCHORS.md's CES window start")
	testUntil := fs.String("test-until", demand.DefaultConfig().TestUntil.Format(time.DateOnly), "decisions stop before this time. Default: ANCHORS.md's CES window end (2017-12-14 23:59 included)")
	latencies := fs.String("wake-latency", "0s,10m", "comma-separated wake-up latencies, one run each")
	nodes := fs.Int("nodes", 0, "cluster size; 0: the latest value of the series' total column before --test-from")
	compare := fs.Bool("compare", true, "also run the Helios policy and the oracle forecasts")
	asJSON := fs.Bool("json", false, "print one JSON object on stdout")
	var policy ces.Config
	policy.RegisterFlags(fs)
	var fcfg demand.ForecasterConfig
	fs.DurationVar(&fcfg.Calibration, "forecast.calibration", demand.DefaultCalibration, "span of past forecast errors the upper quantile is taken over")
	fs.DurationVar(&fcfg.VolatilityWindow, "forecast.volatility-window", 0, "scale forecast errors by the mean step change over this window; 0: no scaling")
	fs.DurationVar(&fcfg.Model.RefitEvery, "forecast.refit-every", demand.DefaultRefitEvery, "retrain the forecaster this often on everything before the decision; negative: never (the model trained at --test-from is kept)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("sim ces: unexpected argument %q", fs.Arg(0))
	}
	var err error
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "ces.wake-latency" {
			err = errors.New("sim ces: use --wake-latency (a list, one run each), not --ces.wake-latency")
		}
	})
	if err != nil {
		return err
	}
	if *path == "" {
		return errors.New("sim ces: --series is required")
	}
	from, err := parseSimTime("--test-from", *testFrom)
	if err != nil {
		return err
	}
	until, err := parseSimTime("--test-until", *testUntil)
	if err != nil {
		return err
	}
	var lats []time.Duration
	for _, f := range strings.Split(*latencies, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d < 0 {
			return fmt.Errorf("sim ces: --wake-latency: %q is not a non-negative duration", f)
		}
		lats = append(lats, d)
	}
	if *nodes < 0 {
		return fmt.Errorf("sim ces: --nodes: %d is negative", *nodes)
	}
	if err := policy.Validate(); err != nil {
		return err
	}

	series, err := demand.OpenSeries(*path)
	if err != nil {
		return fmt.Errorf("sim ces: %w", err)
	}

	type run struct{ policy, source string }
	runs := []run{{ces.PolicyHeliostat, ces.ForecastModel}}
	if *compare {
		runs = append(runs, run{ces.PolicyHelios, ces.ForecastModel}, run{ces.PolicyHeliostat, ces.ForecastOracle}, run{ces.PolicyHelios, ces.ForecastOracle})
	}
	out := simCESOutput{Series: *path, TestFrom: from.Format(time.DateTime), TestUntil: until.Format(time.DateTime)}
	for _, lat := range lats {
		for _, r := range runs {
			p := policy
			p.WakeLatency = lat
			start := time.Now()
			res, err := ces.Replay(ctx, series, ces.ReplayConfig{
				Policy: p, Forecaster: fcfg, TestFrom: from, TestUntil: until, Nodes: *nodes,
				PolicyName: r.policy, Source: r.source,
			})
			if err != nil {
				return fmt.Errorf("sim ces: %s policy, %s forecast, wake-up %v: %w", r.policy, r.source, lat, err)
			}
			fmt.Fprintf(e.stderr, "sim ces: %s/%s wake %v: powered_node_util %.4f unmet %d (%v)\n",
				r.policy, r.source, lat, res.PoweredNodeUtil, res.UnmetDemandEvents, time.Since(start).Round(time.Millisecond))
			out.Runs = append(out.Runs, res)
		}
	}
	out.Result = out.Runs[0]
	if *asJSON {
		return json.NewEncoder(e.stdout).Encode(out)
	}
	fmt.Fprintf(e.stdout, "%s: %d steps of 10m, %s .. %s, %d nodes, baseline node utilization %.4f\n",
		*path, out.Steps, out.TestFrom, out.TestUntil, out.Nodes, out.BaselineNodeUtil)
	fmt.Fprintf(e.stdout, "  %-10s %-7s %5s %9s %6s %10s %8s\n", "policy", "fcst", "wake", "util", "unmet", "node-h off", "trans/d")
	for _, r := range out.Runs {
		fmt.Fprintf(e.stdout, "  %-10s %-7s %5s %9.4f %6d %10.0f %8.1f\n", r.Policy, r.Forecast,
			time.Duration(r.WakeLatencyS*float64(time.Second)), r.PoweredNodeUtil, r.UnmetDemandEvents, r.NodeHoursOff, r.TransitionsPerDay)
	}
	return nil
}

// parseSimTime reads a zone-less date or date-time as UTC (the series'
// clock).
func parseSimTime(flagName, v string) (time.Time, error) {
	for _, layout := range []string{time.DateOnly, time.DateTime, "2006-01-02T15:04:05"} {
		if t, err := time.Parse(layout, strings.TrimSpace(v)); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("sim ces: %s: %q is not a time like 2017-12-01 or 2017-12-01 00:00:00", flagName, v)
}
