package dashboards

import (
	"context"
	"maps"
	"net/http/httptest"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/heliostat-dev/heliostat/internal/promtest"
)

// scrapeJob is the job of deploy/prometheus/scrape.yaml that scrapes each
// seeded component's registry.
var scrapeJob = map[string]string{
	"collector":                "heliostat-collector",
	"collector --source sim":   "heliostat-collector",
	"collector --source slurm": "heliostat-slurm-source",
	"ingest":                   "heliostat-ingest",
	"analytics":                "heliostat-analytics",
	"predictor":                "heliostat-predictor",
	"actuator":                 "heliostat-actuator",
}

// grafanaRanges sets the range variables Grafana interpolates into
// Prometheus queries: $__rate_interval as Grafana computes it for a short
// range at this test's 1s scrape interval (four scrape intervals), and
// $__range for a dashboard showing the last hour.
var grafanaRanges = strings.NewReplacer("$__rate_interval", "4s", "$__range", "1h")

// partsQuery is the Parts panel's query of pipeline.json: each scraped
// part's readiness with its version.
const partsQuery = `max by (job, instance, version) (heliostat_ready * on (job, instance) group_left (version) heliostat_build_info)`

// vectorSelector matches a metric and its label matchers in an expression.
var vectorSelector = regexp.MustCompile(`\b(heliostat_[a-z0-9_]+|up)(\{[^}]*\})?`)

// emptyWhenHealthy are the panel queries that return no series while the
// pipeline is healthy, and why.
var emptyWhenHealthy = map[string]string{
	`count by (source) (heliostat_collector_collect_success == 0)`: "no source failed its last tick",
	`count by (instance) (heliostat_collector_nvml_gpu_lost == 1)`: "every GPU answers NVML",
}

// checkPrometheusServer has a real Prometheus scrape the seeded components'
// registries under the jobs of deploy/prometheus/scrape.yaml and load
// alerts.yaml, then evaluates every Prometheus panel query of the
// dashboards and every alert with Prometheus's own engine: each must
// evaluate without error (a parse error, a many-to-many match, a type
// error) and return series unless emptyWhenHealthy explains why not (a
// label value no component sets), every target must be up, the Parts row must show each target
// ready with its version, and with the pipeline healthy no alert may be
// pending or firing.
func (s *seeded) checkPrometheusServer(t *testing.T) {
	var jobs []promtest.Job
	byJob := map[string]int{}
	for _, j := range scrapeJobs(t) {
		byJob[j.Name] = len(jobs)
		jobs = append(jobs, promtest.Job{Name: j.Name})
	}
	comps := make([]string, 0, len(s.registries))
	for c := range s.registries {
		comps = append(comps, c)
	}
	sort.Strings(comps)
	for _, c := range comps {
		job, ok := scrapeJob[c]
		i, known := byJob[job]
		if !ok || !known {
			t.Fatalf("component %q has no scrape job in deploy/prometheus/scrape.yaml (scrapeJob maps it to %q)", c, job)
		}
		srv := httptest.NewServer(promhttp.HandlerFor(s.registries[c], promhttp.HandlerOpts{}))
		t.Cleanup(srv.Close)
		jobs[i].Targets = append(jobs[i].Targets, strings.TrimPrefix(srv.URL, "http://"))
	}
	for _, j := range jobs {
		if len(j.Targets) == 0 {
			t.Errorf("scrape job %s: no seeded component serves it; map one in scrapeJob", j.Name)
		}
	}
	prom := promtest.Start(t, promtest.Config{Jobs: jobs, RuleFiles: []string{"alerts.yaml"}, Interval: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Every target scraped for longer than the rate interval (a rate needs
	// two samples), then every rule evaluated after that.
	var targets []promtest.Target
	var rules []promtest.Rule
	var allScraped time.Time // when every target had been scraped once
	for {
		var err error
		if targets, err = prom.Targets(ctx); err != nil {
			t.Fatal(err)
		}
		if rules, err = prom.AlertingRules(ctx); err != nil {
			t.Fatal(err)
		}
		if allScraped.IsZero() && len(targets) == len(comps) {
			allScraped = time.Now()
			for _, tg := range targets {
				if tg.LastScrape.IsZero() {
					allScraped = time.Time{}
				}
			}
		}
		evaluated := !allScraped.IsZero() && time.Since(allScraped) > 5*time.Second && len(rules) > 0
		for _, r := range rules {
			evaluated = evaluated && r.LastEvaluation.After(allScraped.Add(5*time.Second))
		}
		if evaluated {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("prometheus: targets %+v and rules not all scraped and evaluated within a minute", targets)
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, tg := range targets {
		if tg.Health != "up" {
			t.Errorf("target %s of %s: %s: %s", tg.Instance, tg.Job, tg.Health, tg.LastError)
		}
	}

	// The alerts: all of alerts.yaml loaded, evaluated without error, and
	// none active on a healthy pipeline.
	want := loadAlerts(t)
	if len(rules) != len(want) {
		t.Errorf("prometheus loaded %d alerting rules from alerts.yaml; it defines %d", len(rules), len(want))
	}
	for _, r := range rules {
		if r.Health != "ok" {
			t.Errorf("alert %s: health %s: %s", r.Name, r.Health, r.LastError)
		}
		if r.State != "inactive" {
			var active []string
			for _, a := range r.Alerts {
				active = append(active, a.State+" "+a.Labels["instance"])
			}
			t.Errorf("alert %s is %s on a healthy pipeline: %v", r.Name, r.State, active)
		}
	}

	// Every series an alert selects exists while the pipeline is healthy:
	// increase and rate see no increase in a counter's first sample, so a
	// counter that first appears at 1 would not fire its alert.
	for _, r := range want {
		for _, sel := range vectorSelector.FindAllString(r.Expr, -1) {
			res, err := prom.Query(ctx, sel)
			if err != nil {
				t.Errorf("alert %s: %s: %v", r.Alert, sel, err)
			} else if len(res) == 0 {
				t.Errorf("alert %s: %s has no series on a healthy pipeline", r.Alert, sel)
			}
		}
	}

	// Every panel query, as Grafana would send it.
	evaluated, withData := 0, 0
	for _, d := range loadDashboards(t) {
		for _, p := range d.allPanels() {
			for _, tg := range p.Targets {
				if tg.Datasource == nil || tg.Datasource.Type != pluginPrometheus {
					continue
				}
				expr := grafanaRanges.Replace(tg.Expr)
				if strings.Contains(expr, "$") {
					t.Errorf("%s: %q uses a Grafana variable this test does not set", panelName(d, p), tg.Expr)
					continue
				}
				res, err := prom.Query(ctx, expr)
				if err != nil {
					t.Errorf("%s: %s: %v", panelName(d, p), tg.Expr, err)
					continue
				}
				evaluated++
				if len(res) > 0 {
					withData++
				} else if _, ok := emptyWhenHealthy[tg.Expr]; !ok {
					t.Errorf("%s: %s returns no series: a label value that no component sets, or a metric that is never exported (list it in emptyWhenHealthy if only trouble fills it)", panelName(d, p), expr)
				}
			}
		}
	}
	t.Logf("prometheus: %d targets up, %d alerts evaluated, %d panel queries evaluated, %d of them with series", len(targets), len(rules), evaluated, withData)

	// Each part's row of the Parts panel: ready, with its version.
	res, err := prom.Query(ctx, partsQuery)
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, r := range res {
		if r.Value != 1 || r.Labels["version"] == "" {
			t.Errorf("parts row %v: ready %v; want 1 with a version", r.Labels, r.Value)
		}
		parts = append(parts, r.Labels["instance"])
	}
	if len(parts) != len(targets) {
		t.Errorf("the Parts panel shows %d parts %v; %d targets are scraped", len(parts), parts, len(targets))
	}
	if !slices.Contains(pipelineExprs(t), partsQuery) {
		t.Error("pipeline.json no longer has the Parts query this test checks; update it")
	}
	checkSamplesPanel(ctx, t, prom)
}

// checkSamplesPanel checks that the GPU samples panel has a series for
// every source of GPU samples the seeded collectors run, the simulated
// cluster's included (it counts its samples in heliostat_sim_samples_total,
// not in the collector's counter).
func checkSamplesPanel(ctx context.Context, t *testing.T, prom *promtest.Server) {
	sources, found := map[string]bool{}, false
	for _, d := range loadDashboards(t) {
		for _, p := range d.allPanels() {
			if d.file != "pipeline.json" || p.Title != samplesPanel {
				continue
			}
			found = true
			for _, tg := range p.Targets {
				res, err := prom.Query(ctx, grafanaRanges.Replace(tg.Expr))
				if err != nil {
					t.Fatalf("%s: %s: %v", panelName(d, p), tg.Expr, err)
				}
				for _, r := range res { // the seeded parts have stopped: rates of 0
					sources[r.Labels["source"]] = true
				}
			}
		}
	}
	if !found {
		t.Fatalf("pipeline.json has no panel %q; update this test", samplesPanel)
	}
	for _, src := range []string{"synthetic", "sim"} {
		if !sources[src] {
			t.Errorf("pipeline.json %q shows samples of sources %v; want %q among them", samplesPanel, slices.Sorted(maps.Keys(sources)), src)
		}
	}
}

// samplesPanel is the title of pipeline.json's panel of GPU samples.
const samplesPanel = "GPU samples per second by source"

// pipelineExprs returns the Prometheus queries of pipeline.json.
func pipelineExprs(t *testing.T) []string {
	var out []string
	for _, d := range loadDashboards(t) {
		if d.file != "pipeline.json" {
			continue
		}
		for _, p := range d.allPanels() {
			for _, tg := range p.Targets {
				out = append(out, tg.Expr)
			}
		}
	}
	return out
}
