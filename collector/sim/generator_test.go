package sim

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/schemas"
)

// TestGeneratorStatistics generates two weeks of jobs on a cluster too large
// to bound job sizes and checks their statistics against the published
// figures the generator follows.
func TestGeneratorStatistics(t *testing.T) {
	const rate = 600 // jobs per hour
	const weeks = 2
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC) // a Monday
	g, err := NewGenerator(GeneratorConfig{Seed: 7, Start: start, VCs: []VC{{Name: "a", Nodes: 200}, {Name: "b", Nodes: 56}}, GPUsPerNode: 8, JobsPerHour: rate})
	if err != nil {
		t.Fatal(err)
	}
	var (
		jobs      []JobSpec
		hour      [24]float64
		day       [7]float64
		single    int
		gpuSum    float64
		durs      []float64
		durSum    float64
		states    = map[schemas.JobState]float64{}
		gpuTime   = map[schemas.JobState]float64{}
		byUser    = map[string]int{}
		last      time.Duration
		totalGPUT float64
	)
	for {
		j, ok := g.Next()
		if !ok {
			t.Fatal("generator ran out of jobs")
		}
		if j.Submit < last {
			t.Fatalf("job %d submitted at %v, before %v", len(jobs), j.Submit, last)
		}
		last = j.Submit
		if j.Submit >= weeks*7*24*time.Hour {
			break
		}
		jobs = append(jobs, j)
		at := start.Add(j.Submit)
		hour[at.Hour()]++
		day[at.Weekday()]++
		if j.GPUs < 1 || j.GPUs&(j.GPUs-1) != 0 {
			t.Fatalf("job %d: %d GPUs is not a power of two", len(jobs), j.GPUs)
		}
		if j.VC == "b" && j.GPUs > 56*8 {
			t.Fatalf("job %d: %d GPUs exceed VC b", len(jobs), j.GPUs)
		}
		if j.GPUs == 1 {
			single++
		}
		gpuSum += float64(j.GPUs)
		d := j.Duration.Seconds()
		if d < minRunS || d > maxRunS || j.Duration%time.Second != 0 {
			t.Fatalf("job %d: duration %v out of bounds", len(jobs), j.Duration)
		}
		if j.TimeLimit < j.Duration {
			t.Fatalf("job %d: limit %v below duration %v", len(jobs), j.TimeLimit, j.Duration)
		}
		durs = append(durs, d)
		durSum += d
		states[j.State]++
		gpuTime[j.State] += d * float64(j.GPUs)
		totalGPUT += d * float64(j.GPUs)
		byUser[j.User]++
	}
	n := float64(len(jobs))
	within := func(what string, got, want, tol float64) {
		t.Helper()
		if math.Abs(got-want) > tol {
			t.Errorf("%s = %.4f; want %.4f ± %.4f", what, got, want, tol)
		} else {
			t.Logf("%s = %.4f (want %.4f ± %.4f)", what, got, want, tol)
		}
	}
	within("jobs per hour", n/(weeks*7*24), rate, 0.02*rate)
	within("share of 1-GPU jobs", float64(single)/n, singleGPUShare, 0.01)
	within("mean GPUs", gpuSum/n, heliosMeanGPUs, 0.08*heliosMeanGPUs)
	slices.Sort(durs)
	within("median run time", durs[len(durs)/2], heliosMedianRunS, 0.05*heliosMedianRunS)
	within("mean run time", durSum/n, heliosMeanRunS, 0.12*heliosMeanRunS)
	within("completed share", states[schemas.StateCompleted]/n, heliosCompletedShare, 0.01)
	within("cancelled share", states[schemas.StateCancelled]/n, heliosCancelledShare, 0.01)
	within("failed share", states[schemas.StateFailed]/n, heliosFailedShare, 0.01)
	allGPUT := heliosCompletedGPUTime + heliosCancelledGPUTime + heliosFailedGPUTime
	within("cancelled GPU-time share", gpuTime[schemas.StateCancelled]/totalGPUT, heliosCancelledGPUTime/allGPUT, 0.08)
	for h := range hour {
		within("submissions at hour "+time.Duration(h*int(time.Hour)).String(), hour[h]/(n/24), venusHourOfDay[h], 0.08)
	}
	for d := range day {
		within("submissions on "+time.Weekday(d).String(), day[d]/(n/7), venusDayOfWeek[d], 0.05)
	}
	users := max(8, 4*256)
	if len(byUser) > users {
		t.Errorf("%d users; want at most %d", len(byUser), users)
	}
	var top int
	for _, c := range byUser {
		top = max(top, c)
	}
	var harmonic float64
	for k := 1; k <= users; k++ {
		harmonic += 1 / math.Pow(float64(k), userZipf)
	}
	within("most active user's share", float64(top)/n, 1/harmonic, 0.01)

	// Names recur: within a user's job name, run times spread far less than
	// over all jobs.
	type key struct{ user, name string }
	groups := map[key][]float64{}
	for _, j := range jobs {
		k := key{j.User, j.Name}
		groups[k] = append(groups[k], math.Log(j.Duration.Seconds()))
	}
	var within2, total2, mean float64
	for _, j := range jobs {
		mean += math.Log(j.Duration.Seconds()) / n
	}
	for _, ls := range groups {
		var m float64
		for _, l := range ls {
			m += l / float64(len(ls))
		}
		for _, l := range ls {
			within2 += (l - m) * (l - m)
			total2 += (l - mean) * (l - mean)
		}
	}
	if r := within2 / total2; r > 0.25 {
		t.Errorf("log run time variance within names is %.2f of the total; want < 0.25", r)
	}
	if len(groups) > len(jobs)/20 {
		t.Errorf("%d distinct user/name pairs for %d jobs; names should recur", len(groups), len(jobs))
	}
}

// TestGeneratorBoundsSizes checks that sizes stop at the largest power of two
// a virtual cluster holds, and that the default arrival rate offers 60% load.
func TestGeneratorBoundsSizes(t *testing.T) {
	vcs := []VC{{Name: "vc1", Nodes: 4}, {Name: "vc2", Nodes: 2}}
	g, err := NewGenerator(GeneratorConfig{Seed: 1, Start: t0, VCs: vcs, GPUsPerNode: 8})
	if err != nil {
		t.Fatal(err)
	}
	most := map[string]int{}
	for range 20000 {
		j, _ := g.Next()
		most[j.VC] = max(most[j.VC], j.GPUs)
	}
	if most["vc1"] != 32 || most["vc2"] != 16 {
		t.Errorf("largest jobs %v; want vc1 32, vc2 16", most)
	}
	r := sizeRatio()
	gpuSeconds := (32*sizeMean(r, 5) + 16*sizeMean(r, 4)) / 48 * heliosMeanRunS
	if got, want := AutoJobsPerHour(vcs, 8), targetLoad*48*3600/gpuSeconds; math.Abs(got-want) > 1e-9 {
		t.Errorf("AutoJobsPerHour = %v; want %v", got, want)
	}
	if got := AutoJobsPerHour([]VC{{Name: "a", Nodes: 4}, {Name: "b", Nodes: 4}}, 8); got < 5 || got > 12 {
		t.Errorf("AutoJobsPerHour(default cluster) = %v; want a few jobs an hour", got)
	}
}

func TestGeneratorConfigErrors(t *testing.T) {
	for _, cfg := range []GeneratorConfig{
		{GPUsPerNode: 8},
		{VCs: []VC{{Name: "a", Nodes: 1}}},
		{VCs: []VC{{Name: "a", Nodes: 0}}, GPUsPerNode: 8},
		{VCs: []VC{{Name: "a", Nodes: 1}}, GPUsPerNode: 8, JobsPerHour: math.NaN()},
		{VCs: []VC{{Name: "a", Nodes: 1}}, GPUsPerNode: 8, JobsPerHour: -1},
	} {
		if _, err := NewGenerator(cfg); err == nil {
			t.Errorf("NewGenerator(%+v) = nil error", cfg)
		}
	}
}
