package dashboards

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The parts of Grafana's dashboard model that the tests read.

type dsRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Datasource *dsRef          `json:"datasource"`
	Multi      bool            `json:"multi"`
	IncludeAll bool            `json:"includeAll"`
	AllValue   string          `json:"allValue"`
}

// sql returns a query variable's SQL: the plugin accepts a plain string or
// an object with rawSql.
func (v variable) sql() (string, error) {
	var s string
	if err := json.Unmarshal(v.Query, &s); err == nil {
		return s, nil
	}
	var obj struct {
		RawSQL string `json:"rawSql"`
	}
	if err := json.Unmarshal(v.Query, &obj); err != nil {
		return "", fmt.Errorf("variable %s: query is neither a string nor an object with rawSql: %w", v.Name, err)
	}
	return obj.RawSQL, nil
}

type target struct {
	Datasource *dsRef `json:"datasource"`
	RefID      string `json:"refId"`
	RawSQL     string `json:"rawSql"`
	EditorType string `json:"editorType"`
	QueryType  string `json:"queryType"`
	// Format is a number for ClickHouse (0 time series, 1 table) and a
	// string for Prometheus ("time_series", "table", "heatmap").
	Format json.RawMessage `json:"format"`
	Expr   string          `json:"expr"`
	Hide   bool            `json:"hide"`
	Legend *string         `json:"legendFormat"`
}

type override struct {
	Matcher struct {
		ID      string          `json:"id"`
		Options json.RawMessage `json:"options"`
	} `json:"matcher"`
}

type transformation struct {
	ID      string          `json:"id"`
	Options json.RawMessage `json:"options"`
}

type gridPos struct {
	X, Y, W, H int
}

type panel struct {
	ID          int              `json:"id"`
	Type        string           `json:"type"`
	Title       string           `json:"title"`
	Description string           `json:"description"`
	Datasource  *dsRef           `json:"datasource"`
	GridPos     gridPos          `json:"gridPos"`
	Targets     []target         `json:"targets"`
	Options     json.RawMessage  `json:"options"`
	Transforms  []transformation `json:"transformations"`
	Panels      []panel          `json:"panels"` // a collapsed row's panels
	FieldConfig struct {
		Overrides []override `json:"overrides"`
	} `json:"fieldConfig"`
}

type dashboard struct {
	file       string
	raw        map[string]any
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []variable `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

// allPanels returns the dashboard's panels, those inside collapsed rows
// included, rows left out.
func (d *dashboard) allPanels() []panel {
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if p.Type != "row" {
				out = append(out, p)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

func (d *dashboard) variable(name string) (variable, bool) {
	for _, v := range d.Templating.List {
		if v.Name == name {
			return v, true
		}
	}
	return variable{}, false
}

// loadDashboards parses every *.json file of Files.
func loadDashboards(t testing.TB) []*dashboard {
	t.Helper()
	names, err := fs.Glob(Files, "*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatal("no dashboards (*.json) embedded")
	}
	sort.Strings(names)
	var out []*dashboard
	for _, name := range names {
		b, err := Files.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		d := &dashboard{file: name}
		if err := json.Unmarshal(b, d); err != nil {
			t.Fatalf("%s: invalid dashboard JSON: %v", name, err)
		}
		if err := json.Unmarshal(b, &d.raw); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, d)
	}
	return out
}

// Datasource plugin ids and the variables that choose them.
const (
	pluginClickHouse = "grafana-clickhouse-datasource"
	pluginPrometheus = "prometheus"
)

// columnsUsed returns the field names a panel's configuration refers to:
// override matchers by name, the fields of transformations, the reduced
// field of a stat/gauge/pie and the x field of a bar chart or trend panel.
// Each must be a column of the panel's query result.
func columnsUsed(p panel) ([]string, error) {
	seen := map[string]bool{}
	add := func(s string) {
		if s != "" {
			seen[s] = true
		}
	}
	for _, o := range p.FieldConfig.Overrides {
		if o.Matcher.ID != "byName" {
			continue
		}
		var name string
		if err := json.Unmarshal(o.Matcher.Options, &name); err != nil {
			return nil, fmt.Errorf("override byName options: %w", err)
		}
		add(name)
	}
	for _, tr := range p.Transforms {
		var o struct {
			ExcludeByName map[string]bool `json:"excludeByName"`
			RenameByName  map[string]any  `json:"renameByName"`
			IndexByName   map[string]any  `json:"indexByName"`
			Include       struct {
				Names []string `json:"names"`
			} `json:"include"`
			Fields      any    `json:"fields"`
			ColumnField string `json:"columnField"`
			RowField    string `json:"rowField"`
			ValueField  string `json:"valueField"`
			ByField     string `json:"byField"`
			Sort        []struct {
				Field string `json:"field"`
			} `json:"sort"`
		}
		if len(tr.Options) > 0 {
			if err := json.Unmarshal(tr.Options, &o); err != nil {
				return nil, fmt.Errorf("transformation %s options: %w", tr.ID, err)
			}
		}
		for k := range o.ExcludeByName {
			add(k)
		}
		for k := range o.RenameByName {
			add(k)
		}
		for k := range o.IndexByName {
			add(k)
		}
		for _, n := range o.Include.Names {
			add(n)
		}
		switch fs := o.Fields.(type) {
		case []any:
			for _, f := range fs {
				if s, ok := f.(string); ok {
					add(s)
				}
			}
		case map[string]any:
			if tr.ID != "groupBy" {
				break
			}
			for k := range fs {
				add(k)
			}
		}
		add(o.ColumnField)
		add(o.RowField)
		add(o.ValueField)
		add(o.ByField)
		for _, s := range o.Sort {
			add(s.Field)
		}
	}
	if len(p.Options) > 0 {
		var o struct {
			ReduceOptions struct {
				Fields string `json:"fields"`
			} `json:"reduceOptions"`
			XField string `json:"xField"`
		}
		if err := json.Unmarshal(p.Options, &o); err != nil {
			return nil, fmt.Errorf("options: %w", err)
		}
		if f := o.ReduceOptions.Fields; f != "" {
			m := exactFieldRegexp.FindStringSubmatch(f)
			if m == nil {
				return nil, fmt.Errorf("reduceOptions.fields %q: want a name (/^name$/) so that the test can check it", f)
			}
			add(m[1])
		}
		add(o.XField)
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out, nil
}

var exactFieldRegexp = regexp.MustCompile(`^/\^([A-Za-z0-9_]+)\$/$`)

// panelName names a panel in test output.
func panelName(d *dashboard, p panel) string {
	return fmt.Sprintf("%s#%d %q", strings.TrimSuffix(d.file, ".json"), p.ID, p.Title)
}
