package sim

import (
	"context"
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func TestConfigFlags(t *testing.T) {
	var c Config
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.RegisterFlags(fs, func(k string) string {
		if k == "HELIOSTAT_CLUSTER" {
			return "envcluster"
		}
		return ""
	})
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults: Validate() = %v", err)
	}
	if c.Cluster != "envcluster" || c.Nodes != 8 || c.GPUsPerNode != 8 || c.VCs != "vc1:4,vc2:4" || c.Speedup != 60 ||
		c.Seed != 1 || c.SampleInterval != 10*time.Second || c.WakeDelay != 5*time.Minute || c.Backfill || !c.Start.IsZero() {
		t.Errorf("flag defaults = %+v", c)
	}
	if err := fs.Parse([]string{"--sim.nodes", "3", "--sim.vcs", "a:2,b:1", "--sim.start", "2024-05-01T10:00:00+08:00", "--sim.speedup", "0"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate() = %v", err)
	}
	if want := time.Date(2024, 5, 1, 2, 0, 0, 0, time.UTC); !c.Start.Equal(want) {
		t.Errorf("--sim.start: %v; want %v", c.Start, want)
	}
	if err := fs.Parse([]string{"--sim.start", "yesterday"}); err == nil {
		t.Error("--sim.start yesterday parsed")
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		flag string // "" means valid
	}{
		{Config{}, ""},
		{Config{Nodes: 2, VCs: "a:1, b:1"}, ""},
		{Config{Nodes: 3, VCs: "a:1:a100, b:1:v100,c:1: h100 "}, ""},
		{Config{Nodes: 2, VCs: "a:1:b200,b:1"}, "--sim.vcs"},
		{Config{Nodes: 2, VCs: "a:1:,b:1"}, "--sim.vcs"},
		{Config{Nodes: 2, VCs: "a:1:a100:x,b:1"}, "--sim.vcs"},
		{Config{Nodes: -1}, "--sim.nodes"},
		{Config{GPUsPerNode: 65}, "--sim.gpus-per-node"},
		{Config{Speedup: -1}, "--sim.speedup"},
		{Config{SampleInterval: 1500 * time.Millisecond}, "--sim.sample-interval"},
		{Config{SampleInterval: -time.Second}, "--sim.sample-interval"},
		{Config{JobsPerHour: -1}, "--sim.jobs-per-hour"},
		{Config{Duration: -time.Second}, "--sim.duration"},
		{Config{WakeDelay: time.Millisecond}, "--sim.wake-delay"},
		{Config{VCs: "a"}, "--sim.vcs"},
		{Config{VCs: "a:0"}, "--sim.vcs"},
		{Config{VCs: "a:4,a:4"}, "--sim.vcs"},
		{Config{VCs: ":8"}, "--sim.vcs"},
		{Config{VCs: "a:4,b:4", Nodes: 9}, "--sim.nodes"},
		{Config{Cluster: strings.Repeat("x", 2000)}, "--sim.cluster"},
	} {
		err := tc.cfg.Validate()
		switch {
		case tc.flag == "" && err != nil:
			t.Errorf("Validate(%+v) = %v; want nil", tc.cfg, err)
		case tc.flag != "" && (err == nil || !strings.Contains(err.Error(), tc.flag)):
			t.Errorf("Validate(%+v) = %v; want an error naming %s", tc.cfg, err, tc.flag)
		}
	}
}

// reverse starts the newest job first.
type reverse struct{}

func (reverse) Name() string { return "reverse" }
func (reverse) Order(jobs []PendingJob) {
	FIFO{}.Order(jobs)
	for i, j := 0, len(jobs)-1; i < j; i, j = i+1, j-1 {
		jobs[i], jobs[j] = jobs[j], jobs[i]
	}
}

// TestPolicy checks that the scheduler follows the policy's order.
func TestPolicy(t *testing.T) {
	jobs := []JobSpec{
		{ID: "a", VC: "vc1", GPUs: 8, Duration: sec(100)},
		{ID: "b", VC: "vc1", GPUs: 8, Submit: sec(1), Duration: sec(10)},
		{ID: "c", VC: "vc1", GPUs: 8, Submit: sec(2), Duration: sec(10)},
	}
	rec := &recorder{}
	s, err := New(Config{Cluster: "test", Nodes: 1, Start: t0}, Jobs(jobs), reverse{}, rec, nil, nil, func() time.Time { return t0 })
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Advance(context.Background(), t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	p := rec.decode(t, "test")
	for id, want := range map[string]int64{"a": 0, "b": 110, "c": 100} {
		if got := p.last[id].StartMillis/1000 - t0.Unix(); got != want {
			t.Errorf("job %s started at %d; want %d", id, got, want)
		}
	}
}

// FuzzParseVCs checks that any --sim.vcs value is parsed or refused, never
// accepted with an empty name, a non-positive size, a GPU type the
// simulator does not model or a VC given twice with one type.
func FuzzParseVCs(f *testing.F) {
	for _, s := range []string{"vc1:4,vc2:4", "", "a:1", "a:0", ":3", "a:1,a:2", "a:-1", " a : 2 ,b:3", "a:2:a100,b:1:v100", "a:1:", "a:1:x", "a:2:a100,a:1:h100", "a:1,a:1:h100"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		vcs, err := ParseVCs(s)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, vc := range vcs {
			b, ok := boardOf(vc.GPUType)
			key := vc.Name + "\x00" + b.gpuType
			if vc.Name == "" || vc.Nodes < 1 || seen[key] || !ok {
				t.Fatalf("ParseVCs(%q) = %+v", s, vcs)
			}
			seen[key] = true
		}
	})
}
