package report

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"strconv"
	"strings"
)

// The charts below draw themselves as inline SVG with a fixed size, so a page
// lays out the same in every browser and a test can find each figure. Every
// data mark (bar, line, heatmap cell) is filled or stroked with a colour of
// the palette; axes, grid and text are grey. Text from data is escaped.

// Figure sizes in CSS pixels.
const (
	chartW   = 760
	chartH   = 300
	heatmapH = 280
)

// Palette is the colour of series i (mod its length); the state colours are
// fixed so that a state looks the same in every figure.
var palette = []string{"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f"}

// stateColor maps a final state to its colour in every figure.
var stateColor = map[string]string{
	"completed": "#59a14f",
	"cancelled": "#f28e2b",
	"failed":    "#e15759",
	"unknown":   "#9c755f",
}

// colorFor returns the series colour: its own, the state colour of its name,
// else the palette's i-th.
func colorFor(name, own string, i int) string {
	if own != "" {
		return own
	}
	if c, ok := stateColor[name]; ok {
		return c
	}
	return palette[i%len(palette)]
}

// Series is one named series of a bar chart, one value per category.
type Series struct {
	Name   string
	Color  string // "" picks one
	Values []float64
}

// Bars is a bar chart: grouped or stacked bars per category, with an
// optional line on a second axis (e.g. submissions per hour over
// utilization).
type Bars struct {
	ID         string // data-figure id
	Title      string // accessible title
	Categories []string
	Series     []Series
	Stacked    bool
	YLabel     string
	YMax       float64 // 0: from the data
	YFormat    func(float64) string
	// Line, when set, is drawn over the bars against a right-hand axis.
	Line       *Series
	LineLabel  string
	LineFormat func(float64) string
}

// XY is one series of a line chart.
type XY struct {
	Name  string
	Color string
	X, Y  []float64
	// Step draws a step function (a CDF): horizontal to the next x, then up.
	Step bool
}

// Tick is an axis tick at Value labelled Label.
type Tick struct {
	Value float64
	Label string
}

// Lines is a line chart, optionally with a logarithmic x axis (durations).
type Lines struct {
	ID, Title string
	Series    []XY
	XLog      bool
	XTicks    []Tick // nil: chosen from the data
	XLabel    string
	YLabel    string
	YMin      float64
	YMax      float64 // 0: from the data
	YFormat   func(float64) string
}

// Heatmap is a grid of values (rows × columns), e.g. utilization by day of
// week × hour of day. NaN cells have no data.
type Heatmap struct {
	ID, Title  string
	Rows, Cols []string
	Values     [][]float64
	Max        float64 // 0: the largest value
	Format     func(float64) string
	Label      string // what a value is, for the colour legend
}

type svgBuf struct{ strings.Builder }

func (b *svgBuf) f(format string, args ...any) { fmt.Fprintf(&b.Builder, format, args...) }

// esc escapes text for SVG text content and double-quoted attributes.
func esc(s string) string { return html.EscapeString(s) }

// num writes a coordinate with at most one decimal.
func num(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "0"
	}
	return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64)
}

func open(b *svgBuf, id, title string, w, h int) {
	b.f(`<svg xmlns="http://www.w3.org/2000/svg" data-figure="%s" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s" font-family="sans-serif" font-size="11">`,
		esc(id), w, h, w, h, esc(title))
	b.f(`<title>%s</title><rect width="%d" height="%d" fill="#fff"/>`, esc(title), w, h)
}

func noData(b *svgBuf, w, h int) template.HTML {
	b.f(`<text x="%d" y="%d" text-anchor="middle" fill="#666" font-size="14">no data</text></svg>`, w/2, h/2)
	return template.HTML(b.String())
}

// niceTicks returns about n round tick values covering [lo, hi].
func niceTicks(lo, hi float64, n int) []float64 {
	if !(hi > lo) {
		hi = lo + 1
	}
	raw := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var out []float64
	for v := math.Ceil(lo/step-1e-9) * step; v <= hi+step*1e-9; v += step {
		out = append(out, v+0) // +0 turns -0 into 0
	}
	return out
}

// niceMax rounds a maximum up to a multiple of its nice tick step.
func niceMax(max float64) float64 {
	if !(max > 0) {
		return 1
	}
	t := niceTicks(0, max, 5)
	step := t[1] - t[0]
	return math.Ceil(max/step-1e-9) * step
}

// plot is the drawing area inside the margins.
type plot struct{ x0, y0, x1, y1 float64 } // y0 top, y1 bottom

func (p plot) w() float64 { return p.x1 - p.x0 }
func (p plot) h() float64 { return p.y1 - p.y0 }

// yAxis draws horizontal grid lines and labels for [0, max] on the left (or
// right) of p.
func yAxis(b *svgBuf, p plot, lo, hi float64, format func(float64) string, right bool, label string) {
	for _, v := range niceTicks(lo, hi, 5) {
		if v < lo-1e-9 || v > hi+1e-9 {
			continue
		}
		y := p.y1 - (v-lo)/(hi-lo)*p.h()
		if right {
			b.f(`<text x="%s" y="%s" fill="#555" dominant-baseline="middle">%s</text>`, num(p.x1+4), num(y), esc(format(v)))
			continue
		}
		b.f(`<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="#e4e4e4"/>`, num(p.x0), num(p.x1), num(y), num(y))
		b.f(`<text x="%s" y="%s" fill="#555" text-anchor="end" dominant-baseline="middle">%s</text>`, num(p.x0-4), num(y), esc(format(v)))
	}
	if label == "" {
		return
	}
	if right {
		b.f(`<text transform="translate(%s %s) rotate(90)" fill="#333" text-anchor="middle">%s</text>`, num(p.x1+48), num((p.y0+p.y1)/2), esc(label))
	} else {
		b.f(`<text transform="translate(14 %s) rotate(-90)" fill="#333" text-anchor="middle">%s</text>`, num((p.y0+p.y1)/2), esc(label))
	}
}

// legend draws the series names in a row above the plot.
func legend(b *svgBuf, x, y float64, names, colors []string, lineLast bool) {
	for i, n := range names {
		if lineLast && i == len(names)-1 {
			b.f(`<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="%s" stroke-width="2"/>`, num(x), num(x+12), num(y), num(y), colors[i])
		} else {
			b.f(`<rect x="%s" y="%s" width="10" height="10" fill="%s"/>`, num(x), num(y-5), colors[i])
		}
		b.f(`<text x="%s" y="%s" fill="#333" dominant-baseline="middle">%s</text>`, num(x+15), num(y), esc(n))
		x += 15 + 7*float64(len([]rune(n))) + 14
	}
}

func orPercent(f func(float64) string) func(float64) string {
	if f != nil {
		return f
	}
	return fmtNum
}

// SVG renders the chart.
func (c *Bars) SVG() template.HTML {
	var b svgBuf
	open(&b, c.ID, c.Title, chartW, chartH)
	n := len(c.Categories)
	if n == 0 || len(c.Series) == 0 {
		return noData(&b, chartW, chartH)
	}
	right := 16.0
	if c.Line != nil {
		right = 64
	}
	p := plot{x0: 64, y0: 30, x1: chartW - right, y1: chartH - 44}
	max := c.YMax
	if max == 0 {
		for i := 0; i < n; i++ {
			sum := 0.0
			for _, s := range c.Series {
				v := at(s.Values, i)
				if c.Stacked {
					sum += v
				} else if v > sum {
					sum = v
				}
			}
			max = math.Max(max, sum)
		}
		max = niceMax(max)
	}
	yf := orPercent(c.YFormat)
	yAxis(&b, p, 0, max, yf, false, c.YLabel)

	var names, colors []string
	for i, s := range c.Series {
		names = append(names, s.Name)
		colors = append(colors, colorFor(s.Name, s.Color, i))
	}
	slot := p.w() / float64(n)
	gap := math.Min(slot*0.2, 8)
	for i := 0; i < n; i++ {
		x := p.x0 + float64(i)*slot + gap/2
		w := slot - gap
		base := 0.0
		for k, s := range c.Series {
			v := at(s.Values, i)
			if !(v > 0) {
				continue
			}
			bx, bw := x, w
			if !c.Stacked {
				bw = w / float64(len(c.Series))
				bx = x + float64(k)*bw
			}
			y0 := p.y1 - math.Min(base+v, max)/max*p.h()
			y1 := p.y1 - math.Min(base, max)/max*p.h()
			b.f(`<rect class="mark" x="%s" y="%s" width="%s" height="%s" fill="%s"><title>%s · %s: %s</title></rect>`,
				num(bx), num(y0), num(math.Max(bw, 0.5)), num(math.Max(y1-y0, 0.5)), colors[k], esc(c.Categories[i]), esc(s.Name), esc(yf(v)))
			if c.Stacked {
				base += v
			}
		}
	}
	// Category labels: as many as fit without overlapping.
	every := 1
	for longest := maxLen(c.Categories); float64(every)*slot < float64(longest)*6.5+6; every++ {
	}
	for i := 0; i < n; i += every {
		b.f(`<text x="%s" y="%s" fill="#555" text-anchor="middle">%s</text>`, num(p.x0+(float64(i)+0.5)*slot), num(p.y1+14), esc(c.Categories[i]))
	}
	b.f(`<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="#888"/>`, num(p.x0), num(p.x1), num(p.y1), num(p.y1))

	if l := c.Line; l != nil {
		lmax := 0.0
		for _, v := range l.Values {
			lmax = math.Max(lmax, v)
		}
		lmax = niceMax(lmax)
		lf := orPercent(c.LineFormat)
		yAxis(&b, p, 0, lmax, lf, true, c.LineLabel)
		color := colorFor(l.Name, l.Color, len(c.Series))
		var pts []string
		for i := 0; i < n; i++ {
			pts = append(pts, num(p.x0+(float64(i)+0.5)*slot)+","+num(p.y1-at(l.Values, i)/lmax*p.h()))
		}
		b.f(`<polyline class="mark" fill="none" stroke="%s" stroke-width="2" points="%s"/>`, color, strings.Join(pts, " "))
		if n <= 40 { // points are visible where few (one month alone is no line)
			for i, pt := range pts {
				x, y, _ := strings.Cut(pt, ",")
				b.f(`<circle class="mark" cx="%s" cy="%s" r="3" fill="%s"><title>%s · %s: %s</title></circle>`, x, y, color, esc(c.Categories[i]), esc(l.Name), esc(lf(at(l.Values, i))))
			}
		}
		names = append(names, l.Name)
		colors = append(colors, color)
	}
	legend(&b, p.x0, 12, names, colors, c.Line != nil)
	b.f(`</svg>`)
	return template.HTML(b.String())
}

func at(v []float64, i int) float64 {
	if i < len(v) && !math.IsNaN(v[i]) {
		return v[i]
	}
	return 0
}

func maxLen(s []string) int {
	m := 1
	for _, v := range s {
		m = max(m, len([]rune(v)))
	}
	return m
}

// SVG renders the chart.
func (c *Lines) SVG() template.HTML {
	var b svgBuf
	open(&b, c.ID, c.Title, chartW, chartH)
	xmin, xmax := math.Inf(1), math.Inf(-1)
	ymax := c.YMax
	points := 0
	for _, s := range c.Series {
		for i, x := range s.X {
			if c.XLog && !(x > 0) || i >= len(s.Y) {
				continue
			}
			xmin, xmax = math.Min(xmin, x), math.Max(xmax, x)
			if c.YMax == 0 {
				ymax = math.Max(ymax, s.Y[i])
			}
			points++
		}
	}
	if points == 0 {
		return noData(&b, chartW, chartH)
	}
	if c.YMax == 0 {
		ymax = niceMax(ymax)
	}
	tx := func(x float64) float64 { return x }
	if c.XLog {
		tx = math.Log10
		xmin = math.Pow(10, math.Floor(math.Log10(xmin)))
		xmax = math.Pow(10, math.Ceil(math.Log10(xmax)))
	}
	if xmax <= xmin {
		xmax = xmin + 1
	}
	p := plot{x0: 64, y0: 30, x1: chartW - 16, y1: chartH - 44}
	sx := func(x float64) float64 { return p.x0 + (tx(x)-tx(xmin))/(tx(xmax)-tx(xmin))*p.w() }
	sy := func(y float64) float64 { return p.y1 - (math.Min(y, ymax)-c.YMin)/(ymax-c.YMin)*p.h() }
	yf := orPercent(c.YFormat)
	yAxis(&b, p, c.YMin, ymax, yf, false, c.YLabel)

	ticks := c.XTicks
	if ticks == nil {
		if c.XLog {
			for v := xmin; v <= xmax*1.0001; v *= 10 {
				ticks = append(ticks, Tick{v, fmtNum(v)})
			}
		} else {
			for _, v := range niceTicks(xmin, xmax, 6) {
				ticks = append(ticks, Tick{v, fmtNum(v)})
			}
		}
	}
	for _, t := range ticks {
		if t.Value < xmin || t.Value > xmax || c.XLog && t.Value <= 0 {
			continue
		}
		x := sx(t.Value)
		b.f(`<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="#e4e4e4"/>`, num(x), num(x), num(p.y0), num(p.y1))
		b.f(`<text x="%s" y="%s" fill="#555" text-anchor="middle">%s</text>`, num(x), num(p.y1+14), esc(t.Label))
	}
	b.f(`<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="#888"/>`, num(p.x0), num(p.x1), num(p.y1), num(p.y1))
	if c.XLabel != "" {
		b.f(`<text x="%s" y="%s" fill="#333" text-anchor="middle">%s</text>`, num((p.x0+p.x1)/2), num(p.y1+32), esc(c.XLabel))
	}
	var names, colors []string
	for i, s := range c.Series {
		color := colorFor(s.Name, s.Color, i)
		names, colors = append(names, s.Name), append(colors, color)
		var pts strings.Builder
		prevY := math.NaN()
		for k, x := range s.X {
			if c.XLog && !(x > 0) || k >= len(s.Y) {
				continue
			}
			px, py := sx(x), sy(s.Y[k])
			if s.Step && !math.IsNaN(prevY) {
				pts.WriteString(num(px) + "," + num(prevY) + " ")
			}
			pts.WriteString(num(px) + "," + num(py) + " ")
			prevY = py
		}
		b.f(`<polyline class="mark" fill="none" stroke="%s" stroke-width="2" points="%s"/>`, color, strings.TrimSpace(pts.String()))
	}
	legend(&b, p.x0, 12, names, colors, false)
	b.f(`</svg>`)
	return template.HTML(b.String())
}

// heatColor maps t in [0, 1] to a white→blue ramp.
func heatColor(t float64) string {
	t = math.Max(0, math.Min(1, t))
	lerp := func(a, b float64) int { return int(math.Round(a + (b-a)*t)) }
	return fmt.Sprintf("#%02x%02x%02x", lerp(0xde, 0x08), lerp(0xeb, 0x30), lerp(0xf7, 0x6b))
}

// SVG renders the heatmap.
func (c *Heatmap) SVG() template.HTML {
	var b svgBuf
	open(&b, c.ID, c.Title, chartW, heatmapH)
	if len(c.Rows) == 0 || len(c.Cols) == 0 {
		return noData(&b, chartW, heatmapH)
	}
	max, known := c.Max, 0
	for _, r := range c.Values {
		for _, v := range r {
			if !math.IsNaN(v) {
				known++
				if c.Max == 0 {
					max = math.Max(max, v)
				}
			}
		}
	}
	if known == 0 {
		return noData(&b, chartW, heatmapH)
	}
	if max == 0 {
		max = 1
	}
	f := orPercent(c.Format)
	p := plot{x0: 48, y0: 34, x1: chartW - 16, y1: heatmapH - 28}
	cw, rh := p.w()/float64(len(c.Cols)), p.h()/float64(len(c.Rows))
	for r, name := range c.Rows {
		y := p.y0 + float64(r)*rh
		b.f(`<text x="%s" y="%s" fill="#555" text-anchor="end" dominant-baseline="middle">%s</text>`, num(p.x0-4), num(y+rh/2), esc(name))
		for k := range c.Cols {
			v := math.NaN()
			if r < len(c.Values) && k < len(c.Values[r]) {
				v = c.Values[r][k]
			}
			x := p.x0 + float64(k)*cw
			if math.IsNaN(v) {
				b.f(`<rect x="%s" y="%s" width="%s" height="%s" fill="#f4f4f4" stroke="#fff"/>`, num(x), num(y), num(cw), num(rh))
				continue
			}
			b.f(`<rect class="mark" x="%s" y="%s" width="%s" height="%s" fill="%s" stroke="#fff"><title>%s %s: %s</title></rect>`,
				num(x), num(y), num(cw), num(rh), heatColor(v/max), esc(name), esc(c.Cols[k]), esc(f(v)))
		}
	}
	every := 1
	for float64(every)*cw < float64(maxLen(c.Cols))*6.5+4 {
		every++
	}
	for k := 0; k < len(c.Cols); k += every {
		b.f(`<text x="%s" y="%s" fill="#555" text-anchor="middle">%s</text>`, num(p.x0+(float64(k)+0.5)*cw), num(p.y1+14), esc(c.Cols[k]))
	}
	// Colour legend: a ramp from 0 to max.
	lx := p.x1 - 200
	for i := 0; i < 10; i++ {
		b.f(`<rect x="%s" y="8" width="16" height="12" fill="%s"/>`, num(lx+float64(i)*16), heatColor(float64(i)/9))
	}
	b.f(`<text x="%s" y="14" fill="#333" text-anchor="end" dominant-baseline="middle">%s 0</text>`, num(lx-4), esc(c.Label))
	b.f(`<text x="%s" y="14" fill="#333" dominant-baseline="middle">%s</text>`, num(lx+164), esc(f(max)))
	b.f(`</svg>`)
	return template.HTML(b.String())
}

// fmtNum prints a number compactly: 950, 1.2k, 3.4M.
func fmtNum(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e9:
		return trimZero(v/1e9, 1) + "G"
	case a >= 1e6:
		return trimZero(v/1e6, 1) + "M"
	case a >= 1e4:
		return trimZero(v/1e3, 0) + "k"
	case a >= 1e3:
		return trimZero(v/1e3, 1) + "k"
	case a >= 10 || a == 0:
		return trimZero(v, 0)
	case a >= 1:
		return trimZero(v, 1)
	}
	return trimZero(v, 2)
}

func trimZero(v float64, prec int) string {
	s := strconv.FormatFloat(v, 'f', prec, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// fmtPct prints a share in [0, 1] as a percentage; NaN (nothing to share
// out) as "–".
func fmtPct(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	if v != 0 && math.Abs(v) < 0.001 {
		return "<0.1%"
	}
	return trimZero(v*100, 1) + "%"
}

// fmtDur prints seconds as a short duration: 45 s, 12 min, 3.5 h, 2.1 d.
func fmtDur(s float64) string {
	switch {
	case math.IsNaN(s):
		return "–"
	case s < 60:
		return trimZero(s, 0) + " s"
	case s < 3600:
		return trimZero(s/60, 1) + " min"
	case s < 86400:
		return trimZero(s/3600, 1) + " h"
	}
	return trimZero(s/86400, 1) + " d"
}

// durationTicks are the x ticks of a duration axis in seconds.
var durationTicks = []Tick{
	{1, "1 s"}, {10, "10 s"}, {60, "1 min"}, {600, "10 min"}, {3600, "1 h"}, {36000, "10 h"}, {86400, "1 d"}, {864000, "10 d"}, {8640000, "100 d"},
}
