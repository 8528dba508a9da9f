package adapter

import (
	"slices"
	"testing"
)

func TestFits(t *testing.T) {
	a100 := &Node{Name: "a", GPUs: 8, GPUTypes: map[string]int{"a100": 8}, Features: []string{"a100", "ib"}}
	h100 := &Node{Name: "h", GPUs: 4, GPUTypes: map[string]int{"h100": 4}, Features: []string{"h100", "nvme"}}
	bare := &Node{Name: "b"}
	// Two types on one node, as gres "gpu:a100:4,gpu:v100:2".
	mixed := &Node{Name: "m", GPUs: 6, GPUTypes: map[string]int{"a100": 4, "v100": 2}}
	for _, tt := range []struct {
		name               string
		job                Job
		a, h, b, m, strict bool // fits a100, h100, bare, mixed; restricted
	}{
		{"nothing asked", Job{}, true, true, true, true, false},
		{"GPU type", Job{GPUType: "h100"}, false, true, false, false, true},
		{"one feature", Job{Constraint: "a100"}, true, false, false, false, true},
		{"all of", Job{Constraint: "a100&ib"}, true, false, false, false, true},
		{"all of, one missing", Job{Constraint: "a100&nvme"}, false, false, false, false, true},
		{"any of", Job{Constraint: "a100 | nvme"}, true, true, false, false, true},
		{"type and feature", Job{GPUType: "a100", Constraint: "nvme"}, false, false, false, false, true},
		{"matching or: not read", Job{Constraint: "[a100|h100]"}, true, true, true, true, false},
		{"count: not read", Job{Constraint: "a100*2"}, true, true, true, true, false},
		{"mixed: not read", Job{Constraint: "a100&ib|h100"}, true, true, true, true, false},
		{"comma: not read", Job{Constraint: "a100,ib"}, true, true, true, true, false},
		{"empty name: not read", Job{Constraint: "a100&"}, true, true, true, true, false},
		{"unread constraint, GPU type read", Job{GPUType: "a100", Constraint: "(a|b)"}, true, false, false, true, true},
		{"8 GPUs on one node", Job{GPUs: 8, NodeCount: 1}, true, false, false, false, true},
		{"16 GPUs on 4 nodes", Job{GPUs: 16, NodeCount: 4}, true, true, false, true, true},
		{"9 GPUs on 2 nodes: 5 on each", Job{GPUs: 9, NodeCount: 2}, true, false, false, true, true},
		{"GPUs, node count unknown", Job{GPUs: 16}, true, true, true, true, false},
		{"one node, no GPUs", Job{NodeCount: 1}, true, true, true, true, false},
		{"4 GPUs of type h100", Job{GPUs: 4, NodeCount: 1, GPUType: "h100"}, false, true, false, false, true},
		{"GPU type on a node of two types", Job{GPUType: "v100"}, false, false, false, true, true},
		{"4 GPUs of type a100: the node's four", Job{GPUs: 4, NodeCount: 1, GPUType: "a100"}, true, false, false, true, true},
		{"4 GPUs of type v100: its other type does not count", Job{GPUs: 4, NodeCount: 1, GPUType: "v100"}, false, false, false, false, true},
		{"6 GPUs of any type: both types count", Job{GPUs: 6, NodeCount: 1}, true, false, false, true, true},
	} {
		for _, c := range []struct {
			n    *Node
			want bool
		}{{a100, tt.a}, {h100, tt.h}, {bare, tt.b}, {mixed, tt.m}} {
			fits, restricted := tt.job.Fits(c.n)
			if fits != c.want || restricted != tt.strict {
				t.Errorf("%s: Fits(%s) = %v, restricted %v; want %v, %v", tt.name, c.n.Name, fits, restricted, c.want, tt.strict)
			}
		}
	}
}

// TestPartitions: a job's partitions, as a slice and as a sequence, split on
// commas with spaces trimmed and empty names left out; a loop over the
// sequence may stop early.
func TestNodeKind(t *testing.T) {
	for _, tt := range []struct {
		n    Node
		want string
	}{
		{Node{}, "no GPU"},
		{Node{GPUs: 8}, "gpu×8"},
		{Node{GPUs: 8, GPUTypes: map[string]int{"": 8}}, "gpu×8"},
		{Node{GPUs: 6, GPUTypes: map[string]int{"v100": 2, "a100": 4}}, "a100×4+v100×2"},
		{Node{GPUs: 6, GPUTypes: map[string]int{"a100": 4, "v100": 2}, Features: []string{"nvme", "ib", "nvme"}}, "a100×4+v100×2 [ib,nvme]"},
		{Node{GPUTypes: map[string]int{"a100": 0}, Features: []string{"bigmem"}}, "no GPU [bigmem]"},
	} {
		if got := tt.n.Kind(); got != tt.want {
			t.Errorf("%+v: Kind() = %q; want %q", tt.n, got, tt.want)
		}
	}
}

func TestPartitions(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"gpu", []string{"gpu"}},
		{"gpu,other", []string{"gpu", "other"}},
		{" gpu , ,other,", []string{"gpu", "other"}},
		{",", nil},
	} {
		j := Job{Partition: tt.in}
		if got := j.Partitions(); !slices.Equal(got, tt.want) {
			t.Errorf("Partitions(%q) = %q; want %q", tt.in, got, tt.want)
		}
		if got := slices.Collect(j.PartitionSeq()); !slices.Equal(got, tt.want) {
			t.Errorf("PartitionSeq(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
	j := Job{Partition: "a,b,c"}
	var first []string
	for p := range j.PartitionSeq() {
		first = append(first, p)
		break
	}
	if !slices.Equal(first, []string{"a"}) {
		t.Errorf("PartitionSeq stopped after the first: %q; want [a]", first)
	}
}
