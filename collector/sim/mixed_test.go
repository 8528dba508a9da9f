package sim

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/schemas"
)

// TestParseVCsMixed: a VC named again with another GPU type is one VC of
// mixed nodes; named again with the same type (the default type counts as
// h100) it is refused.
func TestParseVCsMixed(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []VC
		wantErr string
	}{
		{in: "gpu:4:a100,gpu:2:h100", want: []VC{{"gpu", 4, "a100"}, {"gpu", 2, "h100"}}},
		{in: "gpu:4:a100,cpu:1,gpu:2:v100", want: []VC{{"gpu", 4, "a100"}, {"cpu", 1, ""}, {"gpu", 2, "v100"}}},
		{in: "gpu:4:a100,gpu:2:a100", wantErr: `item 2: virtual cluster "gpu" appears twice with GPU type a100`},
		{in: "gpu:4,gpu:2:h100", wantErr: `item 2: virtual cluster "gpu" appears twice with GPU type h100`},
		{in: "a:1,a:2", wantErr: `item 2: virtual cluster "a" appears twice with GPU type h100`},
	} {
		got, err := ParseVCs(tc.in)
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseVCs(%q) = %+v, %v; want error %q", tc.in, got, err, tc.wantErr)
			}
		case err != nil || !slices.Equal(got, tc.want):
			t.Errorf("ParseVCs(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

// TestMergeVCs: one item per VC, in order of first appearance, a VC of
// mixed nodes with its nodes summed; mixedKinds lists only such VCs, with
// their types resolved.
func TestMergeVCs(t *testing.T) {
	vcs, err := ParseVCs("gpu:4:a100,cpu:1,gpu:2")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := MergeVCs(vcs), []VC{{"gpu", 6, "a100"}, {"cpu", 1, ""}}; !slices.Equal(got, want) {
		t.Errorf("MergeVCs = %+v; want %+v", got, want)
	}
	kinds := mixedKinds(vcs)
	if len(kinds) != 1 || !slices.Equal(kinds["gpu"], []VC{{"gpu", 4, "a100"}, {"gpu", 2, "h100"}}) {
		t.Errorf("mixedKinds = %+v; want gpu: a100 ×4, h100 ×2", kinds)
	}
}

// TestMixedVC runs a VC of two A100 nodes and one H100 node: a job that
// asks for a GPU type runs only on nodes of that type and waits for one
// while a node of the other type is free; a job that asks for none runs on
// any, and its events name the type of the nodes it ran on (none before it
// starts); jobs that ask for a type the VC lacks, or more GPUs than its
// nodes of the type have, are rejected. The queue lists each job's type.
func TestMixedVC(t *testing.T) {
	s, rec := newTestSim(t, Config{Nodes: 3, VCs: "gpu:2:a100,gpu:1:h100"}, Jobs([]JobSpec{
		{ID: "h", VC: "gpu", GPUs: 8, GPUType: "h100", Duration: time.Hour},
		{ID: "any", VC: "gpu", GPUs: 8, Submit: sec(1), Duration: time.Hour},
		{ID: "h2", VC: "gpu", GPUs: 4, GPUType: "h100", Submit: sec(2), Duration: time.Hour},
		{ID: "v", VC: "gpu", GPUs: 1, GPUType: "v100", Submit: sec(3), Duration: time.Hour},
		{ID: "big", VC: "gpu", GPUs: 24, GPUType: "a100", Submit: sec(3), Duration: time.Hour},
		{ID: "all", VC: "gpu", GPUs: 24, Submit: sec(4), Duration: time.Hour},
	}))
	if err := s.Advance(context.Background(), t0.Add(sec(10))); err != nil {
		t.Fatal(err)
	}
	pending := s.Pending()
	if len(pending) != 2 || pending[0].ID != "h2" || pending[0].GPUType != "h100" || pending[1].ID != "all" || pending[1].GPUType != "" {
		t.Errorf("Pending() = %+v; want h2 (h100), all (any)", pending)
	}
	if st := s.Stats(); st.Rejected != 2 {
		t.Errorf("rejected %d jobs; want 2 (v: no v100 node; big: 24 GPUs, the a100 nodes have 16)", st.Rejected)
	}
	p := rec.decode(t, "test")
	for id, want := range map[string]struct {
		node, typ string
	}{"h": {"sim-node-003", "h100"}, "any": {"sim-node-001", "a100"}} {
		e := p.last[id]
		if !slices.Equal(e.Nodes, []string{want.node}) || e.GPUType != want.typ {
			t.Errorf("job %s runs on %v, GPU type %q; want %s, %q", id, e.Nodes, e.GPUType, want.node, want.typ)
		}
	}
	for _, e := range p.events {
		if e.JobID == "any" && e.Type == schemas.JobSubmit && e.GPUType != "" {
			t.Errorf("pending job that asks for no type, in a VC of mixed nodes: GPU type %q; want none yet", e.GPUType)
		}
		if e.JobID == "h2" && e.GPUType != "h100" {
			t.Errorf("job h2's %s event: GPU type %q; want h100, its request", e.Type, e.GPUType)
		}
	}

	// After the hour h2 takes the H100 node, then "all" every node.
	if err := s.Advance(context.Background(), t0.Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	p = rec.decode(t, "test")
	if e := p.last["h2"]; !slices.Equal(e.Nodes, []string{"sim-node-003"}) {
		t.Errorf("job h2 ran on %v; want sim-node-003", e.Nodes)
	}
	if e := p.last["all"]; len(e.Nodes) != 3 || e.GPUType != "a100,h100" {
		t.Errorf("job all ran on %v, GPU type %q; want 3 nodes, a100,h100", e.Nodes, e.GPUType)
	}
}

// TestRestoreKeepsGPUType: a pending job's GPU type survives a restart, and
// a running job's placement on a node of another type is refused.
func TestRestoreKeepsGPUType(t *testing.T) {
	cfg := Config{Nodes: 2, VCs: "gpu:1:a100,gpu:1:h100"}
	base, _ := newTestSim(t, cfg, Jobs([]JobSpec{
		{ID: "r", VC: "gpu", GPUs: 8, GPUType: "h100", Duration: time.Hour},
		{ID: "p", VC: "gpu", GPUs: 8, GPUType: "h100", Submit: sec(1), Duration: time.Hour},
	}))
	if err := base.Advance(context.Background(), t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(*State)
		want []string
	}{
		{name: "as saved", want: []string{"r", "p"}},
		{name: "placed on the a100 node", edit: func(st *State) { st.Jobs[0].Placement[0].Node = "sim-node-001" }, want: []string{"p"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, _ := restored(t, base.Snapshot(), tc.edit, cfg, tc.want)
			if q := s.Pending(); len(q) != 1 || q[0].GPUType != "h100" {
				t.Errorf("Pending() after Restore = %+v; want p, asking for h100", q)
			}
		})
	}
}

// TestGeneratorMixedVC: in a VC of mixed nodes about half the users ask for
// a GPU type, each type in proportion to its nodes, and their jobs fit that
// type's nodes; in other VCs no job asks for a type. A simulated week of
// the workload has no job rejected.
func TestGeneratorMixedVC(t *testing.T) {
	vcs, err := ParseVCs("gpu:6:a100,gpu:2:v100,other:4")
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewGenerator(GeneratorConfig{Seed: 3, Start: t0, VCs: vcs, GPUsPerNode: 8, Users: 400})
	if err != nil {
		t.Fatal(err)
	}
	users := map[string]map[string]bool{} // VC → type → seen ("" for any)
	byUser := map[string]string{}
	for _, u := range g.users {
		if users[u.vc] == nil {
			users[u.vc] = map[string]bool{}
		}
		users[u.vc][u.gpuType] = true
		byUser[u.name] = u.gpuType
	}
	typed, a100 := 0, 0
	for _, u := range g.users {
		if u.vc == "gpu" && u.gpuType != "" {
			typed++
			if u.gpuType == "a100" {
				a100++
			}
		}
	}
	gpuUsers := 0
	for _, u := range g.users {
		if u.vc == "gpu" {
			gpuUsers++
		}
	}
	if share := float64(typed) / float64(gpuUsers); share < 0.35 || share > 0.65 {
		t.Errorf("%d of %d users of the mixed VC ask for a type; want about half", typed, gpuUsers)
	}
	if share := float64(a100) / float64(typed); share < 0.6 || share > 0.9 {
		t.Errorf("%d of %d typed users ask for a100; want about 3 in 4 (6 of 8 nodes)", a100, typed)
	}
	if len(users["other"]) != 1 || !users["other"][""] {
		t.Errorf("users of the single-type VC ask for types %v; want none", users["other"])
	}
	var jobs []JobSpec
	for {
		j, _ := g.Next()
		if j.Submit > 7*24*time.Hour {
			break
		}
		if j.GPUType != byUser[j.User] {
			t.Fatalf("job of user %s asks for %q; the user's type is %q", j.User, j.GPUType, byUser[j.User])
		}
		if j.GPUType == "v100" && j.GPUs > 16 {
			t.Fatalf("job asks for %d v100 GPUs; the VC has 16", j.GPUs)
		}
		jobs = append(jobs, j)
	}
	s, _ := newTestSim(t, Config{Nodes: 12, VCs: "gpu:6:a100,gpu:2:v100,other:4"}, Jobs(jobs))
	if err := s.Advance(context.Background(), t0.Add(8*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Rejected != 0 || st.Submitted != int64(len(jobs)) {
		t.Errorf("Stats() = %+v; want all %d jobs submitted, none rejected", st, len(jobs))
	}
}
