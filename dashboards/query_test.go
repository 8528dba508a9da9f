package dashboards

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
)

// TestPanels seeds a ClickHouse database through heliostat's pipeline (see
// seed), then runs every ClickHouse query of every dashboard — variable
// queries and panel targets — as Grafana and the plugin would send it, under
// three choices of the variables: everything "All", the first option of
// each, and the first two of each. Every query must succeed and return the
// columns its panel refers to (a time column for a time series); with every
// variable at All it must return rows holding data (not only zeros and
// NULLs, which an aggregate over nothing returns), and no choice may empty
// every panel.
// The panels that bound their submit times (submitBounds) must return the
// same rows without the bound.
// Then every Prometheus metric a panel names must be exposed by the
// components' registries, with the labels the query uses, and those
// registries must pass promlint; and a real Prometheus scraping them must
// evaluate every panel query and alert (checkPrometheusServer).
func TestPanels(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ClickHouse and a broker and runs the pipeline; skipped with -short")
	}
	s := seed(t)
	for _, d := range loadDashboards(t) {
		t.Run(strings.TrimSuffix(d.file, ".json"), func(t *testing.T) {
			for _, choice := range []string{"all", "first", "first two"} {
				sel := s.selectVariables(t, d, choice)
				if t.Failed() {
					return
				}
				queried, empty := 0, 0
				for _, p := range d.allPanels() {
					q, e := s.checkClickHousePanel(t, d, p, sel, choice)
					queried += q
					empty += e
				}
				// A filtered view may leave some panels empty (a host without
				// device events), not all of them: that is a broken filter.
				if queried > 0 && empty == queried {
					t.Errorf("%s: every ClickHouse query returned no rows with the variables at %s", d.file, choice)
				}
				t.Logf("%s, variables at %s: %d ClickHouse queries, %d without rows", d.file, choice, queried, empty)
			}
		})
	}
	// On the pipeline's own rows (superseded PENDING and RUNNING rows
	// among them), a panel's submit-time bound must not change its answer,
	// whether the bound reads every cluster or the one selected.
	t.Run("submit bounds", func(t *testing.T) {
		s.checkSubmitBounds(t, s.boundedQueries(t, nil), "seeded, all clusters")
		s.checkSubmitBounds(t, s.boundedQueries(t, map[string][]string{"cluster": {seedCluster}}), "seeded, cluster "+seedCluster)
	})
	t.Run("prometheus", func(t *testing.T) { s.checkPrometheus(t) })
	t.Run("prometheus server", func(t *testing.T) { s.checkPrometheusServer(t) })
}

var dumpDir = flag.String("dump", "", "write every panel query (expanded) and its first rows to files in this directory, for review")

// result is what a query returned.
type result struct {
	columns []string
	types   []string
	rows    int
	data    bool       // some cell holds a value: non-zero, non-empty, not NULL or NaN
	first   [][]string // the first rows, formatted, when dumping
}

// holdsValue reports whether a scanned cell holds a value: a number other
// than 0 or NaN, a non-empty string or array, a time after 1970-01-02.
func holdsValue(v reflect.Value) bool {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return false
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() != 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return v.Uint() != 0
	case reflect.Float32, reflect.Float64:
		return v.Float() != 0 && !math.IsNaN(v.Float())
	case reflect.String, reflect.Slice, reflect.Map:
		return v.Len() > 0
	}
	if t, ok := v.Interface().(time.Time); ok {
		return t.After(time.Unix(86400, 0))
	}
	return true
}

func (s *seeded) query(sql string) (result, error) {
	rows, err := s.grafana.Query(context.Background(), sql)
	if err != nil {
		return result{}, err
	}
	defer rows.Close()
	var r result
	r.columns = rows.Columns()
	for _, ct := range rows.ColumnTypes() {
		r.types = append(r.types, ct.DatabaseTypeName())
	}
	types := rows.ColumnTypes()
	for rows.Next() {
		r.rows++
		vals := make([]any, len(r.columns))
		for i, ct := range types {
			vals[i] = reflect.New(ct.ScanType()).Interface()
		}
		if err := rows.Scan(vals...); err != nil {
			return r, err
		}
		for _, v := range vals {
			r.data = r.data || holdsValue(reflect.ValueOf(v))
		}
		if *dumpDir == "" || r.rows > 20 {
			continue
		}
		line := make([]string, len(vals))
		for i, v := range vals {
			line[i] = fmt.Sprint(reflect.ValueOf(v).Elem().Interface())
		}
		r.first = append(r.first, line)
	}
	return r, rows.Err()
}

// dump writes a query and its result for review (-dump).
func dump(name, sql string, r result) {
	if *dumpDir == "" {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n%s\n\n%d rows\n%s\n", name, sql, r.rows, strings.Join(r.columns, "\t"))
	for _, l := range r.first {
		b.WriteString(strings.Join(l, "\t") + "\n")
	}
	file := strings.NewReplacer("/", "_", " ", "_", "\"", "", "#", "-").Replace(name) + ".txt"
	_ = os.MkdirAll(*dumpDir, 0o755)
	_ = os.WriteFile(filepath.Join(*dumpDir, file), []byte(b.String()), 0o644)
}

// expand turns a query's text into what ClickHouse receives.
func (s *seeded) expand(d *dashboard, sql string, sel map[string]selection) (string, error) {
	vars := map[string]variable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	out, err := interpolate(sql, vars, sel)
	if err != nil {
		return "", err
	}
	return expandMacros(out, s.from, s.to)
}

// selectVariables evaluates the dashboard's variables in order, as Grafana
// does, and selects for each: All ("all", when the variable has it) or its
// first one or two options. A query variable must have options.
func (s *seeded) selectVariables(t *testing.T, d *dashboard, choice string) map[string]selection {
	t.Helper()
	sel := map[string]selection{}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, err := v.sql()
		if err != nil {
			t.Fatal(err)
		}
		sql, err := s.expand(d, q, sel)
		if err != nil {
			t.Errorf("variable %s (%s): %v", v.Name, choice, err)
			return nil
		}
		opts, err := s.options(sql)
		if err != nil {
			t.Errorf("variable %s (%s): %v\n%s", v.Name, choice, err, sql)
			return nil
		}
		if len(opts) == 0 {
			t.Errorf("variable %s (%s): no options on the seeded data\n%s", v.Name, choice, sql)
			return nil
		}
		cur := selection{options: opts}
		switch {
		case choice == "all" && v.IncludeAll:
			cur.all = true
		case choice == "first two" && v.Multi && len(opts) > 1:
			cur.values = opts[:2]
		default:
			cur.values = opts[:1]
		}
		sel[v.Name] = cur
	}
	return sel
}

// options runs a variable query: the first column holds the values (a
// second, if any, the texts shown).
func (s *seeded) options(sql string) ([]string, error) {
	rows, err := s.grafana.Query(context.Background(), sql)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	types := rows.ColumnTypes()
	for rows.Next() {
		vals := make([]any, len(types))
		var v string
		vals[0] = &v
		for i := 1; i < len(types); i++ {
			vals[i] = reflect.New(types[i].ScanType()).Interface()
		}
		if err := rows.Scan(vals...); err != nil {
			return nil, fmt.Errorf("want a String first column: %w", err)
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// checkClickHousePanel runs a panel's ClickHouse queries with the variables
// at sel and checks their columns; with every variable at All ("all") they
// must return rows. It returns how many queries ran and how many returned
// no rows.
func (s *seeded) checkClickHousePanel(t *testing.T, d *dashboard, p panel, sel map[string]selection, choice string) (queried, empty int) {
	t.Helper()
	name := panelName(d, p)
	got := map[string]bool{}
	ran := false
	for _, tg := range p.Targets {
		if tg.Datasource == nil || tg.Datasource.Type != pluginClickHouse || tg.Hide {
			continue
		}
		ran = true
		queried++
		sql, err := s.expand(d, tg.RawSQL, sel)
		if err != nil {
			t.Errorf("%s (%s): %v", name, choice, err)
			continue
		}
		r, err := s.query(sql)
		if err != nil {
			t.Errorf("%s target %s (%s): %v\n%s", name, tg.RefID, choice, err, sql)
			continue
		}
		if choice == "all" {
			dump(name+" "+tg.RefID, sql, r)
		}
		if r.rows == 0 || !r.data {
			empty++
			if choice == "all" {
				t.Errorf("%s target %s (%s): no rows, or only zeros and NULLs, on the seeded data\n%s", name, tg.RefID, choice, sql)
			}
		}
		// Over HTTP (HELIOSTAT_TEST_CLICKHOUSE=chdb) an empty result
		// comes without its columns' names and types.
		if tg.QueryType == "timeseries" && len(r.types) > 0 && !slices.ContainsFunc(r.types, func(ty string) bool { return strings.HasPrefix(ty, "DateTime") }) {
			t.Errorf("%s target %s: a time series without a DateTime column (columns %v, types %v)", name, tg.RefID, r.columns, r.types)
		}
		for _, c := range r.columns {
			got[c] = true
		}
	}
	if !ran {
		return queried, empty
	}
	used, err := columnsUsed(p)
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return queried, empty
	}
	for _, c := range used {
		if !got[c] {
			cols := make([]string, 0, len(got))
			for k := range got {
				cols = append(cols, k)
			}
			sort.Strings(cols)
			t.Errorf("%s (%s): the panel refers to field %q; the query returns %v", name, choice, c, cols)
		}
	}
	return queried, empty
}

// family is a metric family exposed by some component.
type family struct {
	component string
	labels    map[string]bool
}

func (s *seeded) checkPrometheus(t *testing.T) {
	families := map[string]family{}
	for comp, reg := range s.registries {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatalf("gather %s metrics: %v", comp, err)
		}
		problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
		if err != nil {
			t.Fatalf("promlint %s: %v", comp, err)
		}
		for _, p := range problems {
			t.Errorf("promlint %s: %s: %s", comp, p.Metric, p.Text)
		}
		for _, mf := range mfs {
			f := family{component: comp, labels: map[string]bool{}}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					f.labels[l.GetName()] = true
				}
			}
			names := []string{mf.GetName()}
			switch mf.GetType() {
			case dto.MetricType_HISTOGRAM:
				f.labels["le"] = true
				names = append(names, mf.GetName()+"_bucket", mf.GetName()+"_sum", mf.GetName()+"_count")
			case dto.MetricType_SUMMARY:
				f.labels["quantile"] = true
				names = append(names, mf.GetName()+"_sum", mf.GetName()+"_count")
			}
			for _, n := range names {
				if prev, ok := families[n]; ok {
					for l := range prev.labels {
						f.labels[l] = true
					}
					f.component = prev.component + ", " + comp
				}
				families[n] = f
			}
		}
	}
	checked := 0
	for _, d := range loadDashboards(t) {
		for _, p := range d.allPanels() {
			for _, tg := range p.Targets {
				if tg.Datasource == nil || tg.Datasource.Type != pluginPrometheus {
					continue
				}
				checked += checkExpr(t, families, panelName(d, p), tg.Expr)
			}
		}
	}
	t.Logf("%d metric references checked against %d components", checked, len(s.registries))
	checkAlerts(t, families)
}

// checkExpr checks that every metric expr selects is exposed by a component
// and every label it matches or groups on (and each of extraLabels) is on one
// of its metrics or added by the scrape; it returns the metrics found.
func checkExpr(t *testing.T, families map[string]family, where, expr string, extraLabels ...string) int {
	t.Helper()
	metrics, labels, err := promQLNames(expr)
	if err != nil {
		t.Errorf("%s: %v", where, err)
		return 0
	}
	checked := 0
	known := map[string]bool{"instance": true, "job": true} // added by the scrape
	for _, m := range metrics {
		f, ok := families[m]
		if m == "up" {
			// recorded by Prometheus for each target, with only the
			// labels the scrape adds
			f, ok = family{}, true
		}
		if !ok {
			t.Errorf("%s: metric %s is not exposed by any component (%s)", where, m, expr)
			continue
		}
		checked++
		for l := range f.labels {
			known[l] = true
		}
	}
	for _, l := range append(labels, extraLabels...) {
		if !known[l] {
			t.Errorf("%s: label %q is on none of the metrics of %s", where, l, expr)
		}
	}
	return checked
}
