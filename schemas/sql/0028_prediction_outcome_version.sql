-- prediction_outcomes (0012): an outcome's version is now the version of its
-- run's latest event in jobs and job_runs ((event time in ms × 8) plus 1 to
-- 4 for SUBMIT, UPDATE, START, END), no longer recorded_at in ms as 0012
-- says. A rewritten outcome (a lost job listed again and then ended) thus
-- replaces the older one by the order of the run's events, whatever the
-- predictor's clock did in between; each such version is above every
-- recorded_at in ms, so it also replaces an outcome written by an earlier
-- version of the predictor. The rule is kept on the column itself.
ALTER TABLE {database}.prediction_outcomes
    COMMENT COLUMN version 'The version of the run''s latest event (jobs, job_runs: event ms * 8 + 1..4 for SUBMIT..END); recorded_at in ms for outcomes written before migration 0028. The highest wins.';
