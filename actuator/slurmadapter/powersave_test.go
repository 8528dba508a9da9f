package slurmadapter

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/heliostat-dev/heliostat/actuator/adapter"
)

// TestDecodeConfig reads Slurm's power-saving exclusions out of `scontrol
// show config`: the fixture is Slurm 22.05.8's answer with
// SuspendExcNodes=gpu[2-3]:1,gpu4 and SuspendExcParts=batch; the other rows
// are the forms slurm.conf(5) allows, SuspendExcStates of Slurm 23.02, and
// answers that must be refused, naming the setting.
func TestDecodeConfig(t *testing.T) {
	conf := func(nodes, parts string, more ...string) string {
		return strings.Join(append([]string{"Configuration data as of 2026-11-23T21:41:51", "AuthType                = auth/munge",
			"SuspendExcNodes         = " + nodes, "SuspendExcParts         = " + parts}, more...), "\n") + "\n"
	}
	for _, tc := range []struct {
		name    string
		in      string
		want    exclusions
		wantErr error
		naming  string // what the error must name
	}{
		{name: "slurm 22.05 fixture", in: string(readFixture(t, "scontrol-show-config.txt")),
			want: exclusions{nodes: []excGroup{{names: []string{"gpu2", "gpu3"}, keep: 1}, {names: []string{"gpu4"}}}, parts: []string{"batch"}}},
		{name: "none set", in: conf("(null)", "(null)")},
		{name: "one host list", in: conf("gpu[1-3],cpu7", "(null)"),
			want: exclusions{nodes: []excGroup{{names: []string{"gpu1", "gpu2", "gpu3"}}, {names: []string{"cpu7"}}}}},
		{name: "counts", in: conf("nid[10-12]:2,nid[60-61]", "a,b"),
			want: exclusions{nodes: []excGroup{{names: []string{"nid10", "nid11", "nid12"}, keep: 2}, {names: []string{"nid60", "nid61"}}}, parts: []string{"a", "b"}}},
		// Slurm 22.05 keeps 4 of all 14 on, later versions all of nid[1-3]
		// and 4 of nid[10-20]: the adapter keeps what both keep.
		{name: "count after several host lists", in: conf("nid[1-3],nid[10-20]:4", "(null)"),
			want: exclusions{nodes: []excGroup{{names: []string{"nid1", "nid2", "nid3"}}, {names: []string{"nid10", "nid11", "nid12", "nid13", "nid14", "nid15", "nid16", "nid17", "nid18", "nid19", "nid20"}, keep: 4}}}},
		{name: "comma inside brackets", in: conf("gpu[1,3]:1", "(null)"),
			want: exclusions{nodes: []excGroup{{names: []string{"gpu1", "gpu3"}, keep: 1}}}},
		{name: "count of the whole group keeps it all", in: conf("gpu[1-2]:2", "(null)"),
			want: exclusions{nodes: []excGroup{{names: []string{"gpu1", "gpu2"}}}}},
		{name: "states of slurm 23.02", in: conf("(null)", "(null)", "SuspendExcStates        = down,Planned"),
			want: exclusions{states: []string{"DOWN", "PLANNED"}}},
		{name: "other sections' lines are left alone", in: conf("(null)", "(null)", "", "Cgroup Support Configuration:", "AllowedRAMSpace         = 100.0%", "Slurmctld(primary) at vm is UP"), want: exclusions{}},
		{name: "bad host list", in: conf("gpu[1-", "(null)"), wantErr: ErrRecord, naming: "SuspendExcNodes"},
		{name: "count not a number", in: conf("gpu[1-2]:x", "(null)"), wantErr: ErrRecord, naming: `node count "x"`},
		{name: "count of zero", in: conf("gpu[1-2]:0", "(null)"), wantErr: ErrRecord, naming: "SuspendExcNodes"},
		{name: "count without nodes", in: conf(":3", "(null)"), wantErr: ErrRecord, naming: "no nodes"},
		{name: "no SuspendExcNodes line", in: "AuthType = auth/munge\nSuspendExcParts = (null)\n", wantErr: ErrShape, naming: "SuspendExcNodes"},
		{name: "not scontrol's answer", in: "<html>502 Bad Gateway</html>\n", wantErr: ErrShape, naming: "SuspendExcNodes"},
		{name: "a setting twice", in: conf("gpu1", "(null)", "SuspendExcNodes = gpu2"), wantErr: ErrShape, naming: "line 5: SuspendExcNodes again (first on line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeConfig([]byte(tc.in))
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.naming) {
					t.Fatalf("decodeConfig(%q) = %v; want %v naming %q", tc.in, err, tc.wantErr, tc.naming)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("decodeConfig(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			}
		})
	}
}

// TestExclusionsMark marks the nodes Slurm's power saving must leave on: all
// of a group without a count, of an excluded partition or in an excluded
// state; of a group with a count N, N usable nodes — idle, on or waking, no
// job holding them — waking ones first, so that any node left unmarked may
// go down and N stay up.
func TestExclusionsMark(t *testing.T) {
	node := func(name string, edit ...func(*adapter.Node)) adapter.Node {
		n := adapter.Node{Name: name, Partitions: []string{"batch"}, Power: adapter.PowerOn, State: "idle"}
		for _, e := range edit {
			e(&n)
		}
		return n
	}
	busy := func(n *adapter.Node) { n.Busy, n.State = true, "mixed" }
	suspended := func(n *adapter.Node) { n.Jobs = []string{"17"} } // reads idle
	waking := func(n *adapter.Node) { n.Power, n.State = adapter.PowerWaking, "idle+POWERING_UP" }
	off := func(n *adapter.Node) { n.Power, n.State = adapter.PowerOff, "idle+POWERED_DOWN" }
	drained := func(n *adapter.Node) { n.Unusable, n.State = true, "idle+DRAIN" }
	other := func(n *adapter.Node) { n.Partitions = []string{"other"} }
	three := []excGroup{{names: []string{"a", "b", "c"}, keep: 1}}
	for _, tc := range []struct {
		name  string
		ex    exclusions
		nodes []adapter.Node
		want  []string // marked
	}{
		{"none", exclusions{}, []adapter.Node{node("a")}, nil},
		{"group without a count", exclusions{nodes: []excGroup{{names: []string{"a", "c", "zz"}}}}, []adapter.Node{node("a"), node("b"), node("c", off)}, []string{"a", "c"}},
		{"count keeps the first idle node by name", exclusions{nodes: three}, []adapter.Node{node("c"), node("b"), node("a")}, []string{"a"}},
		{"count keeps a waking node first", exclusions{nodes: three}, []adapter.Node{node("a"), node("b", waking), node("c")}, []string{"b"}},
		{"busy, suspended, off and drained nodes do not count", exclusions{nodes: []excGroup{{names: []string{"a", "b", "c", "d", "e"}, keep: 1}}},
			[]adapter.Node{node("a", busy), node("b", suspended), node("c", off), node("d", drained), node("e")}, []string{"e"}},
		{"fewer usable than the count: all of them", exclusions{nodes: []excGroup{{names: []string{"a", "b", "c"}, keep: 2}}},
			[]adapter.Node{node("a", busy), node("b"), node("c", off)}, []string{"b"}},
		{"partition", exclusions{parts: []string{"other"}}, []adapter.Node{node("a"), node("b", other)}, []string{"b"}},
		{"state", exclusions{states: []string{"DRAIN", "POWERING_UP"}}, []adapter.Node{node("a", drained), node("b", waking), node("c")}, []string{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := slices.Clone(tc.nodes)
			tc.ex.mark(nodes)
			var got []string
			for _, n := range nodes {
				if n.PowerSaveExcluded {
					got = append(got, n.Name)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("%+v.mark(%v) marked %v; want %v", tc.ex, tc.nodes, got, tc.want)
			}
		})
	}
}

func FuzzDecodeConfig(f *testing.F) {
	f.Add(readFixture(f, "scontrol-show-config.txt"))
	f.Add([]byte("SuspendExcNodes = nid[1-3],nid[10-20]:4,x[1,3]\nSuspendExcParts = a,,b\nSuspendExcStates = DOWN\n"))
	f.Add([]byte("SuspendExcNodes = g[1-2]:0\nSuspendExcParts = (null)\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ex, err := decodeConfig(b)
		if err != nil {
			if errKind(err) == "other" {
				t.Errorf("decodeConfig error of no kind: %v", err)
			}
			return
		}
		for _, g := range ex.nodes {
			if len(g.names) == 0 || g.keep < 0 || g.keep >= len(g.names) || slices.Contains(g.names, "") {
				t.Errorf("decodeConfig accepted the group %+v", g)
			}
		}
		for _, s := range append(slices.Clone(ex.parts), ex.states...) {
			if s == "" || strings.Contains(s, ",") {
				t.Errorf("decodeConfig accepted the item %q", s)
			}
		}
	})
}
