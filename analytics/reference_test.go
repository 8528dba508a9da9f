package analytics_test

import (
	"bufio"
	"compress/gzip"
	"encoding/csv"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// refJob is one job as the test reads it from a raw trace file, with its own
// parsers: nothing of ingest/trace or of the import path is reused, so that
// the characterization is checked against an independent computation.
type refJob struct {
	vc, user   string
	gpus       int64
	submit     int64 // Unix seconds
	start, end int64 // Unix seconds; -1 when unknown
	class      string
}

// run and queue return the run time and queuing delay; ok is false when
// unknown.
func (j *refJob) run() (int64, bool) {
	if j.class == "" || j.start < 0 || j.end < j.start {
		return 0, false
	}
	return j.end - j.start, true
}

func (j *refJob) queue() (int64, bool) {
	if j.start < 0 || j.start < j.submit {
		return 0, false
	}
	return j.start - j.submit, true
}

// readSWFRaw reads an SWF file the way the issue defines it: GPUs are the
// allocated processors, or the requested ones where allocated is -1; status
// 1 is completed, 0 failed, 5 cancelled, anything else unknown; times are
// UnixStartTime + submit, + wait, + run.
func readSWFRaw(tb testing.TB, path string) []refJob {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		tb.Fatal(err)
	}
	var (
		out    []refJob
		origin int64
	)
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, ";") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line[1:]), "UnixStartTime:"); ok {
				origin, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			}
			continue
		}
		fs := strings.Fields(line)
		if len(fs) != 18 {
			tb.Fatalf("%s: line %q: %d fields", path, line, len(fs))
		}
		n := func(i int) int64 {
			v, err := strconv.ParseInt(fs[i], 10, 64)
			if err != nil {
				fv, ferr := strconv.ParseFloat(fs[i], 64)
				if ferr != nil {
					tb.Fatalf("%s: field %d %q", path, i+1, fs[i])
				}
				v = int64(fv)
			}
			return v
		}
		j := refJob{user: fs[11], submit: origin + n(1), start: -1, end: -1}
		if n(11) < 0 {
			j.user = ""
		}
		// the queue as the importer names it: "queue" or "queue/partition"
		q := ""
		if n(14) >= 0 {
			q = fs[14]
		}
		if n(15) >= 0 {
			q += "/" + fs[15]
		}
		j.vc = q
		j.gpus = n(4)
		if j.gpus < 0 {
			j.gpus = n(7)
		}
		if j.gpus < 0 {
			j.gpus = 0
		}
		if w := n(2); w >= 0 {
			j.start = j.submit + w
			if r := n(3); r >= 0 {
				j.end = j.start + r
			}
		}
		switch n(10) {
		case 1:
			j.class = "completed"
		case 0:
			j.class = "failed"
		case 5:
			j.class = "cancelled"
		default:
			if j.end >= 0 {
				j.class = "unknown" // ended, outcome not given
			}
		}
		out = append(out, j)
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

// readVenusRaw reads the Venus slice: job_id,user,vc,gpu_num,node_num,state,
// submit_time,duration (no start or end time, so no run time or delay).
func readVenusRaw(tb testing.TB, path string) []refJob {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		tb.Fatal(err)
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	var out []refJob
	for _, r := range recs[1:] {
		t, err := time.Parse("2006-01-02 15:04:05", r[col["submit_time"]])
		if err != nil {
			tb.Fatal(err)
		}
		g, _ := strconv.ParseInt(r[col["gpu_num"]], 10, 64)
		j := refJob{vc: r[col["vc"]], user: r[col["user"]], gpus: g, submit: t.Unix(), start: -1, end: -1}
		switch st := r[col["state"]]; {
		case st == "COMPLETED":
			j.class = "completed"
		case strings.HasPrefix(st, "CANCELLED"):
			j.class = "cancelled"
		case st == "FAILED" || st == "TIMEOUT" || st == "NODE_FAIL":
			j.class = "failed"
		default:
			tb.Fatalf("venus state %q", st)
		}
		out = append(out, j)
	}
	return out
}

// quantile7 is the P-quantile of sorted values, linear between closest ranks
// (numpy's default); NaN when empty.
func quantile7(a []int64, p float64) float64 {
	if len(a) == 0 {
		return math.NaN()
	}
	h := float64(len(a)-1) * p
	lo, hi := int(math.Floor(h)), int(math.Ceil(h))
	return float64(a[lo]) + (h-math.Floor(h))*float64(a[hi]-a[lo])
}

func sorted(a []int64) []int64 {
	b := append([]int64(nil), a...)
	sort.Slice(b, func(i, j int) bool { return b[i] < b[j] })
	return b
}

// refStats is the independent characterization of a set of jobs.
type refStats struct {
	jobs, gpuJobs, ended, users int
	classJobs                   map[string]int
	classGPUTime                map[string]float64
	gpuTime                     float64
	runs, queues, gpuCounts     []int64 // sorted; gpuCounts of GPU jobs
	topShare                    map[int]float64
	userGPUTime                 map[string]float64
	userQueue                   map[string]float64
}

func characterize(jobs []refJob) *refStats {
	s := &refStats{classJobs: map[string]int{}, classGPUTime: map[string]float64{}, topShare: map[int]float64{},
		userGPUTime: map[string]float64{}, userQueue: map[string]float64{}}
	for i := range jobs {
		j := &jobs[i]
		s.jobs++
		if _, ok := s.userGPUTime[j.user]; !ok {
			s.userGPUTime[j.user] = 0
			s.userQueue[j.user] = 0
		}
		if j.gpus > 0 {
			s.gpuJobs++
			s.gpuCounts = append(s.gpuCounts, j.gpus)
		}
		if j.class != "" {
			s.ended++
			s.classJobs[j.class]++
		}
		if r, ok := j.run(); ok {
			s.runs = append(s.runs, r)
			gt := float64(j.gpus * r)
			s.gpuTime += gt
			s.classGPUTime[j.class] += gt
			s.userGPUTime[j.user] += gt
		}
		if q, ok := j.queue(); ok {
			s.queues = append(s.queues, q)
			s.userQueue[j.user] += float64(q)
		}
	}
	s.users = len(s.userGPUTime)
	s.runs, s.queues, s.gpuCounts = sorted(s.runs), sorted(s.queues), sorted(s.gpuCounts)
	var ut []float64
	for _, v := range s.userGPUTime {
		ut = append(ut, v)
	}
	sort.Sort(sort.Reverse(sort.Float64Slice(ut)))
	for _, p := range []int{1, 5, 10, 25} {
		k := (p*s.users + 99) / 100
		var top float64
		for _, v := range ut[:k] {
			top += v
		}
		s.topShare[p] = top / s.gpuTime
	}
	return s
}
