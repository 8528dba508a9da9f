package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/heliostat-dev/heliostat/schemas"
)

// VC is a virtual cluster: a named group of nodes that only its users' jobs
// run on.
type VC struct {
	Name  string
	Nodes int
	// GPUType is the GPU model of the VC's nodes (GPUTypes lists those
	// the simulator models); "" is DefaultGPUType.
	GPUType string
}

// GeneratorConfig configures a Generator.
type GeneratorConfig struct {
	// Seed makes the workload reproducible: one seed, one workload.
	Seed uint64
	// Start is the simulation's start; its location sets the local hour of
	// the diurnal submission pattern.
	Start time.Time
	// VCs are the virtual clusters jobs are submitted to; at least one.
	VCs []VC
	// GPUsPerNode is the GPUs of each node; at least 1.
	GPUsPerNode int
	// JobsPerHour is the mean rate of submissions over a week; 0 means the
	// rate that offers 60% of the cluster's GPU time (AutoJobsPerHour).
	JobsPerHour float64
	// Users is how many users submit jobs; 0 means 4 per node, at least 8.
	Users int
}

// Generator is a synthetic Workload that follows the published Helios
// figures (see helios.go): Zipf-distributed user activity, GPU counts that are
// powers of two (mostly one), heavy-tailed (log-normal) run times, Helios'
// shares of completed, failed and cancelled jobs, and Venus' hour-of-day and
// day-of-week submission pattern. Job names recur per user and run-time
// scale, as Helios found, so that a predictor has something to learn. It
// never runs out of jobs.
type Generator struct {
	rng      *rand.Rand
	start    time.Time
	t        float64 // seconds since start of the last arrival
	rate     float64 // mean jobs per second
	maxRate  float64 // bound for thinning
	users    []genUser
	userCum  []float64 // cumulative activity
	vcSizes  map[string][]float64
	durs     durationModel
	stateCum [3]float64
}

type genUser struct {
	name string
	vc   string
	hash uint64
	// gpuType is the GPU type the user's jobs ask for, in a VC that mixes
	// types; "" for any (and in every other VC).
	gpuType string
}

// MergeVCs returns vcs (as ParseVCs gives them) with one item per VC, in
// order of first appearance: a VC of mixed nodes, which comes once per GPU
// type, gets its nodes summed and the first item's GPUType (mixedKinds
// lists its types).
func MergeVCs(vcs []VC) []VC {
	var out []VC
	at := map[string]int{}
	for _, vc := range vcs {
		if i, ok := at[vc.Name]; ok {
			out[i].Nodes += vc.Nodes
			continue
		}
		at[vc.Name] = len(out)
		out = append(out, vc)
	}
	return out
}

// mixedKinds returns, for each VC of vcs that comes with more than one GPU
// type (a VC of mixed nodes), its items, each GPUType resolved ("" is
// DefaultGPUType).
func mixedKinds(vcs []VC) map[string][]VC {
	groups := map[string][]VC{}
	for _, vc := range vcs {
		b, _ := boardOf(vc.GPUType)
		groups[vc.Name] = append(groups[vc.Name], VC{Name: vc.Name, Nodes: vc.Nodes, GPUType: b.gpuType})
	}
	for name, g := range groups {
		if len(g) < 2 {
			delete(groups, name)
		}
	}
	return groups
}

// pickTypes gives half the users of each VC of mixed nodes (kinds, as
// mixedKinds returns them) a GPU type their jobs ask for, each type in
// proportion to its nodes; the other half ask for any. It reads the users'
// hashes, not the generator's stream, so that a workload without such a VC
// is the same as before it.
func (g *Generator) pickTypes(kinds map[string][]VC) {
	for i := range g.users {
		u := &g.users[i]
		groups := kinds[u.vc]
		if len(groups) == 0 || u.hash>>63 == 0 {
			continue
		}
		total := 0
		for _, k := range groups {
			total += k.Nodes
		}
		x := int((u.hash >> 32 & 0x7fffffff) % uint64(total))
		for _, k := range groups {
			if x < k.Nodes {
				u.gpuType = k.GPUType
				break
			}
			x -= k.Nodes
		}
	}
}

var finalStates = [3]schemas.JobState{schemas.StateCompleted, schemas.StateCancelled, schemas.StateFailed}

// projectWords name users' recurring jobs.
var projectWords = []string{
	"resnet", "bert", "gpt", "vit", "detr", "yolo", "unet", "moco", "clip", "swin",
	"mae", "t5", "wav2vec", "ddpm", "nerf", "lstm", "gan", "pointnet", "deit", "roberta",
}

// timeLimits are the limits users pick, smallest first.
var timeLimits = []time.Duration{
	30 * time.Minute, time.Hour, 2 * time.Hour, 4 * time.Hour, 8 * time.Hour, 12 * time.Hour,
	24 * time.Hour, 48 * time.Hour, 72 * time.Hour, 168 * time.Hour, 336 * time.Hour,
}

// NewGenerator returns a Generator for cfg.
func NewGenerator(cfg GeneratorConfig) (*Generator, error) {
	if len(cfg.VCs) == 0 {
		return nil, errors.New("sim: generator: no virtual clusters")
	}
	if cfg.GPUsPerNode < 1 {
		return nil, fmt.Errorf("sim: generator: %d GPUs per node", cfg.GPUsPerNode)
	}
	if cfg.JobsPerHour < 0 || math.IsNaN(cfg.JobsPerHour) || math.IsInf(cfg.JobsPerHour, 0) {
		return nil, fmt.Errorf("sim: generator: jobs per hour %v is not a non-negative number", cfg.JobsPerHour)
	}
	nodes := 0
	for _, vc := range cfg.VCs {
		if vc.Nodes < 1 {
			return nil, fmt.Errorf("sim: generator: virtual cluster %q has %d nodes", vc.Name, vc.Nodes)
		}
		nodes += vc.Nodes
	}
	durs, err := fitDurations()
	if err != nil {
		return nil, err
	}
	vcs, kinds := MergeVCs(cfg.VCs), mixedKinds(cfg.VCs)
	g := &Generator{
		rng:     rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		start:   cfg.Start,
		durs:    durs,
		vcSizes: make(map[string][]float64),
	}
	var c float64
	for i, s := range durs.states {
		c += s.share
		g.stateCum[i] = c
	}
	nUsers := cfg.Users
	if nUsers <= 0 {
		nUsers = max(8, 4*nodes)
	}
	g.makeUsers(nUsers, vcs)
	r := sizeRatio()
	for _, vc := range vcs {
		g.vcSizes[vc.Name] = cumulative(sizeShares(r, maxExp(vc.Nodes*cfg.GPUsPerNode)))
	}
	for name, groups := range kinds {
		for _, k := range groups {
			g.vcSizes[typeKey(name, k.GPUType)] = cumulative(sizeShares(r, maxExp(k.Nodes*cfg.GPUsPerNode)))
		}
	}
	g.pickTypes(kinds)
	rate := cfg.JobsPerHour
	if rate == 0 {
		rate = AutoJobsPerHour(cfg.VCs, cfg.GPUsPerNode)
	}
	g.rate = rate / 3600
	g.maxRate = g.rate * slices.Max(venusHourOfDay[:]) * slices.Max(venusDayOfWeek[:])
	return g, nil
}

// AutoJobsPerHour is the default submission rate for a cluster of vcs: the
// rate at which the jobs' mean GPU time (Helios' mean run time times the mean
// size of jobs that fit each virtual cluster) fills 60% of the cluster's GPUs.
func AutoJobsPerHour(vcs []VC, gpusPerNode int) float64 {
	r := sizeRatio()
	var gpus, gpuSeconds float64
	vcs = MergeVCs(vcs)
	for _, vc := range vcs {
		n := float64(vc.Nodes * gpusPerNode)
		gpus += n
		// Users are spread so that each VC gets jobs in proportion to its
		// GPUs.
		gpuSeconds += n * sizeMean(r, maxExp(vc.Nodes*gpusPerNode)) * heliosMeanRunS
	}
	if gpus == 0 || gpuSeconds == 0 {
		return 0
	}
	perJob := gpuSeconds / gpus
	return targetLoad * gpus * 3600 / perJob
}

// maxExp returns the largest k ≤ maxSizeExp with 2^k ≤ gpus.
func maxExp(gpus int) int {
	k := 0
	for k < maxSizeExp && 1<<(k+1) <= gpus {
		k++
	}
	return k
}

func cumulative(p []float64) []float64 {
	c := make([]float64, len(p))
	var s float64
	for i, v := range p {
		s += v
		c[i] = s
	}
	for i := range c {
		c[i] /= s
	}
	return c
}

// makeUsers names n users with Zipf activity and spreads them over vcs, the
// most active first, each to the VC with the least activity per node so far.
func (g *Generator) makeUsers(n int, vcs []VC) {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	load := make([]float64, len(vcs))
	seen := make(map[string]bool, n)
	var cum float64
	for k := range n {
		w := 1 / math.Pow(float64(k+1), userZipf)
		var name string
		for {
			b := []byte{'u', 0, 0, 0, 0}
			for i := 1; i < len(b); i++ {
				b[i] = alphabet[g.rng.IntN(len(alphabet))]
			}
			if name = string(b); !seen[name] {
				seen[name] = true
				break
			}
		}
		best := 0
		for i := range vcs {
			if load[i]/float64(vcs[i].Nodes) < load[best]/float64(vcs[best].Nodes) {
				best = i
			}
		}
		load[best] += w
		cum += w
		g.users = append(g.users, genUser{name: name, vc: vcs[best].Name, hash: g.rng.Uint64()})
		g.userCum = append(g.userCum, cum)
	}
}

// Next returns the next job.
func (g *Generator) Next() (JobSpec, bool) {
	if g.maxRate <= 0 {
		return JobSpec{}, false
	}
	// Thinning: candidates at the peak rate, each kept with the ratio of
	// the rate at its time to the peak rate.
	for {
		g.t += g.rng.ExpFloat64() / g.maxRate
		at := g.start.Add(time.Duration(g.t * float64(time.Second)))
		if g.rng.Float64()*g.maxRate < g.rate*venusHourOfDay[at.Hour()]*venusDayOfWeek[at.Weekday()] {
			break
		}
	}
	u := &g.users[sort.SearchFloat64s(g.userCum, g.rng.Float64()*g.userCum[len(g.userCum)-1])]
	sizes := g.vcSizes[u.vc]
	if u.gpuType != "" {
		sizes = g.vcSizes[typeKey(u.vc, u.gpuType)]
	}
	k := min(sort.SearchFloat64s(sizes, g.rng.Float64()), len(sizes)-1)
	si := min(sort.SearchFloat64s(g.stateCum[:], g.rng.Float64()*g.stateCum[2]), 2)
	run := g.durs.states[si].scale * math.Exp(g.durs.mu+g.durs.sigma*g.rng.NormFloat64())
	run = math.Ceil(min(max(run, minRunS), maxRunS))
	dur := time.Duration(run) * time.Second

	// Jobs of one user with run times within a factor of four mostly share
	// a name; one in four strays to a neighbouring class.
	class := int(math.Log(run) / math.Log(4))
	if x := g.rng.Float64(); x < 0.125 {
		class--
	} else if x < 0.25 {
		class++
	}
	word := projectWords[(u.hash+uint64(max(class, 0)))%uint64(len(projectWords))]
	limit := timeLimits[len(timeLimits)-1]
	want := time.Duration(float64(dur) * (1 + 3*g.rng.Float64()))
	for _, l := range timeLimits {
		if l >= want {
			limit = l
			break
		}
	}
	return JobSpec{
		Name:      fmt.Sprintf("%s-%d", word, max(class, 0)),
		User:      u.name,
		VC:        u.vc,
		GPUs:      1 << k,
		GPUType:   u.gpuType,
		Submit:    time.Duration(math.Ceil(g.t)) * time.Second,
		Duration:  dur,
		TimeLimit: limit,
		State:     finalStates[si],
	}, true
}
