package analytics

import (
	"flag"
	"fmt"
	"sort"
	"strings"
	"testing"
)

func TestParseCapacities(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
		bad  bool
	}{
		{"", "[]", false},
		{"venus=1022", "[venus=1022]", false},
		{"venus/vcvGl=160, /vcvlY=16", "[venus/vcvGl=160 /vcvlY=16]", false},
		{"venus", "", true},
		{"venus=-1", "", true},
		{"venus=1e3", "", true},
		{"=5", "", true},
		{"venus=99999999999", "", true},
	} {
		got, err := ParseCapacities(tc.in)
		if (err != nil) != tc.bad {
			t.Errorf("ParseCapacities(%q) error %v; want error %v", tc.in, err, tc.bad)
			continue
		}
		if !tc.bad && fmt.Sprint(got) != tc.want && !(tc.want == "[]" && len(got) == 0) {
			t.Errorf("ParseCapacities(%q) = %v; want %s", tc.in, got, tc.want)
		}
	}
}

func TestReadCapacityFile(t *testing.T) {
	for _, tc := range []struct {
		name, in, want, err string
	}{
		{"helios vcs", "vc,nodes,gpus_per_node\nvcvGl,20,8\nvcvlY,2,8\n", "[/vcvGl=160 /vcvlY=16]", ""},
		{"cluster gpus", "cluster,vc,gpus\nvenus,,1022\nvenus,vcvGl,160\n", "[venus=1022 venus/vcvGl=160]", ""},
		{"no gpus column", "vc,nodes\na,1\n", "", "want a gpus column"},
		{"bad number on line 3", "vc,gpus\na,1\nb,x\n", "", "line 3: gpus"},
		{"short row", "vc,gpus\na\n", "", "line 2: 1 fields"},
		{"duplicate", "vc,gpus\na,1\na,2\n", "", "first on line 2"},
		{"nameless", "cluster,vc,gpus\n,,4\n", "", "names no cluster and no VC"},
		{"empty", "", "", "empty"},
	} {
		got, err := ReadCapacityFile(strings.NewReader(tc.in))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: ReadCapacityFile error %v", tc.name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: ReadCapacityFile error %v; want one containing %q", tc.name, err, tc.err)
		case tc.err == "" && fmt.Sprint(got) != tc.want:
			t.Errorf("%s: ReadCapacityFile = %v; want %s", tc.name, got, tc.want)
		}
	}
}

func TestResolveCapacities(t *testing.T) {
	cfg := []Capacity{{VC: "a", GPUs: 8}, {VC: "b", GPUs: 16}, {Cluster: "x", VC: "a", GPUs: 4}, {Cluster: "y", GPUs: 100}}
	pairs := [][2]string{{"x", "a"}, {"x", "b"}, {"y", "a"}, {"y", "z"}, {"w", "a"}, {"w", "q"}}
	var got []string
	for _, r := range resolveCapacities(cfg, pairs) {
		got = append(got, fmt.Sprintf("%s/%s=%d %s", r.cluster, r.vc, r.gpus, r.source))
	}
	sort.Strings(got)
	want := []string{
		"w/a=8 config",
		"x/=20 config_vcs", // x's own a (4) + any cluster's b (16)
		"x/a=4 config",
		"x/b=16 config",
		"y/=100 config",
		"y/a=8 config",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("resolveCapacities:\n got %v\nwant %v", got, want)
	}
}

func FuzzReadCapacityFile(f *testing.F) {
	f.Add("vc,nodes,gpus_per_node\nvcvGl,20,8\n")
	f.Add("cluster,vc,gpus\nvenus,,1022\n")
	f.Add("\uFEFFgpus,cluster\n5,\"a\"\"b\"\n")
	f.Fuzz(func(t *testing.T, in string) {
		cs, err := ReadCapacityFile(strings.NewReader(in))
		if err != nil {
			return
		}
		for _, c := range cs {
			if c.GPUs > maxCapacity || (c.Cluster == "" && c.VC == "") {
				t.Fatalf("accepted %+v", c)
			}
		}
	})
}

func FuzzParseCapacities(f *testing.F) {
	f.Add("venus/vcvGl=160,/vcvlY=16")
	f.Fuzz(func(t *testing.T, in string) {
		cs, err := ParseCapacities(in)
		if err != nil {
			return
		}
		for _, c := range cs {
			if c.GPUs > maxCapacity || (c.Cluster == "" && c.VC == "") {
				t.Fatalf("accepted %+v", c)
			}
		}
	})
}

// TestCapacityFlagTwice: one cluster or VC given twice in --analytics.capacity
// (in one value or in two flags) is refused, as the file refuses it; the
// same VC under two clusters is two entries.
func TestCapacityFlagTwice(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"--analytics.capacity", "venus=8,venus=16"}, "gives venus twice (8 and 16 GPUs)"},
		{[]string{"--analytics.capacity", "venus/a=8", "--analytics.capacity", "venus/a=8"}, "gives venus/a twice"},
		{[]string{"--analytics.capacity", "/a=8, /a=4"}, "gives /a twice"},
		{[]string{"--analytics.capacity", "venus/a=8,earth/a=8,/a=2,venus=100"}, ""},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		var c Config
		c.RegisterFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		c.Database = "heliostat"
		err := c.Validate()
		if tc.err == "" && err != nil {
			t.Errorf("%v: Validate = %v; want nil", tc.args, err)
		}
		if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%v: Validate = %v; want one containing %q", tc.args, err, tc.err)
		}
	}
}
