-- Run preparation, after the runner inserted the configured capacities into
-- {capacity_all}: each cluster (vc '') and VC gets the capacity of the best
-- source (lowest prio): config 1, config_vcs 2, inventory 3, peak 4, none 9.
CREATE TABLE {capacity} ENGINE = Memory AS
SELECT cluster, vc, argMin(gpus, prio) AS gpus, argMin(source, prio) AS source
FROM {capacity_all}
GROUP BY cluster, vc;
