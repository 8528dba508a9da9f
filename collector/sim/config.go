package sim

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/heliostat-dev/heliostat/internal/envdefault"
	"github.com/heliostat-dev/heliostat/schemas"
)

// Defaults of the Config fields (and of their flags).
const (
	DefaultCluster        = "sim"
	DefaultNodes          = 8
	DefaultGPUsPerNode    = 8
	DefaultVCs            = "vc1:4,vc2:4"
	DefaultSpeedup        = 60
	DefaultSeed           = 1
	DefaultSampleInterval = 10 * time.Second
	DefaultWakeDelay      = 5 * time.Minute
	// maxNodes bounds the cluster: node names have three digits and more
	// (sim-node-001 … sim-node-9999).
	maxNodes = 9999
)

// Config configures a Sim. Zero fields mean their defaults, except Speedup
// and Seed, whose zeros mean what they say.
type Config struct {
	// Cluster names the simulated cluster on every message.
	// Default: "sim", or $HELIOSTAT_CLUSTER (flag default).
	Cluster string
	// Nodes is the number of nodes, named sim-node-001, sim-node-002, …
	// It must equal the nodes of VCs.
	// Default: 8.
	Nodes int
	// GPUsPerNode is the GPUs of each node.
	// Default: 8.
	GPUsPerNode int
	// VCs lists the virtual clusters as name:nodes pairs, comma separated;
	// nodes are assigned to them in order. An item name:nodes:type also
	// names the GPU type of the VC's nodes (one of GPUTypes; default h100),
	// which sets their samples' model, power, clocks and framebuffer and
	// their jobs' GPU type. A name given again with another type makes a
	// VC of mixed nodes ("gpu:4:a100,gpu:2:h100"): its jobs ask for one of
	// its types (JobSpec.GPUType) or for any. "" with the flag default.
	// Default: "vc1:4,vc2:4"; "" in a Config literal means one VC "vc1" of
	// all nodes.
	VCs string
	// Speedup is simulated seconds per real second; 0 runs as fast as
	// possible (tests, replays).
	// Default (flag): 60.
	Speedup float64
	// Seed makes the synthetic workload and telemetry reproducible.
	// Default (flag): 1.
	Seed uint64
	// SampleInterval is the simulated time between two GPU samples of a
	// node; whole seconds, at least 1s.
	// Default: 10s.
	SampleInterval time.Duration
	// JobsPerHour is the synthetic workload's mean submission rate in
	// simulated time; 0 means AutoJobsPerHour (60% offered load).
	// Default: 0.
	JobsPerHour float64
	// Start is the simulated time the simulation starts at, truncated to
	// the second.
	// Default: the real time when New is called.
	Start time.Time
	// Duration is how much simulated time Run simulates before it returns;
	// 0 means until its context ends or, at Speedup 0, until a finite
	// workload is done.
	// Default: 0.
	Duration time.Duration
	// Backfill lets a pending job start ahead of the job holding its
	// virtual cluster's queue if, at its time limit, it ends before that
	// job could start (EASY backfill, on time limits as Slurm does).
	// Default: false, strict order.
	Backfill bool
	// WakeDelay is the simulated time a powered-up node takes to become
	// usable; whole seconds.
	// Default: 5m.
	WakeDelay time.Duration
	// AutoResume powers powered-down nodes up when the job at the head of
	// a virtual cluster's queue could run on them, as Slurm's power saving
	// does (ResumeProgram): the nodes are held for that job while they
	// wake, and it starts on them once they are up. Without it only
	// PowerUp wakes a node.
	// Default: false (the --sim.auto-resume flag defaults to true).
	AutoResume bool
	// KeepJobs leaves the pending and running jobs open when Run returns,
	// instead of ending running ones as NODE_FAIL and pending ones as
	// CANCELLED: nothing is published for them, and Snapshot returns them
	// for a later Sim to Restore. `heliostat up` sets it, so that a
	// restart continues the simulated cluster; it has no flag.
	// Default: false.
	KeepJobs bool
}

// RegisterFlags registers the simulator's flags on fs, with the defaults
// filled in. getenv supplies defaults from the environment
// (HELIOSTAT_CLUSTER); nil means none.
func (c *Config) RegisterFlags(fs *flag.FlagSet, getenv func(string) string) {
	cluster := envdefault.String(getenv, "HELIOSTAT_CLUSTER", DefaultCluster)
	fs.StringVar(&c.Cluster, "sim.cluster", cluster, "name of the simulated cluster (env HELIOSTAT_CLUSTER)")
	fs.IntVar(&c.Nodes, "sim.nodes", DefaultNodes, "nodes of the simulated cluster; must match --sim.vcs")
	fs.IntVar(&c.GPUsPerNode, "sim.gpus-per-node", DefaultGPUsPerNode, "GPUs of each simulated node")
	fs.StringVar(&c.VCs, "sim.vcs", DefaultVCs, fmt.Sprintf(`virtual clusters as name:nodes pairs, comma separated; name:nodes:type also names the GPU type of the VC's nodes (%s; default %s), which sets their samples' model, power, clocks and framebuffer and their jobs' GPU type; a name given again with another type makes a VC of mixed nodes ("gpu:4:a100,gpu:2:h100"), whose jobs ask for one of its types or for any; "" puts all nodes in one VC "vc1"`, gpuTypeList(), DefaultGPUType))
	fs.Float64Var(&c.Speedup, "sim.speedup", DefaultSpeedup, "simulated seconds per real second; 0 runs as fast as possible")
	fs.Uint64Var(&c.Seed, "sim.seed", DefaultSeed, "seed of the synthetic workload and telemetry")
	fs.DurationVar(&c.SampleInterval, "sim.sample-interval", DefaultSampleInterval, "simulated time between two GPU samples of a node (whole seconds)")
	fs.Float64Var(&c.JobsPerHour, "sim.jobs-per-hour", 0, "mean job submissions per simulated hour; 0 offers 60% of the cluster's GPU time")
	fs.Func("sim.start", "simulated start time, RFC 3339 (default: now)", func(s string) error {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return err
		}
		c.Start = t
		return nil
	})
	fs.DurationVar(&c.Duration, "sim.duration", 0, "simulated time to run; 0 runs until stopped (at speedup 0: until the workload is done)")
	fs.BoolVar(&c.Backfill, "sim.backfill", false, "let a job start ahead of the job holding its queue if it ends, at its time limit, before that job could start")
	fs.DurationVar(&c.WakeDelay, "sim.wake-delay", DefaultWakeDelay, "simulated time a powered-up node takes to become usable")
	fs.BoolVar(&c.AutoResume, "sim.auto-resume", true, "power powered-down nodes up when the job at the head of their virtual cluster's queue could run on them, as Slurm's power saving does")
}

// Validate reports the first invalid field, named by its flag. Zero fields
// are valid: they mean their defaults.
func (c Config) Validate() error {
	if len(c.Cluster) > schemas.MaxStringLen || !utf8.ValidString(c.Cluster) {
		return fmt.Errorf("sim: --sim.cluster: %.64q is longer than %d bytes or not UTF-8", c.Cluster, schemas.MaxStringLen)
	}
	if c.Nodes < 0 || c.Nodes > maxNodes {
		return fmt.Errorf("sim: --sim.nodes: %d is not between 1 and %d", c.Nodes, maxNodes)
	}
	if c.GPUsPerNode < 0 || c.GPUsPerNode > 64 {
		return fmt.Errorf("sim: --sim.gpus-per-node: %d is not between 1 and 64", c.GPUsPerNode)
	}
	if math.IsNaN(c.Speedup) || math.IsInf(c.Speedup, 0) || c.Speedup < 0 || c.Speedup > 1e6 {
		return fmt.Errorf("sim: --sim.speedup: %v is not between 0 and 1e6", c.Speedup)
	}
	if c.SampleInterval < 0 || c.SampleInterval%time.Second != 0 {
		return fmt.Errorf("sim: --sim.sample-interval: %v is not a positive whole number of seconds", c.SampleInterval)
	}
	if math.IsNaN(c.JobsPerHour) || math.IsInf(c.JobsPerHour, 0) || c.JobsPerHour < 0 {
		return fmt.Errorf("sim: --sim.jobs-per-hour: %v is not a non-negative number", c.JobsPerHour)
	}
	if c.Duration < 0 {
		return fmt.Errorf("sim: --sim.duration: %v is negative", c.Duration)
	}
	if c.WakeDelay < 0 || c.WakeDelay%time.Second != 0 {
		return fmt.Errorf("sim: --sim.wake-delay: %v is not a non-negative whole number of seconds", c.WakeDelay)
	}
	d := c.withDefaults()
	vcs, err := ParseVCs(d.VCs)
	if err != nil {
		return fmt.Errorf("sim: --sim.vcs: %w", err)
	}
	if vcs != nil {
		n := 0
		for _, vc := range vcs {
			n += vc.Nodes
		}
		if n != d.Nodes {
			return fmt.Errorf("sim: --sim.vcs %q holds %d nodes but --sim.nodes is %d", c.VCs, n, d.Nodes)
		}
	}
	return nil
}

// withDefaults returns c with zero fields set to their defaults (Start is
// left for New, which knows the clock).
func (c Config) withDefaults() Config {
	if c.Cluster == "" {
		c.Cluster = DefaultCluster
	}
	if c.Nodes == 0 {
		c.Nodes = DefaultNodes
	}
	if c.GPUsPerNode == 0 {
		c.GPUsPerNode = DefaultGPUsPerNode
	}
	if c.SampleInterval == 0 {
		c.SampleInterval = DefaultSampleInterval
	}
	if c.WakeDelay == 0 {
		c.WakeDelay = DefaultWakeDelay
	}
	return c
}

// VCList returns the virtual clusters of a defaulted, valid c (Sim.Config's).
func (c Config) VCList() []VC {
	vcs, _ := ParseVCs(c.VCs)
	if vcs == nil {
		return []VC{{Name: "vc1", Nodes: c.Nodes}}
	}
	return vcs
}

// ParseVCs parses a list of name:nodes or name:nodes:type items
// ("vc1:4,vc2:4:a100"; the type one of GPUTypes, DefaultGPUType when left
// out; VC.GPUType is "" then). A name may come again with another type:
// "gpu:4:a100,gpu:2:h100" is one VC of four A100 and two H100 nodes, one
// item each. It returns nil for "".
func ParseVCs(s string) ([]VC, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var vcs []VC
	seen := map[string]bool{}
	for i, part := range strings.Split(s, ",") {
		name, n, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok {
			return nil, fmt.Errorf("item %d %q: want name:nodes or name:nodes:type", i+1, part)
		}
		name = strings.TrimSpace(name)
		if name == "" || len(name) > schemas.MaxStringLen || !utf8.ValidString(name) {
			return nil, fmt.Errorf("item %d %q: name is empty, too long or not UTF-8", i+1, part)
		}
		n, typ, typed := strings.Cut(n, ":")
		nodes, err := strconv.Atoi(strings.TrimSpace(n))
		if err != nil || nodes < 1 || nodes > maxNodes {
			return nil, fmt.Errorf("item %d %q: nodes is not an integer from 1 to %d", i+1, part, maxNodes)
		}
		typ = strings.TrimSpace(typ)
		b, ok := boardOf(typ)
		if typed && (typ == "" || !ok) {
			return nil, fmt.Errorf("item %d %q: GPU type %q is not one the simulator models (%s)", i+1, part, typ, gpuTypeList())
		}
		// A VC named again with another GPU type mixes node kinds.
		key := name + "\x00" + b.gpuType
		if seen[key] {
			return nil, fmt.Errorf("item %d: virtual cluster %q appears twice with GPU type %s (name it again only with another type, for a VC of mixed nodes)", i+1, name, b.gpuType)
		}
		seen[key] = true
		vcs = append(vcs, VC{Name: name, Nodes: nodes, GPUType: typ})
	}
	if len(vcs) == 0 {
		return nil, errors.New("no virtual clusters")
	}
	return vcs, nil
}
