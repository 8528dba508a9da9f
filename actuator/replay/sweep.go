package replay

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/heliostat-dev/heliostat/ingest/trace"
)

// A capacity sweep replays one workload on clusters of several sizes and
// measures what each size would have given: the what-if of capacity
// planning (`heliostat sim --capacity-sweep`).
//
// A size is a scale factor of the base cluster, or an explicit node count of
// a cluster that is one pool. Scaling multiplies each VC's node count and
// rounds to the nearest (halves up), keeping at least one node; a VC of a
// single node (an SWF machine given as one pool of MaxProcs processors)
// scales its GPUs (processors) instead. A size that would take a VC beyond
// 2^20 nodes (a one-node VC beyond 2^20 GPUs) is refused. With FitLargest, a VC never shrinks
// below what its largest job needs. Otherwise a job larger than its VC at
// some size never runs there: it is counted (NeverRun) and left out of that
// size's replay, so the sizes below the largest jobs replay less work, which
// NeverRun and NeverRunGPUTime show.

// maxSweepSizes bounds the sizes of one sweep.
const maxSweepSizes = 1000

// Size is one cluster size of a capacity sweep: Factor × the base cluster,
// or, when Nodes > 0, a single-pool cluster of Nodes nodes.
type Size struct {
	Factor float64
	Nodes  int
}

// String returns "×0.5" or "24 nodes".
func (s Size) String() string {
	if s.Nodes > 0 {
		return fmt.Sprintf("%d nodes", s.Nodes)
	}
	return "×" + strconv.FormatFloat(s.Factor, 'g', -1, 64)
}

// ErrBadSizes is wrapped by the errors of ParseFactors and ParseNodeCounts.
var ErrBadSizes = errors.New("replay: bad capacity sweep")

// ParseFactors reads a comma-separated list of scale factors, such as
// "0.5,0.75,1,1.25,1.5": each a number above 0 and at most 1000, none twice.
// Errors name the entry.
func ParseFactors(s string) ([]Size, error) {
	return parseSizes(s, func(f string) (Size, error) {
		x, err := strconv.ParseFloat(f, 64)
		if err != nil || !(x > 0 && x <= 1000) {
			return Size{}, fmt.Errorf("factor %.40q is not a number above 0 and at most 1000", f)
		}
		return Size{Factor: x}, nil
	})
}

// ParseNodeCounts reads a comma-separated list of node counts, such as
// "16,20,24": each an integer from 1 to 2^20, none twice. Errors name the
// entry.
func ParseNodeCounts(s string) ([]Size, error) {
	return parseSizes(s, func(f string) (Size, error) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > maxNodes {
			return Size{}, fmt.Errorf("node count %.40q is not an integer from 1 to %d", f, maxNodes)
		}
		return Size{Nodes: n}, nil
	})
}

func parseSizes(s string, one func(string) (Size, error)) ([]Size, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("%w: empty list", ErrBadSizes)
	}
	parts := strings.Split(s, ",")
	if len(parts) > maxSweepSizes {
		return nil, fmt.Errorf("%w: %d sizes; at most %d", ErrBadSizes, len(parts), maxSweepSizes)
	}
	var out []Size
	for i, p := range parts {
		z, err := one(strings.TrimSpace(p))
		if err != nil {
			return nil, fmt.Errorf("%w: entry %d: %v", ErrBadSizes, i+1, err)
		}
		if slices.Contains(out, z) {
			return nil, fmt.Errorf("%w: entry %d: %s given twice", ErrBadSizes, i+1, z)
		}
		out = append(out, z)
	}
	return out, nil
}

// Scale returns base at size s. largest[i] is the most GPUs a job of VC i
// asks for; with fit, no VC is made too small for it (nil or 0: no bound).
// A size that would give a VC more nodes (or a one-node VC more GPUs) than a
// replay models, 2^20, is refused, naming the size and the VC: clamped, the
// row would not be the size it names.
func Scale(base []VC, s Size, largest []int, fit bool) ([]VC, error) {
	if s.Nodes > 0 {
		if len(base) != 1 {
			return nil, fmt.Errorf("replay: explicit node counts need a cluster of one pool, not %d virtual clusters: scale them with factors", len(base))
		}
		if s.Nodes > maxNodes {
			return nil, fmt.Errorf("replay: size %s: more than %d nodes", s, maxNodes)
		}
	} else if !(s.Factor > 0) || math.IsInf(s.Factor, 0) {
		return nil, fmt.Errorf("replay: scale factor %v: want a number above 0", s.Factor)
	}
	out := make([]VC, len(base))
	for i, v := range base {
		need := 0
		if fit && i < len(largest) {
			need = largest[i]
		}
		switch {
		case s.Nodes > 0:
			v.Nodes = max(s.Nodes, ceilDiv(need, v.GPUsPerNode))
		case v.Nodes == 1:
			n, err := scaled(s, v, "GPUs (processors) on its node", v.GPUsPerNode, maxGPUsPerNode)
			if err != nil {
				return nil, err
			}
			v.GPUsPerNode = max(n, need)
		default:
			n, err := scaled(s, v, "nodes", v.Nodes, maxNodes)
			if err != nil {
				return nil, err
			}
			v.Nodes = max(n, ceilDiv(need, v.GPUsPerNode))
		}
		out[i] = v
	}
	return out, nil
}

// scaled returns n × s.Factor rounded (halves up), at least 1, or an error
// naming the size, the VC and what it counts when that is more than bound.
// The product is taken and checked in float64, so that no n overflows an int.
func scaled(s Size, v VC, what string, n, bound int) (int, error) {
	x := math.Round(s.Factor * float64(n))
	if x > float64(bound) {
		return 0, fmt.Errorf("replay: size %s: VC %s would have %.0f %s, more than the %d a replay models", s, v.Name, x, what, bound)
	}
	return max(1, int(x)), nil
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// SweepWorkload reads tr for a sweep over cl: the workload holds every job
// with a known run time and GPUs (processors) in a known VC, whatever its
// size (its VCs are unbounded, and Skipped counts no job as too large), and
// base is the cluster the sizes scale: cl's VCs, its pool, or the SWF
// machine of the trace's header.
func SweepWorkload(tr *trace.Trace, cl Cluster) (w *Workload, base []VC, err error) {
	w0, err := FromTrace(tr, cl)
	if err != nil {
		return nil, nil, err
	}
	base = w0.VCs
	var open Cluster
	switch {
	case len(cl.VCs) > 0:
		open.VCs = make([]VC, len(base))
		for i, v := range base {
			v.Nodes = maxNodes
			open.VCs[i] = v
		}
	case base[0].Nodes == 1:
		open.Nodes, open.GPUsPerNode = 1, maxGPUsPerNode
	default:
		open.Nodes, open.GPUsPerNode = maxNodes, base[0].GPUsPerNode
	}
	if w, err = FromTrace(tr, open); err != nil {
		return nil, nil, err
	}
	return w, base, nil
}

// SweepPoint is what a replay at one size gave. Queueing delays are start −
// submit of the jobs replayed, seconds; the median is exact (the mean of the
// two middle values for an even count), p95 and p99 the nearest rank.
type SweepPoint struct {
	// Size is the size as asked: "×0.5" or "24 nodes".
	Size string `json:"size"`
	// Factor is the scale factor, or the node count over the base's
	// nodes for an explicit count.
	Factor float64 `json:"factor"`
	// Cluster is the cluster at this size.
	Cluster []VC `json:"cluster"`
	// Nodes and GPUs are the cluster's nodes and GPUs (processors) in all.
	Nodes int `json:"nodes"`
	GPUs  int `json:"gpus"`
	// NJobs counts the jobs replayed.
	NJobs int `json:"n_jobs"`
	// NeverRun counts the jobs larger than their VC at this size: they
	// could never run and are not replayed. NeverRunGPUTimeShare is their
	// share of the workload's GPU time (GPUs × run).
	NeverRun             int     `json:"never_run"`
	NeverRunGPUTimeShare float64 `json:"never_run_gpu_time_share"`
	AvgQueue             float64 `json:"avg_queue_s"`
	MedianQueue          float64 `json:"median_queue_s"`
	P95Queue             float64 `json:"p95_queue_s"`
	P99Queue             float64 `json:"p99_queue_s"`
	MaxQueue             float64 `json:"max_queue_s"`
	// QueuedShare is the share of the jobs replayed that waited at all.
	QueuedShare float64 `json:"queued_share"`
	// AvgJCT is the mean of end − submit, seconds.
	AvgJCT float64 `json:"avg_jct_s"`
	// Makespan is the last end − the first submit of the jobs replayed.
	Makespan float64 `json:"makespan_s"`
	// Utilization is the GPU time of the jobs replayed over GPUs ×
	// Makespan.
	Utilization float64 `json:"utilization"`
	// ElapsedS is the wall time of this size's replay, seconds.
	ElapsedS float64 `json:"elapsed_s"`
}

// SweepConfig configures a capacity sweep.
type SweepConfig struct {
	// Sizes are the cluster sizes, in the order to replay and report.
	Sizes []Size
	// FitLargest keeps every VC at least as large as its largest job.
	FitLargest bool
	// Policy orders the queues (default FIFO).
	Policy Policy
	// Replay configures each replay (backfill, QSSF).
	Replay Config
	// Progress, when set, is called after each size.
	Progress func(i int, p SweepPoint)
}

// Sweep replays w on base scaled to each of cfg.Sizes. w's jobs may be
// larger than base (see SweepWorkload); their VC indexes are base's.
func Sweep(ctx context.Context, w *Workload, base []VC, cfg SweepConfig) ([]SweepPoint, error) {
	if len(cfg.Sizes) == 0 {
		return nil, errors.New("replay: capacity sweep without sizes")
	}
	if len(base) == 0 || len(w.VCs) != len(base) {
		return nil, fmt.Errorf("replay: capacity sweep: workload of %d VCs on a base cluster of %d", len(w.VCs), len(base))
	}
	pol := cfg.Policy
	if pol == "" {
		pol = FIFO
	}
	largest := make([]int, len(base))
	var gpuTime float64
	for i := range w.Jobs {
		j := &w.Jobs[i]
		if j.VC < 0 || j.VC >= len(base) {
			return nil, fmt.Errorf("replay: job %s: VC %d out of range", j.ID, j.VC)
		}
		largest[j.VC] = max(largest[j.VC], j.GPUs)
		gpuTime += float64(j.GPUs) * float64(j.Run)
	}
	baseNodes := 0
	for _, v := range base {
		baseNodes += v.Nodes
	}
	var out []SweepPoint
	for i, s := range cfg.Sizes {
		if ctx.Err() != nil {
			return out, fmt.Errorf("replay: capacity sweep stopped before size %s: %w", s, context.Cause(ctx))
		}
		vcs, err := Scale(base, s, largest, cfg.FitLargest)
		if err != nil {
			return out, err
		}
		p := SweepPoint{Size: s.String(), Factor: s.Factor, Cluster: vcs}
		if s.Nodes > 0 {
			p.Factor = float64(s.Nodes) / float64(baseNodes)
		}
		sub := &Workload{VCs: vcs, Skipped: w.Skipped}
		var never float64
		for _, j := range w.Jobs {
			v := vcs[j.VC]
			if int64(j.GPUs) > int64(v.Nodes)*int64(v.GPUsPerNode) {
				p.NeverRun++
				never += float64(j.GPUs) * float64(j.Run)
				continue
			}
			sub.Jobs = append(sub.Jobs, j)
		}
		if gpuTime > 0 {
			p.NeverRunGPUTimeShare = never / gpuTime
		}
		for _, v := range vcs {
			p.Nodes += v.Nodes
			p.GPUs += v.Nodes * v.GPUsPerNode
		}
		began := time.Now()
		res, err := Run(ctx, sub, pol, cfg.Replay)
		if err != nil {
			return out, err
		}
		p.summarize(sub, res, gpuTime-never)
		p.ElapsedS = time.Since(began).Seconds()
		out = append(out, p)
		if cfg.Progress != nil {
			cfg.Progress(i, p)
		}
	}
	return out, nil
}

// summarize fills p's figures from the replay res of w, whose jobs hold
// gpuTime GPU·seconds.
func (p *SweepPoint) summarize(w *Workload, res Result, gpuTime float64) {
	n := len(w.Jobs)
	p.NJobs = n
	if n == 0 {
		return
	}
	waits := make([]float64, n)
	var wait, jct float64
	queued := 0
	for i := range w.Jobs {
		q := float64(res.Start[i] - w.Jobs[i].Submit)
		waits[i] = q
		wait += q
		jct += float64(res.End[i] - w.Jobs[i].Submit)
		if q > 0 {
			queued++
		}
	}
	slices.Sort(waits)
	p.AvgQueue, p.AvgJCT = wait/float64(n), jct/float64(n)
	p.QueuedShare = float64(queued) / float64(n)
	if n%2 == 1 {
		p.MedianQueue = waits[n/2]
	} else {
		p.MedianQueue = (waits[n/2-1] + waits[n/2]) / 2
	}
	p.P95Queue = nearestRank(waits, 0.95)
	p.P99Queue = nearestRank(waits, 0.99)
	p.MaxQueue = waits[n-1]
	p.Makespan = res.Makespan
	if p.Makespan > 0 && p.GPUs > 0 {
		p.Utilization = gpuTime / (float64(p.GPUs) * p.Makespan)
	}
}

// nearestRank returns the q-quantile of sorted xs by the nearest-rank rule.
func nearestRank(xs []float64, q float64) float64 {
	k := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[min(max(k, 0), len(xs)-1)]
}
