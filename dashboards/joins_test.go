package dashboards

import (
	"testing"

	"github.com/heliostat-dev/heliostat/internal/sqlcheck"
)

// TestJoinAliases: every subquery or table function in a JOIN of a
// dashboard's ClickHouse SQL (query variables and panel targets) has an
// alias, on both sides. Current ClickHouse refuses one without
// (ALIAS_REQUIRED); 18.16, which TestPanels runs on, accepts it. The SQL is
// read as written: variables and macros stand for values, never for the
// tables of a JOIN, so a finding's line is that of the rawSql text.
func TestJoinAliases(t *testing.T) {
	for _, d := range loadDashboards(t) {
		for _, v := range d.Templating.List {
			if v.Type != "query" {
				continue
			}
			q, err := v.sql()
			if err != nil {
				t.Error(err)
				continue
			}
			for _, f := range sqlcheck.UnaliasedJoins(q) {
				t.Errorf("%s: variable %q, rawSql %s", d.file, v.Name, f)
			}
		}
		for _, p := range d.allPanels() {
			for _, tg := range p.Targets {
				if tg.Datasource == nil || tg.Datasource.Type != pluginClickHouse {
					continue
				}
				for _, f := range sqlcheck.UnaliasedJoins(tg.RawSQL) {
					t.Errorf("%s target %s, rawSql %s", panelName(d, p), tg.RefID, f)
				}
			}
		}
	}
}
