package analytics_test

import (
	"context"
	"math"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/analytics"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestCharacterizeVenus imports the Venus slice (1,867 GPU jobs of two VCs)
// with the VC sizes of the Helios artifact as the capacity file and checks
// counts, shares, users, GPU counts and capacities against the raw file. The
// slice gives no start or end times, so no run time, delay or GPU time is
// known: those must come out empty (NaN), not invented.
func TestCharacterizeVenus(t *testing.T) {
	path := sharedData(t, "helios/venus_sept_2vc.csv")
	vcs := sharedData(t, "helios/venus_sept_2vc_vcs.csv")
	cfg, conn := schematest.Database(t)
	ctx := context.Background()
	db := cfg.Database
	importTrace(t, conn, db, path, "venus")
	ref := readVenusRaw(t, path)

	f, err := os.Open(vcs)
	if err != nil {
		t.Fatal(err)
	}
	caps, err := analytics.ReadCapacityFile(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	w := analytics.Window{Since: time.Date(2020, 9, 1, 0, 0, 0, 0, time.UTC), Until: time.Date(2020, 10, 1, 0, 0, 0, 0, time.UTC)}
	if _, err := newRunner(t, conn, db, farFuture, caps...).RunWindow(ctx, w); err != nil {
		t.Fatal(err)
	}

	want := characterize(ref)
	h, err := analytics.ReadHeadline(ctx, conn, db, w, "venus")
	if err != nil {
		t.Fatal(err)
	}
	if h.Jobs != 1867 || h.GPUJobs != uint64(want.gpuJobs) || h.Users != uint64(want.users) || h.EndedJobs != 1867 {
		t.Errorf("headline jobs %d, GPU jobs %d, users %d, ended %d; want 1867, %d, %d, 1867", h.Jobs, h.GPUJobs, h.Users, h.EndedJobs, want.gpuJobs, want.users)
	}
	for _, c := range []string{"completed", "cancelled", "failed"} {
		if ws := float64(want.classJobs[c]) / 1867; h.StateShare[c] != ws {
			t.Errorf("state_share[%s] = %v; want %v", c, h.StateShare[c], ws)
		}
	}
	if h.DurationJobs != 0 || !math.IsNaN(h.DurationMedianS) {
		t.Errorf("duration median %v of %d jobs; want NaN of 0 (the slice has no start times)", h.DurationMedianS, h.DurationJobs)
	}

	// per VC: jobs, rates, GPU-count median; capacity from the file
	byVC := map[string][]refJob{}
	for _, j := range ref {
		byVC[j.vc] = append(byVC[j.vc], j)
	}
	for vc, js := range byVC {
		checkSummary(t, conn, db, w, "vc", vc, js)
	}
	gotCap := map[string]uint32{}
	rows, err := conn.Query(ctx, "SELECT vc, gpus, source FROM "+db+".analytics_capacity WHERE window_id = ?", w.ID())
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var vc, src string
		var n uint32
		if err := rows.Scan(&vc, &n, &src); err != nil {
			t.Fatal(err)
		}
		gotCap[vc+"/"+src] = n
	}
	rows.Close()
	if want := map[string]uint32{"vcvGl/config": 160, "vcvlY/config": 16, "/config_vcs": 176}; len(gotCap) != 3 ||
		gotCap["vcvGl/config"] != want["vcvGl/config"] || gotCap["vcvlY/config"] != want["vcvlY/config"] || gotCap["/config_vcs"] != 176 {
		t.Errorf("capacities %v; want %v", gotCap, want)
	}

	// the users' completion rates
	type rate struct{ done, ended int }
	wantRate := map[string]*rate{}
	for _, j := range ref {
		r := wantRate[j.user]
		if r == nil {
			r = &rate{}
			wantRate[j.user] = r
		}
		r.ended++
		if j.class == "completed" {
			r.done++
		}
	}
	rows, err = conn.Query(ctx, "SELECT user, complete_rate FROM "+db+".analytics_users WHERE window_id = ? AND scope = 'cluster'", w.ID())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var u string
		var cr float64
		if err := rows.Scan(&u, &cr); err != nil {
			t.Fatal(err)
		}
		n++
		if r := wantRate[u]; r == nil || cr != float64(r.done)/float64(r.ended) {
			t.Errorf("user %q completion rate %v; want %+v", u, cr, r)
		}
	}
	rows.Close()
	if n != len(wantRate) {
		t.Errorf("%d users; want %d", n, len(wantRate))
	}

	// submissions per hour of day add up to the jobs
	var subs uint64
	if err := conn.QueryRow(ctx, "SELECT sum(submissions) FROM "+db+".analytics_utilization WHERE window_id = ? AND scope = 'cluster' AND slot_kind = 'hour_of_day'", w.ID()).Scan(&subs); err != nil {
		t.Fatal(err)
	}
	if subs != 1867 {
		t.Errorf("submissions by hour of day sum to %d; want 1867", subs)
	}
	var hours []uint32
	for _, j := range ref {
		hours = append(hours, uint32(time.Unix(j.submit, 0).UTC().Hour()))
	}
	sort.Slice(hours, func(a, b int) bool { return hours[a] < hours[b] })
	var at9 uint64
	for _, hh := range hours {
		if hh == 9 {
			at9++
		}
	}
	var got9 uint64
	if err := conn.QueryRow(ctx, "SELECT submissions FROM "+db+".analytics_utilization WHERE window_id = ? AND scope = 'cluster' AND slot_kind = 'hour_of_day' AND slot = 9", w.ID()).Scan(&got9); err != nil {
		t.Fatal(err)
	}
	if got9 != at9 {
		t.Errorf("submissions at 9h: %d; want %d", got9, at9)
	}
}
