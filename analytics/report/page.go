package report

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

//go:embed page.html
var pageHTML string

// page is what the template sees: the report and its figures by id.
type page struct {
	*Report
	Figs map[string]*figure
}

var funcs = template.FuncMap{
	"join": strings.Join,
	"pct":  fmtPct,
	// share is a share of m, "–" where m has none.
	"share": fmtShare,
	"dur":   fmtDur,
	"num":   fmtNum,
	"hours": func(gpuSeconds float64) string { return fmtNum(gpuSeconds / 3600) },
	"dec": func(v float64) string {
		if math.IsNaN(v) {
			return "–"
		}
		return trimZero(v, 1)
	},
	"count": func(n int64) string { return groupDigits(n) },
	"inc":   func(i int) int { return i + 1 },
	"stamp": func(t time.Time) string {
		if t.IsZero() {
			return "–"
		}
		return t.UTC().Format("2006-01-02 15:04 UTC")
	},
	"window": func(from, to time.Time) string {
		switch {
		case from.IsZero() && to.IsZero():
			return "at any time"
		case to.IsZero():
			return "from " + from.UTC().Format("2006-01-02 15:04")
		case from.IsZero():
			return "before " + to.UTC().Format("2006-01-02 15:04")
		}
		return from.UTC().Format("2006-01-02 15:04") + " to " + to.UTC().Format("2006-01-02 15:04") + " UTC"
	},
	"queueRanked": queueRanked,
	"flags": func(m map[string]int64) []flagCount {
		out := make([]flagCount, 0, len(m))
		for k, v := range m {
			out = append(out, flagCount{k, v})
		}
		sort.Slice(out, func(i, j int) bool {
			if out[i].N != out[j].N {
				return out[i].N > out[j].N
			}
			return out[i].Name < out[j].Name
		})
		return out
	},
	"summaryRows": summaryRows,
}

type flagCount struct {
	Name string
	N    int64
}

var pageTmpl = template.Must(template.New("page").Funcs(funcs).Parse(pageHTML))

// fmtShare prints m[key] as fmtPct does, and a missing key, like NaN, as
// "–": no data, not 0.
func fmtShare(m map[string]float64, key string) string {
	v, ok := m[key]
	if !ok {
		return "–"
	}
	return fmtPct(v)
}

// queueRanked orders users by their share of queuing delay, as the
// queuing-delay figure numbers them.
func queueRanked(users []User) []User {
	out := append([]User(nil), users...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].QueueShare > out[j].QueueShare })
	if len(out) > figureUsers {
		out = out[:figureUsers]
	}
	return out
}

// groupDigits prints 1234567 as 1,234,567.
func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

type summaryRow struct {
	Name   string
	Values []string
}

// summaryRows transposes the summary: one row per Helios column, one column
// per cluster, numbers as the Helios file writes them.
func summaryRows(s []Summary) []summaryRow {
	type col struct {
		name string
		get  func(*Summary) string
	}
	f := func(prec int, get func(*Summary) float64) func(*Summary) string {
		return func(x *Summary) string {
			v := get(x)
			if math.IsNaN(v) {
				return "–"
			}
			return strconv.FormatFloat(v, 'f', prec, 64)
		}
	}
	i := func(get func(*Summary) int64) func(*Summary) string {
		return func(x *Summary) string { return strconv.FormatInt(get(x), 10) }
	}
	cols := []col{
		{"gpu_num", func(x *Summary) string {
			if x.GPUs == 0 {
				return "–"
			}
			return strconv.FormatFloat(x.GPUs, 'f', -1, 64)
		}},
		{"job_num", i(func(x *Summary) int64 { return x.Jobs })},
		{"cpu_job_num", i(func(x *Summary) int64 { return x.CPUJobs })},
		{"gpu_job_num", i(func(x *Summary) int64 { return x.GPUJobs })},
		{"avg_run_time_cpu", f(3, func(x *Summary) float64 { return x.AvgRunCPU })},
		{"avg_run_time_gpu", f(3, func(x *Summary) float64 { return x.AvgRunGPU })},
		{"avg_que_time_cpu", f(3, func(x *Summary) float64 { return x.AvgQueueCPU })},
		{"avg_que_time_gpu", f(3, func(x *Summary) float64 { return x.AvgQueueGPU })},
		{"avg_gpu_num", f(3, func(x *Summary) float64 { return x.AvgGPUs })},
		{"med_run_time_cpu", f(1, func(x *Summary) float64 { return x.MedRunCPU })},
		{"med_run_time_gpu", f(1, func(x *Summary) float64 { return x.MedRunGPU })},
		{"med_que_time_cpu", f(1, func(x *Summary) float64 { return x.MedQueueCPU })},
		{"med_que_time_gpu", f(1, func(x *Summary) float64 { return x.MedQueueGPU })},
		{"med_gpu_num", f(1, func(x *Summary) float64 { return x.MedGPUs })},
		{"complete_rate", f(3, func(x *Summary) float64 { return x.CompleteRate })},
		{"cancel_rate", f(3, func(x *Summary) float64 { return x.CancelRate })},
		{"fail_rate", f(3, func(x *Summary) float64 { return x.FailRate })},
		{"complete_rate_cpu", f(3, func(x *Summary) float64 { return x.CompleteRateCPU })},
		{"cancel_rate_cpu", f(3, func(x *Summary) float64 { return x.CancelRateCPU })},
		{"fail_rate_cpu", f(3, func(x *Summary) float64 { return x.FailRateCPU })},
		{"complete_rate_gpu", f(3, func(x *Summary) float64 { return x.CompleteRateGPU })},
		{"cancel_rate_gpu", f(3, func(x *Summary) float64 { return x.CancelRateGPU })},
		{"fail_rate_gpu", f(3, func(x *Summary) float64 { return x.FailRateGPU })},
		{"complete_gpu_time", f(1, func(x *Summary) float64 { return x.CompleteGPUTime })},
		{"cancel_gpu_time", f(1, func(x *Summary) float64 { return x.CancelGPUTime })},
		{"fail_gpu_time", f(1, func(x *Summary) float64 { return x.FailGPUTime })},
	}
	out := make([]summaryRow, len(cols))
	for k, c := range cols {
		out[k].Name = c.name
		for j := range s {
			out[k].Values = append(out[k].Values, c.get(&s[j]))
		}
	}
	return out
}

// figureOrder is the page order of the figures.
var figureOrder = []string{FigDurationCDF, FigStateShare, FigUtilHeatmap, FigUtilHour, FigUtilWeekday, FigMonthly,
	FigVCUtil, FigGPUCount, FigStateByGPUs, FigUserCurve, FigUserQueue, FigTelemetryUser}

// Figures returns the ids of the figures Render draws for r, in page order.
// A figure without data is not drawn: its place holds its caption, which
// says why.
func (r *Report) Figures() []string {
	figs := r.figures()
	var ids []string
	for _, id := range figureOrder {
		if f, ok := figs[id]; ok && !f.Empty {
			ids = append(ids, id)
		}
	}
	return ids
}

func (r *Report) figures() map[string]*figure {
	figs := []figure{
		r.figDurationCDF(), r.figStateShare(), r.figUtilHeatmap(),
		periodFigure(FigUtilHour, "Utilization and submissions by hour of day ("+r.zone()+")", "hour", r.Hours),
		periodFigure(FigUtilWeekday, "Utilization and submissions by day of week ("+r.zone()+")", "day", r.Weekdays),
		r.figMonthly(), r.figVCUtil(), r.figGPUCount(), r.figStateByGPUs(), r.figUserCurve(), r.figUserQueue(),
	}
	if r.Telemetry != nil {
		figs = append(figs, r.figTelemetryUsers())
	}
	m := make(map[string]*figure, len(figs))
	for i := range figs {
		// Every chart draws its data as class="mark" elements: none is no data.
		figs[i].Empty = !strings.Contains(string(figs[i].SVG), `class="mark"`)
		m[figs[i].ID] = &figs[i]
	}
	return m
}

// Render writes r as one self-contained HTML page in UTF-8. Every string from
// the data (user, VC and cluster names) is escaped, and bytes that are not
// UTF-8 become U+FFFD.
func Render(w io.Writer, r *Report) error {
	var buf bytes.Buffer
	if err := pageTmpl.Execute(&buf, page{Report: r, Figs: r.figures()}); err != nil {
		return fmt.Errorf("report: render: %w", err)
	}
	b := buf.Bytes()
	if !utf8.Valid(b) {
		b = bytes.ToValidUTF8(b, []byte("\uFFFD"))
	}
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("report: write: %w", err)
	}
	return nil
}
