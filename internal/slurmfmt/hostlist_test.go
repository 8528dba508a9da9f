package slurmfmt

import (
	"slices"
	"strings"
	"testing"
)

func TestExpandHostlist(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{"", nil, ""},
		{"(null)", nil, ""},
		{"gpu1", []string{"gpu1"}, ""},
		{"gpu[1-2,4]", []string{"gpu1", "gpu2", "gpu4"}, ""},
		{"gpu[1-2],cpu3", []string{"gpu1", "gpu2", "cpu3"}, ""},
		{"gpu[1,3],cpu05", []string{"gpu1", "gpu3", "cpu05"}, ""},
		{"n[08-11]", []string{"n08", "n09", "n10", "n11"}, ""},
		{"n[8-11]", []string{"n8", "n9", "n10", "n11"}, ""},
		{"r[1-2]n[1-2]", []string{"r1n1", "r1n2", "r2n1", "r2n2"}, ""},
		{"a[1]-b", []string{"a1-b"}, ""},
		{"node-1.example.org,gpu[3]", []string{"node-1.example.org", "gpu3"}, ""},
		{"gpu[1-2", nil, "not closed"},
		{"gpu1-2]", nil, "without '['"},
		{"gpu]1", nil, "without '['"},
		{"gpu[[1]]", nil, "nested"},
		{"gpu[]", nil, "empty brackets"},
		{"gpu[2-1]", nil, "backwards"},
		{"gpu[a-b]", nil, "bad number"},
		{"gpu[1-]", nil, "bad number"},
		{"gpu1,,gpu2", nil, "empty host name"},
		{"a,,b", nil, "empty host name"},
		{"gpu1,", nil, "empty host name"},
		{"gpu 1", nil, "space"},
		{"n[0-999999999]", nil, "more than"},
		{"a[0-999]b[0-999]", nil, "more than"},
	} {
		got, err := ExpandHostlist(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ExpandHostlist(%q) = %v, %v; want error containing %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ExpandHostlist(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func FuzzExpandHostlist(f *testing.F) {
	for _, s := range []string{"gpu[1-2,4]", "r[1-2]n[01-03],x", "a[", "]", "n[0-99999]", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		hosts, err := ExpandHostlist(s)
		if err != nil {
			return
		}
		if len(hosts) > MaxHosts {
			t.Fatalf("ExpandHostlist(%q) gave %d hosts, more than MaxHosts", s, len(hosts))
		}
		for _, h := range hosts {
			if h == "" || strings.ContainsAny(h, "[],") {
				t.Fatalf("ExpandHostlist(%q) gave host %q", s, h)
			}
		}
		// A list without brackets is its own expansion.
		if !strings.ContainsAny(s, "[]") && s != "(null)" && strings.Join(hosts, ",") != s {
			t.Fatalf("ExpandHostlist(%q) = %q; want the names unchanged", s, hosts)
		}
	})
}

func TestSplitHostlist(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{in: "gpu[1,3]:1,gpu4", want: []string{"gpu[1,3]:1", "gpu4"}},
		{in: "a,,b", want: []string{"a", "", "b"}},
		{in: "", want: []string{""}},
		{in: "gpu[1,3", err: "'[' at offset 3 is not closed"},
		{in: "gpu1]", err: "']' without '[' at offset 4"},
		{in: "g[[1]]", err: "nested '[' at offset 2"},
	} {
		got, err := SplitHostlist(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("SplitHostlist(%q) error = %v; want one containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("SplitHostlist(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}
