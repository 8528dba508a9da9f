// Package web serves a component's /metrics and the /-/healthy and /-/ready
// probes.
package web

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Server is the HTTP endpoint of one process.
type Server struct {
	srv     *http.Server
	ln      net.Listener
	scheme  string // http or https
	ready   atomic.Bool
	waiting atomic.Pointer[error] // why it is still starting (Starting)
	checkMu sync.Mutex
	checks  []func() error
	mux     *http.ServeMux
}

// Listen binds addr (":0" picks a free port) and prepares the handlers for g,
// served over HTTPS with tc, or plain HTTP when tc is nil.
func Listen(addr string, tc *tls.Config, g prometheus.Gatherer, logger *slog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("web: listen on %s: %w", addr, err)
	}
	s := &Server{ln: ln, mux: http.NewServeMux(), scheme: "http"}
	if tc != nil {
		s.ln, s.scheme = tls.NewListener(ln, tc), "https"
	}
	s.mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}))
	s.mux.HandleFunc("/-/healthy", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	s.mux.HandleFunc("/-/ready", func(w http.ResponseWriter, _ *http.Request) {
		if err := s.Ready(); err != nil {
			http.Error(w, "not ready:\n"+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	s.srv = &http.Server{Handler: s.mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(logger.With("component", "http_server").Handler(), slog.LevelInfo)}
	return s, nil
}

// Addr returns the bound address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL returns the address of path on this server for people and logs:
// its scheme, and localhost for a wildcard address ("https://localhost:9400/metrics").
func (s *Server) URL(path string) string { return s.scheme + "://" + DisplayAddr(s.Addr()) + path }

// DisplayAddr returns a bound address as a client would dial it: localhost
// for a wildcard host (":9400", "[::]:9400").
func DisplayAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}

// Handle serves h at pattern beside the metrics and probes (heliostat up
// mounts the report at /report). Call it before Run.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// SetReady flips /-/ready.
func (s *Server) SetReady(ok bool) { s.ready.Store(ok) }

// errStarting is what Ready says before SetReady(true).
var errStarting = errors.New("starting")

// Starting says what the process waits for before it can SetReady(true),
// such as a dependency that does not answer yet: /-/ready's 503 names it
// after "starting". nil clears it.
func (s *Server) Starting(reason error) {
	if reason == nil {
		s.waiting.Store(nil)
		return
	}
	s.waiting.Store(&reason)
}

// Ready returns nil when /-/ready answers 200, and otherwise what its 503
// names: "starting" before SetReady(true) (with what it waits for, from
// Starting), then each failing check.
func (s *Server) Ready() error {
	if !s.ready.Load() {
		if why := s.waiting.Load(); why != nil {
			return fmt.Errorf("%w: %w", errStarting, *why)
		}
		return errStarting
	}
	s.checkMu.Lock()
	checks := s.checks
	s.checkMu.Unlock()
	var errs []error
	for _, check := range checks {
		errs = append(errs, check())
	}
	return errors.Join(errs...)
}

// AddCheck makes /-/ready, once SetReady(true), also ask check: a non-nil
// error from any check is a 503 whose body names what is failing (one line
// each).
func (s *Server) AddCheck(check func() error) {
	s.checkMu.Lock()
	defer s.checkMu.Unlock()
	s.checks = append(slices.Clip(s.checks), check)
}

// Run serves until ctx is done, then shuts down within 5s.
func (s *Server) Run(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("web: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("web: shutdown: %w", err)
	}
	return nil
}

// StatusRecorder is an http.ResponseWriter that remembers the status code
// written, for request metrics: Code is 200 until WriteHeader says
// otherwise, as net/http answers a handler that writes no header.
type StatusRecorder struct {
	http.ResponseWriter
	Code int
}

// NewStatusRecorder wraps w.
func NewStatusRecorder(w http.ResponseWriter) *StatusRecorder {
	return &StatusRecorder{ResponseWriter: w, Code: http.StatusOK}
}

// WriteHeader records code and writes it.
func (w *StatusRecorder) WriteHeader(code int) {
	w.Code = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap returns the wrapped writer, for http.ResponseController.
func (w *StatusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }
