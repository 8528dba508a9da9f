// Package tlsfiles builds TLS configurations from the PEM files operators
// name in flags (a CA bundle, a certificate and its key), with errors that
// name the flag and the file. The Kafka and ClickHouse clients and the
// actuator's API share it.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"time"
)

// CertPool reads a PEM file of CA certificates; flag (e.g.
// "--kafka.tls.ca") names the setting in errors.
func CertPool(flag, file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s %s: no PEM certificate in the file", flag, file)
	}
	return pool, nil
}

// KeyPair reads a PEM certificate (chain) and its key; prefix (e.g.
// "--kafka.tls") names the .cert and .key settings in errors.
func KeyPair(prefix, certFile, keyFile string) (tls.Certificate, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s.cert %s and %s.key %s: %w", prefix, certFile, prefix, keyFile, err)
	}
	return pair, nil
}

// Client describes a client's TLS settings, as flags give them.
type Client struct {
	// Prefix names the flags in errors, e.g. "--clickhouse.tls".
	Prefix string
	// CAFile is a PEM file of the CAs to trust; "" trusts the system's.
	CAFile string
	// CertFile and KeyFile are a client certificate and its key, or both "".
	CertFile, KeyFile string
	// ServerName is the name to check the server's certificate against;
	// "" means the host dialled.
	ServerName string
	// InsecureSkipVerify accepts any server certificate (tests only).
	InsecureSkipVerify bool
	// Logger reports a client certificate reloaded, or one that could not
	// be; nil discards.
	Logger *slog.Logger
	// Now is the clock of the reload checks; nil: time.Now.
	Now func() time.Time
}

// Config returns the client configuration: TLS 1.2 or later, verifying the
// server against CAFile (or the system's CAs), presenting the client
// certificate when one is given. Like a Server's, the client key pair is
// read again when its files change (checked at most every ReloadEvery, at
// a handshake), so a renewed certificate is used without a restart; the CA
// file is read once.
func (c Client) Config() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName, InsecureSkipVerify: c.InsecureSkipVerify} //nolint:gosec // a flag documented as for tests
	if c.CAFile != "" {
		pool, err := CertPool(c.Prefix+".ca", c.CAFile)
		if err != nil {
			return nil, err
		}
		tc.RootCAs = pool
	}
	if c.CertFile != "" || c.KeyFile != "" {
		if c.CertFile == "" || c.KeyFile == "" {
			return nil, fmt.Errorf("%s.cert and %s.key go together: give both or neither", c.Prefix, c.Prefix)
		}
		r, err := newKeyPair(c.Prefix, c.CertFile, c.KeyFile, c.Now, c.Logger)
		if err != nil {
			return nil, err
		}
		tc.GetClientCertificate = r.getClient
	}
	return tc, nil
}
