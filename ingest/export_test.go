package ingest

import "time"

// ShortenShutdown makes Run of the Ingester that c configures go on beginning
// writes for d once its context is done, instead of shutdownFlushTimeout:
// for tests that stop an ingester while its flush retries a failing
// ClickHouse.
func ShortenShutdown(c *Config, d time.Duration) { c.shutdownFlush = d }
