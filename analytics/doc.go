// Package analytics characterizes a GPU cluster's jobs and users the way the
// Helios study (SC'21) did, continuously: SQL jobs (queries/*.sql, embedded)
// that a Runner runs for windows of time, on a schedule and on demand,
// writing result tables (migrations 0014-0019, listed in README.md), and the
// capacity-planning queries (capacity/*.sql, see docs/CAPACITY.md).
//
// Every query runs on ClickHouse 18.16 and current releases: plain GROUP BY,
// arrays and arrayJoin, FINAL; no window functions; an alias on every
// subquery that takes part in a JOIN, on both sides (current releases refuse
// one without; TestJoinAliases checks).
package analytics
