package report

import (
	"fmt"
	"html/template"
	"math"
	"sort"
	"strconv"
)

// figure is one figure of the page: its SVG and a caption with the key
// numbers.
type figure struct {
	ID      string
	Title   string
	Caption string
	SVG     template.HTML
	Empty   bool // no data: the page shows the caption alone
}

// Figure ids, in page order. The browser test expects each of them.
const (
	FigDurationCDF   = "duration-cdf"
	FigStateShare    = "state-share"
	FigUtilHeatmap   = "util-heatmap"
	FigUtilHour      = "util-hour"
	FigUtilWeekday   = "util-weekday"
	FigMonthly       = "monthly"
	FigVCUtil        = "vc-util"
	FigGPUCount      = "gpu-count"
	FigStateByGPUs   = "state-by-gpus"
	FigUserCurve     = "user-concentration"
	FigUserQueue     = "user-queue"
	FigTelemetryUser = "telemetry-users"
)

var weekdayNames = []string{"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"}

func hourLabels() []string {
	out := make([]string, 24)
	for h := range out {
		out[h] = strconv.Itoa(h)
	}
	return out
}

func (r *Report) figDurationCDF() figure {
	c := &Lines{ID: FigDurationCDF, Title: "Run time of GPU jobs (CDF)", XLog: true, XTicks: durationTicks,
		XLabel: "run time (log scale)", YLabel: "fraction of GPU jobs", YMax: 1, YFormat: fmtPct}
	for _, s := range r.DurationCDF {
		xy := XY{Name: s.Name, Step: true}
		for _, p := range s.Points {
			x := p.X
			if x < 1 {
				x = 1 // the log axis starts at 1 s; shorter jobs count there
			}
			xy.X, xy.Y = append(xy.X, x), append(xy.Y, p.Y)
		}
		c.Series = append(c.Series, xy)
	}
	caption := "No GPU job with a known run time in the window."
	if r.Headline.GPUJobs > 0 && !math.IsNaN(r.RunP50S) {
		caption = fmt.Sprintf("Half of the GPU jobs ran %s or less (median %s).", fmtDur(r.RunP50S), strconv.FormatFloat(r.RunP50S, 'f', -1, 64)+" s")
		if !math.IsNaN(r.RunP90S) && r.RunP90S > 0 {
			caption += fmt.Sprintf(" 90%% finished within %s.", fmtDur(r.RunP90S))
		}
	}
	return figure{ID: FigDurationCDF, Title: c.Title, Caption: caption, SVG: c.SVG()}
}

func (r *Report) figStateShare() figure {
	c := &Bars{ID: FigStateShare, Title: "Final state of jobs and of GPU time", Categories: []string{"jobs", "GPU time"},
		Stacked: true, YMax: 1, YFormat: fmtPct, YLabel: "share"}
	var jobs, gt float64
	for _, s := range r.States {
		jobs += float64(s.Jobs)
		gt += s.GPUTime
	}
	for _, s := range r.States {
		c.Series = append(c.Series, Series{Name: s.State, Values: []float64{ratio(float64(s.Jobs), jobs), ratio(s.GPUTime, gt)}})
	}
	h := r.Headline
	if done, ok := h.StateShare["completed"]; !ok || math.IsNaN(done) {
		c.Series = nil
		return figure{ID: FigStateShare, Title: c.Title, Caption: "No job of the window has ended yet: there is no final state to share out.", SVG: c.SVG()}
	}
	caption := fmt.Sprintf("%s of jobs completed, %s were cancelled and %s failed (TIMEOUT and NODE_FAIL count as failed); by GPU time: %s, %s and %s.",
		fmtShare(h.StateShare, "completed"), fmtShare(h.StateShare, "cancelled"), fmtShare(h.StateShare, "failed"),
		fmtShare(h.GPUTimeStateShare, "completed"), fmtShare(h.GPUTimeStateShare, "cancelled"), fmtShare(h.GPUTimeStateShare, "failed"))
	if u, ok := h.StateShare["unknown"]; ok {
		caption += fmt.Sprintf(" The trace gives no outcome for %s of jobs.", fmtPct(u))
	}
	return figure{ID: FigStateShare, Title: c.Title, Caption: caption, SVG: c.SVG()}
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func (r *Report) figUtilHeatmap() figure {
	c := &Heatmap{ID: FigUtilHeatmap, Title: "GPU utilization by day of week and hour of day", Rows: weekdayNames, Cols: hourLabels(),
		Max: 1, Format: fmtPct, Label: "utilization"}
	c.Values = make([][]float64, 7)
	lo, hi := math.Inf(1), math.Inf(-1)
	var loAt, hiAt string
	for d := range 7 {
		c.Values[d] = r.HourWeekday[d][:]
		for h, v := range r.HourWeekday[d] {
			if math.IsNaN(v) {
				continue
			}
			if v < lo {
				lo, loAt = v, fmt.Sprintf("%s %02d:00", weekdayNames[d], h)
			}
			if v > hi {
				hi, hiAt = v, fmt.Sprintf("%s %02d:00", weekdayNames[d], h)
			}
		}
	}
	caption := "Utilization is the GPUs held by running jobs divided by the cluster's GPUs" + r.capacityNote() + ", averaged over each hour (" + r.zone() + ")."
	if loAt != "" {
		caption += fmt.Sprintf(" Lowest %s (%s), highest %s (%s).", fmtPct(lo), loAt, fmtPct(hi), hiAt)
	}
	return figure{ID: FigUtilHeatmap, Title: c.Title, Caption: caption, SVG: c.SVG()}
}

func periodFigure(id, title, what string, ps []Period) figure {
	c := &Bars{ID: id, Title: title, Stacked: false, YMax: 1, YFormat: fmtPct, YLabel: "GPU utilization",
		LineLabel: "submissions per " + what, LineFormat: fmtNum}
	util := Series{Name: "utilization", Color: palette[0]}
	subs := Series{Name: "submissions", Color: palette[1]}
	peak, peakAt := -1.0, ""
	for _, p := range ps {
		c.Categories = append(c.Categories, p.Label)
		util.Values = append(util.Values, p.Utilization)
		subs.Values = append(subs.Values, p.Submissions)
		if p.Submissions > peak {
			peak, peakAt = p.Submissions, p.Label
		}
	}
	if len(ps) > 0 {
		c.Series = []Series{util}
		c.Line = &subs
	}
	caption := "Bars: mean GPU utilization; line: mean jobs submitted per " + what + "."
	if peakAt != "" {
		caption += fmt.Sprintf(" Most submissions at %s (%s per %s).", peakAt, fmtNum(peak), what)
	}
	return figure{ID: id, Title: title, Caption: caption, SVG: c.SVG()}
}

func (r *Report) figMonthly() figure {
	c := &Bars{ID: FigMonthly, Title: "Single- and multi-GPU jobs by month", Stacked: true, YLabel: "GPU jobs", YFormat: fmtNum,
		LineLabel: "multi-GPU share of GPU time", LineFormat: fmtPct}
	single := Series{Name: "single-GPU jobs", Color: palette[0]}
	multi := Series{Name: "multi-GPU jobs", Color: palette[4]}
	share := Series{Name: "multi-GPU share of GPU time", Color: palette[3]}
	var sj, mj int64
	var sg, mg float64
	for _, m := range r.Months {
		c.Categories = append(c.Categories, m.Month)
		single.Values = append(single.Values, float64(m.SingleGPUJobs))
		multi.Values = append(multi.Values, float64(m.MultiGPUJobs))
		share.Values = append(share.Values, ratio(m.MultiGPUTime, m.SingleGPUTime+m.MultiGPUTime))
		sj, mj, sg, mg = sj+m.SingleGPUJobs, mj+m.MultiGPUJobs, sg+m.SingleGPUTime, mg+m.MultiGPUTime
	}
	if len(r.Months) > 0 {
		c.Series = []Series{single, multi}
		c.Line = &share
	}
	caption := fmt.Sprintf("Multi-GPU jobs are %s of GPU jobs but take %s of GPU time.",
		fmtPct(ratio(float64(mj), float64(sj+mj))), fmtPct(ratio(mg, sg+mg)))
	return figure{ID: FigMonthly, Title: c.Title, Caption: caption, SVG: c.SVG()}
}

func (r *Report) figVCUtil() figure {
	c := &Bars{ID: FigVCUtil, Title: "Utilization of each virtual cluster", YMax: 1, YFormat: fmtPct, YLabel: "GPU utilization"}
	mean := Series{Name: "mean", Color: palette[0]}
	p50 := Series{Name: "median hour", Color: palette[4]}
	p90 := Series{Name: "90th percentile hour", Color: palette[6]}
	for _, v := range r.VCs {
		c.Categories = append(c.Categories, v.Name)
		mean.Values = append(mean.Values, v.UtilMean)
		p50.Values = append(p50.Values, v.UtilP50)
		p90.Values = append(p90.Values, v.UtilP90)
	}
	if len(r.VCs) > 0 {
		c.Series = []Series{mean, p50, p90}
	}
	caption := "Hourly GPU utilization of each VC (GPUs held by its running jobs ÷ its GPUs): mean, median and 90th-percentile hour. The table gives demand, run and queue times."
	return figure{ID: FigVCUtil, Title: c.Title, Caption: caption, SVG: c.SVG()}
}

func (r *Report) figGPUCount() figure {
	c := &Bars{ID: FigGPUCount, Title: "GPU jobs and GPU time by GPUs per job", YFormat: fmtPct, YLabel: "share", YMax: 1}
	jobs := Series{Name: "share of GPU jobs", Color: palette[0]}
	gt := Series{Name: "share of GPU time", Color: palette[1]}
	var nj, ng float64
	for _, g := range r.GPUCounts {
		nj += float64(g.Jobs)
		ng += g.GPUTime
	}
	single, big := 0.0, 0.0
	for _, g := range r.GPUCounts {
		c.Categories = append(c.Categories, strconv.FormatInt(g.GPUs, 10))
		jobs.Values = append(jobs.Values, ratio(float64(g.Jobs), nj))
		gt.Values = append(gt.Values, ratio(g.GPUTime, ng))
		if g.GPUs == 1 {
			single = ratio(float64(g.Jobs), nj)
		}
		if g.GPUs >= 8 {
			big += ratio(g.GPUTime, ng)
		}
	}
	if len(r.GPUCounts) > 0 {
		c.Series = []Series{jobs, gt}
	}
	caption := fmt.Sprintf("%s of GPU jobs ask for one GPU; jobs of 8 GPUs or more take %s of GPU time.", fmtPct(single), fmtPct(big))
	return figure{ID: FigGPUCount, Title: c.Title, Caption: caption, SVG: c.SVG()}
}

func (r *Report) figStateByGPUs() figure {
	c := &Bars{ID: FigStateByGPUs, Title: "Final state by GPUs per job", Stacked: true, YMax: 1, YFormat: fmtPct, YLabel: "share of jobs"}
	present := map[string]bool{}
	for _, b := range r.StateByGPUs {
		for s, n := range b.Jobs {
			if n > 0 {
				present[s] = true
			}
		}
	}
	for _, s := range States {
		if !present[s] {
			continue
		}
		ser := Series{Name: s}
		for _, b := range r.StateByGPUs {
			var total int64
			for _, n := range b.Jobs {
				total += n
			}
			ser.Values = append(ser.Values, ratio(float64(b.Jobs[s]), float64(total)))
		}
		c.Series = append(c.Series, ser)
	}
	for _, b := range r.StateByGPUs {
		c.Categories = append(c.Categories, b.Bucket)
	}
	caption := "Share of jobs by final state within each GPU-count bucket."
	if n := len(r.StateByGPUs); n > 1 {
		first, last := r.StateByGPUs[0], r.StateByGPUs[n-1]
		caption += fmt.Sprintf(" %s of %s-GPU jobs completed against %s of %s-GPU jobs.",
			fmtPct(stateRate(first, "completed")), first.Bucket, fmtPct(stateRate(last, "completed")), last.Bucket)
	}
	return figure{ID: FigStateByGPUs, Title: c.Title, Caption: caption, SVG: c.SVG()}
}

func stateRate(b GPUStates, state string) float64 {
	var total int64
	for _, n := range b.Jobs {
		total += n
	}
	return ratio(float64(b.Jobs[state]), float64(total))
}

func (r *Report) figUserCurve() figure {
	c := &Lines{ID: FigUserCurve, Title: "Concentration of GPU time on users", XLabel: "share of users, heaviest first", XTicks: pctTicks,
		YLabel: "share of GPU time", YMax: 1, YFormat: fmtPct}
	if len(r.UserCurve) > 0 {
		xy := XY{Name: "cumulative share of GPU time"}
		xy.X, xy.Y = append(xy.X, 0), append(xy.Y, 0)
		for _, p := range r.UserCurve {
			xy.X, xy.Y = append(xy.X, p.X), append(xy.Y, p.Y)
		}
		c.Series = []XY{xy}
	}
	caption := "Users ranked by GPU time."
	for _, k := range r.Concentration {
		caption += fmt.Sprintf(" Top %s (%d): %s.", fmtPct(k.Pct), k.Users, fmtPct(k.Share))
	}
	return figure{ID: FigUserCurve, Title: c.Title, Caption: caption, SVG: c.SVG()}
}

var pctTicks = []Tick{{0, "0%"}, {0.2, "20%"}, {0.4, "40%"}, {0.6, "60%"}, {0.8, "80%"}, {1, "100%"}}

// figureUsers is how many users the user figures show.
const figureUsers = 15

func (r *Report) figUserQueue() figure {
	users := append([]User(nil), r.Users...)
	sort.SliceStable(users, func(i, j int) bool { return users[i].QueueShare > users[j].QueueShare })
	if len(users) > figureUsers {
		users = users[:figureUsers]
	}
	c := &Bars{ID: FigUserQueue, Title: "Queuing delay by user", YFormat: fmtPct, YMax: 1, YLabel: "share",
		LineLabel: "completion rate", LineFormat: fmtPct}
	q := Series{Name: "share of queuing delay", Color: palette[6]}
	g := Series{Name: "share of GPU time", Color: palette[0]}
	done := Series{Name: "completion rate", Color: stateColor["completed"]}
	top := 0.0
	for i, u := range users {
		c.Categories = append(c.Categories, "#"+strconv.Itoa(i+1))
		q.Values = append(q.Values, u.QueueShare)
		g.Values = append(g.Values, u.GPUTimeShare)
		done.Values = append(done.Values, u.CompletionRate)
		top += u.QueueShare
	}
	if len(users) > 0 {
		c.Series = []Series{q, g}
		c.Line = &done
	}
	if top == 0 || math.IsNaN(top) { // NaN: no queuing delay to divide by
		c.Series, c.Line = nil, nil
		return figure{ID: FigUserQueue, Title: c.Title, Caption: "No GPU job waited in this window (or the source gives no start times), so there is no queuing delay to share out.", SVG: c.SVG()}
	}
	caption := fmt.Sprintf("The %d users who waited most, numbered as in the table below; together they account for %s of all queuing delay of GPU jobs.", len(users), fmtPct(top))
	return figure{ID: FigUserQueue, Title: c.Title, Caption: caption, SVG: c.SVG()}
}

func (r *Report) figTelemetryUsers() figure {
	t := r.Telemetry
	c := &Bars{ID: FigTelemetryUser, Title: "GPU hours and idle allocated GPU hours by user", YLabel: "GPU hours", YFormat: fmtNum,
		LineLabel: "mean GPU utilization", LineFormat: func(v float64) string { return trimZero(v, 0) + "%" }}
	busy := Series{Name: "GPU hours used", Color: palette[0]}
	idle := Series{Name: "idle allocated GPU hours", Color: palette[3]}
	util := Series{Name: "mean utilization", Color: palette[2]}
	users := t.Users
	if len(users) > figureUsers {
		users = users[:figureUsers]
	}
	for i, u := range users {
		c.Categories = append(c.Categories, "#"+strconv.Itoa(i+1))
		busy.Values = append(busy.Values, math.Max(u.GPUHours-u.IdleGPUHours, 0))
		idle.Values = append(idle.Values, u.IdleGPUHours)
		util.Values = append(util.Values, u.UtilMean)
	}
	if len(users) > 0 {
		c.Stacked = true
		c.Series = []Series{busy, idle}
		c.Line = &util
	}
	caption := fmt.Sprintf("%s jobs with GPU samples: %s GPU hours at %s mean utilization; %s GPU hours (%s) allocated but idle; %s kWh.",
		fmtNum(float64(t.Jobs)), fmtNum(t.GPUHours), trimZero(t.UtilMean, 1)+"%", fmtNum(t.IdleGPUHours), fmtPct(ratio(t.IdleGPUHours, t.GPUHours)), fmtNum(t.EnergyKWh))
	return figure{ID: FigTelemetryUser, Title: c.Title, Caption: caption, SVG: c.SVG()}
}

// zone names the time zone of the hour and weekday slots.
func (r *Report) zone() string {
	if r.timeZone == "" {
		return "UTC"
	}
	return r.timeZone
}

// capacitySources explains analytics_capacity's sources.
var capacitySources = map[string]string{
	"config":     "as configured",
	"config_vcs": "its configured VCs summed",
	"inventory":  "GPUs seen by the collectors",
	"peak":       "the most held at once, a lower bound: configure the capacity for true utilization",
}

// capacityNote says how many GPUs utilization divides by, and why.
func (r *Report) capacityNote() string {
	if r.Capacity <= 0 {
		return ""
	}
	s := " (" + fmtNum(r.Capacity) + " GPUs"
	if why, ok := capacitySources[r.CapacitySource]; ok {
		s += ": " + why
	}
	return s + ")"
}
