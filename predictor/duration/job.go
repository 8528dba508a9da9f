// Package duration predicts a job's run time at submit time from the history of
// jobs that had already ended, with one design and one set of defaults for
// every trace. Features come from History, which only ever holds ended jobs;
// Model is an immutable, validated wrapper around per-segment model trees
// (depth 2) whose leaves are robust least-squares fits of log run time
// (github.com/sajari/regression).
package duration

import "time"

// Job is what the predictor knows of a job at submit time, plus its outcome
// (Run, End), which History reads only once the job has ended.
type Job struct {
	ID         string // the job's id where it has one, for per-job output; never a feature
	User       string
	Executable string        // executable, job name or command hash; "" when unknown
	Queue      string        // queue, partition or VC; "" when unknown
	Submit     time.Time     // submit time
	ReqTime    time.Duration // requested time limit; <= 0 when unknown
	Procs      int           // requested (else allocated) processors or GPUs; <= 0 when unknown
	Mem        int64         // requested memory, in any one unit (only compared for equality); <= 0 when unknown
	GPUType    string        // GPU type asked for ("a100"; a mix as "a100,v100"); "" when any or unknown

	Run time.Duration // outcome: run time (> 0)
	End time.Time     // outcome: when the job ended
}
