-- GPU identity, refreshed by ingest from every sample batch: one row per GPU
-- or MIG instance after merges (read with FINAL or argMax(…, last_seen)).
CREATE TABLE IF NOT EXISTS {database}.gpu_inventory (
    cluster String,
    host String,
    gpu_uuid String,
    mig_uuid String,
    gpu_index UInt16,
    pci_bus_id String,
    minor_number Int32,
    model String,
    driver_version String,
    gi_id Int32,
    ci_id Int32,
    mig_profile String,
    last_seen DateTime('UTC')
) ENGINE = ReplacingMergeTree(last_seen)
ORDER BY (cluster, host, gpu_uuid, mig_uuid);
