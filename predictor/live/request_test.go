package live

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/predictor/duration"
	"github.com/heliostat-dev/heliostat/schemas"
)

// TestTrainingRowUsesRequestAtSubmit: a job is submitted with a 1 h limit,
// 2 a100 GPUs and 8 GiB in partition batch and predicted with them; after
// it starts, scontrol update raises its limit to 24 h (an UPDATE event; the
// GPUs, their type, memory and partition changed too, for the test) and it
// runs 5 h. Its training row holds the request it had at submit, as its
// prediction did; the record keeps the latest, which the tables show. A
// job whose events name a GPU type only from its start on takes that type.
func TestTrainingRowUsesRequestAtSubmit(t *testing.T) {
	conn, db := historyDB(t)
	ctx := context.Background()
	now := t0.Add(30 * time.Hour)
	j := tjob{id: "ext", user: "alice", gpus: 2, limit: 3600, mem: 8 << 30, gpuType: "a100", submit: now}
	insertFrom(t, conn, db, schemas.SourceSlurm, j)
	late := tjob{id: "late", user: "bob", gpus: 1, submit: now}
	insertFrom(t, conn, db, schemas.SourceSlurm, late)
	c := &clock{t: now.Add(time.Minute)}
	r, _ := newRunner(t, conn, db, c)
	if _, err := r.Once(ctx); err != nil {
		t.Fatal(err)
	}
	j.start = now.Add(time.Minute)
	st := j.events()[1]
	upd := st
	upd.Type, upd.TimeLimitS, upd.GPUs, upd.GPUType, upd.MemReqBytes, upd.Partition, upd.EventMillis = schemas.JobUpdate, 86400, 4, "h100", 16<<30, "long", j.start.Add(50*time.Minute).UnixMilli()
	end := upd
	endT := j.start.Add(5 * time.Hour)
	end.Type, end.State, end.ExitCode, end.EndMillis, end.EventMillis = schemas.JobEnd, schemas.StateCompleted, 0, endT.UnixMilli(), endT.UnixMilli()
	late.start = now.Add(2 * time.Minute)
	lateStart := late.events()[1]
	lateStart.GPUType = "v100"
	if err := ingest.InsertJobEvents(ctx, conn, db, "c1", schemas.SourceSlurm, []schemas.JobEvent{st, upd, end, lateStart}); err != nil {
		t.Fatal(err)
	}
	for _, since := range []int64{0, 1} { // a retrain's read, an incremental one
		recs, _, err := loadJobs(ctx, conn, db, time.Unix(0, 0), since)
		if err != nil {
			t.Fatal(err)
		}
		var ext *rec
		for _, rc := range recs {
			switch rc.jobID {
			case "ext":
				ext = rc
			case "late":
				if rc.job.GPUType != "v100" {
					t.Errorf("since %d: GPU type of late = %q; want v100 (the first its events name)", since, rc.job.GPUType)
				}
			}
		}
		if ext == nil {
			t.Fatalf("since %d: ext not loaded", since)
		}
		if ext.job.ReqTime != time.Hour || ext.job.Procs != 2 || ext.job.Mem != 8<<30 || ext.job.GPUType != "a100" || ext.job.Queue != scoped("c1", "batch") {
			t.Errorf("since %d: features' request of ext = limit %v, %d procs, %d bytes, type %q, queue %q; want 1h0m0s, 2, 8 GiB, a100, batch (at submit)",
				since, ext.job.ReqTime, ext.job.Procs, ext.job.Mem, ext.job.GPUType, ext.job.Queue)
		}
		if ext.limit == nil || *ext.limit != 86400 || ext.gpus != 4 || ext.partition != "long" {
			t.Errorf("since %d: record of ext = limit %v, %d GPUs, partition %q; want the latest: 86400, 4, long", since, ext.limit, ext.gpus, ext.partition)
		}
		if ext.run() != 5*time.Hour {
			t.Errorf("since %d: run of ext = %v; want 5h0m0s", since, ext.run())
		}
		var f duration.Features
		replay(recs, func(rc *rec) bool { return rc == ext }, func(_ *rec, got duration.Features) { f = got })
		req := f.X[9] // "req" in the user2 and exact feature lists
		if f.Segment == duration.SegCold {
			req = f.X[0]
		}
		if want := math.Log(3600); math.Abs(req-want) > 1e-9 {
			t.Errorf("since %d: training row of ext: segment %s, req feature ln %.0f s; want ln 3600 (the limit at submit)", since, f.Segment, math.Exp(req))
		}
	}
}
