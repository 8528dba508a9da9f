package analytics

import (
	"strings"
	"testing"
	"time"
)

// TestTimeZone: --analytics.timezone takes the IANA names that ClickHouse
// knows too, and refuses Go's "Local" (which ClickHouse does not know: every
// run would fail part-way, after replacing some result tables) with an
// error naming the flag; CapacitySQL refuses time.Local as well.
func TestTimeZone(t *testing.T) {
	for _, tc := range []struct {
		tz  string
		err string // "" for none
	}{
		{"", ""},
		{"UTC", ""},
		{"Asia/Shanghai", ""},
		{"Local", `--analytics.timezone "Local": "Local" is Go's name for this machine's zone, unknown to ClickHouse`},
		{"Nowhere/Else", `--analytics.timezone "Nowhere/Else"`},
	} {
		c := Config{Database: "heliostat", TimeZone: tc.tz}
		err := c.Validate()
		if tc.err == "" && err != nil {
			t.Errorf("Validate(TimeZone %q) = %v; want nil", tc.tz, err)
		}
		if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("Validate(TimeZone %q) = %v; want an error containing %q", tc.tz, err, tc.err)
		}
	}
	q := CapacityQueries()[0]
	w := Window{Since: time.Unix(0, 0), Until: time.Unix(3600, 0)}
	// time.Local is named "Local" only when TZ is unset (with TZ set it
	// takes TZ's name, which ClickHouse may know): a zone of that name
	// stands for it whatever the test process's environment.
	local := time.FixedZone("Local", 3600)
	if _, err := CapacitySQL(q, "db", w, w.Until, local, 0); err == nil || !strings.Contains(err.Error(), `"Local"`) {
		t.Errorf("CapacitySQL(a zone named Local) = %v; want an error naming Local", err)
	}
}
