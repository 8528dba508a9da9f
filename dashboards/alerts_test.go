package dashboards

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/heliostat-dev/heliostat/internal/promtest"
)

// ruleFile is a Prometheus rule file, as far as alerts.yaml uses it.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []rule `yaml:"rules"`
	} `yaml:"groups"`
}

type rule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func loadAlerts(t *testing.T) []rule {
	t.Helper()
	b, err := os.ReadFile("alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	var rules []rule
	groups := map[string]bool{}
	for _, g := range f.Groups {
		if g.Name == "" || groups[g.Name] || len(g.Rules) == 0 {
			t.Errorf("alerts.yaml: group %q: want a unique name and rules", g.Name)
		}
		groups[g.Name] = true
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		t.Fatal("alerts.yaml has no rules")
	}
	return rules
}

var (
	alertName      = regexp.MustCompile(`^Heliostat[A-Z][A-Za-z0-9]*$`)
	templateLabel  = regexp.MustCompile(`\$labels\.([A-Za-z_][A-Za-z0-9_]*)`)
	templateAction = regexp.MustCompile(`\{\{[^}]*\}\}`)
	aggregation    = regexp.MustCompile(`\b(sum|min|max|avg|count)\s*(by\s*\(([^)]*)\))?\s*\(`)
	// upSelector matches each selector of up; heliostatUp those that
	// select heliostat's scrape jobs only: all of them, or one by name.
	upSelector  = regexp.MustCompile(`\bup\b(\{[^}]*\})?`)
	heliostatUp = regexp.MustCompile(`^up\{job(=~"heliostat-\.\*"|="(heliostat-[a-z-]+)")\}$`)
)

// TestAlertsStructure checks alerts.yaml without a server: a Prometheus
// rule file whose alerts have unique Heliostat… names, an expression that
// selects heliostat metrics only (up only for the scrape jobs of
// deploy/prometheus/scrape.yaml), a valid "for", a severity, and a summary
// and description whose templates use only $value and labels the
// expression keeps.
func TestAlertsStructure(t *testing.T) {
	names := map[string]bool{}
	jobs := scrapeJobs(t)
	for _, r := range loadAlerts(t) {
		if !alertName.MatchString(r.Alert) || names[r.Alert] {
			t.Errorf("alert %q: want a unique name matching %s", r.Alert, alertName)
		}
		names[r.Alert] = true
		metrics, _, err := promQLNames(r.Expr)
		if err != nil || strings.TrimSpace(r.Expr) == "" {
			t.Errorf("%s: expr %q: %v", r.Alert, r.Expr, err)
		}
		if slices.Contains(metrics, "up") {
			for _, sel := range upSelector.FindAllString(r.Expr, -1) {
				m := heliostatUp.FindStringSubmatch(sel)
				switch {
				case m == nil:
					t.Errorf("%s: expr %q reads up of other scrape jobs than heliostat's (%s); select up{job=~\"heliostat-.*\"} or up{job=\"heliostat-…\"}", r.Alert, r.Expr, sel)
				case m[2] != "" && !slices.ContainsFunc(jobs, func(j promtest.Job) bool { return j.Name == m[2] }):
					t.Errorf("%s: expr %q selects scrape job %s, which deploy/prometheus/scrape.yaml does not define", r.Alert, r.Expr, m[2])
				}
			}
		}
		if r.For != "" {
			if d, err := time.ParseDuration(r.For); err != nil || d <= 0 {
				t.Errorf("%s: for %q is not a positive duration", r.Alert, r.For)
			}
		}
		if sev := r.Labels["severity"]; !slices.Contains([]string{"critical", "warning", "info"}, sev) {
			t.Errorf("%s: severity %q; want critical, warning or info", r.Alert, sev)
		}
		for _, k := range []string{"summary", "description"} {
			if strings.TrimSpace(r.Annotations[k]) == "" {
				t.Errorf("%s: annotation %s is missing", r.Alert, k)
			}
		}
		kept, all := keptLabels(r.Expr)
		for _, a := range r.Annotations {
			for _, act := range templateAction.FindAllString(a, -1) {
				if !strings.Contains(act, "$value") && !strings.Contains(act, "$labels.") {
					t.Errorf("%s: template %s uses neither $value nor $labels", r.Alert, act)
				}
			}
			for _, m := range templateLabel.FindAllStringSubmatch(a, -1) {
				if !all && !kept[m[1]] {
					t.Errorf("%s: the annotation uses $labels.%s, which the aggregation in %q drops", r.Alert, m[1], r.Expr)
				}
			}
		}
	}
}

// keptLabels returns the labels an expression's result keeps when its
// outermost aggregations group by a list (all false), or all true when it
// does not aggregate (every label of the series is kept).
func keptLabels(expr string) (kept map[string]bool, all bool) {
	ms := aggregation.FindAllStringSubmatch(expr, -1)
	if len(ms) == 0 {
		return nil, true
	}
	kept = map[string]bool{}
	for _, m := range ms {
		for _, l := range strings.Split(m[3], ",") {
			if l = strings.TrimSpace(l); l != "" {
				kept[l] = true
			}
		}
	}
	return kept, false
}

// checkAlerts checks each alert's metrics and labels against the metric
// families the components expose; labels a template reads must be on one
// of the metrics (or be added by the scrape).
func checkAlerts(t *testing.T, families map[string]family) {
	checked := 0
	for _, r := range loadAlerts(t) {
		var read []string // labels the templates read
		for _, a := range r.Annotations {
			for _, m := range templateLabel.FindAllStringSubmatch(a, -1) {
				read = append(read, m[1])
			}
		}
		checked += checkExpr(t, families, "alert "+r.Alert, r.Expr, read...)
	}
	t.Logf("alerts: %d metric references checked", checked)
}

// ruleTests is a promtool rule test file, as far as alerts_test.yaml uses
// it.
type ruleTests struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		Name  string `yaml:"name"`
		Cases []struct {
			EvalTime  string `yaml:"eval_time"`
			AlertName string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

// TestAlertRules has Prometheus's promtool check alerts.yaml (expressions,
// durations, templates) and run the unit tests of alerts_test.yaml, which
// must test every alert both firing and silent. promtool compares the
// annotations whole, so the tests run on a copy of alerts.yaml without the
// descriptions: they check the summaries as rendered. It also checks
// deploy/prometheus/scrape.yaml as a Prometheus config loading alerts.yaml,
// with job names that the HeliostatComponentDown alert watches.
func TestAlertRules(t *testing.T) {
	rules := loadAlerts(t)
	out, err := promtest.Promtool(t, ".", "check", "rules", "alerts.yaml")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if want := fmt.Sprintf("SUCCESS: %d rules found", len(rules)); !strings.Contains(out, want) {
		t.Errorf("promtool check rules: want %q in\n%s", want, out)
	}

	// Every alert is tested firing and silent.
	b, err := os.ReadFile("alerts_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var tests ruleTests
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&tests); err != nil {
		t.Fatalf("alerts_test.yaml: %v", err)
	}
	if !slices.Equal(tests.RuleFiles, []string{"alerts.yaml"}) {
		t.Errorf("alerts_test.yaml: rule_files %v; want [alerts.yaml]", tests.RuleFiles)
	}
	firing, silent := map[string]int{}, map[string]int{}
	for _, tc := range tests.Tests {
		for _, c := range tc.Cases {
			if len(c.ExpAlerts) > 0 {
				firing[c.AlertName]++
			} else {
				silent[c.AlertName]++
			}
		}
	}
	names := map[string]bool{}
	for _, r := range rules {
		names[r.Alert] = true
		if firing[r.Alert] == 0 || silent[r.Alert] == 0 {
			t.Errorf("alerts_test.yaml tests %s firing in %d cases and silent in %d; want both", r.Alert, firing[r.Alert], silent[r.Alert])
		}
	}
	for n := range firing {
		if !names[n] {
			t.Errorf("alerts_test.yaml tests %s, which alerts.yaml does not define", n)
		}
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "alerts.yaml"), withoutDescriptions(t), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts_test.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := promtest.Promtool(t, dir, "test", "rules", "alerts_test.yaml"); err != nil {
		t.Errorf("%v\n%s", err, out)
	}

	// The scrape jobs, as a config that loads these rules.
	scrape, err := os.ReadFile(filepath.Join("..", "deploy", "prometheus", "scrape.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rulesAbs, err := filepath.Abs("alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(conf, append(fmt.Appendf(nil, "rule_files: [%q]\n", rulesAbs), scrape...), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := promtest.Promtool(t, dir, "check", "config", "prometheus.yml"); err != nil {
		t.Errorf("deploy/prometheus/scrape.yaml: %v\n%s", err, out)
	}
	for _, j := range scrapeJobs(t) {
		if !strings.HasPrefix(j.Name, "heliostat-") {
			t.Errorf("deploy/prometheus/scrape.yaml: job %s is not watched by HeliostatComponentDown (up{job=~\"heliostat-.*\"})", j.Name)
		}
	}
}

// withoutDescriptions is alerts.yaml without the alerts' description
// annotations.
func withoutDescriptions(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var f map[string]any
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	groups, _ := f["groups"].([]any)
	for _, g := range groups {
		rules, _ := g.(map[string]any)["rules"].([]any)
		for _, r := range rules {
			if ann, ok := r.(map[string]any)["annotations"].(map[string]any); ok {
				delete(ann, "description")
			}
		}
	}
	out, err := yaml.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// scrapeJobs returns the jobs of deploy/prometheus/scrape.yaml.
func scrapeJobs(t *testing.T) []promtest.Job {
	t.Helper()
	jobs, err := promtest.ReadScrapeJobs(filepath.Join("..", "deploy", "prometheus", "scrape.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) == 0 {
		t.Fatal("deploy/prometheus/scrape.yaml has no scrape jobs")
	}
	return jobs
}
