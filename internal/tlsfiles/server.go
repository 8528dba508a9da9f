package tlsfiles

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// Server describes a server's TLS settings, as flags give them.
type Server struct {
	// Prefix names the flags in errors, e.g. "--actuator.tls".
	Prefix string
	// CertFile and KeyFile are the certificate (chain) to serve and its
	// key; both "" serves plain HTTP.
	CertFile, KeyFile string
	// ClientCAFile, when set, requires clients to present a certificate
	// signed by one of its CAs (mutual TLS).
	ClientCAFile string
}

// Enabled reports whether a certificate or key is configured.
func (s Server) Enabled() bool { return s.CertFile != "" || s.KeyFile != "" }

// Config returns the server configuration (TLS 1.2 or later; client
// certificates required with ClientCAFile), or nil when no certificate is
// configured. The key pair is read again when either file changes, checked
// at most once every ReloadEvery, so a renewed certificate is served without
// a restart; while a renewal cannot be read (half-written, or a key that
// does not match) the last good pair is served and the error logged at each
// check.
func (s Server) Config(now func() time.Time, logger *slog.Logger) (*tls.Config, error) {
	if !s.Enabled() {
		if s.ClientCAFile != "" {
			return nil, fmt.Errorf("%s.client-ca needs %s.cert and %s.key", s.Prefix, s.Prefix, s.Prefix)
		}
		return nil, nil
	}
	if s.CertFile == "" || s.KeyFile == "" {
		return nil, errors.New(s.Prefix + ".cert and " + s.Prefix + ".key go together: give both or neither")
	}
	r, err := newKeyPair(s.Prefix, s.CertFile, s.KeyFile, now, logger)
	if err != nil {
		return nil, err
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.get}
	if s.ClientCAFile != "" {
		pool, err := CertPool(s.Prefix+".client-ca", s.ClientCAFile)
		if err != nil {
			return nil, err
		}
		tc.ClientCAs, tc.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return tc, nil
}

// ReloadEvery bounds how often a key pair's files are looked at.
const ReloadEvery = 10 * time.Second

// keyPair serves a certificate and key from files, reading them again when
// their modification times change.
type keyPair struct {
	prefix, cert, key string
	now               func() time.Time
	logger            *slog.Logger

	mu      sync.Mutex
	pair    *tls.Certificate
	stamp   [2]time.Time // modification times of cert and key when read
	checked time.Time
}

// newKeyPair reads the pair; nil now is time.Now, a nil logger discards.
func newKeyPair(prefix, cert, key string, now func() time.Time, logger *slog.Logger) (*keyPair, error) {
	if now == nil {
		now = time.Now
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	k := &keyPair{prefix: prefix, cert: cert, key: key, now: now, logger: logger}
	if err := k.load(); err != nil {
		return nil, err
	}
	return k, nil
}

func (k *keyPair) stamps() ([2]time.Time, error) {
	var s [2]time.Time
	for i, f := range []string{k.cert, k.key} {
		st, err := os.Stat(f)
		if err != nil {
			return s, fmt.Errorf("%s key pair: %w", k.prefix, err)
		}
		s[i] = st.ModTime()
	}
	return s, nil
}

// load reads the pair; the caller holds mu or owns k.
func (k *keyPair) load() error {
	pair, err := KeyPair(k.prefix, k.cert, k.key)
	if err != nil {
		return err
	}
	s, err := k.stamps()
	if err != nil {
		return err
	}
	k.pair, k.stamp, k.checked = &pair, s, k.now()
	return nil
}

func (k *keyPair) get(*tls.ClientHelloInfo) (*tls.Certificate, error) { return k.current(), nil }

func (k *keyPair) getClient(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return k.current(), nil
}

// current returns the pair, read again first when a check is due and the
// files changed.
func (k *keyPair) current() *tls.Certificate {
	k.mu.Lock()
	defer k.mu.Unlock()
	if now := k.now(); now.Sub(k.checked) >= ReloadEvery {
		k.checked = now
		s, err := k.stamps()
		if err == nil && s != k.stamp {
			if err = k.load(); err == nil {
				k.logger.Info("reloaded the TLS certificate", "flags", k.prefix, "cert", k.cert, "not_after", k.pair.Leaf.NotAfter)
			}
		}
		if err != nil {
			// A pair being replaced can be read half-written; the old
			// pair is still valid, so serve it and retry at the next check.
			k.logger.Warn("cannot reload the TLS certificate; using the previous one", "flags", k.prefix, "err", err)
		}
	}
	return k.pair
}
