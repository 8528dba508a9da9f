// Package chconn holds the ClickHouse connection settings that every subcommand
// shares (--clickhouse.* flags) and opens native-protocol connections from them.
package chconn

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Config says how to reach ClickHouse.
type Config struct {
	// Addr is host:port of the native protocol. Default 127.0.0.1:9000, or
	// $HELIOSTAT_CLICKHOUSE_ADDR.
	Addr string
	// Database holds heliostat's tables. Default "heliostat".
	Database string
	// User is the ClickHouse user. Default "default".
	User string
	// PasswordFile names a file holding the password. When empty the password
	// comes from $HELIOSTAT_CLICKHOUSE_PASSWORD, never from a flag value.
	PasswordFile string
	// DialTimeout bounds connecting. Default 5s.
	DialTimeout time.Duration
	// Compression is the native-protocol block compression: "lz4" (default)
	// or "none" (cheaper on loopback).
	Compression string
}

// RegisterFlags adds the --clickhouse.* flags to fs, with defaults from getenv.
func (c *Config) RegisterFlags(fs *flag.FlagSet, getenv func(string) string) {
	addr := getenv("HELIOSTAT_CLICKHOUSE_ADDR")
	if addr == "" {
		addr = "127.0.0.1:9000"
	}
	fs.StringVar(&c.Addr, "clickhouse.addr", addr, "ClickHouse native-protocol address host:port ($HELIOSTAT_CLICKHOUSE_ADDR)")
	fs.StringVar(&c.Database, "clickhouse.database", "heliostat", "ClickHouse database that holds heliostat's tables")
	fs.StringVar(&c.User, "clickhouse.user", "default", "ClickHouse user")
	fs.StringVar(&c.PasswordFile, "clickhouse.password-file", "", "file holding the ClickHouse password (default: $HELIOSTAT_CLICKHOUSE_PASSWORD)")
	fs.DurationVar(&c.DialTimeout, "clickhouse.dial-timeout", 5*time.Second, "timeout for connecting to ClickHouse")
	fs.StringVar(&c.Compression, "clickhouse.compression", "lz4", "block compression on the wire: lz4 or none")
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Validate checks the settings.
func (c *Config) Validate() error {
	if c.Addr == "" {
		return errors.New("chconn: --clickhouse.addr is empty")
	}
	if !identifier.MatchString(c.Database) {
		return fmt.Errorf("chconn: --clickhouse.database %q is not a plain identifier", c.Database)
	}
	if c.Compression != "" && c.Compression != "lz4" && c.Compression != "none" {
		return fmt.Errorf("chconn: --clickhouse.compression %q: want lz4 or none", c.Compression)
	}
	return nil
}

// Open connects and pings. getenv supplies $HELIOSTAT_CLICKHOUSE_PASSWORD.
func (c *Config) Open(ctx context.Context, getenv func(string) string) (driver.Conn, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	password := getenv("HELIOSTAT_CLICKHOUSE_PASSWORD")
	if c.PasswordFile != "" {
		b, err := os.ReadFile(c.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("chconn: read password file: %w", err)
		}
		password = strings.TrimSpace(string(b))
	}
	timeout := c.DialTimeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	user := c.User
	if user == "" {
		user = "default"
	}
	comp := &clickhouse.Compression{Method: clickhouse.CompressionLZ4}
	if c.Compression == "none" {
		comp = &clickhouse.Compression{Method: clickhouse.CompressionNone}
	}
	conn, err := clickhouse.Open(&clickhouse.Options{
		Addr:            []string{c.Addr},
		Auth:            clickhouse.Auth{Username: user, Password: password},
		DialTimeout:     timeout,
		MaxOpenConns:    8,
		MaxIdleConns:    4,
		ConnMaxLifetime: time.Hour,
		Compression:     comp,
	})
	if err != nil {
		return nil, fmt.Errorf("chconn: open %s: %w", c.Addr, err)
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := conn.Ping(pctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("chconn: ping %s: %w", c.Addr, err)
	}
	return conn, nil
}
