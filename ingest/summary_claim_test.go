package ingest_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestSummarizerClaimAcrossPasses: a run summarized by an earlier pass still
// owns its allocation intervals when a later run of its job ID is summarized.
// Bob's run of job 7 (08:00–09:00, GPU 0 of h4 at 30 %, its interval left open:
// the closing row lost) is summarized first; carol's run of the same ID
// (12:30–13:30, 2 GPUs of h3 at 60 %, h4 idle meanwhile) ends later and is
// summarized by the next pass, incremental or full. Carol's run gets h3 only:
// bob's open interval overlaps her run, but it is bob's. Before the fix she
// took h4 too (3 GPUs, its idle samples, util 40, idle_allocated, and where
// Slurm gave no GPU count 3 GPU hours). Bob's run keeps h4 also when its
// END never arrived (its latest row says it runs). A run of job 7 in another
// cluster, which started before carol's interval began (the node's clock a
// little ahead of Slurm's), takes nothing from her either.
func TestSummarizerClaimAcrossPasses(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	at := func(h, m, s int) time.Time {
		return t0.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(s)*time.Second)
	}
	known := func(n uint32) *uint32 { return u32(n) }
	unknown := func(uint32) *uint32 { return nil }
	f32 := func(v float32) *float32 { return &v }
	f64 := func(v float64) *float64 { return &v }
	run := func(cluster, user string, gpus *uint32, submit, start, end time.Time) jobRow {
		return jobRow{cluster: cluster, id: "7", user: user, event: "END", state: "COMPLETED", submit: submit, start: start, end: end, gpus: gpus, at: end}
	}
	bob := func(gpus func(uint32) *uint32) jobRow {
		return run("c1", "bob", gpus(1), at(8, 0, 0), at(8, 0, 0), at(9, 0, 0))
	}
	carol := func(gpus func(uint32) *uint32) jobRow {
		return run("c1", "carol", gpus(2), at(12, 0, 0), at(12, 30, 0), at(13, 30, 0))
	}
	bobSummary := jobSummary{user: "bob", submit: at(8, 0, 0), state: "COMPLETED", gpus: 1, end: at(9, 0, 0), elapsed: 3600, gpuHours: 1,
		hosts: []string{"h4"}, samples: 61, utilMean: f32(30), zeroHours: f64(0), flags: []string{}}
	carolSummary := jobSummary{user: "carol", submit: at(12, 0, 0), state: "COMPLETED", gpus: 2, end: at(13, 30, 0), elapsed: 3600, gpuHours: 2,
		hosts: []string{"h3", "h3"}, samples: 2 * 61, utilMean: f32(60), zeroHours: f64(0), flags: []string{}}
	for _, tc := range []struct {
		name    string
		earlier []jobRow // summarized by the first pass
		later   jobRow   // ends after it, summarized by the second
		allocs  []allocRow
		want    []jobSummary // job 7's in cluster c1, by submit time
	}{
		{
			name:    "earlier run's open interval",
			earlier: []jobRow{bob(known)},
			later:   carol(known),
			allocs:  []allocRow{{"h4", 1, "7", at(8, 0, 0), time.Time{}}, {"h3", 2, "7", at(12, 30, 0), at(13, 30, 0)}},
			want:    []jobSummary{bobSummary, carolSummary},
		},
		{
			name:    "earlier run's open interval, gpus unknown",
			earlier: []jobRow{bob(unknown)},
			later:   carol(unknown),
			allocs:  []allocRow{{"h4", 1, "7", at(8, 0, 0), time.Time{}}, {"h3", 2, "7", at(12, 30, 0), at(13, 30, 0)}},
			want:    []jobSummary{bobSummary, carolSummary},
		},
		{
			name:    "earlier run's END lost, gpus unknown",
			earlier: []jobRow{{id: "7", user: "bob", event: "START", state: "RUNNING", submit: at(8, 0, 0), start: at(8, 0, 0), at: at(8, 0, 0)}},
			later:   carol(unknown),
			allocs:  []allocRow{{"h4", 1, "7", at(8, 0, 0), time.Time{}}, {"h3", 2, "7", at(12, 30, 0), at(13, 30, 0)}},
			want:    []jobSummary{carolSummary},
		},
		{
			name:    "another cluster's run of the ID, gpus unknown",
			earlier: []jobRow{run("c2", "erin", nil, at(12, 10, 0), at(12, 20, 0), at(14, 0, 0))},
			later:   carol(unknown),
			allocs:  []allocRow{{"h3", 2, "7", at(12, 29, 50), at(13, 30, 0)}},
			want:    []jobSummary{carolSummary},
		},
	} {
		for _, pass := range []struct {
			kind      string
			fullEvery time.Duration
		}{{"incremental", time.Hour}, {"full", 0}} {
			t.Run(tc.name+"/"+pass.kind, func(t *testing.T) {
				ch, conn := schematest.Database(t)
				ctx := context.Background()
				db := ch.Database
				clock := time.Now().UTC().Truncate(time.Second)
				earlier := make([]jobRow, len(tc.earlier))
				ended := 0
				for i, r := range tc.earlier {
					r.inserted = clock.Add(-time.Hour)
					earlier[i] = r
					if r.event == "END" {
						ended++
					}
				}
				insertJobRows(t, conn, db, earlier...)
				insertAllocs(t, conn, db, tc.allocs...)
				insertSamples(t, conn, db, "h4", 1, at(8, 0, 0), at(9, 1, 0), 30)
				insertSamples(t, conn, db, "h4", 1, at(9, 1, 0), at(16, 0, 0), 0)
				insertSamples(t, conn, db, "h3", 2, at(12, 30, 0), at(13, 31, 0), 60)
				insertSamples(t, conn, db, "h3", 2, at(13, 31, 0), at(16, 0, 0), 0)

				reg := prometheus.NewRegistry()
				sum, err := ingest.NewSummarizer(ingest.SummaryConfig{Database: db, FullEvery: pass.fullEvery}, conn, slog.New(slog.DiscardHandler), reg,
					func() time.Time { return clock })
				if err != nil {
					t.Fatal(err)
				}
				if n, err := sum.Once(ctx); err != nil || n != ended {
					t.Fatalf("first Once = %d, %v; want %d runs summarized", n, err, ended)
				}
				later := tc.later
				later.inserted = clock.Add(time.Minute)
				insertJobRows(t, conn, db, later)
				clock = clock.Add(2 * time.Minute)
				before := passes(t, reg)
				if n, err := sum.Once(ctx); err != nil || n != 1 {
					t.Fatalf("second Once = %d, %v; want the later run summarized", n, err)
				}
				if kind := passes(t, reg); kind[pass.kind] != before[pass.kind]+1 {
					t.Fatalf("second pass: passes %v (before %v); want a %s pass", kind, before, pass.kind)
				}
				if got := readSummaries(t, conn, db, "7"); fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Errorf("summaries of job 7 = \n%v\nwant\n%v", got, tc.want)
				}
			})
		}
	}
}
