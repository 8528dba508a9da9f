// Package ingest consumes heliostat's Kafka topics and writes them into
// ClickHouse with native batch inserts, exactly once in effect: every row carries
// its Kafka partition and offset, every INSERT holds one table partition (so it
// lands whole or not at all), a materialized view records each landed message in
// ingest_ledger, and on every partition assignment ingest skips what the ledger
// already holds. Offsets are committed to Kafka only after ClickHouse accepted
// the rows; the commit is a shortcut, the ledger is the truth.
package ingest

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/heliostat-dev/heliostat/internal/chconn"
	"github.com/heliostat-dev/heliostat/internal/envdefault"
	"github.com/heliostat-dev/heliostat/internal/kafkaconn"
)

// Config configures an Ingester.
type Config struct {
	// Brokers are the Kafka bootstrap addresses; required (the flag defaults
	// to $HELIOSTAT_KAFKA_BROKERS, else 127.0.0.1:9092).
	Brokers []string
	// Kafka secures the connections to the brokers (TLS, SASL); the zero
	// value is plaintext.
	Kafka kafkaconn.Config
	// Group is the Kafka consumer group; replicas sharing it split the
	// partitions. Default "heliostat-ingest".
	Group string
	// ClickHouse says where the tables are.
	ClickHouse chconn.Config
	// BatchRows flushes a batch once it holds this many rows. Default 200,000;
	// at most 1,000,000 so that a block stays one ClickHouse insert block.
	BatchRows int
	// BatchInterval flushes a non-empty batch at least this often. Default 1s.
	BatchInterval time.Duration
	// SessionTimeout is the consumer-group session timeout: how long the group
	// waits for a replica that stopped heartbeating before giving its
	// partitions to another. Default 10s.
	SessionTimeout time.Duration
	// RetryMax caps the backoff between retries of a failed insert. Default 30s.
	RetryMax time.Duration
	// Retention drops raw-sample partitions (days) older than this; 0 keeps
	// everything (the --retention flag defaults to 30 days).
	Retention time.Duration
	// RollupRetention drops rollup partitions (months) older than this; 0 keeps
	// everything (the --retention.rollup flag defaults to 400 days).
	RollupRetention time.Duration
	// DedupeWindow is how long ingest remembers a producer that has sent
	// nothing to a partition (by the messages' Kafka timestamps), to drop
	// copies of its messages; then its sequence marks are deleted. 0 never
	// forgets (the --dedupe.window flag defaults to DefaultDedupeWindow).
	DedupeWindow time.Duration
	// IdleCheck: when ingest has sent ClickHouse nothing for this long, it
	// pings it, so that readiness notices a ClickHouse lost while no data
	// flows. Default 15s.
	IdleCheck time.Duration
	// LogCheck: when a partition has yielded no message for this long,
	// ingest compares its position with the partition's log end, to notice
	// a topic deleted and created again (see ResetPartition). Default 30s.
	LogCheck time.Duration

	// shutdownFlush is how long Run, once its context is done, goes on
	// beginning writes: shutdownFlushTimeout, shorter only in tests
	// (export_test.go).
	shutdownFlush time.Duration
}

// DefaultDedupeWindow is the --dedupe.window default: a copy of a message
// sent up to a week after its producer's last message is still recognised.
const DefaultDedupeWindow = 7 * 24 * time.Hour

// RegisterFlags adds the ingest flags to fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet, getenv func(string) string) {
	brokers := envdefault.String(getenv, "HELIOSTAT_KAFKA_BROKERS", "127.0.0.1:9092")
	fs.Func("kafka.brokers", "comma-separated Kafka bootstrap addresses ($HELIOSTAT_KAFKA_BROKERS, default "+brokers+")", func(s string) error {
		c.Brokers = splitList(s)
		return nil
	})
	c.Brokers = splitList(brokers)
	fs.StringVar(&c.Group, "ingest.group", "heliostat-ingest", "Kafka consumer group shared by ingest replicas")
	fs.IntVar(&c.BatchRows, "ingest.batch-rows", 200_000, "flush a batch at this many rows (max 1000000)")
	fs.DurationVar(&c.BatchInterval, "ingest.batch-interval", time.Second, "flush a non-empty batch at least this often")
	fs.DurationVar(&c.SessionTimeout, "kafka.session-timeout", 10*time.Second, "consumer-group session timeout (how fast a dead replica's partitions move)")
	fs.DurationVar(&c.RetryMax, "ingest.retry-max", 30*time.Second, "longest backoff between retries of a failed insert")
	fs.DurationVar(&c.Retention, "retention", 30*24*time.Hour, "drop raw sample partitions older than this (0 keeps all)")
	fs.DurationVar(&c.RollupRetention, "retention.rollup", 400*24*time.Hour, "drop 1-minute rollup partitions older than this (0 keeps all)")
	fs.DurationVar(&c.DedupeWindow, "dedupe.window", DefaultDedupeWindow,
		"forget the message numbers of a producer silent this long in a partition; a copy it sends later is stored again (0 never forgets)")
	fs.DurationVar(&c.IdleCheck, "ingest.idle-check", 15*time.Second, "ping ClickHouse after this long without a request, so /-/ready notices it gone while no data flows")
	fs.DurationVar(&c.LogCheck, "ingest.log-check", 30*time.Second, "after this long without a message from a partition, check that its log still reaches ingest's position (a recreated topic)")
	c.Kafka.RegisterFlags(fs, getenv)
	c.ClickHouse.RegisterFlags(fs, getenv)
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Validate checks c and fills defaults for zero values.
func (c *Config) Validate() error {
	if len(c.Brokers) == 0 {
		return errors.New("ingest: --kafka.brokers is empty")
	}
	if c.Group == "" {
		c.Group = "heliostat-ingest"
	}
	if c.BatchRows == 0 {
		c.BatchRows = 200_000
	}
	if c.BatchRows < 1 || c.BatchRows > 1_000_000 {
		return fmt.Errorf("ingest: --ingest.batch-rows %d is outside 1..1000000", c.BatchRows)
	}
	if c.BatchInterval == 0 {
		c.BatchInterval = time.Second
	}
	if c.BatchInterval < 10*time.Millisecond {
		return fmt.Errorf("ingest: --ingest.batch-interval %s is below 10ms", c.BatchInterval)
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = 10 * time.Second
	}
	if c.SessionTimeout < 100*time.Millisecond {
		return fmt.Errorf("ingest: --kafka.session-timeout %s is below 100ms", c.SessionTimeout)
	}
	if c.RetryMax == 0 {
		c.RetryMax = 30 * time.Second
	}
	if c.RetryMax < 0 {
		return fmt.Errorf("ingest: --ingest.retry-max %s is negative (retries would not wait)", c.RetryMax)
	}
	if c.IdleCheck == 0 {
		c.IdleCheck = 15 * time.Second
	}
	if c.IdleCheck < 10*time.Millisecond {
		return fmt.Errorf("ingest: --ingest.idle-check %s is below 10ms", c.IdleCheck)
	}
	if c.LogCheck == 0 {
		c.LogCheck = 30 * time.Second
	}
	if c.LogCheck < 10*time.Millisecond {
		return fmt.Errorf("ingest: --ingest.log-check %s is below 10ms", c.LogCheck)
	}
	if c.shutdownFlush == 0 {
		c.shutdownFlush = shutdownFlushTimeout
	}
	if c.Retention < 0 || c.RollupRetention < 0 {
		return errors.New("ingest: retention must not be negative")
	}
	if c.DedupeWindow < 0 {
		return fmt.Errorf("ingest: --dedupe.window %s is negative", c.DedupeWindow)
	}
	if err := c.Kafka.Validate(); err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	return c.ClickHouse.Validate()
}
