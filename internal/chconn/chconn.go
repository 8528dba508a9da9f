// Package chconn holds the ClickHouse connection settings that every subcommand
// shares (--clickhouse.* flags) and opens connections (native protocol, or
// HTTP with --clickhouse.protocol http) from them.
package chconn

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/heliostat-dev/heliostat/internal/envdefault"
	"github.com/heliostat-dev/heliostat/internal/tlsfiles"
)

// Config says how to reach ClickHouse.
type Config struct {
	// Addr is host:port of the server's native port (9000 by convention),
	// or of its HTTP port (8123) with Protocol "http". Default
	// 127.0.0.1:9000, or $HELIOSTAT_CLICKHOUSE_ADDR.
	Addr string
	// Protocol is "native" (default; empty means it) or "http": ClickHouse's
	// HTTP interface, for a server reached only through an HTTP proxy or
	// load balancer. HTTP needs a ClickHouse newer than 18.16, which refuses
	// clickhouse-go's client_protocol_version parameter (tested on 26.7).
	Protocol string
	// Database holds heliostat's tables. Default "heliostat".
	Database string
	// User is the ClickHouse user. Default "default".
	User string
	// PasswordFile names a file holding the password. When empty the password
	// comes from $HELIOSTAT_CLICKHOUSE_PASSWORD, never from a flag value.
	PasswordFile string
	// DialTimeout bounds connecting. Default 5s.
	DialTimeout time.Duration
	// Compression is ClickHouse's block compression on the wire (in HTTP
	// bodies too): "lz4" (default)
	// or "none" (cheaper on loopback).
	Compression string

	// TLS turns on TLS: the native protocol on ClickHouse's tcp_port_secure
	// (9440 by convention), or HTTPS (its https_port, 8443) with Protocol
	// "http". Any of the TLS* settings below implies it. Default
	// off: plain TCP, as before.
	TLS bool
	// TLSCAFile names a PEM file of CA certificates to trust instead of the
	// system pool. Default empty: the system pool.
	TLSCAFile string
	// TLSCertFile and TLSKeyFile are a PEM client certificate and its key, for
	// servers that require one. Both or neither.
	TLSCertFile, TLSKeyFile string
	// TLSServerName is the name to verify in the server's certificate. Default
	// empty: the host of Addr.
	TLSServerName string
	// TLSInsecureSkipVerify accepts any server certificate. For testing only:
	// it leaves the connection open to a man in the middle.
	TLSInsecureSkipVerify bool
	// Logger reports the client certificate reloaded after a renewal (it
	// is read again when its files change); nil discards. Not a flag.
	Logger *slog.Logger
	// RefusedHint, when set, ends the error of a connection that Addr
	// refused (nothing listens there) with what else the caller's user
	// can do, in the caller's terms. Default none. Not a flag.
	RefusedHint string
}

// RegisterFlags adds the --clickhouse.* flags to fs, with defaults from getenv.
func (c *Config) RegisterFlags(fs *flag.FlagSet, getenv func(string) string) {
	addr := envdefault.String(getenv, "HELIOSTAT_CLICKHOUSE_ADDR", "127.0.0.1:9000")
	fs.StringVar(&c.Addr, "clickhouse.addr", addr, "ClickHouse address host:port: its native port, or its HTTP port with --clickhouse.protocol http ($HELIOSTAT_CLICKHOUSE_ADDR)")
	fs.StringVar(&c.Protocol, "clickhouse.protocol", "native", "how to talk to ClickHouse: native (its TCP protocol, port 9000) or http (its HTTP interface, port 8123; 8443 with TLS); http needs a ClickHouse newer than 18.16 (tested on 26.7)")
	fs.StringVar(&c.Database, "clickhouse.database", "heliostat", "ClickHouse database that holds heliostat's tables")
	fs.StringVar(&c.User, "clickhouse.user", envdefault.String(getenv, "HELIOSTAT_CLICKHOUSE_USER", "default"), "ClickHouse user ($HELIOSTAT_CLICKHOUSE_USER)")
	fs.StringVar(&c.PasswordFile, "clickhouse.password-file", "", "file holding the ClickHouse password (default: $HELIOSTAT_CLICKHOUSE_PASSWORD)")
	fs.DurationVar(&c.DialTimeout, "clickhouse.dial-timeout", 5*time.Second, "timeout for connecting to ClickHouse")
	fs.StringVar(&c.Compression, "clickhouse.compression", "lz4", "block compression on the wire: lz4 or none")
	fs.BoolVar(&c.TLS, "clickhouse.tls", false, "connect with TLS (the server's secure native port, usually 9440); implied by any --clickhouse.tls.* flag")
	fs.StringVar(&c.TLSCAFile, "clickhouse.tls.ca", "", "PEM file of CA certificates that sign the server's certificate (default: the system pool)")
	fs.StringVar(&c.TLSCertFile, "clickhouse.tls.cert", "", "PEM client certificate, for servers that require one (with --clickhouse.tls.key)")
	fs.StringVar(&c.TLSKeyFile, "clickhouse.tls.key", "", "PEM key of the client certificate (with --clickhouse.tls.cert)")
	fs.StringVar(&c.TLSServerName, "clickhouse.tls.server-name", "", "name to verify in the server's certificate (default: the host of --clickhouse.addr)")
	fs.BoolVar(&c.TLSInsecureSkipVerify, "clickhouse.tls.insecure-skip-verify", false, "accept any server certificate without verifying it; for testing only, never in production")
}

// TLSEnabled reports whether connections use TLS: --clickhouse.tls or any
// --clickhouse.tls.* setting.
func (c *Config) TLSEnabled() bool {
	return c.TLS || c.TLSCAFile != "" || c.TLSCertFile != "" || c.TLSKeyFile != "" ||
		c.TLSServerName != "" || c.TLSInsecureSkipVerify
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
	if c.Protocol != "" && c.Protocol != "native" && c.Protocol != "http" {
		return fmt.Errorf("chconn: --clickhouse.protocol %q: want native or http", c.Protocol)
	}
	if c.Compression != "" && c.Compression != "lz4" && c.Compression != "none" {
		return fmt.Errorf("chconn: --clickhouse.compression %q: want lz4 or none", c.Compression)
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return errors.New("chconn: --clickhouse.tls.cert and --clickhouse.tls.key go together: give both or neither")
	}
	if c.DialTimeout < 0 {
		return fmt.Errorf("chconn: --clickhouse.dial-timeout %s is negative (no connection could be made)", c.DialTimeout)
	}
	return nil
}

// tlsConfig builds the client TLS settings, or returns nil when TLS is off.
// It reads the CA and client key files, so its errors name the flag and file.
func (c *Config) tlsConfig() (*tls.Config, error) {
	if !c.TLSEnabled() {
		return nil, nil
	}
	tc, err := tlsfiles.Client{Prefix: "--clickhouse.tls", CAFile: c.TLSCAFile, CertFile: c.TLSCertFile, KeyFile: c.TLSKeyFile,
		ServerName: c.TLSServerName, InsecureSkipVerify: c.TLSInsecureSkipVerify, Logger: c.Logger}.Config()
	if err != nil {
		return nil, fmt.Errorf("chconn: %w", err)
	}
	return tc, nil
}

// Open connects and pings. getenv supplies $HELIOSTAT_CLICKHOUSE_PASSWORD.
func (c *Config) Open(ctx context.Context, getenv func(string) string) (driver.Conn, error) {
	opts, err := c.options(getenv)
	if err != nil {
		return nil, err
	}
	return c.connect(ctx, opts)
}

// Backoff bounds OpenWait's pauses between attempts: the first is
// MinBackoff, each next one twice the last, up to MaxBackoff.
const (
	MinBackoff = time.Second
	MaxBackoff = 30 * time.Second
)

// OpenWait opens a connection as Open does and runs prepare on it (a
// long-running part's schema migration at start-up). While ClickHouse
// cannot be reached or prepare fails, it tells report the error and
// tries again, after MinBackoff doubling up to MaxBackoff, until it
// succeeds or ctx ends (then it returns ctx's error). Settings that cannot
// work (Validate, an unreadable password or TLS file) fail at once. So a
// part started before its ClickHouse (a whole site powered on at once)
// waits for it, serving its metrics and a not-ready probe that says why,
// instead of exiting.
func (c *Config) OpenWait(ctx context.Context, getenv func(string) string, prepare func(context.Context, driver.Conn) error, report func(err error, attempt int, retryIn time.Duration)) (driver.Conn, error) {
	opts, err := c.options(getenv)
	if err != nil {
		return nil, err
	}
	pause := MinBackoff
	for attempt := 1; ; attempt++ {
		conn, err := c.connect(ctx, opts)
		if err == nil {
			if err = prepare(ctx, conn); err == nil {
				return conn, nil
			}
			conn.Close()
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		report(err, attempt, pause)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, MaxBackoff)
	}
}

// options checks the settings and reads the password and TLS files.
func (c *Config) options(getenv func(string) string) (*clickhouse.Options, error) {
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
	user := c.User
	if user == "" {
		user = "default"
	}
	tc, err := c.tlsConfig()
	if err != nil {
		return nil, err
	}
	comp := &clickhouse.Compression{Method: clickhouse.CompressionLZ4}
	if c.Compression == "none" {
		comp = &clickhouse.Compression{Method: clickhouse.CompressionNone}
	}
	return &clickhouse.Options{
		Protocol:        c.ClientProtocol(),
		Addr:            []string{c.Addr},
		Auth:            clickhouse.Auth{Username: user, Password: password},
		DialTimeout:     c.dialTimeout(),
		MaxOpenConns:    8,
		MaxIdleConns:    4,
		ConnMaxLifetime: time.Hour,
		Compression:     comp,
		TLS:             tc,
	}, nil
}

// ClientProtocol is Protocol as clickhouse-go names it.
func (c *Config) ClientProtocol() clickhouse.Protocol {
	if c.Protocol == "http" {
		return clickhouse.HTTP
	}
	return clickhouse.Native
}

func (c *Config) dialTimeout() time.Duration {
	if c.DialTimeout == 0 {
		return 5 * time.Second
	}
	return c.DialTimeout
}

// connect opens a connection pool with opts and pings the server.
func (c *Config) connect(ctx context.Context, opts *clickhouse.Options) (driver.Conn, error) {
	conn, err := clickhouse.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("chconn: open %s: %w", c.Addr, err)
	}
	pctx, cancel := context.WithTimeout(ctx, c.dialTimeout())
	defer cancel()
	if err := conn.Ping(pctx); err != nil {
		conn.Close()
		if c.RefusedHint != "" && errors.Is(err, syscall.ECONNREFUSED) {
			err = fmt.Errorf("%w (%s)", err, c.RefusedHint)
		}
		if opts.TLS != nil {
			return nil, fmt.Errorf("chconn: ping %s over TLS: %w", c.Addr, err)
		}
		return nil, fmt.Errorf("chconn: ping %s: %w", c.Addr, err)
	}
	return conn, nil
}
