// Package live is the live half of the duration predictor: a Runner that
// trains predictor/duration models from ClickHouse's jobs table, predicts
// every new job's run time, and records each prediction's error once the job
// has ended, so that accuracy over time is one query away.
//
// Each pass (every Config.Interval) the Runner
//
//  1. reads the window of jobs (Config.History back from the newest job
//     event, leaving out events of live sources stamped more than an hour
//     after ClickHouse's now(): a node's clock a year ahead must not move
//     the window off every job) from jobs FINAL, incrementally between
//     retrains;
//  2. replays the window in submit order exactly as the offline backtest
//     does: a job's features come from a duration.History that holds only
//     the jobs that had ended strictly before its submit time;
//  3. every Config.RetrainInterval, fits a model on the ended jobs of the
//     window (and a second one on all but the latest Config.Holdout share,
//     to report held-out accuracy and to calibrate the served model's
//     intervals: duration.Calibrate scales them to cover 80% of the
//     held-out rows), writes its row to prediction_models and only then
//     swaps it in atomically;
//  4. writes one row to predictions for every job it has not predicted yet
//     (model_version, predicted_s with its 80% interval lower_s..upper_s,
//     widened or narrowed by a duration.Adaptive that each outcome of step
//     5 moves, so the intervals keep covering 80% while the workload
//     drifts between fits; gpu_service_s = predicted_s × max(gpus, 1));
//     a job already ended when
//     first seen is predicted too, flagged after_end, except for the backlog
//     found by the very first pass, which is history, not work;
//  5. writes one row to prediction_outcomes for every predicted job that has
//     ended: actual_s, abs_error_s, log_ratio, abs_log_error, within_2x,
//     within_interval (ran = 0 when the job never ran, or when the system
//     cut a live run short: see cutShort); a predicted job that outlives
//     the window (still running when its submit leaves it) is looked up
//     by its run in job_runs and scored when it ends, or given up once its
//     submit is Config.OutcomeWait old.
//
// The Runner's memory is a cache of those tables: a new Runner (a restart)
// reads back the predictions and outcomes back to Config.OutcomeWait and writes neither
// twice, and replays the outcomes' within_interval, in end order, through
// its interval correction. Should a row be written twice anyway (an insert that failed after
// it landed, two replicas), both tables are ReplacingMergeTree keyed by
// (cluster, job_id): the first prediction and the latest outcome win under
// FINAL.
//
// Accuracy over time, hour by hour, over the jobs that ran and were predicted
// before they ended (AccuracyQuery returns it for a database):
//
//	SELECT toStartOfHour(end_time) AS hour, count() AS jobs,
//	       avg(within_2x) AS within_2x, avg(abs_log_error) AS mean_abs_log_error,
//	       avg(within_interval) AS interval_coverage, avg(abs_error_s) AS mae_s
//	FROM heliostat.prediction_outcomes FINAL
//	WHERE ran = 1 AND after_end = 0
//	GROUP BY hour ORDER BY hour
//
// and by model version:
//
//	SELECT model_version, count(), avg(within_2x), avg(abs_log_error)
//	FROM heliostat.prediction_outcomes FINAL WHERE ran = 1 AND after_end = 0
//	GROUP BY model_version ORDER BY model_version
//
// Runner.Model and Runner.Predict serve the actuator and the advisory API;
// both are safe for concurrent use while passes run.
package live

// AccuracyQuery returns the accuracy-over-time query of the package
// documentation for the tables of database db: per hour of job end, the jobs
// scored, the share within 2×, the mean |ln(p/y)|, the interval coverage and
// the mean absolute error in seconds.
func AccuracyQuery(db string) string {
	return `SELECT toStartOfHour(end_time) AS hour, count() AS jobs,
       avg(within_2x) AS within_2x, avg(abs_log_error) AS mean_abs_log_error,
       avg(within_interval) AS interval_coverage, avg(abs_error_s) AS mae_s
FROM ` + db + `.prediction_outcomes FINAL
WHERE ran = 1 AND after_end = 0
GROUP BY hour ORDER BY hour`
}
