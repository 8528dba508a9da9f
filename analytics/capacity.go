package analytics

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Capacity is a configured number of GPUs of a cluster or of one of its
// virtual clusters (VC: Slurm partition, or the vc of a Helios trace).
type Capacity struct {
	// Cluster is the cluster's name; "" applies to every cluster.
	Cluster string
	// VC is the virtual cluster; "" is the whole cluster.
	VC string
	// GPUs is the capacity.
	GPUs uint32
}

func (c Capacity) String() string {
	return c.key() + "=" + strconv.FormatUint(uint64(c.GPUs), 10)
}

// key is what the capacity applies to: CLUSTER, CLUSTER/VC or /VC.
func (c Capacity) key() string {
	if c.VC != "" {
		return c.Cluster + "/" + c.VC
	}
	return c.Cluster
}

// maxCapacity bounds a configured capacity: a million GPUs is beyond any
// cluster today, and a larger figure is a typo.
const maxCapacity = 1 << 24

// ParseCapacities parses the --analytics.capacity flag: comma-separated
// CLUSTER=GPUS, CLUSTER/VC=GPUS or /VC=GPUS (that VC of any cluster).
func ParseCapacities(s string) ([]Capacity, error) {
	var out []Capacity
	for i, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		key, val, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("analytics: capacity item %d %q: want CLUSTER=GPUS, CLUSTER/VC=GPUS or /VC=GPUS", i+1, item)
		}
		n, err := parseGPUs(val)
		if err != nil {
			return nil, fmt.Errorf("analytics: capacity item %d %q: %w", i+1, item, err)
		}
		cluster, vc, _ := strings.Cut(strings.TrimSpace(key), "/")
		if cluster == "" && vc == "" {
			return nil, fmt.Errorf("analytics: capacity item %d %q: names no cluster and no VC", i+1, item)
		}
		out = append(out, Capacity{Cluster: cluster, VC: vc, GPUs: n})
	}
	return out, nil
}

func parseGPUs(s string) (uint32, error) {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 32)
	if err != nil || n > maxCapacity {
		return 0, fmt.Errorf("GPUs %q: want a whole number from 0 to %d", s, maxCapacity)
	}
	return uint32(n), nil
}

// Capacity file columns, matched by header name (case-insensitive).
var capacityColumns = map[string]string{
	"cluster": "cluster", "vc": "vc", "gpus": "gpus", "gpu_num": "gpus",
	"nodes": "nodes", "node_num": "nodes", "node num": "nodes", "gpus_per_node": "gpus_per_node",
}

// ReadCapacityFile reads a CSV file of capacities with a header row naming
// its columns: cluster (optional; empty or absent applies to every cluster),
// vc (optional; empty is the whole cluster), and either gpus (or gpu_num) or
// nodes (or node_num) with gpus_per_node — the format of the Helios
// artifact's VC files (vc,nodes,gpus_per_node). Other columns are ignored.
// Every bad row is reported by line, field and reason, and the file is
// refused: a capacity half read would give wrong utilization figures.
func ReadCapacityFile(r io.Reader) ([]Capacity, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, errors.New("analytics: capacity file: empty; want a header row")
	}
	if err != nil {
		return nil, fmt.Errorf("analytics: capacity file: header: %w", err)
	}
	col := map[string]int{}
	for i, h := range header {
		h = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\uFEFF")))
		if c, ok := capacityColumns[h]; ok {
			if _, dup := col[c]; dup {
				return nil, fmt.Errorf("analytics: capacity file: header: column %s twice", c)
			}
			col[c] = i
		}
	}
	_, hasGPUs := col["gpus"]
	_, hasNodes := col["nodes"]
	_, hasPer := col["gpus_per_node"]
	if !hasGPUs && !(hasNodes && hasPer) {
		return nil, errors.New("analytics: capacity file: header: want a gpus column, or nodes and gpus_per_node")
	}
	var (
		out  []Capacity
		errs []error
		seen = map[[2]string]int{}
	)
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("capacity file: %w", err))
			var pe *csv.ParseError
			if !errors.As(err, &pe) {
				break
			}
			continue
		}
		line, _ := cr.FieldPos(0)
		if len(rec) != len(header) {
			errs = append(errs, fmt.Errorf("capacity file line %d: %d fields, header has %d", line, len(rec), len(header)))
			continue
		}
		cell := func(name string) string {
			if i, ok := col[name]; ok {
				return strings.TrimSpace(rec[i])
			}
			return ""
		}
		c := Capacity{Cluster: cell("cluster"), VC: cell("vc")}
		if hasGPUs {
			n, err := parseGPUs(cell("gpus"))
			if err != nil {
				errs = append(errs, fmt.Errorf("capacity file line %d: gpus: %w", line, err))
				continue
			}
			c.GPUs = n
		} else {
			nodes, err1 := parseGPUs(cell("nodes"))
			per, err2 := parseGPUs(cell("gpus_per_node"))
			if err := errors.Join(err1, err2); err != nil {
				errs = append(errs, fmt.Errorf("capacity file line %d: nodes, gpus_per_node: %w", line, err))
				continue
			}
			if uint64(nodes)*uint64(per) > maxCapacity {
				errs = append(errs, fmt.Errorf("capacity file line %d: %d nodes x %d GPUs exceeds %d", line, nodes, per, maxCapacity))
				continue
			}
			c.GPUs = nodes * per
		}
		if c.Cluster == "" && c.VC == "" {
			errs = append(errs, fmt.Errorf("capacity file line %d: names no cluster and no VC", line))
			continue
		}
		k := [2]string{c.Cluster, c.VC}
		if prev, ok := seen[k]; ok {
			errs = append(errs, fmt.Errorf("capacity file line %d: %s again (first on line %d)", line, c, prev))
			continue
		}
		seen[k] = line
		out = append(out, c)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("analytics: %d bad rows: %w", len(errs), errors.Join(errs...))
	}
	return out, nil
}

// resolveCapacities gives the configured capacity of each (cluster, vc) of
// pairs — a cluster-specific entry wins over one for any cluster — and, for a
// cluster with no configured total whose VCs seen in the window are all
// configured, the sum of its configured VCs (source config_vcs).
func resolveCapacities(cfg []Capacity, pairs [][2]string) []capacityRow {
	exact := map[[2]string]uint32{}
	for _, c := range cfg {
		exact[[2]string{c.Cluster, c.VC}] = c.GPUs
	}
	lookup := func(cluster, vc string) (uint32, bool) {
		if n, ok := exact[[2]string{cluster, vc}]; ok {
			return n, true
		}
		if vc != "" {
			n, ok := exact[[2]string{"", vc}]
			return n, ok
		}
		return 0, false
	}
	var out []capacityRow
	clusters := map[string]bool{}
	allVCs := map[string]bool{} // cluster → every VC seen is configured
	for _, p := range pairs {
		cluster, vc := p[0], p[1]
		if !clusters[cluster] {
			clusters[cluster] = true
			allVCs[cluster] = true
		}
		if vc == "" {
			continue
		}
		if n, ok := lookup(cluster, vc); ok {
			out = append(out, capacityRow{cluster, vc, n, "config", 1})
		} else {
			allVCs[cluster] = false
		}
	}
	for cluster := range clusters {
		if n, ok := lookup(cluster, ""); ok {
			out = append(out, capacityRow{cluster, "", n, "config", 1})
			continue
		}
		if !allVCs[cluster] {
			continue
		}
		// The sum over every VC configured for this cluster (or for any
		// cluster), not only those with jobs in the window: their GPUs
		// exist whether or not someone used them.
		var sum uint64
		vcs := map[string]uint32{}
		for _, c := range cfg {
			if c.VC != "" && (c.Cluster == cluster || c.Cluster == "") {
				if _, ok := vcs[c.VC]; !ok || c.Cluster == cluster {
					vcs[c.VC] = c.GPUs
				}
			}
		}
		for _, n := range vcs {
			sum += uint64(n)
		}
		if len(vcs) > 0 && sum <= maxCapacity {
			out = append(out, capacityRow{cluster, "", uint32(sum), "config_vcs", 2})
		}
	}
	return out
}

type capacityRow struct {
	cluster, vc string
	gpus        uint32
	source      string
	prio        uint8
}
