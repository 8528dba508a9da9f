package main

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/heliostat-dev/heliostat/predictor/duration"
)

// backtestJobsHeader is the header of predictor backtest --jobs-out: one
// row per test job, in submit order, with what the model knew at its
// submit and what it predicted. submit is Unix seconds; procs and req_s
// are empty when the trace does not give them; fitted is 0 when the
// segment's history rule answered; log_ratio = ln(max(predicted_s, 1) /
// actual_s) (> 0: predicted too long); within_2x as the JSON counts it.
func backtestJobsHeader() []string {
	return []string{"job", "user", "queue", "submit", "procs", "req_s", "segment", "fitted",
		"predicted_s", "lower_s", "upper_s", "actual_s", "log_ratio", "within_2x"}
}

// backtestJobs writes the rows of --jobs-out as the backtest predicts.
type backtestJobs struct {
	buf *bufio.Writer
	cw  *csv.Writer
	row []string
	n   int
	err error // the first write error; later rows are not written
}

func newBacktestJobs(out io.Writer) *backtestJobs {
	buf := bufio.NewWriter(out)
	w := &backtestJobs{buf: buf, cw: csv.NewWriter(buf), row: make([]string, len(backtestJobsHeader()))}
	w.err = w.cw.Write(backtestJobsHeader())
	return w
}

// add writes test job j's row; a duration.BacktestConfig.OnPredict.
func (w *backtestJobs) add(j *duration.Job, f duration.Features, p duration.Prediction) {
	if w.err != nil {
		return
	}
	secs := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
	pred, actual := p.Point.Seconds(), j.Run.Seconds()
	r := w.row
	r[0], r[1], r[2] = j.ID, j.User, j.Queue
	r[3] = strconv.FormatInt(j.Submit.Unix(), 10)
	r[4], r[5] = "", ""
	if j.Procs > 0 {
		r[4] = strconv.Itoa(j.Procs)
	}
	if j.ReqTime > 0 {
		r[5] = secs(j.ReqTime.Seconds())
	}
	r[6], r[7] = f.Segment.String(), b01(p.Fitted)
	r[8], r[9], r[10], r[11] = secs(pred), secs(p.Low.Seconds()), secs(p.High.Seconds()), secs(actual)
	r[12] = strconv.FormatFloat(math.Log(math.Max(pred, 1)/actual), 'f', 4, 64)
	r[13] = b01(duration.Within2x(pred, actual))
	w.err = w.cw.Write(r)
	w.n++
}

// finish flushes the rows; it returns the first error of any write.
func (w *backtestJobs) finish() error {
	if w.err != nil {
		return fmt.Errorf("jobs CSV: %w", w.err)
	}
	w.cw.Flush()
	if err := w.cw.Error(); err != nil {
		return fmt.Errorf("jobs CSV: %w", err)
	}
	if err := w.buf.Flush(); err != nil {
		return fmt.Errorf("jobs CSV: %w", err)
	}
	return nil
}

func b01(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
