-- Duration models trained by the live predictor (predictor/live): one row per
-- model, written before the model serves any prediction, so that every
-- predictions.model_version names a row here. n_train is the number of
-- training rows (ended jobs of the window); the holdout figures come from a
-- fit on the earlier (1 - holdout) share of those rows, by submit time,
-- scored on the rest; the in-sample figures from the served model on all of
-- them. config is JSON: the window, the holdout share and the rows per
-- feature segment.
CREATE TABLE IF NOT EXISTS {database}.prediction_models (
    model_version UInt64,
    trained_at DateTime('UTC'),
    data_from DateTime('UTC'),
    data_to DateTime('UTC'),
    n_jobs UInt32,
    n_train UInt32,
    train_s Float64,
    in_sample_within_2x Float64,
    in_sample_r2_log Float64,
    in_sample_mae_s Float64,
    holdout_n UInt32,
    holdout_within_2x Float64,
    holdout_r2_log Float64,
    holdout_mae_s Float64,
    holdout_interval_coverage Float64,
    config String
) ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(trained_at)
ORDER BY (model_version, trained_at);
