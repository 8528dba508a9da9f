package demand

import (
	"fmt"
	"os"
	"testing"
	"time"
)

func TestExp(t *testing.T) {
	f, err := os.Open("../../../shared/data/philly/philly_node_sequence.csv")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	s, err := ReadSeries(f)
	if err != nil {
		t.Fatal(err)
	}
	type variant struct {
		name                          string
		lags                          []int
		lagD, seas, win               []time.Duration
		noCal                         bool
	}
	D := 24 * time.Hour
	full := variant{"full", []int{2, 3, 6}, []time.Duration{time.Hour, D, 7 * D}, []time.Duration{D, 7 * D}, []time.Duration{time.Hour, 6 * time.Hour, D}, false}
	vs := []variant{full}
	v := full; v.name = "nocal"; v.noCal = true; vs = append(vs, v)
	v = full; v.name = "noseas"; v.seas = nil; vs = append(vs, v)
	v = full; v.name = "nowin"; v.win = nil; vs = append(vs, v)
	v = full; v.name = "noweek"; v.lagD = []time.Duration{time.Hour, D}; v.seas = []time.Duration{D}; vs = append(vs, v)
	v = full; v.name = "short"; v.lagD = nil; v.seas = nil; v.win = []time.Duration{time.Hour}; v.noCal = true; vs = append(vs, v)
	windows := [][2]time.Time{{time.Date(2017, 11, 17, 0, 0, 0, 0, time.UTC), DefaultTestFrom}, {DefaultTestFrom, DefaultTestUntil}}
	for _, v := range vs {
		lagSteps, lagDurations, seasonalPeriods, windowDurations, noCalendar = v.lags, v.lagD, v.seas, v.win, v.noCal
		for _, ridge := range []float64{1e-3, 1e-1, 1} {
			line := fmt.Sprintf("%-7s ridge=%-5g", v.name, ridge)
			for wi, w := range windows {
				for _, h := range []time.Duration{10 * time.Minute, time.Hour, 6 * time.Hour} {
					c := Config{Horizon: h, HalfLife: -1, Ridge: ridge, TestFrom: w[0], TestUntil: w[1]}
					r, err := c.Backtest(s)
					if err != nil {
						t.Fatal(err)
					}
					line += fmt.Sprintf(" %s%v %.3f", []string{"V", "T"}[wi], h, r.RMSENodes/r.Baselines["last"].RMSENodes)
				}
			}
			t.Log(line)
		}
	}
}
