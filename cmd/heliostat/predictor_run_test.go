package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

func TestPredictorRunFlags(t *testing.T) {
	for _, args := range [][]string{
		{"predictor", "run", "--predictor.holdout", "1"},
		{"predictor", "run", "--predictor.interval", "-1s"},
		{"predictor", "run", "--clickhouse.database", "bad-name"},
		{"predictor", "run", "extra"},
	} {
		var out, errb bytes.Buffer
		if err := run(context.Background(), args, func(string) string { return "" }, &out, &errb); err == nil {
			t.Errorf("run(%q): no error", args)
		}
	}
}

// TestPredictorRun runs `heliostat predictor run` against a ClickHouse
// holding ended jobs of one user and a pending one, until the pending job's
// prediction is written and /metrics shows it.
func TestPredictorRun(t *testing.T) {
	ch, conn := schematest.Database(t)
	t0 := time.Date(2026, 4, 6, 8, 0, 0, 0, time.UTC)
	var evs []schemas.JobEvent
	job := func(id string, submit time.Time, run time.Duration) {
		e := schemas.JobEvent{Type: schemas.JobSubmit, State: schemas.StatePending, EventMillis: submit.UnixMilli(), JobID: id,
			ArrayTaskID: schemas.Unknown, User: "alice", UID: schemas.Unknown, ExitCode: schemas.Unknown, Priority: schemas.Unknown,
			SubmitMillis: submit.UnixMilli(), TimeLimitS: 7200, NodeCount: schemas.Unknown, CPUs: schemas.Unknown, GPUs: 2, MemReqBytes: schemas.Unknown}
		evs = append(evs, e)
		if run > 0 {
			e.Type, e.State, e.StartMillis, e.EventMillis = schemas.JobStart, schemas.StateRunning, submit.UnixMilli(), submit.UnixMilli()
			evs = append(evs, e)
			e.Type, e.State, e.EndMillis, e.EventMillis = schemas.JobEnd, schemas.StateCompleted, submit.Add(run).UnixMilli(), submit.Add(run).UnixMilli()
			evs = append(evs, e)
		}
	}
	for i := range 10 {
		job(fmt.Sprint("h", i), t0.Add(time.Duration(i)*time.Hour), time.Duration(300+10*i)*time.Second)
	}
	job("new", t0.Add(12*time.Hour), 0)
	if err := ingest.InsertJobEvents(context.Background(), conn, ch.Database, "c1", schemas.SourceSlurm, evs); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var stderr bytes.Buffer
	go func() {
		done <- run(ctx, append([]string{"predictor", "run", "--web.listen-address", addr, "--predictor.interval", "100ms"}, chFlags(ch)...), func(string) string { return "" }, io.Discard, &stderr)
	}()
	deadline := time.Now().Add(30 * time.Second)
	var predicted float64
	for {
		err := conn.QueryRow(context.Background(), "SELECT predicted_s FROM "+ch.Database+".predictions FINAL WHERE job_id = 'new'").Scan(&predicted)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("no prediction for the pending job after 30 s: %v; stderr:\n%s", err, stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if predicted < 150 || predicted > 800 {
		t.Errorf("pending job predicted %v s; want near the user's 300-390 s", predicted)
	}
	// The counter moves just after the insert returns: wait for it too.
	for {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), "heliostat_predictor_predictions_total 1\n") {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("/metrics does not count the prediction:\n%s", body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	waitProbe(t, http.DefaultClient, "http://"+addr, http.StatusOK, "ready")
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("predictor run: %v", err)
	}
}
