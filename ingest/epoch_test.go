package ingest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/ingest/trace"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestTraceEpochTimesStored: a trace job that starts (and ends) at the Unix
// epoch itself, as the first jobs of an SWF file without UnixStartTime do,
// is stored with that start and end. Before, the events carried them as 0,
// which a job event reads as unknown: jobs held the job as never started
// (start_time NULL), and one of no run time also without an end.
func TestTraceEpochTimesStored(t *testing.T) {
	ch, conn := schematest.Database(t)
	swf := "; no UnixStartTime: times count from the epoch\n" +
		"1 0 0 100 4 -1 -1 4 3600 -1 1 1 1 1 1 -1 -1 -1\n" +
		"2 0 0 0 4 -1 -1 4 3600 -1 1 1 1 1 1 -1 -1 -1\n"
	tr, err := trace.ReadSWF(strings.NewReader(swf))
	if err != nil {
		t.Fatal(err)
	}
	c := trace.NewConverter()
	var evs []schemas.JobEvent
	for i := range tr.Jobs {
		if evs, err = c.AppendChecked(evs, &tr.Jobs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := ingest.InsertJobEvents(context.Background(), conn, ch.Database, "c", schemas.SourceTrace, evs); err != nil {
		t.Fatal(err)
	}
	epoch := time.Unix(0, 0).UTC()
	want := map[string]time.Time{"1": epoch.Add(100 * time.Second), "2": epoch}
	rows, err := conn.Query(context.Background(), "SELECT job_id, start_time, end_time FROM "+ch.Database+".jobs FINAL")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id string
		var start, end *time.Time
		if err := rows.Scan(&id, &start, &end); err != nil {
			t.Fatal(err)
		}
		n++
		if start == nil || !start.Equal(epoch) || end == nil || !end.Equal(want[id]) {
			t.Errorf("job %s: start %v, end %v; want %v, %v", id, start, end, epoch, want[id])
		}
	}
	if n != 2 {
		t.Errorf("jobs FINAL holds %d jobs; want 2", n)
	}
}
