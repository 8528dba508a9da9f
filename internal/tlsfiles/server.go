package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
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
// configured. The key pair, and the client CA file, are read again when
// their files change, checked at most once every ReloadEvery, so a renewed
// certificate is served, and a CA added to or removed from the bundle
// trusted, without a restart. While a file cannot be read (half-written, or
// a key that does not match) the last good one is used and the error logged
// at each check. A client the new bundle does not trust cannot resume a
// session it had either (see mutualTLS). The returned configuration is
// complete: a handshake takes its settings from GetConfigForClient, so
// fields set on it later (NextProtos) would not be used.
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
		flag := s.Prefix + ".client-ca"
		cas, err := newReloader(reloadSpec[*x509.CertPool]{
			prefix: flag, what: "client CA file", files: []string{s.ClientCAFile},
			read: func() (*x509.CertPool, error) { return CertPool(flag, s.ClientCAFile) },
			now:  now, logger: logger,
		})
		if err != nil {
			return nil, err
		}
		m := &mutualTLS{cas: cas, getCertificate: r.get}
		tc.ClientCAs, tc.ClientAuth = m.config().ClientCAs, tls.RequireAndVerifyClientCert
		tc.GetConfigForClient = m.forClient
	}
	return tc, nil
}

// mutualTLS hands each handshake a configuration with the current client
// CAs, one per version of the bundle rather than one changed in place
// (crypto/tls reads a Config while handshakes run). Each has session ticket
// keys of its own, so a ticket issued under an earlier bundle is not even
// decrypted; Go also verifies a resumed session's chain against the current
// ClientCAs, so either alone would refuse it.
type mutualTLS struct {
	cas            *reloader[*x509.CertPool]
	getCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)

	mu      sync.Mutex
	version int
	cfg     *tls.Config
}

func (m *mutualTLS) forClient(*tls.ClientHelloInfo) (*tls.Config, error) { return m.config(), nil }

// config returns the configuration for the current bundle, made anew when
// the bundle changed. A fresh tls.Config makes its own ticket keys (and
// rotates them), so none is carried over from the previous one.
func (m *mutualTLS) config() *tls.Config {
	pool, v := m.cas.current()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cfg == nil || v != m.version {
		m.cfg = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: m.getCertificate,
			ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
		m.version = v
	}
	return m.cfg
}

// ReloadEvery bounds how often a key pair's or CA file's files are looked
// at.
const ReloadEvery = 10 * time.Second

// reloadSpec says what a reloader reads.
type reloadSpec[T any] struct {
	prefix, what string // the flags, and what is read, for logs: "--web.tls", "TLS certificate"
	files        []string
	read         func() (T, error)
	attrs        func(T) []any // what to log of a value reloaded; nil: nothing
	now          func() time.Time
	logger       *slog.Logger
}

// reloader holds a value read from files, and reads it again when their
// modification times change, looked at most every ReloadEvery.
type reloader[T any] struct {
	spec reloadSpec[T]

	mu      sync.Mutex
	val     T
	version int // counts the reads that succeeded
	stamp   []time.Time
	checked time.Time
}

// newReloader reads the value once; a nil now is time.Now, a nil logger
// discards.
func newReloader[T any](spec reloadSpec[T]) (*reloader[T], error) {
	if spec.now == nil {
		spec.now = time.Now
	}
	if spec.logger == nil {
		spec.logger = slog.New(slog.DiscardHandler)
	}
	r := &reloader[T]{spec: spec}
	if err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *reloader[T]) stamps() ([]time.Time, error) {
	s := make([]time.Time, len(r.spec.files))
	for i, f := range r.spec.files {
		st, err := os.Stat(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.spec.prefix, err)
		}
		s[i] = st.ModTime()
	}
	return s, nil
}

// load reads the value; the caller holds mu or owns r. The times are taken
// first: a file rewritten during the read is then read again at the next
// check, never missed.
func (r *reloader[T]) load() error {
	s, err := r.stamps()
	if err != nil {
		return err
	}
	v, err := r.spec.read()
	if err != nil {
		return err
	}
	r.val, r.stamp, r.checked = v, s, r.spec.now()
	r.version++
	return nil
}

// current returns the value and its version, read again first when a
// check is due and the files changed.
func (r *reloader[T]) current() (T, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := r.spec.now(); now.Sub(r.checked) >= ReloadEvery {
		r.checked = now
		s, err := r.stamps()
		if err == nil && !slices.Equal(s, r.stamp) {
			if err = r.load(); err == nil {
				attrs := []any{"flags", r.spec.prefix, "files", r.spec.files}
				if r.spec.attrs != nil {
					attrs = append(attrs, r.spec.attrs(r.val)...)
				}
				r.spec.logger.Info("reloaded the "+r.spec.what, attrs...)
			}
		}
		if err != nil {
			// A file being replaced can be read half-written; the old
			// value is still valid, so use it and retry at the next check.
			r.spec.logger.Warn("cannot reload the "+r.spec.what+"; using the previous one", "flags", r.spec.prefix, "err", err)
		}
	}
	return r.val, r.version
}

// keyPair serves a certificate and key from files, reading them again when
// they change.
type keyPair struct{ r *reloader[*tls.Certificate] }

// newKeyPair reads the pair; nil now is time.Now, a nil logger discards.
func newKeyPair(prefix, cert, key string, now func() time.Time, logger *slog.Logger) (keyPair, error) {
	r, err := newReloader(reloadSpec[*tls.Certificate]{
		prefix: prefix, what: "TLS certificate", files: []string{cert, key},
		read: func() (*tls.Certificate, error) {
			pair, err := KeyPair(prefix, cert, key)
			return &pair, err
		},
		attrs: func(c *tls.Certificate) []any { return []any{"not_after", c.Leaf.NotAfter} },
		now:   now, logger: logger,
	})
	return keyPair{r}, err
}

func (k keyPair) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c, _ := k.r.current()
	return c, nil
}

func (k keyPair) getClient(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	c, _ := k.r.current()
	return c, nil
}
