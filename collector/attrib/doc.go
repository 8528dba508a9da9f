// Package attrib attributes the GPUs of a Slurm node to jobs and publishes
// allocation intervals (schemas.Alloc) for them.
//
// Each poll lists the compute processes of every GPU and MIG instance (a
// ProcessLister: the nvml source), finds each process's job from
// /proc/PID/cgroup (Slurm's cgroup path holds job_<id>) or, failing that,
// /proc/PID/environ (SLURM_JOB_ID), and feeds the (GPU, job) pairs seen to a
// Tracker. The Tracker opens an interval when a job first shows on a GPU and
// closes it once the job has been absent for a grace number of polls; each
// open and close is published, keyed by host. Open intervals are kept in a
// small state file so that a restarted collector continues them.
//
// Intervals, not a job label on every sample: analytics joins samples to
// jobs by time (see FIELDS.md, "GPU ↔ job allocation").
package attrib
