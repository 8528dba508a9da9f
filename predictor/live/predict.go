package live

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/heliostat-dev/heliostat/predictor/duration"
)

// ErrNoModel is returned by Predict before the first model is trained.
var ErrNoModel = errors.New("live: no duration model trained yet")

// Spec describes a job for an ad-hoc prediction (the advisory API's
// POST /v1/predict, the control loop's ranking): what is known of it at
// submit time.
type Spec struct {
	// Cluster and JobID name the job in the jobs table, when it is there
	// (the control loop's pending jobs). If the latest pass read it and it
	// had not ended, its record supplies what a scheduler's view of a
	// pending job lacks and its row in the predictions table was made from:
	// the command hash, which names a recurring job better than Name, for
	// a job without GPUs its processors, without a Submit its submit time,
	// and the user's submissions as they stood at its submit (the
	// time since the user's previous submit and the jobs in flight then:
	// the History of the pass already counts this job and the user's later
	// ones). The fields below, the scheduler's current view, are kept, and
	// the jobs that ended since its submit count. Cluster also says whose
	// history User and Partition are: the same name on another cluster is
	// another user's, another partition's.
	Cluster, JobID string

	User      string
	Name      string // job name or command hash; "" when unknown
	Partition string // partition or virtual cluster; "" when unknown
	GPUs      int    // GPUs requested; 0 when none or unknown
	// TimeLimit is the requested limit; 0 when unlimited or unknown. It caps
	// the prediction.
	TimeLimit time.Duration
	// Submit is the submit time; zero means the newest job event the latest
	// pass saw (the data's clock).
	Submit time.Time
	// MemBytes is the memory requested in all; 0 when unknown (a recorded
	// job's own then).
	MemBytes int64
	// GPUType is the GPU type asked for ("a100"; Slurm's --gres=gpu:a100:2);
	// "" when any or unknown (a recorded job's own then). A user's runs of
	// the job's shape on that type are its closest history.
	GPUType string
}

// Estimate is an ad-hoc prediction.
type Estimate struct {
	ModelVersion uint64        `json:"model_version"`
	Point        time.Duration `json:"-"`
	Low          time.Duration `json:"-"`
	High         time.Duration `json:"-"`
	PredictedS   float64       `json:"predicted_s"`
	LowerS       float64       `json:"lower_s"`
	UpperS       float64       `json:"upper_s"`
	// GPUServiceS is PredictedS × max(GPUs, 1): the key of
	// shortest-predicted-service-first ordering.
	GPUServiceS float64 `json:"gpu_service_s"`
	Segment     string  `json:"segment"` // how much of the user's history the features rest on
	Fitted      bool    `json:"fitted"`  // false: the history rule answered, the segment had too little data
}

// Predict estimates the run time of a job described by s with the current
// model and the History of the latest pass (every job that had ended by
// then). Safe for concurrent use, also while a pass runs.
func (r *Runner) Predict(s Spec) (Estimate, error) {
	t := r.model.Load()
	hs := r.hist.Load()
	if t == nil || hs == nil {
		return Estimate{}, ErrNoModel
	}
	return estimate(t, hs, s, r.adapt.Widen())
}

// estimate predicts s with t's model, its intervals widened by widen
// (duration.Adaptive).
func estimate(t *Trained, hs *historySnap, s Spec, widen float64) (Estimate, error) {
	if s.GPUs < 0 {
		return Estimate{}, fmt.Errorf("live: predict: gpus %d is negative", s.GPUs)
	}
	if s.TimeLimit < 0 {
		return Estimate{}, fmt.Errorf("live: predict: time limit %v is negative", s.TimeLimit)
	}
	if s.MemBytes < 0 {
		return Estimate{}, fmt.Errorf("live: predict: memory %d bytes is negative", s.MemBytes)
	}
	j := duration.Job{User: scoped(s.Cluster, s.User), Executable: s.Name, Queue: scoped(s.Cluster, s.Partition), Submit: s.Submit, ReqTime: s.TimeLimit, Procs: s.GPUs, Mem: s.MemBytes, GPUType: s.GPUType}
	r, recorded := hs.open[key{s.Cluster, s.JobID}]
	recorded = recorded && s.JobID != ""
	if recorded {
		if r.Executable != "" {
			j.Executable = r.Executable
		}
		if s.GPUs == 0 {
			j.Procs = r.Procs
		}
		if s.MemBytes == 0 {
			j.Mem = r.Mem
		}
		if s.GPUType == "" {
			j.GPUType = r.GPUType
		}
		if j.Submit.IsZero() {
			j.Submit = r.Submit
		}
	}
	if j.Submit.IsZero() {
		j.Submit = hs.asOf
	}
	hs.mu.Lock()
	var f duration.Features
	if recorded {
		f = hs.h.FeaturesAt(&j, r.AtSubmit)
	} else {
		f = hs.h.Features(&j)
	}
	hs.mu.Unlock()
	p, err := t.Model.PredictWidened(f, s.TimeLimit, widen)
	if err != nil {
		return Estimate{}, fmt.Errorf("live: predict: %w", err)
	}
	return Estimate{ModelVersion: t.Info.Version, Point: p.Point, Low: p.Low, High: p.High,
		PredictedS: p.Point.Seconds(), LowerS: p.Low.Seconds(), UpperS: p.High.Seconds(),
		GPUServiceS: p.Point.Seconds() * math.Max(float64(s.GPUs), 1), Segment: f.Segment.String(), Fitted: p.Fitted}, nil
}

// scoped is name (a user or a partition) as the History of jobs of several
// clusters knows it: within its cluster. A user or partition of the same
// name on another cluster sharing the database is someone, or something,
// else ("root", "gpu").
func scoped(cluster, name string) string { return cluster + "\x00" + name }
