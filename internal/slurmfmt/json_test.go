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
			N Int `json:"time_limit"`
		}
		err := json.Unmarshal([]byte(`{"time_limit": `+tc.in+`}`), &v)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "time_limit") {
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

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want ExitCode
		err  bool
	}{
		{`0`, ExitCode{0, true}, false},
		{`768`, ExitCode{3, true}, false}, // wait status: exit 3
		{`9`, ExitCode{137, true}, false}, // wait status: killed by SIGKILL
		{`null`, ExitCode{}, false},
		{`{"set": true, "infinite": false, "number": 256}`, ExitCode{1, true}, false},
		{`{"status": ["SUCCESS"], "return_code": {"set": true, "infinite": false, "number": 0}, "signal": {"id": {"set": false, "infinite": false, "number": 0}, "name": ""}}`, ExitCode{0, true}, false},
		{`{"status": ["ERROR"], "return_code": {"set": true, "infinite": false, "number": 2}, "signal": {"id": {"set": false, "number": 0}}}`, ExitCode{2, true}, false},
		{`{"status": ["SIGNALED"], "return_code": {"set": true, "number": 0}, "signal": {"id": {"set": true, "number": 15}, "name": "TERM"}}`, ExitCode{143, true}, false},
		{`{"status": ["PENDING"], "return_code": {"set": false, "number": 0}}`, ExitCode{}, false},
		{`{"return_code": {"set": true, "number": 1}, "signal": {"id": {"set": true, "number": 9223372036854775807}}}`, ExitCode{1, true}, false},
		{`{"status": "x"}`, ExitCode{}, true},
		{`{"return_code": "x"}`, ExitCode{}, true},
		{`"0"`, ExitCode{}, true},
	} {
		var c ExitCode
		err := json.Unmarshal([]byte(tc.in), &c)
		if (err != nil) != tc.err || !tc.err && c != tc.want {
			t.Errorf("%s: %+v, %v; want %+v, error %v", tc.in, c, err, tc.want, tc.err)
		}
	}
	if got := (ExitCode{}).Or(-1); got != -1 {
		t.Errorf("unset Or(-1) = %d", got)
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

func FuzzStates(f *testing.F) {
	for _, s := range []string{`"PENDING"`, `["IDLE", "POWERED_DOWN"]`, `[]`, `null`, `7`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var st States
		if err := json.Unmarshal([]byte(s), &st); err != nil {
			return
		}
		if len(st) > 0 && st.Base() != st[0] || len(st) == 0 && st.Base() != "" {
			t.Errorf("%q: %q has base %q", s, st, st.Base())
		}
	})
}

func FuzzExitCode(f *testing.F) {
	for _, s := range []string{`768`, `null`, `{"set": true, "number": 256}`, `{"status": ["SIGNALED"], "return_code": {"set": true, "number": 0}, "signal": {"id": {"set": true, "number": 15}}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var c ExitCode
		if err := c.UnmarshalJSON([]byte(s)); err != nil {
			return
		}
		if !c.Set && c.Code != 0 {
			t.Errorf("%q: unset with code %d", s, c.Code)
		}
		// A wait status always reads as a shell's 0 to 255.
		plain := !strings.HasPrefix(strings.TrimSpace(s), "{")
		if plain && c.Set && (c.Code < 0 || c.Code > 255) {
			t.Errorf("%q: code %d from a wait status", s, c.Code)
		}
		var again ExitCode
		if err := again.UnmarshalJSON([]byte(s)); err != nil || again != c {
			t.Errorf("%q: decoded twice as %+v and %+v, %v", s, c, again, err)
		}
	})
}
