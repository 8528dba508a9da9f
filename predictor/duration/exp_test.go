package duration

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func loadSWFQuick(t *testing.T, path string) []Job {
	f, err := os.Open(path)
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	gz, _ := gzip.NewReader(f)
	sc := bufio.NewScanner(gz)
	var start int64
	var jobs []Job
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, ";") {
			if i := strings.Index(l, "UnixStartTime:"); i >= 0 {
				start, _ = strconv.ParseInt(strings.TrimSpace(l[i+14:]), 10, 64)
			}
			continue
		}
		fs := strings.Fields(l)
		if len(fs) != 18 {
			continue
		}
		n := func(i int) int64 { v, _ := strconv.ParseInt(fs[i], 10, 64); return v }
		sub := time.Unix(start+n(1), 0)
		run := time.Duration(n(3)) * time.Second
		procs := int(n(7))
		if procs <= 0 {
			procs = int(n(4))
		}
		exe := ""
		if n(13) > 0 {
			exe = fs[13]
		}
		q := ""
		if n(14) > 0 {
			q = fs[14]
		}
		if n(15) > 0 {
			q += "/" + fs[15]
		}
		jobs = append(jobs, Job{User: fs[11], Executable: exe, Queue: q, Submit: sub, ReqTime: time.Duration(n(8)) * time.Second,
			Procs: procs, Run: run, End: sub.Add(time.Duration(n(2))*time.Second + run)})
	}
	return jobs
}

func TestExperiment(t *testing.T) {
	if k, err := strconv.ParseFloat(os.Getenv("HK"), 64); err == nil {
		huberK = k
	}
	if os.Getenv("EXP") == "" {
		t.Skip()
	}
	for _, p := range []string{"CTC-SP2-1996-3.1-cln.swf.gz", "HPC2N-2002-2.2-cln.swf.gz"} {
		jobs := loadSWFQuick(t, "../../../shared/data/swf/"+p)
		start := time.Now()
		res, err := Backtest(jobs, BacktestConfig{})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(map[string]any{"h": []float64{res.Within2x, res.R2Log, res.MAES}, "cold": []float64{float64(res.Cold.N), res.Cold.Within2x, res.Cold.R2Log}, "refits": res.Refits, "train_s": res.TrainTime})
		t.Logf("%s (%v): %s", p, time.Since(start), b)
		for _, n := range []string{"reqtime", "last1", "last2"} {
			m := res.Baselines[n]
			t.Logf("   %-8s within2x %.3f r2 %.3f mae %.0f", n, m.Within2x, m.R2Log, m.MAES)
		}
	}
}
