package analytics

import (
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// queryFS holds the characterization jobs (queries/*.sql) and the
// capacity-planning queries (capacity/*.sql) with the fragments they share
// (capacity/*.part).
//
//go:embed queries/*.sql capacity/*.sql capacity/*.part
var queryFS embed.FS

// Job is one characterization job: a file of SQL statements that read the
// run's snapshot of the window's jobs ({jobs}) and capacity ({capacity}) and
// insert into result tables ({out.TABLE}, a staging copy of TABLE that the
// runner swaps in when the job is done).
type Job struct {
	// Name is the file name without .sql; `heliostat analytics run NAME`.
	Name string
	// Tables are the result tables the job writes, in the order it writes
	// them.
	Tables []string
	// Statements are the job's statements, placeholders unexpanded.
	Statements []string
	// temps are the job's own temporary tables ({tmp.NAME}), dropped when
	// the run ends.
	temps []string
	// needsSnapshot: the job reads {jobs} or {capacity}.
	needsSnapshot bool
}

// jobOrder is the order jobs run in; every file of queries/ other than the
// preparation ones must be listed.
var jobOrder = []string{"capacity", "jobs", "utilization", "gpus", "users", "efficiency"}

var (
	outRef  = regexp.MustCompile(`\{out\.([a-z0-9_]+)\}`)
	partRef = regexp.MustCompile(`\{part\.([a-z0-9_]+)\}`)
	tmpRef  = regexp.MustCompile(`\{tmp\.([a-z0-9_]+)\}`)
)

// Jobs returns the characterization jobs in the order they run.
func Jobs() []Job {
	jobs := make([]Job, 0, len(jobOrder))
	for _, name := range jobOrder {
		jobs = append(jobs, mustJob(name))
	}
	return jobs
}

// JobNames returns the names of the characterization jobs in the order they
// run.
func JobNames() []string { return append([]string(nil), jobOrder...) }

func mustJob(name string) Job {
	stmts := mustStatements("queries/" + name + ".sql")
	j := Job{Name: name, Statements: stmts}
	seen := map[string]bool{}
	for _, s := range stmts {
		for _, m := range outRef.FindAllStringSubmatch(s, -1) {
			if !seen[m[1]] {
				seen[m[1]] = true
				j.Tables = append(j.Tables, m[1])
			}
		}
		for _, m := range tmpRef.FindAllStringSubmatch(s, -1) {
			if !seen["tmp."+m[1]] {
				seen["tmp."+m[1]] = true
				j.temps = append(j.temps, m[1])
			}
		}
		if strings.Contains(s, "{jobs}") || strings.Contains(s, "{capacity}") {
			j.needsSnapshot = true
		}
	}
	return j
}

// mustStatements reads an embedded file and splits it into statements; the
// files are part of the binary, so a missing one is a build defect (the
// package's tests read every one).
func mustStatements(path string) []string {
	b, err := fs.ReadFile(queryFS, path)
	if err != nil {
		panic(fmt.Sprintf("analytics: embedded %s: %v", path, err))
	}
	return splitStatements(string(b))
}

// splitStatements cuts SQL text into statements at lines ending in ';',
// dropping comment lines (as schemas/migrate does).
func splitStatements(sql string) []string {
	var stmts []string
	var cur strings.Builder
	for _, line := range strings.Split(sql, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
		if strings.HasSuffix(t, ";") {
			stmts = append(stmts, strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		stmts = append(stmts, s)
	}
	return stmts
}

// quantileRef is the quantile macro {q:ARRAY:P}: the P-quantile of the sorted
// array ARRAY (an alias), linear between the closest ranks (numpy's default,
// "type 7"): with h = (n-1)P, a[floor h] + (h - floor h)(a[ceil h] - a[floor
// h]), 0-based; NaN for an empty array. The median of an even count is the
// mean of the two middle values.
var quantileRef = regexp.MustCompile(`\{q:([A-Za-z_][A-Za-z0-9_]*):(0(?:\.[0-9]+)?|1(?:\.0+)?)\}`)

func quantileSQL(arr, p string) string {
	n := "length(" + arr + ")"
	h := "((" + n + " - 1) * " + p + ")"
	lo := arr + "[toUInt64(floor(" + h + ")) + 1]"
	hi := arr + "[toUInt64(ceil(" + h + ")) + 1]"
	return "if(" + n + " = 0, nan, " + lo + " + (" + h + " - floor(" + h + ")) * (" + hi + " - " + lo + "))"
}

// expand substitutes the placeholders of a statement: the quantile macro
// {q:A:P} and every {name} of vars. An unknown placeholder is an error, so
// that a typo cannot reach ClickHouse as SQL.
func expand(stmt string, vars map[string]string) (string, error) {
	stmt = quantileRef.ReplaceAllStringFunc(stmt, func(m string) string {
		sm := quantileRef.FindStringSubmatch(m)
		return quantileSQL(sm[1], sm[2])
	})
	var b strings.Builder
	for {
		i := strings.IndexByte(stmt, '{')
		if i < 0 {
			b.WriteString(stmt)
			break
		}
		j := strings.IndexByte(stmt[i:], '}')
		if j < 0 {
			return "", fmt.Errorf("unclosed placeholder at %q", clip(stmt[i:]))
		}
		name := stmt[i+1 : i+j]
		v, ok := vars[name]
		if !ok {
			return "", fmt.Errorf("unknown placeholder {%s}", name)
		}
		b.WriteString(stmt[:i])
		b.WriteString(v)
		stmt = stmt[i+j+1:]
	}
	return b.String(), nil
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// CapacityQuery is one capacity-planning query (capacity/*.sql).
type CapacityQuery struct {
	// Name is the file name without .sql.
	Name string
	// Doc is the file's leading comment, without the comment markers.
	Doc string
	// SQL is the query, placeholders unexpanded.
	SQL string
}

// CapacityQueries returns the capacity-planning queries by name.
func CapacityQueries() []CapacityQuery {
	entries, err := fs.ReadDir(queryFS, "capacity")
	if err != nil {
		panic(fmt.Sprintf("analytics: embedded capacity queries: %v", err))
	}
	var out []CapacityQuery
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".sql")
		if !ok {
			continue
		}
		b, err := fs.ReadFile(queryFS, "capacity/"+e.Name())
		if err != nil {
			panic(fmt.Sprintf("analytics: embedded %s: %v", e.Name(), err))
		}
		var doc []string
		for _, line := range strings.Split(string(b), "\n") {
			t, ok := strings.CutPrefix(strings.TrimSpace(line), "--")
			if !ok {
				break
			}
			doc = append(doc, strings.TrimPrefix(t, " "))
		}
		stmts := splitStatements(inlineParts(string(b)))
		if len(stmts) != 1 {
			panic(fmt.Sprintf("analytics: capacity/%s holds %d statements; want 1", e.Name(), len(stmts)))
		}
		out = append(out, CapacityQuery{Name: name, Doc: strings.TrimSpace(strings.Join(doc, "\n")), SQL: stmts[0]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// inlineParts replaces each {part.NAME} of a capacity query with the text of
// capacity/NAME.part, a fragment several queries share, and does the same in
// the parts it inlined (hourly_demand.part reads runs.part); the files are
// part of the binary, so a missing one, or parts that name each other in a
// loop, is a build defect (the tests run every query).
func inlineParts(sql string) string {
	for depth := 0; partRef.MatchString(sql); depth++ {
		if depth == maxPartDepth {
			panic(fmt.Sprintf("analytics: embedded capacity parts nest deeper than %d: a loop?", maxPartDepth))
		}
		sql = partRef.ReplaceAllStringFunc(sql, func(m string) string {
			name := partRef.FindStringSubmatch(m)[1]
			b, err := fs.ReadFile(queryFS, "capacity/"+name+".part")
			if err != nil {
				panic(fmt.Sprintf("analytics: embedded capacity/%s.part: %v", name, err))
			}
			return stripLeadingComment(string(b))
		})
	}
	return sql
}

// stripLeadingComment drops the comment lines a part starts with (its
// documentation): inlined after "FROM ", the first would comment out the
// rest of that line's SQL in what --sql prints.
func stripLeadingComment(s string) string {
	for {
		line, rest, ok := strings.Cut(s, "\n")
		if !ok || !strings.HasPrefix(strings.TrimSpace(line), "--") {
			return s
		}
		s = rest
	}
}

// maxPartDepth bounds how deep capacity parts may inline one another.
const maxPartDepth = 4

// unix formats a Unix time for a placeholder.
func unix(sec int64) string { return strconv.FormatInt(sec, 10) }
