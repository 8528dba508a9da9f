package sqlcheck

import (
	"strings"
	"testing"
)

func TestUnaliasedJoins(t *testing.T) {
	tests := []struct {
		name, sql string
		want      []string // Finding.String() up to " has no alias"
	}{
		{"both sides unaliased", "SELECT * FROM (SELECT 1 AS a) ANY LEFT JOIN (SELECT 1 AS a) USING a",
			[]string{"1:15: subquery on the left of the JOIN on line 1", "1:45: subquery on the right of the JOIN on line 1"}},
		{"both aliased with AS", "SELECT * FROM (SELECT 1 AS a) AS l ANY LEFT JOIN (SELECT 1 AS a) AS r USING a", nil},
		{"both aliased without AS", "SELECT * FROM (SELECT 1 AS a) l ANY LEFT JOIN (SELECT 1 AS a) r USING a", nil},
		{"quoted aliases", "SELECT * FROM (SELECT 1 AS a) AS `l` JOIN (SELECT 1 AS a) \"r\" USING a", nil},
		{"lower case", "select * from (select 1 as a) join (select 1 as a) using a",
			[]string{"1:15: subquery on the left", "1:36: subquery on the right"}},
		{"tables", "SELECT * FROM t ANY LEFT JOIN db.u USING k", nil},
		{"placeholder tables", "SELECT * FROM {jobs} ANY LEFT JOIN {tmp.names} USING cvu", nil},
		{"left only", "SELECT * FROM (SELECT cvu FROM {jobs}) ANY LEFT JOIN {tmp.names} USING cvu",
			[]string{"1:15: subquery on the left"}},
		{"right only", "SELECT * FROM {database}.t FINAL ANY INNER JOIN (SELECT k FROM u) USING k",
			[]string{"1:49: subquery on the right"}},
		{"left alias before GLOBAL", "SELECT * FROM (SELECT 1 AS x) GLOBAL ANY LEFT JOIN t USING x",
			[]string{"1:15: subquery on the left"}},
		{"table function", "SELECT * FROM numbers(3) JOIN t USING number",
			[]string{"1:15: table function numbers on the left"}},
		{"table function right", "SELECT * FROM t AS a JOIN numbers(3) ON a.n = number",
			[]string{"1:27: table function numbers on the right"}},
		{"table function aliased", "SELECT * FROM numbers(3) AS n JOIN numbers(2) m USING number", nil},
		{"array join", "SELECT a FROM (SELECT [1] AS a) ARRAY JOIN a", nil},
		{"left array join", "SELECT a FROM (SELECT [1] AS a) LEFT ARRAY JOIN a", nil},
		{"array join then join", "SELECT a FROM (SELECT [1] AS a, 0 AS c) ARRAY JOIN a JOIN (SELECT 0 AS c) USING c",
			[]string{"1:15: subquery on the left", "1:59: subquery on the right"}},
		{"Join engine", "CREATE TABLE t (k UInt8) ENGINE = Join(ANY, LEFT, k)", nil},
		{"arrayJoin function", "SELECT arrayJoin([1, 2]) AS x FROM (SELECT 1)", nil},
		{"line comment", "SELECT 1 -- FROM (SELECT 1) JOIN (SELECT 2) USING x\nFROM t", nil},
		{"block comment", "SELECT 1 /* FROM (SELECT 1) JOIN (SELECT 2) USING x */ FROM t", nil},
		{"string literal", "SELECT 'FROM (SELECT 1) JOIN (SELECT 2) USING x' FROM t", nil},
		{"escaped quote", `SELECT 'it\'s (' FROM (SELECT 1 AS x) JOIN t USING x`,
			[]string{"1:23: subquery on the left"}},
		{"join inside a subquery", "SELECT * FROM (SELECT * FROM a JOIN (SELECT 1 AS x) USING x)",
			[]string{"1:37: subquery on the right"}},
		{"parentheses between FROM and JOIN", "SELECT * FROM (SELECT 1 AS x) AS l ARRAY JOIN [(1, 2)] AS p JOIN (SELECT 1 AS x) USING (x)",
			[]string{"1:66: subquery on the right"}},
		{"chain of joins", "SELECT * FROM (SELECT 1 AS x) AS a JOIN (SELECT 2 AS x) USING x JOIN (SELECT 3 AS x) AS c USING x",
			[]string{"1:41: subquery on the right"}},
		{"left reported once", "SELECT * FROM (SELECT 1 AS x) JOIN t USING x JOIN u USING x",
			[]string{"1:15: subquery on the left of the JOIN on line 1"}},
		{"union branches", "SELECT x FROM (SELECT 1 AS x) UNION ALL SELECT x FROM t JOIN (SELECT 1 AS x) AS r USING x", nil},
		{"positions on later lines", "SELECT *\nFROM t\nANY LEFT JOIN\n  (SELECT 1 AS x)\nUSING x",
			[]string{"4:3: subquery on the right of the JOIN on line 3"}},
		{"column counts characters", "SELECT 'é' AS e FROM (SELECT 1 AS x) JOIN t USING x",
			[]string{"1:22: subquery on the left"}},
		{"Grafana variables and macros", "SELECT * FROM (SELECT host FROM t WHERE cluster IN (${cluster:singlequote}) AND $__timeFilter(ts)) AS a\n" +
			"ANY LEFT JOIN (SELECT host FROM u WHERE h IN ($host)) USING host",
			[]string{"2:15: subquery on the right of the JOIN on line 2"}},
		{"two statements", "SELECT * FROM (SELECT 1 AS x) AS a JOIN t USING x;\nSELECT * FROM (SELECT 1 AS x) JOIN t USING x",
			[]string{"2:15: subquery on the left of the JOIN on line 2"}},
		{"unclosed", "SELECT * FROM (SELECT 1 JOIN (", []string{"1:30: subquery on the right"}},
		{"stray parenthesis", "SELECT 1) FROM (SELECT 1) AS a JOIN (SELECT 1) USING x", []string{"1:37: subquery on the right"}},
		{"empty", "", nil},
	}
	for _, tc := range tests {
		got := UnaliasedJoins(tc.sql)
		var gs []string
		for _, f := range got {
			gs = append(gs, f.String())
		}
		ok := len(got) == len(tc.want)
		for i := 0; ok && i < len(got); i++ {
			ok = strings.HasPrefix(gs[i], tc.want[i])
		}
		if !ok {
			t.Errorf("%s: UnaliasedJoins(%q) = %q; want %q", tc.name, tc.sql, gs, tc.want)
		}
	}
}

func TestFindingString(t *testing.T) {
	f := Finding{Line: 44, Column: 1, Side: "right", Expr: "subquery", JoinLine: 43}
	want := "44:1: subquery on the right of the JOIN on line 43 has no alias (current ClickHouse: ALIAS_REQUIRED)"
	if got := f.String(); got != want {
		t.Errorf("Finding.String() = %q; want %q", got, want)
	}
}

// FuzzUnaliasedJoins: any text is scanned without a panic, and every
// finding lies inside it.
func FuzzUnaliasedJoins(f *testing.F) {
	for _, s := range []string{"SELECT * FROM (SELECT 1) JOIN numbers(2) USING x", "FROM ((( JOIN", ") ) JOIN ( 'x", "/* JOIN", "${a JOIN (", "FROM é JOIN (\n)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		lines := strings.Count(sql, "\n") + 1
		for _, fd := range UnaliasedJoins(sql) {
			if fd.Line < 1 || fd.Line > lines || fd.Column < 1 || fd.JoinLine < 1 || fd.JoinLine > lines {
				t.Fatalf("UnaliasedJoins(%q): finding %+v lies outside the text", sql, fd)
			}
		}
	})
}
