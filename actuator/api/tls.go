package api

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"time"

	"github.com/heliostat-dev/heliostat/internal/tlsfiles"
)

// TLSConfig returns the server TLS configuration of --actuator.tls.cert and
// --actuator.tls.key (with --actuator.tls.client-ca: client certificates
// required), or nil when no certificate is configured. The key pair and the
// client CA file are read again when their files change
// (tlsfiles.Server.Config), so a renewed certificate is served, and a
// changed CA bundle trusted, without a restart.
func (c Config) TLSConfig(now func() time.Time, logger *slog.Logger) (*tls.Config, error) {
	tc, err := tlsfiles.Server{Prefix: "--actuator.tls", CertFile: c.TLSCertFile, KeyFile: c.TLSKeyFile, ClientCAFile: c.TLSClientCAFile}.Config(now, logger)
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	return tc, nil
}
