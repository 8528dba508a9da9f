// Package dashboards holds heliostat's Grafana dashboards (one JSON file per
// dashboard, for Grafana 10 or later with the grafana-clickhouse-datasource
// plugin and Prometheus) and the provisioning files that load them; README.md
// says how to install them and what each dashboard shows.
//
// The dashboards choose their data sources by template variable
// (${ds_clickhouse}, ${ds_prometheus}), never by a hard-coded uid, and use
// only the plugin macros that work on ClickHouse 18.16: $__timeFilter,
// $__fromTime and $__toTime; every subquery in a JOIN has an alias, which
// current ClickHouse requires and 18.16 does not. The package's tests check that, run every
// ClickHouse panel's SQL with its macros and variables expanded against a
// ClickHouse holding data seeded through the real pipeline, and check every
// Prometheus metric a panel names against the components' registries.
package dashboards

import "embed"

// Files holds the dashboards (*.json) and the provisioning files
// (provisioning/*.yaml).
//
//go:embed *.json provisioning/*.yaml
var Files embed.FS
