package demand

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestReadSeries(t *testing.T) {
	at := func(s string) time.Time { t, _ := time.Parse(timeLayout, s); return t }
	nan := math.NaN()
	tests := []struct {
		name  string
		in    string
		start time.Time
		step  time.Duration
		vals  []float64
		cap   float64
	}{
		{"philly header", "time,active,total\n2017-10-03 00:00:00,312,420\n2017-10-03 00:01:00,309,420\n",
			at("2017-10-03 00:00:00"), time.Minute, []float64{312, 309}, 420},
		{"columns in another order, extra column, spaces, BOM", "\ufefftotal, note ,TIME,active\n420,x,2017-10-03 00:00:00,1\n552,y,2017-10-03 00:02:00, 2\n",
			at("2017-10-03 00:00:00"), 2 * time.Minute, []float64{1, 2}, 552},
		{"BOM before a quoted header", "\ufeff\"time\",\"active\"\r\n\"2017-10-03 00:00:00\",1\r\n2017-10-03 00:01:00,2\r\n",
			at("2017-10-03 00:00:00"), time.Minute, []float64{1, 2}, 0},
		{"gap becomes missing steps", "time,active\n2017-10-03 00:00:00,5\n2017-10-03 00:01:00,6\n2017-10-03 00:04:00,7\n",
			at("2017-10-03 00:00:00"), time.Minute, []float64{5, 6, nan, nan, 7}, 0},
		{"T separator and fractional counts", "time,active,total\n2017-10-03T00:00:00,1.5,4\n2017-10-03T00:00:30,0,4\n",
			at("2017-10-03 00:00:00"), 30 * time.Second, []float64{1.5, 0}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ReadSeries(strings.NewReader(tt.in))
			if err != nil {
				t.Fatalf("ReadSeries(%q) error %v", tt.in, err)
			}
			if !s.Start.Equal(tt.start) || s.Step != tt.step || s.Capacity != tt.cap || !sameValues(s.Values, tt.vals) {
				t.Errorf("ReadSeries(%q) = start %v step %v cap %v values %v; want %v %v %v %v",
					tt.in, s.Start, s.Step, s.Capacity, s.Values, tt.start, tt.step, tt.cap, tt.vals)
			}
		})
	}
}

func TestReadSeriesErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", "missing required column"},
		{"no time column", "when,active\n", `"time" (line 1)`},
		{"no active column", "time,busy\n", `"active" (line 1)`},
		{"bad time", "time,active\n2017-10-03 00:00:00,1\n03/10/2017,2\n", "line 3: time"},
		{"negative", "time,active\n2017-10-03 00:00:00,1\n2017-10-03 00:01:00,1\n2017-10-03 00:02:00,-1\n", "line 4: active"},
		{"NaN", "time,active\n2017-10-03 00:00:00,NaN\n", "line 2: active"},
		{"Inf total", "time,active,total\n2017-10-03 00:00:00,1,+Inf\n", "line 2: total"},
		{"not a number", "time,active\n2017-10-03 00:00:00,many\n", "line 2: active"},
		{"active above total", "time,active,total\n2017-10-03 00:00:00,1,420\n2017-10-03 00:01:00,421,420\n", "line 3: active 421 is above total 420"},
		{"out of order", "time,active\n2017-10-03 00:01:00,1\n2017-10-03 00:00:00,1\n", "line 3: time 2017-10-03 00:00:00 is not after line 2"},
		{"duplicate", "time,active\n2017-10-03 00:01:00,1\n2017-10-03 00:01:00,1\n", "line 3"},
		{"off the grid", "time,active\n2017-10-03 00:00:00,1\n2017-10-03 00:01:00,1\n2017-10-03 00:02:30,1\n",
			"line 4: time 2017-10-03 00:02:30 is 1m30s after line 3's, not a whole number of the 1m0s step (the smallest gap, from line 2 to line 3)"},
		// One row a second early far down the file sets a 59s step: the
		// error names that row, not only the first row off its grid.
		{"moved row sets the step", "time,active\n2017-10-03 00:00:00,1\n2017-10-03 00:01:00,1\n2017-10-03 00:02:00,1\n2017-10-03 00:02:59,1\n2017-10-03 00:04:00,1\n",
			"line 3: time 2017-10-03 00:01:00 is 1m0s after line 2's, not a whole number of the 59s step (the smallest gap, from line 4 to line 5)"},
		{"time twice", "time,active,Time\n", `line 1: column "time" twice (cells 1 and 3)`},
		{"active twice", "active,time, ACTIVE\n2017-10-03 00:00:00,1,2\n", `line 1: column "active" twice (cells 1 and 3)`},
		{"total twice", "time,total,active,total\n", `line 1: column "total" twice (cells 2 and 4)`},
		{"short row", "time,active\n2017-10-03 00:00:00\n", "line 2"},
		{"header only", "time,active\n", "0 rows"},
		{"one row", "time,active\n2017-10-03 00:00:00,1\n", "1 rows"},
		{"too long", "time,active\n0001-01-01 00:00:00,1\n0001-01-01 00:00:01,1\n9999-01-01 00:00:00,1\n", "line 4: series spans"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadSeries(strings.NewReader(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ReadSeries(%q) error = %v; want one containing %q", tt.in, err, tt.want)
			}
		})
	}
	if _, err := ReadSeries(strings.NewReader("a,b\n")); !errors.Is(err, ErrMissingColumn) {
		t.Errorf("ReadSeries(no columns) error = %v; want ErrMissingColumn", err)
	}
}

// FuzzReadSeries checks that no input panics or yields an inconsistent
// Series, and that what it reads writes back and reads the same.
func FuzzReadSeries(f *testing.F) {
	f.Add("time,active,total\n2017-10-03 00:00:00,312,420\n2017-10-03 00:01:00,309,420\n2017-10-03 00:05:00,300,420\n")
	f.Add("active,time\n1,2017-10-03T00:00:00\n2,2017-10-03T00:00:10\n")
	f.Add("time,active\n\"2017-10-03 00:00:00\",1\n2017-10-03 00:00:00.5,2\n")
	f.Add("time,active\n0001-01-01 00:00:00,0\n9999-12-31 23:59:59,1e308\n")
	f.Add("\ufeff\"time\",\"active\"\n2017-10-03 00:00:00,1\n2017-10-03 00:01:00,2\n")
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ReadSeries(strings.NewReader(in))
		if err != nil {
			return
		}
		if s.Step <= 0 || s.Len() < 2 || s.Len() > MaxSeriesLen || s.Capacity < 0 {
			t.Fatalf("ReadSeries(%q) = step %v len %d capacity %v", in, s.Step, s.Len(), s.Capacity)
		}
		if math.IsNaN(s.Values[0]) || math.IsNaN(s.Values[s.Len()-1]) {
			t.Fatalf("ReadSeries(%q): first or last step missing", in)
		}
		for i, v := range s.Values {
			if v < 0 || math.IsInf(v, 0) {
				t.Fatalf("ReadSeries(%q): value %d = %v", in, i, v)
			}
		}
		if s.Totals != nil && len(s.Totals) != len(s.Values) {
			t.Fatalf("ReadSeries(%q): %d totals for %d values", in, len(s.Totals), len(s.Values))
		}
		for i := range s.Totals {
			if s.Values[i] > s.Totals[i] {
				t.Fatalf("ReadSeries(%q): step %d has %v active of %v", in, i, s.Values[i], s.Totals[i])
			}
		}
		again, err := ReadSeries(strings.NewReader(writeSeries(s)))
		if err != nil {
			t.Fatalf("ReadSeries(writeSeries(ReadSeries(%q))) error %v", in, err)
		}
		if !again.Start.Equal(s.Start) || again.Step != s.Step || !sameValues(again.Values, s.Values) {
			t.Fatalf("ReadSeries(%q) does not read back the same", in)
		}
		if _, err := s.Resample(2*s.Step, Max); err != nil {
			t.Fatalf("Resample(%v) of ReadSeries(%q): %v", 2*s.Step, in, err)
		}
	})
}

// writeSeries writes s as CSV, one row a known step.
func writeSeries(s Series) string {
	var b strings.Builder
	b.WriteString("time,active\n")
	for i, v := range s.Values {
		if !math.IsNaN(v) {
			fmt.Fprintf(&b, "%s,%s\n", s.Time(i).Format("2006-01-02 15:04:05.999999999"), strconv.FormatFloat(v, 'g', -1, 64))
		}
	}
	return b.String()
}

// sameValues reports whether a and b are equal, NaN matching NaN.
func sameValues(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] && !(math.IsNaN(a[i]) && math.IsNaN(b[i])) {
			return false
		}
	}
	return true
}

// TestOpenSeries reads a series file plain and gzip-compressed, with the
// same result, and names the file in errors.
func TestOpenSeries(t *testing.T) {
	const text = "time,active,total\n2017-10-01 00:00:00,3,10\n2017-10-01 00:01:00,4,10\n"
	dir := t.TempDir()
	plain, packed := filepath.Join(dir, "s.csv"), filepath.Join(dir, "s.csv.gz")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(text))
	zw.Close()
	if err := os.WriteFile(plain, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(packed, gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := OpenSeries(plain)
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenSeries(packed)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Values) != 2 || fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("plain %v, gzip %v; want the same two steps", a, b)
	}
	bad := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(bad, []byte("when,busy\n1,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenSeries(bad); err == nil || !strings.HasPrefix(err.Error(), bad+": ") || !errors.Is(err, ErrMissingColumn) {
		t.Errorf("OpenSeries(%s) error %v; want the file named and ErrMissingColumn", bad, err)
	}
}
