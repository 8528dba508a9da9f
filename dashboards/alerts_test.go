package dashboards

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
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
)

// TestAlertsStructure checks alerts.yaml without a server: a Prometheus
// rule file whose alerts have unique Heliostat… names, an expression that
// selects heliostat metrics only (up only for the scrape jobs of
// deploy/prometheus/scrape.yaml), a valid "for", a severity, and a summary
// and description whose templates use only $value and labels the
// expression keeps.
func TestAlertsStructure(t *testing.T) {
	names := map[string]bool{}
	for _, r := range loadAlerts(t) {
		if !alertName.MatchString(r.Alert) || names[r.Alert] {
			t.Errorf("alert %q: want a unique name matching %s", r.Alert, alertName)
		}
		names[r.Alert] = true
		metrics, _, err := promQLNames(r.Expr)
		if err != nil || strings.TrimSpace(r.Expr) == "" {
			t.Errorf("%s: expr %q: %v", r.Alert, r.Expr, err)
		}
		if slices.Contains(metrics, "up") && !strings.Contains(r.Expr, `up{job=~"heliostat-.*"}`) {
			t.Errorf("%s: expr %q reads up of other scrape jobs than heliostat's; select up{job=~\"heliostat-.*\"}", r.Alert, r.Expr)
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
