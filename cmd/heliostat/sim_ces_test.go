package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// TestSimCESCommand runs `sim ces` on Philly with no wake-up delay and checks
// the evaluation interface's fields, the comparison runs and the goal.
func TestSimCESCommand(t *testing.T) {
	skipInCHDBPass(t)
	if testing.Short() {
		t.Skip("replay of the Philly series; skipped with -short")
	}
	path := sharedData(t, "philly/philly_node_sequence.csv")
	var out, errs bytes.Buffer
	e := &env{getenv: func(string) string { return "" }, stdout: &out, stderr: &errs}
	if err := runSimCES(context.Background(), []string{"--series", path, "--test-from", "2017-12-01", "--wake-latency", "0", "--json"}, e); err != nil {
		t.Fatalf("sim ces: %v\n%s", err, errs.String())
	}
	var res struct {
		PoweredNodeUtil   *float64 `json:"powered_node_util"`
		BaselineNodeUtil  *float64 `json:"baseline_node_util"`
		UnmetDemandEvents *int     `json:"unmet_demand_events"`
		NodeHoursOff      *float64 `json:"node_hours_off"`
		TransitionsPerDay *float64 `json:"transitions_per_day"`
		WakeLatencyS      *float64 `json:"wake_latency_s"`
		Runs              []struct {
			Policy   string `json:"policy"`
			Forecast string `json:"forecast"`
		} `json:"runs"`
	}
	dec := json.NewDecoder(&out)
	if err := dec.Decode(&res); err != nil {
		t.Fatalf("decode: %v", err)
	}
	if dec.More() {
		t.Errorf("--json printed more than one object")
	}
	if res.PoweredNodeUtil == nil || res.BaselineNodeUtil == nil || res.UnmetDemandEvents == nil || res.NodeHoursOff == nil ||
		res.TransitionsPerDay == nil || res.WakeLatencyS == nil {
		t.Fatalf("sim ces --json lacks an evaluation field: %+v", res)
	}
	if *res.PoweredNodeUtil < 0.93 || *res.UnmetDemandEvents > 6 || *res.WakeLatencyS != 0 {
		t.Errorf("powered_node_util %.4f unmet %d wake %v; want ≥ 0.93, ≤ 6, 0", *res.PoweredNodeUtil, *res.UnmetDemandEvents, *res.WakeLatencyS)
	}
	var got []string
	for _, r := range res.Runs {
		got = append(got, r.Policy+"/"+r.Forecast)
	}
	if strings.Join(got, " ") != "heliostat/model helios/model heliostat/oracle helios/oracle" {
		t.Errorf("runs %v; want heliostat and helios with model and oracle forecasts", got)
	}
	if !strings.Contains(errs.String(), "helios/oracle") {
		t.Errorf("no progress on stderr: %q", errs.String())
	}
}

func TestSimCESErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{}, "--series is required"},
		{[]string{"--series", "x.csv", "--wake-latency", "soon"}, `--wake-latency: "soon"`},
		{[]string{"--series", "x.csv", "--test-from", "December"}, "--test-from"},
		{[]string{"--series", "x.csv", "--ces.wake-latency", "5m"}, "use --wake-latency"},
		{[]string{"--series", "x.csv", "--ces.quantile", "2"}, "--ces.quantile"},
		{[]string{"--series", "x.csv", "extra"}, "unexpected argument"},
		{[]string{"--series", "/nonexistent/x.csv"}, "no such file"},
	} {
		e := &env{getenv: func(string) string { return "" }, stdout: io.Discard, stderr: io.Discard}
		err := runSimCES(context.Background(), tt.args, e)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("sim ces %v: error %v; want %q", tt.args, err, tt.want)
		}
	}
}

// TestSimCESHelp: the help says what a negative --forecast.refit-every does,
// as --demand.refit-every's does.
func TestSimCESHelp(t *testing.T) {
	var errs bytes.Buffer
	e := &env{getenv: func(string) string { return "" }, stdout: io.Discard, stderr: &errs}
	if err := runSimCES(context.Background(), []string{"-h"}, e); err == nil {
		t.Fatal("sim ces -h: no error")
	}
	_, help, _ := strings.Cut(errs.String(), "-forecast.refit-every")
	help, _, _ = strings.Cut(help, "\n  -")
	if !strings.Contains(help, "negative: never") {
		t.Errorf("sim ces -h: --forecast.refit-every %q; want it to say what a negative value does", help)
	}
}
