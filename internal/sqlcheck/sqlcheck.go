// Package sqlcheck finds SQL that ClickHouse 18.16 runs but current
// ClickHouse refuses: a JOIN with a subquery or a table function on either
// side that has no alias. Since 20.3 (setting joined_subquery_requires_alias,
// on by default) such a query fails with "No alias for subquery or table
// function in JOIN" (code 206, ALIAS_REQUIRED); 18.16 knows no such rule, so
// tests against it cannot catch the mistake.
//
// The check reads tokens, not a full grammar: comments and string literals
// are skipped, placeholders ({name}, $name, ${name:format}) are opaque, and
// ARRAY JOIN is not a join of tables. Tables listed with commas after FROM
// are not checked.
package sqlcheck

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Finding is a subquery or table function that takes part in a JOIN
// without an alias.
type Finding struct {
	// Line and Column locate the start of the table expression, from 1;
	// columns count characters.
	Line, Column int
	// Side is "left" or "right": the side of the JOIN it stands on.
	Side string
	// Expr is "subquery" or "table function NAME".
	Expr string
	// JoinLine is the line of the JOIN keyword.
	JoinLine int
}

// String returns "LINE:COLUMN: EXPR on the SIDE of the JOIN on line N has no
// alias".
func (f Finding) String() string {
	return fmt.Sprintf("%d:%d: %s on the %s of the JOIN on line %d has no alias (current ClickHouse: ALIAS_REQUIRED)",
		f.Line, f.Column, f.Expr, f.Side, f.JoinLine)
}

// UnaliasedJoins returns the subqueries and table functions without an
// alias that stand on either side of a JOIN in sql, in the order of their
// JOINs. sql may hold several statements.
func UnaliasedJoins(sql string) []Finding {
	toks := tokenize(sql)
	var out []Finding
	seen := map[int]bool{} // table expressions already reported
	check := func(k int, side string, join int) {
		if k < 0 || k >= len(toks) || seen[k] {
			return
		}
		var expr string
		var end int
		switch t := toks[k]; {
		case t.text == "(":
			expr, end = "subquery", t.match
		case t.kind == word && k+1 < len(toks) && toks[k+1].text == "(":
			expr, end = "table function "+t.text, toks[k+1].match
		default:
			return // a table: needs no alias
		}
		if aliased(toks, end+1) {
			return
		}
		seen[k] = true
		line, col := position(sql, toks[k].pos)
		joinLine, _ := position(sql, toks[join].pos)
		out = append(out, Finding{Line: line, Column: col, Side: side, Expr: expr, JoinLine: joinLine})
	}
	for i, t := range toks {
		// ARRAY JOIN joins no table; ENGINE = Join(…) names a table engine
		if !t.is("JOIN") || (i > 0 && (toks[i-1].is("ARRAY") || toks[i-1].is("ENGINE") || toks[i-1].text == "=")) {
			continue
		}
		// The left side: the first table expression of the FROM clause the
		// JOIN belongs to (the others are right sides of earlier JOINs).
		if f := fromOf(toks, i); f >= 0 {
			check(f+1, "left", i)
		}
		check(i+1, "right", i)
	}
	return out
}

// fromOf returns the index of the FROM keyword at the level of toks[i], or
// -1 when there is none before the enclosing parenthesis.
func fromOf(toks []token, i int) int {
	for j := i - 1; j >= 0; j-- {
		switch t := toks[j]; {
		case t.text == ")":
			j = t.match // skip the parenthesized group; the loop steps past its "("
		case t.text == "(":
			return -1
		case t.is("FROM"):
			return j
		}
	}
	return -1
}

// notAlias reports whether word w is a keyword that may follow a table
// expression; any other name there is its alias (ClickHouse allows one
// without AS).
func notAlias(w string) bool {
	switch strings.ToUpper(w) {
	case "FINAL", "SAMPLE", "ARRAY", "LEFT", "RIGHT", "INNER", "FULL", "CROSS", "OUTER", "ANY", "ALL", "ASOF", "SEMI", "ANTI",
		"GLOBAL", "LOCAL", "PASTE", "JOIN", "ON", "USING", "WHERE", "PREWHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "OFFSET",
		"UNION", "INTERSECT", "EXCEPT", "SETTINGS", "FORMAT", "WINDOW", "QUALIFY", "INTO":
		return true
	}
	return false
}

// aliased reports whether the token at k gives the table expression before
// it an alias.
func aliased(toks []token, k int) bool {
	if k >= len(toks) {
		return false
	}
	t := toks[k]
	return t.is("AS") || t.kind == quoted || (t.kind == word && !notAlias(t.text))
}

// position returns the line and column, from 1, of byte offset pos in s.
func position(s string, pos int) (line, col int) {
	start := strings.LastIndexByte(s[:pos], '\n') + 1
	return strings.Count(s[:pos], "\n") + 1, utf8.RuneCountInString(s[start:pos]) + 1
}
