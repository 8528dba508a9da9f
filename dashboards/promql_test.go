package dashboards

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func jsonString(raw json.RawMessage, s *string) error { return json.Unmarshal(raw, s) }

var (
	promString   = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	promRange    = regexp.MustCompile(`\[[^\]]*\]`)
	promMatchers = regexp.MustCompile(`\{([^}]*)\}`)
	promMatcher  = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*''`)
	promGrouping = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	promIdent    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	promKeywords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true,
		"group_right": true, "bool": true, "and": true, "or": true, "unless": true, "offset": true, "inf": true, "nan": true}
)

// promQLNames returns the metric names a PromQL expression selects and the
// label names it matches on or groups by. It knows the PromQL that
// dashboards use: function and aggregation calls, by/without/on/ignoring
// clauses, label matchers, range selectors, offsets, numbers and strings.
// Every metric must be one of heliostat's (heliostat_…), or up, which
// Prometheus records for each scrape.
func promQLNames(expr string) (metrics, labels []string, err error) {
	s := promString.ReplaceAllString(expr, "''")
	s = promRange.ReplaceAllString(s, " ")
	for _, m := range promMatchers.FindAllStringSubmatch(s, -1) {
		for _, l := range promMatcher.FindAllStringSubmatch(m[1], -1) {
			labels = append(labels, l[1])
		}
	}
	s = promMatchers.ReplaceAllString(s, " ")
	for _, m := range promGrouping.FindAllStringSubmatch(s, -1) {
		for _, l := range strings.Split(m[2], ",") {
			if l = strings.TrimSpace(l); l != "" {
				labels = append(labels, l)
			}
		}
	}
	s = promGrouping.ReplaceAllString(s, " ")
	for _, loc := range promIdent.FindAllStringIndex(s, -1) {
		id := s[loc[0]:loc[1]]
		if loc[0] > 0 {
			if c := s[loc[0]-1]; c >= '0' && c <= '9' || c == '.' || c == '$' {
				continue // a number's exponent or unit, or a variable
			}
		}
		if promKeywords[strings.ToLower(id)] {
			continue
		}
		if rest := strings.TrimLeft(s[loc[1]:], " \t\n"); strings.HasPrefix(rest, "(") {
			continue // a function or aggregation
		}
		if !strings.HasPrefix(id, "heliostat_") && id != "up" {
			return nil, nil, fmt.Errorf("PromQL %q selects %q, not a heliostat metric", expr, id)
		}
		if !slices.Contains(metrics, id) {
			metrics = append(metrics, id)
		}
	}
	slices.Sort(labels)
	return metrics, slices.Compact(labels), nil
}

func TestPromQLNames(t *testing.T) {
	tests := []struct {
		expr            string
		metrics, labels []string
		err             bool
	}{
		{expr: `sum by (table) (rate(heliostat_ingest_rows_total[$__rate_interval]))`, metrics: []string{"heliostat_ingest_rows_total"}, labels: []string{"table"}},
		{expr: `histogram_quantile(0.99, sum by (le, table) (rate(heliostat_ingest_batch_duration_seconds_bucket{table=~"gpu.*"}[5m])))`,
			metrics: []string{"heliostat_ingest_batch_duration_seconds_bucket"}, labels: []string{"le", "table"}},
		{expr: `sum(increase(heliostat_ingest_messages_total{outcome="deadletter", topic!="x"}[$__range])) or vector(0)`,
			metrics: []string{"heliostat_ingest_messages_total"}, labels: []string{"outcome", "topic"}},
		{expr: `time() - max(heliostat_analytics_last_success_timestamp_seconds) > 1e3`, metrics: []string{"heliostat_analytics_last_success_timestamp_seconds"}},
		{expr: `heliostat_a / on (instance) group_left heliostat_b offset 5m`, metrics: []string{"heliostat_a", "heliostat_b"}, labels: []string{"instance"}},
		{expr: `up{job=~"heliostat-.*"} == 0`, metrics: []string{"up"}, labels: []string{"job"}},
		{expr: `rate(node_cpu_seconds_total[5m])`, err: true},
	}
	for _, tc := range tests {
		m, l, err := promQLNames(tc.expr)
		if tc.err {
			if err == nil {
				t.Errorf("promQLNames(%q) = %v, %v; want an error", tc.expr, m, l)
			}
			continue
		}
		if err != nil || !slices.Equal(m, tc.metrics) || !slices.Equal(l, tc.labels) {
			t.Errorf("promQLNames(%q) = %v, %v, %v; want %v, %v", tc.expr, m, l, err, tc.metrics, tc.labels)
		}
	}
}
