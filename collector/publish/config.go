package publish

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/heliostat-dev/heliostat/internal/envdefault"
	"github.com/heliostat-dev/heliostat/internal/kafkaconn"
)

// Defaults for the zero values of Config fields.
const (
	DefaultBroker        = "127.0.0.1:9092"
	DefaultWriteTimeout  = 10 * time.Second
	DefaultSpoolDir      = "data/spool"
	DefaultSpoolMaxBytes = 1 << 30
	// DefaultSequenceKeys is how many message keys one producer id numbers
	// before the Publisher draws a new one.
	DefaultSequenceKeys = 1 << 16
)

// Config configures a Publisher. The zero value of each field means its
// default.
type Config struct {
	// Brokers are the bootstrap brokers, host:port each.
	// Default: ["127.0.0.1:9092"].
	Brokers []string
	// WriteTimeout bounds one write to the brokers, a direct publish or one
	// replay batch. A publish that times out is spooled.
	// Default: 10s.
	WriteTimeout time.Duration
	// SpoolDir is the directory of the on-disk spool that holds messages
	// while the brokers are unreachable. One process at a time may use it.
	// Default: "data/spool", relative to the working directory.
	SpoolDir string
	// SpoolMaxBytes bounds the spool; once it is full, new messages are
	// dropped (and counted) until the brokers take the backlog.
	// Default: 1 GiB.
	SpoolMaxBytes int64
	// SequenceKeys bounds the per-key message counters (one per topic and
	// key: a host for samples, a job for job events). When a message with a
	// new key would exceed it, the Publisher draws a new producer id and
	// numbers from 1 again, so a long-running job source holds at most this
	// many counters and ingest can forget the old id once it falls idle.
	// Default: 65,536.
	SequenceKeys int
	// Kafka secures the connections to the brokers (TLS, SASL); the zero
	// value is plaintext.
	Kafka kafkaconn.Config
}

// RegisterFlags registers the publisher's flags on fs, with the defaults
// filled in. A SpoolDir set before the call is its flag's default, so that
// two programs on one host can default to spools of their own. getenv
// supplies the brokers' default ($HELIOSTAT_KAFKA_BROKERS) and the SASL
// credentials' (kafkaconn.Config.RegisterFlags).
func (c *Config) RegisterFlags(fs *flag.FlagSet, getenv func(string) string) {
	c.Brokers = []string{DefaultBroker}
	if b := envdefault.String(getenv, "HELIOSTAT_KAFKA_BROKERS", ""); b != "" {
		if err := (*brokerList)(&c.Brokers).Set(b); err != nil {
			c.Brokers = []string{b} // Validate names what is wrong with it
		}
	}
	fs.Var((*brokerList)(&c.Brokers), "kafka.brokers", "comma-separated Kafka bootstrap brokers, host:port (env HELIOSTAT_KAFKA_BROKERS)")
	fs.DurationVar(&c.WriteTimeout, "kafka.write-timeout", DefaultWriteTimeout,
		"timeout of one write to Kafka; messages that time out are spooled")
	spool := cmp.Or(c.SpoolDir, DefaultSpoolDir)
	fs.StringVar(&c.SpoolDir, "spool.dir", spool,
		"directory of the on-disk spool for messages Kafka has not taken yet (one process at a time)")
	fs.Int64Var(&c.SpoolMaxBytes, "spool.max-bytes", DefaultSpoolMaxBytes,
		"size bound of the spool in bytes; beyond it new messages are dropped")
	c.Kafka.RegisterFlags(fs, getenv)
}

// Validate reports the first invalid field, named by its flag.
func (c Config) Validate() error {
	for _, b := range c.Brokers {
		host, port, err := net.SplitHostPort(b)
		if err != nil {
			return fmt.Errorf("publish: --kafka.brokers: %q: %w", b, err)
		}
		if host == "" || port == "" {
			return fmt.Errorf("publish: --kafka.brokers: %q: want host:port", b)
		}
	}
	if c.WriteTimeout < 0 {
		return fmt.Errorf("publish: --kafka.write-timeout: %v is negative", c.WriteTimeout)
	}
	if c.SpoolMaxBytes < 0 {
		return fmt.Errorf("publish: --spool.max-bytes: %d is negative", c.SpoolMaxBytes)
	}
	if c.SequenceKeys < 0 {
		return fmt.Errorf("publish: SequenceKeys: %d is negative", c.SequenceKeys)
	}
	if err := c.Kafka.Validate(); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	return nil
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if len(c.Brokers) == 0 {
		c.Brokers = []string{DefaultBroker}
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.SpoolDir == "" {
		c.SpoolDir = DefaultSpoolDir
	}
	if c.SpoolMaxBytes == 0 {
		c.SpoolMaxBytes = DefaultSpoolMaxBytes
	}
	if c.SequenceKeys == 0 {
		c.SequenceKeys = DefaultSequenceKeys
	}
	return c
}

// brokerList is a flag.Value for a comma-separated list of brokers.
type brokerList []string

func (l *brokerList) String() string {
	if l == nil {
		return ""
	}
	return strings.Join(*l, ",")
}

func (l *brokerList) Set(s string) error {
	var out []string
	for b := range strings.SplitSeq(s, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	if len(out) == 0 {
		return errors.New("no brokers given")
	}
	*l = out
	return nil
}
