package slurmfmt

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestInt(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Int
		err  string
	}{
		{`7`, Int{7, true}, ""},
		{`-2`, Int{-2, true}, ""},
		{`null`, Int{}, ""},
		{`1e3`, Int{1000, true}, ""},
		{`18446744073709551614`, Int{}, ""}, // NO_VAL64
		{`{"set": true, "infinite": false, "number": 40}`, Int{40, true}, ""},
		{`{"set": false, "infinite": false, "number": 0}`, Int{}, ""},
		{`{"set": true, "infinite": true, "number": 0}`, Int{}, ""},
		{`{"number": 5}`, Int{5, true}, ""},
		{`1.5`, Int{}, "value 1.5"},
		{`"7"`, Int{}, "value \"7\""},
		{`{"set": true}`, Int{}, "without \"number\""},
		{`{"number": "x"}`, Int{}, "value \"x\""},
	} {
		var v struct {
			N Int `json:"n"`
		}
		err := json.Unmarshal([]byte(`{"n": `+tc.in+`}`), &v)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "n") {
				t.Errorf("%s: error %v; want one naming the field and containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || v.N != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.in, v.N, err, tc.want)
		}
	}
	if got := (Int{}).Or(-1); got != -1 {
		t.Errorf("unset Or(-1) = %d", got)
	}
	if got := (Int{0, true}).Or(-1); got != 0 {
		t.Errorf("set 0 Or(-1) = %d", got)
	}
}

func TestStates(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want States
		base string
		err  bool
	}{
		{`"PENDING"`, States{"PENDING"}, "PENDING", false},
		{`["IDLE", "POWERED_DOWN"]`, States{"IDLE", "POWERED_DOWN"}, "IDLE", false},
		{`[]`, States{}, "", false},
		{`7`, nil, "", true},
		{`[1]`, nil, "", true},
	} {
		var s States
		err := json.Unmarshal([]byte(tc.in), &s)
		if (err != nil) != tc.err || !tc.err && (!slices.Equal(s, tc.want) || s.Base() != tc.base) {
			t.Errorf("%s: %q (base %q), %v; want %q (base %q), error %v", tc.in, s, s.Base(), err, tc.want, tc.base, tc.err)
		}
	}
}

func FuzzInt(f *testing.F) {
	for _, s := range []string{`7`, `null`, `{"set": true, "number": 4}`, `18446744073709551615`, `1e300`, `{"number": {"number": 1}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var n Int
		if err := n.UnmarshalJSON([]byte(s)); err != nil {
			return
		}
		if !n.Set && n.V != 0 {
			t.Errorf("%q: unset Int with value %d", s, n.V)
		}
	})
}
