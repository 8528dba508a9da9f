package dashboards

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// dsVariables are the datasource variables and the plugin each must select.
var dsVariables = map[string]string{"ds_clickhouse": pluginClickHouse, "ds_prometheus": pluginPrometheus}

// grafanaBuiltins are Grafana's global variables a Prometheus query may use.
var grafanaBuiltins = map[string]bool{"__rate_interval": true, "__interval": true, "__range": true}

// TestStructure checks every dashboard without a server: unique uids and
// panel ids, datasources chosen by variable only, every variable referenced
// defined before use, ClickHouse SQL with the 18.16 macros only and every
// variable formatted for SQL, Prometheus queries that name heliostat metrics,
// a sane grid.
func TestStructure(t *testing.T) {
	uids := map[string]string{}
	for _, d := range loadDashboards(t) {
		if d.UID == "" || d.Title == "" {
			t.Errorf("%s: uid and title are required", d.file)
		}
		if prev, ok := uids[d.UID]; ok {
			t.Errorf("%s: uid %q also used by %s", d.file, d.UID, prev)
		}
		uids[d.UID] = d.file
		checkDatasourceRefs(t, d, "", d.raw)
		checkVariables(t, d)
		ids := map[int]bool{}
		var walk func([]panel)
		walk = func(ps []panel) {
			for _, p := range ps {
				if ids[p.ID] || p.ID <= 0 {
					t.Errorf("%s: panel id %d (%q) is not unique and positive", d.file, p.ID, p.Title)
				}
				ids[p.ID] = true
				if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X < 0 || p.GridPos.X+p.GridPos.W > 24 {
					t.Errorf("%s: bad gridPos %+v", panelName(d, p), p.GridPos)
				}
				walk(p.Panels)
			}
		}
		walk(d.Panels)
		for _, p := range d.allPanels() {
			checkPanel(t, d, p)
		}
	}
}

// checkDatasourceRefs walks the raw JSON: every "datasource" object must
// name its uid by a datasource variable of the dashboard, of the matching
// plugin type.
func checkDatasourceRefs(t *testing.T, d *dashboard, path string, node any) {
	file := d.file
	switch n := node.(type) {
	case map[string]any:
		for k, v := range n {
			if k == "datasource" {
				ref, ok := v.(map[string]any)
				if !ok {
					t.Errorf("%s: %s.datasource is %v; want {type, uid: ${ds_…}}", file, path, v)
					continue
				}
				uid, _ := ref["uid"].(string)
				typ, _ := ref["type"].(string)
				name := strings.TrimSuffix(strings.TrimPrefix(uid, "${"), "}")
				want, known := dsVariables[name]
				if !strings.HasPrefix(uid, "${") || !known {
					t.Errorf("%s: %s.datasource uid %q is hard-coded; want ${ds_clickhouse} or ${ds_prometheus}", file, path, uid)
				} else if typ != want {
					t.Errorf("%s: %s.datasource type %q with uid %s; want %q", file, path, typ, uid, want)
				} else if v, ok := d.variable(name); !ok || v.Type != "datasource" {
					t.Errorf("%s: %s.datasource uses ${%s}, which the dashboard does not define as a datasource variable", file, path, name)
				}
				continue
			}
			checkDatasourceRefs(t, d, path+"."+k, v)
		}
	case []any:
		for i, v := range n {
			checkDatasourceRefs(t, d, fmt.Sprintf("%s[%d]", path, i), v)
		}
	}
}

// checkVariables: datasource variables select the right plugin; query
// variables use ClickHouse through ${ds_clickhouse}, refer only to variables
// defined before them, and carry a custom all value that SQL can use.
func checkVariables(t *testing.T, d *dashboard) {
	defined := map[string]bool{}
	for _, v := range d.Templating.List {
		if defined[v.Name] {
			t.Errorf("%s: variable %q defined twice", d.file, v.Name)
		}
		switch v.Type {
		case "datasource":
			want, ok := dsVariables[v.Name]
			var q string
			_ = jsonString(v.Query, &q)
			if !ok || q != want {
				t.Errorf("%s: datasource variable %q selects %q; want one of %v", d.file, v.Name, q, dsVariables)
			}
		case "query":
			if v.Datasource == nil || v.Datasource.UID != "${ds_clickhouse}" {
				t.Errorf("%s: query variable %q: datasource %+v; want ${ds_clickhouse}", d.file, v.Name, v.Datasource)
			}
			q, err := v.sql()
			if err != nil || strings.TrimSpace(q) == "" {
				t.Errorf("%s: query variable %q: no SQL (%v)", d.file, v.Name, err)
			}
			checkSQLText(t, fmt.Sprintf("%s: variable %q", d.file, v.Name), q, d, defined)
			if v.IncludeAll && v.AllValue != "'__all'" {
				t.Errorf("%s: variable %q includes All with allValue %q; the SQL filters expect '__all'", d.file, v.Name, v.AllValue)
			}
		default:
			t.Errorf("%s: variable %q of type %q; the tests know datasource and query variables", d.file, v.Name, v.Type)
		}
		defined[v.Name] = true
	}
}

// sqlAllPattern is how a multi-value variable filters SQL: its custom all
// value '__all' short-circuits the IN list.
var sqlAllPattern = regexp.MustCompile(`'__all' IN \(\$\{(\w+):singlequote\}\)`)

// checkSQLText checks one ClickHouse query's text: the 18.16 macros only,
// every variable defined (in defined, when not nil) and referenced as
// ${name:singlequote}.
func checkSQLText(t *testing.T, where, sql string, d *dashboard, defined map[string]bool) {
	t.Helper()
	for _, m := range macroRef.FindAllStringSubmatch(sql, -1) {
		if !clickHouse18Macros[m[1]] {
			t.Errorf("%s: macro $__%s; only $__timeFilter, $__fromTime and $__toTime work on ClickHouse 18.16", where, m[1])
		}
	}
	for _, r := range references(sql) {
		if strings.HasPrefix(r.name, "__") {
			continue
		}
		v, ok := d.variable(r.name)
		switch {
		case !ok:
			t.Errorf("%s: variable %q is not defined", where, r.name)
			continue
		case defined != nil && !defined[r.name]:
			t.Errorf("%s: variable %q is defined after its use", where, r.name)
		case v.Type != "query":
			t.Errorf("%s: variable %q of type %s used in SQL", where, r.name, v.Type)
		}
		if r.format != "singlequote" {
			t.Errorf("%s: ${%s} without :singlequote; SQL takes variables as quoted literals", where, r.name)
		}
	}
	// Every All-capable variable used must be guarded by its '__all' test.
	guarded := map[string]bool{}
	for _, m := range sqlAllPattern.FindAllStringSubmatch(sql, -1) {
		guarded[m[1]] = true
	}
	for _, r := range references(sql) {
		if v, ok := d.variable(r.name); ok && v.IncludeAll && !guarded[r.name] {
			t.Errorf("%s: variable %q can be All ('__all') but the SQL never tests '__all' IN (${%s:singlequote})", where, r.name, r.name)
		}
	}
}

func checkPanel(t *testing.T, d *dashboard, p panel) {
	name := panelName(d, p)
	if len(p.Targets) == 0 && p.Type != "text" {
		t.Errorf("%s: no queries", name)
	}
	refIDs := map[string]bool{}
	for _, tg := range p.Targets {
		if refIDs[tg.RefID] || tg.RefID == "" {
			t.Errorf("%s: refId %q empty or repeated", name, tg.RefID)
		}
		refIDs[tg.RefID] = true
		if tg.Datasource == nil {
			t.Errorf("%s: target %s has no datasource", name, tg.RefID)
			continue
		}
		switch tg.Datasource.Type {
		case pluginClickHouse:
			if tg.EditorType != "sql" || strings.TrimSpace(tg.RawSQL) == "" {
				t.Errorf("%s: ClickHouse target %s: want editorType sql and rawSql", name, tg.RefID)
			}
			var format *int
			if err := json.Unmarshal(tg.Format, &format); err != nil || format == nil || (tg.QueryType == "timeseries") != (*format == 0) || (tg.QueryType == "table") != (*format == 1) {
				t.Errorf("%s: target %s: queryType %q and format %s disagree (timeseries 0, table 1)", name, tg.RefID, tg.QueryType, tg.Format)
			}
			checkSQLText(t, name, tg.RawSQL, d, nil)
		case pluginPrometheus:
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("%s: Prometheus target %s has no expr", name, tg.RefID)
			}
			if tg.Format != nil {
				var format string
				if err := json.Unmarshal(tg.Format, &format); err != nil || !slices.Contains([]string{"time_series", "table", "heatmap"}, format) {
					t.Errorf("%s: Prometheus target %s: format %s; want time_series, table or heatmap", name, tg.RefID, tg.Format)
				}
			}
			for _, r := range references(tg.Expr) {
				if _, ok := d.variable(r.name); !ok && !grafanaBuiltins[r.name] {
					t.Errorf("%s: Prometheus query refers to undefined variable %q", name, r.name)
				}
			}
			metrics, _, err := promQLNames(tg.Expr)
			if err != nil {
				t.Errorf("%s: %v", name, err)
			} else if len(metrics) == 0 {
				t.Errorf("%s: Prometheus query %q names no heliostat metric", name, tg.Expr)
			}
		default:
			t.Errorf("%s: target %s: datasource type %q", name, tg.RefID, tg.Datasource.Type)
		}
	}
	if _, err := columnsUsed(p); err != nil {
		t.Errorf("%s: %v", name, err)
	}
	for _, r := range references(p.Title) {
		if _, ok := d.variable(r.name); !ok {
			t.Errorf("%s: title refers to undefined variable %q", name, r.name)
		}
	}
}
