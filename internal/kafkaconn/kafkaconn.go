// Package kafkaconn holds how heliostat's Kafka clients reach the brokers:
// TLS (server verification against a CA, client certificates) and SASL
// (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), as one set of --kafka.tls.* and
// --kafka.sasl.* flags shared by every command that talks to Kafka. With no
// flag given the clients speak plaintext, as before.
package kafkaconn

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/heliostat-dev/heliostat/internal/tlsfiles"
)

// SASL mechanisms, as --kafka.sasl.mechanism takes them.
const (
	MechanismPlain       = "plain"
	MechanismSCRAMSHA256 = "scram-sha-256"
	MechanismSCRAMSHA512 = "scram-sha-512"
)

// Environment variables read by RegisterFlags.
const (
	EnvSASLUser     = "HELIOSTAT_KAFKA_SASL_USER"
	EnvSASLPassword = "HELIOSTAT_KAFKA_SASL_PASSWORD"
)

// Config says how to secure the connections to the brokers. The zero value
// is plaintext without authentication.
type Config struct {
	// TLS turns on TLS. Any of CAFile, CertFile, KeyFile, ServerName and
	// InsecureSkipVerify implies it.
	TLS bool
	// CAFile is a PEM file of the certificate authorities that sign the
	// brokers' certificates. Default: the system's pool.
	CAFile string
	// CertFile and KeyFile are a client certificate and its key, for
	// brokers that require one (both or neither).
	CertFile, KeyFile string
	// ServerName is the name the brokers' certificates are checked against
	// instead of the host of the address dialled.
	ServerName string
	// InsecureSkipVerify accepts any broker certificate. For tests only.
	InsecureSkipVerify bool
	// SASLMechanism is "", MechanismPlain, MechanismSCRAMSHA256 or
	// MechanismSCRAMSHA512 (case does not matter).
	SASLMechanism string
	// SASLUser is the SASL user name.
	SASLUser string
	// SASLPasswordFile holds the SASL password; it wins over SASLPassword.
	SASLPasswordFile string
	// SASLPassword is the password when no file is given (RegisterFlags
	// takes it from $HELIOSTAT_KAFKA_SASL_PASSWORD; it has no flag, so it
	// never shows in a process listing).
	SASLPassword string
	// Logger reports the client certificate reloaded after a renewal (it
	// is read again when its files change); nil discards. Not a flag.
	Logger *slog.Logger
}

// RegisterFlags adds the --kafka.tls* and --kafka.sasl.* flags to fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet, getenv func(string) string) {
	fs.BoolVar(&c.TLS, "kafka.tls", false, "connect to the brokers over TLS (implied by the other --kafka.tls.* flags)")
	fs.StringVar(&c.CAFile, "kafka.tls.ca", "", "PEM file of the CAs that sign the brokers' certificates (default: the system's)")
	fs.StringVar(&c.CertFile, "kafka.tls.cert", "", "PEM client certificate, for brokers that require one (with --kafka.tls.key)")
	fs.StringVar(&c.KeyFile, "kafka.tls.key", "", "PEM key of --kafka.tls.cert")
	fs.StringVar(&c.ServerName, "kafka.tls.server-name", "", "name to check the brokers' certificates against (default: the host dialled)")
	fs.BoolVar(&c.InsecureSkipVerify, "kafka.tls.insecure-skip-verify", false, "accept any broker certificate (testing only: anyone on the path can read and change the data)")
	fs.StringVar(&c.SASLMechanism, "kafka.sasl.mechanism", "", "SASL authentication: plain, scram-sha-256 or scram-sha-512 (default: none); use it with TLS, PLAIN sends the password as is")
	fs.StringVar(&c.SASLUser, "kafka.sasl.user", getenv(EnvSASLUser), "SASL user ($"+EnvSASLUser+")")
	fs.StringVar(&c.SASLPasswordFile, "kafka.sasl.password-file", "", "file holding the SASL password (default: $"+EnvSASLPassword+")")
	c.SASLPassword = getenv(EnvSASLPassword)
}

// TLSOn reports whether the connections use TLS.
func (c Config) TLSOn() bool {
	return c.TLS || c.CAFile != "" || c.CertFile != "" || c.KeyFile != "" || c.ServerName != "" || c.InsecureSkipVerify
}

// Validate reports every invalid setting, named by its flag. It reads no
// file; Load does.
func (c Config) Validate() error {
	var errs []error
	if (c.CertFile == "") != (c.KeyFile == "") {
		errs = append(errs, errors.New("--kafka.tls.cert and --kafka.tls.key go together: give both or neither"))
	}
	switch strings.ToLower(c.SASLMechanism) {
	case "":
		if c.SASLPasswordFile != "" {
			errs = append(errs, errors.New("--kafka.sasl.password-file is set but --kafka.sasl.mechanism is not (plain, scram-sha-256 or scram-sha-512)"))
		}
	case MechanismPlain, MechanismSCRAMSHA256, MechanismSCRAMSHA512:
		if c.SASLUser == "" {
			errs = append(errs, fmt.Errorf("--kafka.sasl.mechanism %s needs --kafka.sasl.user (or $%s)", c.SASLMechanism, EnvSASLUser))
		}
		if c.SASLPasswordFile == "" && c.SASLPassword == "" {
			errs = append(errs, fmt.Errorf("--kafka.sasl.mechanism %s needs --kafka.sasl.password-file (or $%s)", c.SASLMechanism, EnvSASLPassword))
		}
	default:
		errs = append(errs, fmt.Errorf("--kafka.sasl.mechanism %q: want plain, scram-sha-256 or scram-sha-512", c.SASLMechanism))
	}
	if len(errs) > 0 {
		return fmt.Errorf("kafkaconn: %w", errors.Join(errs...))
	}
	return nil
}

// Security is a loaded Config: the TLS configuration and the SASL
// mechanism, ready for kafka-go's dialers and transports. A nil *Security
// is plaintext without authentication.
type Security struct {
	tls  *tls.Config
	sasl sasl.Mechanism
	desc string
}

// Load validates c, reads its files and returns the Security it
// describes; nil when c asks for neither TLS nor SASL.
func (c Config) Load() (*Security, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	mech := strings.ToLower(c.SASLMechanism)
	if !c.TLSOn() && mech == "" {
		return nil, nil
	}
	s := &Security{}
	if c.TLSOn() {
		tc, err := tlsfiles.Client{Prefix: "--kafka.tls", CAFile: c.CAFile, CertFile: c.CertFile, KeyFile: c.KeyFile,
			ServerName: c.ServerName, InsecureSkipVerify: c.InsecureSkipVerify, Logger: c.Logger}.Config()
		if err != nil {
			return nil, fmt.Errorf("kafkaconn: %w", err)
		}
		s.tls = tc
		s.desc = "tls"
	}
	if mech != "" {
		password := c.SASLPassword
		if c.SASLPasswordFile != "" {
			b, err := os.ReadFile(c.SASLPasswordFile)
			if err != nil {
				return nil, fmt.Errorf("kafkaconn: --kafka.sasl.password-file: %w", err)
			}
			password = strings.TrimRight(string(b), "\r\n")
			if password == "" {
				return nil, fmt.Errorf("kafkaconn: --kafka.sasl.password-file %s is empty", c.SASLPasswordFile)
			}
		}
		switch mech {
		case MechanismPlain:
			s.sasl = plain.Mechanism{Username: c.SASLUser, Password: password}
		case MechanismSCRAMSHA256, MechanismSCRAMSHA512:
			algo := scram.SHA256
			if mech == MechanismSCRAMSHA512 {
				algo = scram.SHA512
			}
			m, err := scram.Mechanism(algo, c.SASLUser, password)
			if err != nil {
				return nil, fmt.Errorf("kafkaconn: --kafka.sasl.mechanism %s for user %q: %w", mech, c.SASLUser, err)
			}
			s.sasl = m
		}
		if s.desc != "" {
			s.desc += "+"
		}
		s.desc += "sasl/" + mech + " as " + c.SASLUser
	}
	return s, nil
}

// String describes the security for logs: "plaintext", "tls",
// "sasl/scram-sha-512 as alice" or "tls+sasl/plain as alice".
func (s *Security) String() string {
	if s == nil {
		return "plaintext"
	}
	return s.desc
}

// Dialer returns a kafka-go dialer with s's TLS and SASL and the given
// connect timeout.
func (s *Security) Dialer(timeout time.Duration) *kafka.Dialer {
	d := &kafka.Dialer{Timeout: timeout, DualStack: true}
	if s != nil {
		d.TLS, d.SASLMechanism = s.tlsCopy(), s.sasl
	}
	return d
}

// Transport returns a kafka-go transport (for writers) with s's TLS and
// SASL, naming itself clientID to the brokers.
func (s *Security) Transport(clientID string) *kafka.Transport {
	t := &kafka.Transport{ClientID: clientID}
	if s != nil {
		t.TLS, t.SASL = s.tlsCopy(), s.sasl
	}
	return t
}

// Probe connects to each broker in turn, with s's TLS and SASL, until one
// accepts; it returns nil then, else why the last one refused. kafka-go's
// writers report a refused TLS handshake or SASL login as a bare "EOF";
// Probe gets the reason ("SASL Authentication failed", "certificate signed
// by unknown authority") for the logs and errors around them.
func Probe(ctx context.Context, s *Security, brokers []string, timeout time.Duration) error {
	if len(brokers) == 0 {
		return errors.New("kafkaconn: no brokers")
	}
	var last error
	for _, b := range brokers {
		conn, err := s.Dialer(timeout).DialContext(ctx, "tcp", b)
		if err == nil {
			// A broker that wants SASL takes the TLS handshake and then
			// hangs up on the first request that did not log in.
			_ = conn.SetDeadline(time.Now().Add(timeout))
			_, err = conn.Brokers()
			conn.Close()
			if err == nil {
				return nil
			}
		}
		last = fmt.Errorf("kafkaconn: connect to %s (%s): %w%s", b, s, err, hint(s, err))
		if ctx.Err() != nil {
			break
		}
	}
	return last
}

// hint says what a broker that hangs up at once usually wants.
func hint(s *Security, err error) string {
	if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, syscall.ECONNRESET) {
		return ""
	}
	switch {
	case s == nil:
		return " (the broker hung up: does it want TLS, --kafka.tls, or SASL, --kafka.sasl.mechanism?)"
	case s.sasl == nil:
		return " (the broker hung up: does it want SASL, --kafka.sasl.mechanism?)"
	case s.tls == nil:
		return " (the broker hung up: does it want TLS, --kafka.tls?)"
	}
	return " (the broker hung up: check the SASL mechanism and whether it wants TLS)"
}

// tlsCopy gives each client its own tls.Config: kafka-go fills ServerName
// in the one it is handed.
func (s *Security) tlsCopy() *tls.Config {
	if s.tls == nil {
		return nil
	}
	return s.tls.Clone()
}
