package analytics

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

func TestWindowID(t *testing.T) {
	w := Window{Since: time.Date(2020, 9, 1, 0, 0, 0, 0, time.UTC), Until: time.Date(2020, 10, 1, 0, 0, 0, 0, time.UTC)}
	if got, want := w.ID(), "2020-09-01T00:00:00Z/2020-10-01T00:00:00Z"; got != want {
		t.Errorf("ID() = %q; want %q", got, want)
	}
	back, err := ParseWindow(w.ID())
	if err != nil || back != w {
		t.Errorf("ParseWindow(%q) = %v, %v; want %v", w.ID(), back, err, w)
	}
	for _, bad := range []string{"", "2020-09-01T00:00:00Z", "2020-10-01T00:00:00Z/2020-09-01T00:00:00Z", "x/y", "2020-09-01T00:00:00.5Z/2020-10-01T00:00:00Z"} {
		if _, err := ParseWindow(bad); err == nil {
			t.Errorf("ParseWindow(%q) = nil error; want one", bad)
		}
	}
}

func TestPeriods(t *testing.T) {
	shanghai, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Skipf("no tzdata: %v", err)
	}
	at := time.Date(2020, 9, 2, 17, 30, 0, 0, time.UTC) // Thursday 01:30 on the 3rd in Shanghai
	for _, tc := range []struct {
		p    Period
		loc  *time.Location
		want string
	}{
		{Day, time.UTC, "2020-09-02T00:00:00Z/2020-09-03T00:00:00Z"},
		{Day, shanghai, "2020-09-02T16:00:00Z/2020-09-03T16:00:00Z"},
		{Week, time.UTC, "2020-08-31T00:00:00Z/2020-09-07T00:00:00Z"},
		{Month, time.UTC, "2020-09-01T00:00:00Z/2020-10-01T00:00:00Z"},
		{Month, shanghai, "2020-08-31T16:00:00Z/2020-09-30T16:00:00Z"},
	} {
		if got := tc.p.Containing(at, tc.loc).ID(); got != tc.want {
			t.Errorf("%s.Containing(%v, %v) = %s; want %s", tc.p, at, tc.loc, got, tc.want)
		}
	}
	var ids []string
	for _, w := range Day.Recent(at, 48*time.Hour, time.UTC) {
		ids = append(ids, w.ID()[:10])
	}
	if got, want := strings.Join(ids, " "), "2020-08-31 2020-09-01 2020-09-02"; got != want {
		t.Errorf("Day.Recent = %s; want %s", got, want)
	}
	if _, err := ParsePeriod("year"); err == nil {
		t.Error("ParsePeriod(year) = nil error")
	}
}

// TestThroughToday: a window given only its start ends at the end of the
// day, in the zone, that holds now, whatever the time of day.
func TestThroughToday(t *testing.T) {
	shanghai, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Fatalf("no tzdata: %v", err)
	}
	since := time.Date(2020, 9, 1, 6, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		now  time.Time
		loc  *time.Location
		want string // window ID, or the error's text
	}{
		{time.Date(2020, 9, 2, 0, 0, 0, 0, time.UTC), time.UTC, "2020-09-01T06:00:00Z/2020-09-03T00:00:00Z"},
		{time.Date(2020, 9, 2, 23, 59, 59, 0, time.UTC), time.UTC, "2020-09-01T06:00:00Z/2020-09-03T00:00:00Z"},
		{time.Date(2020, 9, 2, 17, 30, 0, 0, time.UTC), shanghai, "2020-09-01T06:00:00Z/2020-09-03T16:00:00Z"},
		{time.Date(2020, 9, 1, 7, 0, 0, 0, time.UTC), time.UTC, "2020-09-01T06:00:00Z/2020-09-02T00:00:00Z"},
		{time.Date(2020, 8, 31, 12, 0, 0, 0, time.UTC), time.UTC, "not before the end of today"},
	} {
		w, err := ThroughToday(since, tc.now, tc.loc)
		got := w.ID()
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, tc.want) {
			t.Errorf("ThroughToday(%v, %v, %v) = %s; want %s", since, tc.now, tc.loc, got, tc.want)
		}
	}
}

func TestExpand(t *testing.T) {
	got, err := expand("SELECT {q:a:0.5} FROM {database}.t", map[string]string{"database": "db"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "FROM db.t") || !strings.Contains(got, "((length(a) - 1) * 0.5)") {
		t.Errorf("expand = %q", got)
	}
	for _, bad := range []string{"SELECT {nope}", "SELECT {database"} {
		if _, err := expand(bad, map[string]string{"database": "db"}); err == nil {
			t.Errorf("expand(%q) = nil error; want one", bad)
		}
	}
}

// TestEmbedded checks that every job and capacity query parses, expands
// with the runner's placeholders, and that every file of queries/ is a job
// or a preparation step.
func TestEmbedded(t *testing.T) {
	vars := map[string]string{"database": "db", "jobs": "j", "capacity": "c", "capacity_all": "ca", "window_id": "w",
		"since": "0", "hour0": "0", "until": "1", "computed_until": "1", "lookback_since": "0", "tz": "UTC", "window_columns": "x"}
	for _, j := range Jobs() {
		if len(j.Tables) == 0 || len(j.Statements) == 0 {
			t.Errorf("job %s: tables %v, %d statements", j.Name, j.Tables, len(j.Statements))
		}
		v := map[string]string{}
		for k, x := range vars {
			v[k] = x
		}
		for _, tb := range j.Tables {
			v["out."+tb] = "o"
		}
		for _, tmp := range j.temps {
			v["tmp."+tmp] = "t"
		}
		for i, s := range j.Statements {
			if _, err := expand(s, v); err != nil {
				t.Errorf("job %s statement %d: %v", j.Name, i+1, err)
			}
		}
	}
	entries, err := queryFS.ReadDir("queries")
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{"prepare.sql": true, "prepare_capacity.sql": true}
	for _, n := range JobNames() {
		known[n+".sql"] = true
	}
	for _, e := range entries {
		if !known[e.Name()] {
			t.Errorf("queries/%s is neither a job nor a preparation step", e.Name())
		}
	}
	for _, q := range CapacityQueries() {
		if q.Doc == "" {
			t.Errorf("capacity query %s has no leading comment", q.Name)
		}
		w := Window{Since: time.Unix(0, 0), Until: time.Unix(3600, 0)}
		if _, err := CapacitySQL(q, "db", w, w.Until, time.UTC, 0); err != nil {
			t.Errorf("%v", err)
		}
	}
}

func TestHeadlineJSON(t *testing.T) {
	h := Headline{Cluster: "v", Jobs: 3, StateShare: map[string]float64{"completed": 1}, GPUTimeStateShare: map[string]float64{"completed": math.NaN()},
		DurationMedianS: math.NaN(), Top5PctUsersGPUTimeShare: 0.5}
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["duration_median_s"] != nil || m["top5pct_users_gpu_time_share"] != 0.5 || m["jobs"] != 3.0 ||
		m["gpu_time_state_share"].(map[string]any)["completed"] != nil || m["state_share"].(map[string]any)["completed"] != 1.0 {
		t.Errorf("json.Marshal(Headline) = %s", b)
	}
}

// FuzzParseWindow: a window is refused with an error naming it, or is valid
// and its ID reads back as the same window.
func FuzzParseWindow(f *testing.F) {
	for _, s := range []string{"2026-01-01T00:00:00Z/2026-01-02T00:00:00Z", "2026-01-01T00:00:00+08:00/2026-01-01T01:00:00Z",
		"bad", "/", "2026-01-02T00:00:00Z/2026-01-01T00:00:00Z", "1969-12-31T00:00:00Z/1970-01-02T00:00:00Z", "2026-01-01T00:00:00.5Z/2026-01-02T00:00:00Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		w, err := ParseWindow(id)
		if err != nil {
			if !strings.Contains(err.Error(), "window") {
				t.Fatalf("ParseWindow(%q) error %q does not say it is about a window", id, err)
			}
			return
		}
		if err := w.Validate(); err != nil {
			t.Fatalf("ParseWindow(%q) = %v, which is invalid: %v", id, w, err)
		}
		back, err := ParseWindow(w.ID())
		if err != nil || !back.Since.Equal(w.Since) || !back.Until.Equal(w.Until) {
			t.Fatalf("ParseWindow(%q) = %v; its ID reads back as %v, %v", id, w, back, err)
		}
	})
}

// TestHourStart: the utilization hours start on the zone's whole hours,
// off the UTC hour where its offset has half or quarter hours.
func TestHourStart(t *testing.T) {
	at := func(h, m int) time.Time { return time.Date(2026, 3, 2, h, m, 0, 0, time.UTC) }
	for _, tc := range []struct {
		tz   string
		t    time.Time
		want time.Time
	}{
		{"UTC", at(0, 0), at(0, 0)},
		{"UTC", at(10, 15), at(10, 0)},
		{"Asia/Shanghai", at(0, 0), at(0, 0)},        // +08:00
		{"Asia/Kolkata", at(0, 0), at(-1, 30)},       // +05:30: 05:00 IST
		{"Asia/Kolkata", at(0, 30), at(0, 30)},       // 06:00 IST
		{"Asia/Kathmandu", at(0, 0), at(-1, 15)},     // +05:45: 05:00 NPT
		{"Australia/Adelaide", at(0, 0), at(-1, 30)}, // +10:30: 10:00 ACDT
		{"America/St_Johns", at(0, 0), at(-1, 30)},   // -03:30: 20:00 NST
		{"America/St_Johns", at(0, 29), at(-1, 30)},
		// 1969-12-31T20:30 NST's hour began before 1970: the time itself
		{"America/St_Johns", time.Unix(0, 0).UTC(), time.Unix(0, 0).UTC()},
	} {
		loc, err := time.LoadLocation(tc.tz)
		if err != nil {
			t.Fatal(err)
		}
		if got := hourStart(tc.t, loc); !got.Equal(tc.want) {
			t.Errorf("hourStart(%s, %s) = %s; want %s", tc.t.Format(time.RFC3339), tc.tz, got.Format(time.RFC3339), tc.want.Format(time.RFC3339))
		}
	}
}
