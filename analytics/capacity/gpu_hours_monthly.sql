-- GPU hours by month, VC and user, per cluster: the GPU time of jobs running
-- in [since, until), split across the months (in {tz}) it fell in (a running
-- job counts up to now), with the jobs that ran in the month and each row's
-- share of its cluster's month. Jobs are runs (job_runs): every run of a job
-- Slurm requeued counts its GPU time, and counts as a job of the month it
-- ran in, as do two jobs that shared an id. VC is the Slurm partition or a
-- trace's VC; a job's GPUs are its processors where a trace gives no GPUs
-- (SWF). Read: who is growing, and which VC needs the next nodes.
SELECT
    month,
    cluster,
    vc,
    user,
    jobs,
    round(gpu_s / 3600, 1) AS gpu_hours,
    round(gpu_s / month_gpu_s, 4) AS share_of_month
FROM (
    SELECT month, cluster, vc, user, uniqExact(job_id, submit_s) AS jobs, sum(gs) AS gpu_s
    FROM {part.held_months}
    WHERE gs > 0
    GROUP BY month, cluster, vc, user
) AS usage
ANY LEFT JOIN {part.month_totals} AS month_totals USING (month, cluster)
ORDER BY month, cluster, gpu_hours DESC, vc, user;
