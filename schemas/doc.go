// Package schemas is heliostat's contract: the versioned wire messages that travel
// through Kafka, the topic names, and the ClickHouse DDL (embedded, numbered
// migrations). It is the only package every component imports, so it depends on
// nothing but the standard library.
package schemas
