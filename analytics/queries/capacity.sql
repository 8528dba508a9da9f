-- Job "capacity": the GPUs each cluster and VC had in the window, as the run
-- determined them (prepare.sql, prepare_capacity.sql), into analytics_capacity.
INSERT INTO {out.analytics_capacity} (window_id, window_start, window_end, cluster, vc, gpus, source)
SELECT {window_columns}, cluster, vc, gpus, source
FROM {capacity};
