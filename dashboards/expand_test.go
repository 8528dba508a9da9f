package dashboards

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

// What Grafana and the ClickHouse plugin do to a panel's SQL before
// ClickHouse sees it, re-done here so that the tests run the same text.
//
// 1. Grafana's template service replaces variable references ($name,
//    ${name}, ${name:format}, [[name]]) in the browser. Without a format the
//    plugin's own formatter applies: a multi-value selection becomes
//    'a','b' (quoted, not escaped), a single value is inserted as it is.
//    ${name:singlequote} quotes and escapes every value and joins them with
//    commas. "All" becomes the variable's custom all value, inserted as it is
//    whatever the format, or every option's value when there is none.
// 2. The plugin's backend (sqlds) expands its macros with the panel's time
//    range: $__timeFilter(col) → col >= toDateTime(F) AND col <= toDateTime(T),
//    $__fromTime → toDateTime(F), $__toTime → toDateTime(T), F and T in Unix
//    seconds. Any other macro is refused here: $__timeInterval and
//    $__timeGroup expand to toStartOfInterval, which ClickHouse 18.16 lacks.

// selection is a template variable's current value.
type selection struct {
	all     bool     // "All" is selected
	values  []string // the selected values, when not all
	options []string // every option's value (what "All" means without a custom all value)
}

// varRef matches Grafana's variable syntaxes: $name, [[name]] or
// [[name:format]], ${name} or ${name:format}.
var varRef = regexp.MustCompile(`\$(\w+)|\[\[(\w+?)(?::(\w+))?\]\]|\$\{(\w+)(?::([^}]+))?\}`)

// reference is one variable reference in a text.
type reference struct {
	name, format string
	start, end   int
}

func references(s string) []reference {
	var out []reference
	for _, m := range varRef.FindAllStringSubmatchIndex(s, -1) {
		r := reference{start: m[0], end: m[1]}
		switch {
		case m[2] >= 0:
			r.name = s[m[2]:m[3]]
		case m[4] >= 0:
			r.name = s[m[4]:m[5]]
			if m[6] >= 0 {
				r.format = s[m[6]:m[7]]
			}
		default:
			r.name = s[m[8]:m[9]]
			if m[10] >= 0 {
				r.format = s[m[10]:m[11]]
			}
		}
		out = append(out, r)
	}
	return out
}

// interpolate replaces the references to defined variables in s. Names
// starting with "__" are Grafana's built-ins or the plugin's macros and are
// left alone; any other undefined name is an error.
func interpolate(s string, vars map[string]variable, sel map[string]selection) (string, error) {
	var b strings.Builder
	last := 0
	for _, r := range references(s) {
		b.WriteString(s[last:r.start])
		last = r.end
		if strings.HasPrefix(r.name, "__") {
			b.WriteString(s[r.start:r.end])
			continue
		}
		v, ok := vars[r.name]
		if !ok {
			return "", fmt.Errorf("variable %q is not defined", r.name)
		}
		cur, ok := sel[r.name]
		if !ok {
			return "", fmt.Errorf("variable %q has no value", r.name)
		}
		val, err := formatValue(v, cur, r.format)
		if err != nil {
			return "", err
		}
		b.WriteString(val)
	}
	b.WriteString(s[last:])
	return b.String(), nil
}

func formatValue(v variable, cur selection, format string) (string, error) {
	if cur.all && v.AllValue != "" {
		if format == "text" {
			return "All", nil
		}
		return v.AllValue, nil
	}
	values := cur.values
	if cur.all {
		values = cur.options
	}
	switch format {
	case "":
		// The plugin's formatter: arrays quoted and joined, scalars as they are.
		if v.Multi || v.IncludeAll {
			return "'" + strings.Join(values, "','") + "'", nil
		}
		if len(values) != 1 {
			return "", fmt.Errorf("variable %q: single-value variable with %d values", v.Name, len(values))
		}
		return values[0], nil
	case "singlequote":
		q := make([]string, len(values))
		for i, s := range values {
			q[i] = "'" + strings.ReplaceAll(s, "'", `\'`) + "'"
		}
		return strings.Join(q, ","), nil
	case "raw", "csv":
		return strings.Join(values, ","), nil
	}
	return "", fmt.Errorf("variable %q: format %q is not emulated by this test", v.Name, format)
}

// macroRef matches a plugin macro.
var macroRef = regexp.MustCompile(`\$__(\w+)`)

// ClickHouse18Macros are the plugin macros that work on ClickHouse 18.16.
var clickHouse18Macros = map[string]bool{"timeFilter": true, "fromTime": true, "toTime": true}

// expandMacros expands the plugin's macros in s for the time range
// [from, to], as the plugin's backend does.
func expandMacros(s string, from, to time.Time) (string, error) {
	dt := func(t time.Time) string { return fmt.Sprintf("toDateTime(%d)", t.Unix()) }
	var b strings.Builder
	for {
		m := macroRef.FindStringSubmatchIndex(s)
		if m == nil {
			b.WriteString(s)
			return b.String(), nil
		}
		name := s[m[2]:m[3]]
		if !clickHouse18Macros[name] {
			return "", fmt.Errorf("macro $__%s: only $__timeFilter, $__fromTime and $__toTime work on ClickHouse 18.16", name)
		}
		b.WriteString(s[:m[0]])
		rest := s[m[1]:]
		switch name {
		case "fromTime":
			b.WriteString(dt(from))
		case "toTime":
			b.WriteString(dt(to))
		case "timeFilter":
			args, n, err := macroArgs(rest)
			if err != nil {
				return "", fmt.Errorf("macro $__timeFilter: %w", err)
			}
			if len(args) != 1 || strings.TrimSpace(args[0]) == "" {
				return "", fmt.Errorf("macro $__timeFilter: want 1 argument, got %d", len(args))
			}
			col := strings.TrimSpace(args[0])
			fmt.Fprintf(&b, "%s >= %s AND %s <= %s", col, dt(from), col, dt(to))
			rest = rest[n:]
		}
		s = rest
	}
}

// macroArgs parses "(a, b(c, d))…" at the start of s: the arguments split at
// top-level commas, and the length of the parenthesized part.
func macroArgs(s string) ([]string, int, error) {
	if !strings.HasPrefix(s, "(") {
		return nil, 0, fmt.Errorf("no argument list")
	}
	depth, start := 0, 1
	var args []string
	for i, c := range s {
		switch c {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return append(args, s[start:i]), i + 1, nil
			}
		case ',':
			if depth == 1 {
				args = append(args, s[start:i])
				start = i + 1
			}
		}
	}
	return nil, 0, fmt.Errorf("unbalanced parentheses")
}

func TestInterpolate(t *testing.T) {
	vars := map[string]variable{
		"cluster": {Name: "cluster", Multi: true, IncludeAll: true, AllValue: "'__all'"},
		"vc":      {Name: "vc", Multi: true, IncludeAll: true},
		"window":  {Name: "window"},
	}
	tests := []struct {
		in   string
		sel  map[string]selection
		want string
		err  bool
	}{
		{in: "c IN (${cluster:singlequote})", sel: map[string]selection{"cluster": {values: []string{"a", "b'c"}}}, want: `c IN ('a','b\'c')`},
		{in: "c IN (${cluster:singlequote})", sel: map[string]selection{"cluster": {all: true, options: []string{"a"}}}, want: "c IN ('__all')"},
		{in: "v IN (${vc:singlequote})", sel: map[string]selection{"vc": {all: true, options: []string{"x", "y"}}}, want: "v IN ('x','y')"},
		{in: "v IN ($vc)", sel: map[string]selection{"vc": {values: []string{"x", "y"}}}, want: "v IN ('x','y')"},
		{in: "w = '$window' AND [[window]] ${window:raw}", sel: map[string]selection{"window": {values: []string{"w1"}}}, want: "w = 'w1' AND w1 w1"},
		{in: "$__timeFilter(ts) AND $__fromTime", want: "$__timeFilter(ts) AND $__fromTime"},
		{in: "$nope", err: true},
		{in: "${vc:regex}", sel: map[string]selection{"vc": {values: []string{"x"}}}, err: true},
	}
	for _, tc := range tests {
		got, err := interpolate(tc.in, vars, tc.sel)
		if tc.err {
			if err == nil {
				t.Errorf("interpolate(%q) = %q; want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("interpolate(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestExpandMacros(t *testing.T) {
	from, to := time.Unix(1700000000, 0), time.Unix(1700003600, 900e6)
	tests := []struct {
		in, want string
		err      bool
	}{
		{in: "WHERE $__timeFilter(ts) AND x", want: "WHERE ts >= toDateTime(1700000000) AND ts <= toDateTime(1700003600) AND x"},
		{in: "$__timeFilter( ifNull(end_time, now()) )", want: "ifNull(end_time, now()) >= toDateTime(1700000000) AND ifNull(end_time, now()) <= toDateTime(1700003600)"},
		{in: "toUInt32($__toTime) - toUInt32($__fromTime)", want: "toUInt32(toDateTime(1700003600)) - toUInt32(toDateTime(1700000000))"},
		{in: "$__timeInterval(ts)", err: true},
		{in: "$__timeGroup(ts, 1m)", err: true},
		{in: "$__timeFilter_ms(ts)", err: true},
		{in: "$__timeFilter(a, b)", err: true},
		{in: "$__timeFilter(ts", err: true},
	}
	for _, tc := range tests {
		got, err := expandMacros(tc.in, from, to)
		if tc.err {
			if err == nil {
				t.Errorf("expandMacros(%q) = %q; want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("expandMacros(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}
