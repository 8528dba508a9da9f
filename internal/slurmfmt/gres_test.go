package slurmfmt

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

func TestParseGres(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want GPUs
		ok   bool
		err  string
	}{
		{"gpu:8(IDX:0-7)", GPUs{Count: 8, Indices: []int64{0, 1, 2, 3, 4, 5, 6, 7}}, true, ""},
		{"gpu:a100:2(IDX:0,3)", GPUs{Type: "a100", Count: 2, Indices: []int64{0, 3}}, true, ""},
		{"gpu:1(IDX:5),mps:0(0/100,0/100)", GPUs{Count: 1, Indices: []int64{5}}, true, ""},
		{"gpu:v100:1(IDX:4),gpu:a100:2(IDX:0-1)", GPUs{Type: "a100,v100", Count: 3, Indices: []int64{4, 0, 1}}, true, ""},
		{"gpu:2(IDX:N/A)", GPUs{Count: 2}, true, ""},
		{"mps:100", GPUs{}, false, ""},
		{"", GPUs{}, false, "empty GRES name"},
		{"gpu:2(IDX:0)", GPUs{}, false, "2 GPUs but 1 indices"},
		{"gpu:2(IDX:1-0)", GPUs{}, false, "bad GPU index range"},
		{"gpu:x:y", GPUs{}, false, "not a number"},
		{"gpu:2(IDX:0-1", GPUs{}, false, "not closed"},
		{"gpu:2(IDX:9223372036854775806-9223372036854775807)", GPUs{Count: 2, Indices: []int64{9223372036854775806, 9223372036854775807}}, true, ""},
		// Other GRES are passed over whatever they hold: Slurm 22.05's
		// count-only GRES (seen on the test cluster), a count of bytes
		// (as sinfo's gres_used writes one, 22.05 and 24.11), a unit, a
		// type.
		{"gpu:1(IDX:0),tmpdisk(CNT:10737418240)", GPUs{Count: 1, Indices: []int64{0}}, true, ""},
		{"gpu:l40s:1(IDX:0),tmpsize:10737418240", GPUs{Type: "l40s", Count: 1, Indices: []int64{0}}, true, ""},
		{"tmpdisk:nvme:7T,gpu:2(IDX:0-1)", GPUs{Count: 2, Indices: []int64{0, 1}}, true, ""},
		{"gpu:1048577(IDX:N/A)", GPUs{}, false, "out of range"},
	} {
		got, ok, err := ParseGresDetail(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseGresDetail(%q) error = %v; want one containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || ok != tc.ok || got.Type != tc.want.Type || got.Count != tc.want.Count || !slices.Equal(got.Indices, tc.want.Indices) {
			t.Errorf("ParseGresDetail(%q) = %+v, %v, %v; want %+v, %v", tc.in, got, ok, err, tc.want, tc.ok)
		}
	}
	for _, tc := range []struct {
		in    string
		count int64
		typ   string
		ok    bool
		// byType is ByType where it is not {typ: count} (ok) or nil.
		byType map[string]int64
	}{
		{"gres:gpu:8", 8, "", true, nil},
		{"gres:gpu:a100:2,gres:mps:100", 2, "a100", true, nil},
		{"gpu", 1, "", true, nil},
		{"gres/gpu:3", 3, "", true, nil},
		{"", 0, "", false, nil},
		{"gres:shard:2", 0, "", false, nil},
		{"gres/gpu:a100:2,gres:mps:100", 2, "a100", true, nil},
		{"gpu:h100:2(IDX:0-1)", 2, "h100", true, nil},
		{"gpu:h100:8(S:0-1),mps:100", 8, "h100", true, nil},
		{"gpu:a100", 1, "a100", true, nil},
		{"mps:100", 0, "", false, nil},
		{"(null)", 0, "", false, nil},
		{"N/A", 0, "", false, nil},
		{"gres/gpu=4", 4, "", true, nil},
		{"cpu=2,mem=1G,gres/gpu:h100=2", 2, "h100", true, nil},
		{"gpu:a100:4(S:0),gpu:v100:2(S:1)", 6, "a100,v100", true, map[string]int64{"a100": 4, "v100": 2}},
		{"gpu:a100:1(IDX:0),gpu:v100:0(IDX:N/A)", 1, "a100,v100", true, map[string]int64{"a100": 1, "v100": 0}},
		{"gres/gpu:a100=2,gres/gpu=1,gres/gpu:a100=1", 4, "a100", true, map[string]int64{"a100": 3, "": 1}},
		{"gres:gpu:v100:1,gres:gpu:a100:1", 2, "a100,v100", true, map[string]int64{"a100": 1, "v100": 1}},
		// sinfo's gres and gres_used on a node with a local-disk GRES
		// (Slurm 24.11; 22.05 writes "gpu:1,tmpdisk:10737418240"), and
		// requests for it: passed over.
		{"tmpsize:7T,gpu:l40s:4(S:0-1)", 4, "l40s", true, nil},
		{"gpu:l40s:1(IDX:0),tmpsize:10737418240", 1, "l40s", true, nil},
		{"gres/gpu:l40s=1,gres/tmpsize=10737418240", 1, "l40s", true, nil},
		{"gres:tmpsize:10737418240,gres:gpu:2", 2, "", true, nil},
		{"gres/tmpdisk:nvme:7T", 0, "", false, nil},
	} {
		g, ok, err := ParseTRES(tc.in)
		if err != nil || ok != tc.ok || g.Count != tc.count || g.Type != tc.typ {
			t.Errorf("ParseTRES(%q) = %+v, %v, %v; want count %d type %q ok %v", tc.in, g, ok, err, tc.count, tc.typ, tc.ok)
		}
		want := tc.byType
		if want == nil && tc.ok {
			want = map[string]int64{tc.typ: tc.count}
		}
		if !maps.Equal(g.ByType, want) || (want == nil) != (g.ByType == nil) {
			t.Errorf("ParseTRES(%q).ByType = %v; want %v", tc.in, g.ByType, want)
		}
	}
}

// TestParseTRESErrors: a GPU request that cannot be read is an error, not
// zero GPUs.
func TestParseTRESErrors(t *testing.T) {
	for _, tc := range []struct{ in, err string }{
		{"gpu:a:b", "not a number"},
		{"gpu:-1", "out of range"},
		{"gres/gpu=x", "not a number"},
		{"gres/gpu:a100:2=3", "both before and after"},
		{"gres/gpu=-2", "not a number in range"},
		{"gpu:a100:2:x", "more than name:type:count"},
		{"gpu:),", "holds one of ,()="},
		{"gres:gpu:8,,gres:mps:1", "empty GRES name"},
		{"gres:gpu:1048577", "out of range"},
	} {
		if g, ok, err := ParseTRES(tc.in); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("ParseTRES(%q) = %+v, %v, %v; want an error containing %q", tc.in, g, ok, err, tc.err)
		}
	}
}

func FuzzParseTRES(f *testing.F) {
	for _, s := range []string{"gres:gpu:8", "gres/gpu:a100:2,gres:mps:100", "gpu:h100:8(S:0-1)", "gpu:8(IDX:0-7)", "(null)", "gpu:x:y", "gpu:a100:4(S:0),gpu:v100:2(S:1)",
		"gpu:l40s:1(IDX:0),tmpsize:10737418240"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		g, ok, err := ParseTRES(s)
		if err != nil {
			return
		}
		var sum int64
		for _, n := range g.ByType {
			sum += n
		}
		if g.Count < 0 || !ok && g.Count != 0 || sum != g.Count || ok != (g.ByType != nil) || !typeList(g.Type) {
			t.Errorf("ParseTRES(%q) = %+v, %v", s, g, ok)
		}
		for _, typ := range strings.Split(g.Type, ",") {
			if _, named := g.ByType[typ]; typ != "" && !named {
				t.Errorf("ParseTRES(%q): type %q is not in ByType %v", s, typ, g.ByType)
			}
		}
	})
}

// typeList reports whether typ is a GPU type list as JoinTypes writes it:
// "", or names, none empty, sorted, each once, joined by ','.
func typeList(typ string) bool {
	if typ == "" {
		return true
	}
	names := strings.Split(typ, ",")
	for i, n := range names {
		if n == "" || i > 0 && names[i-1] >= n {
			return false
		}
	}
	return true
}

func FuzzParseGresDetail(f *testing.F) {
	for _, s := range []string{"gpu:8(IDX:0-7)", "gpu:a100:2(IDX:0,3)", "gpu:1(IDX:5),mps:0(0/100,0/100)", "gpu:2(IDX:N/A)", "gpu:2(IDX:0-4095)", "gpu:2(IDX:9223372036854775806-9223372036854775807)", "gpu:v100:1(IDX:4),gpu:a100:2(IDX:0-1)",
		"gpu:l40s:1(IDX:0),tmpsize:10737418240"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		g, ok, err := ParseGresDetail(s)
		if err != nil {
			return
		}
		if g.Count < 0 || !ok && g.Count != 0 || g.Indices != nil && int64(len(g.Indices)) != g.Count || !typeList(g.Type) {
			t.Errorf("ParseGresDetail(%q) = %+v, %v", s, g, ok)
		}
	})
}

func TestJoinTypes(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{nil, ""},
		{[]string{""}, ""},
		{[]string{"a100"}, "a100"},
		{[]string{"", "a100", ""}, "a100"},
		{[]string{"v100", "a100"}, "a100,v100"},
		{[]string{"a100", "v100", "a100"}, "a100,v100"},
	} {
		if got := JoinTypes(tc.in); got != tc.want {
			t.Errorf("JoinTypes(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}
