package api

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/heliostat-dev/heliostat/internal/tlsfiles"
)

// TLSConfig returns the server TLS configuration of --actuator.tls.cert and
// --actuator.tls.key (with --actuator.tls.client-ca: client certificates
// required), or nil when no certificate is configured. The key pair is read
// again when either file changes, checked at most once every reloadEvery
// (10 s), so a renewed certificate is served without a restart; while a
// renewal cannot be read (half-written, or a key that does not match) the
// last good pair is served and the error is logged at each check.
func (c Config) TLSConfig(now func() time.Time, logger *slog.Logger) (*tls.Config, error) {
	if c.TLSCertFile == "" && c.TLSKeyFile == "" {
		if c.TLSClientCAFile != "" {
			return nil, errors.New("api: --actuator.tls.client-ca needs --actuator.tls.cert and --actuator.tls.key")
		}
		return nil, nil
	}
	if c.TLSCertFile == "" || c.TLSKeyFile == "" {
		return nil, errors.New("api: --actuator.tls.cert and --actuator.tls.key go together: give both or neither")
	}
	r := &keyPair{cert: c.TLSCertFile, key: c.TLSKeyFile, now: now, logger: logger}
	if err := r.load(); err != nil {
		return nil, err
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.get}
	if c.TLSClientCAFile != "" {
		pool, err := tlsfiles.CertPool("--actuator.tls.client-ca", c.TLSClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("api: %w", err)
		}
		tc.ClientCAs, tc.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return tc, nil
}

// reloadEvery bounds how often keyPair looks at its files.
const reloadEvery = 10 * time.Second

// keyPair serves a certificate and key from files, reading them again when
// their modification times change.
type keyPair struct {
	cert, key string
	now       func() time.Time
	logger    *slog.Logger

	mu      sync.Mutex
	pair    *tls.Certificate
	stamp   [2]time.Time // modification times of cert and key when read
	checked time.Time
}

func (k *keyPair) stamps() ([2]time.Time, error) {
	var s [2]time.Time
	for i, f := range []string{k.cert, k.key} {
		st, err := os.Stat(f)
		if err != nil {
			return s, fmt.Errorf("api: TLS key pair: %w", err)
		}
		s[i] = st.ModTime()
	}
	return s, nil
}

// load reads the pair; the caller holds mu or owns k.
func (k *keyPair) load() error {
	s, err := k.stamps()
	if err != nil {
		return err
	}
	pair, err := tlsfiles.KeyPair("--actuator.tls", k.cert, k.key)
	if err != nil {
		return fmt.Errorf("api: %w", err)
	}
	k.pair, k.stamp, k.checked = &pair, s, k.now()
	return nil
}

func (k *keyPair) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if now := k.now(); now.Sub(k.checked) >= reloadEvery {
		k.checked = now
		s, err := k.stamps()
		if err == nil && s != k.stamp {
			if err = k.load(); err == nil {
				k.logger.Info("reloaded the API's TLS certificate", "cert", k.cert, "not_after", k.pair.Leaf.NotAfter)
			}
		}
		if err != nil {
			// A pair being replaced can be read half-written; the old
			// pair is still valid, so serve it and retry at the next check.
			k.logger.Warn("cannot reload the API's TLS certificate; serving the previous one", "err", err)
		}
	}
	return k.pair, nil
}
