package chserver

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"time"

	"github.com/heliostat-dev/heliostat/internal/aptinstall"
)

// SuperviseConfig says how Supervise restarts a server that exited.
type SuperviseConfig struct {
	// MinBackoff is the wait before starting a server that exited again.
	// It doubles, up to MaxBackoff, after every failed start and every
	// exit within MaxBackoff of the last start. Default 1s.
	MinBackoff time.Duration
	// MaxBackoff caps the wait. Default 30s.
	MaxBackoff time.Duration
	// Attempts is how many starts in a row may fail before Supervise
	// gives up. Default 5.
	Attempts int
	// Exited, when set, is called for every exit on its own (not one Stop
	// asked for), before the restart: the caller counts them.
	Exited func()
}

// Supervise watches the server until ctx ends or Stop is called, and
// starts it again, on the same directory and ports, whenever it exits on
// its own (killed, crashed): it logs an error naming the exit status, the
// process id and the server's error log, waits, and starts it. It returns
// nil when ctx ends or the server was stopped, and an error once
// cfg.Attempts starts in a row failed; the server is then down.
func (s *Server) Supervise(ctx context.Context, cfg SuperviseConfig) error {
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = time.Second
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(30*time.Second, cfg.MinBackoff)
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = 5
	}
	backoff := cfg.MinBackoff
	for {
		p := s.process()
		since := time.Now()
		select {
		case <-ctx.Done():
			return nil
		case <-p.done:
		}
		if s.isStopped() {
			return nil // an exit that Stop asked for
		}
		if time.Since(since) >= cfg.MaxBackoff {
			backoff = cfg.MinBackoff // it ran a while: not a crash loop
		}
		if cfg.Exited != nil {
			cfg.Exited()
		}
		status := exitStatus(p.err)
		attrs := []any{"pid", p.cmd.Process.Pid, "status", status, "log", s.ErrorLog(), "restart_in", backoff}
		if tail := aptinstall.Tail(s.errLogSince(p.errLogFrom), 400); tail != "" {
			attrs = append(attrs, "log_tail", tail)
		}
		s.logger.Error("clickhouse server exited; restarting it", attrs...)
		for attempt := 1; ; attempt++ {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, cfg.MaxBackoff)
			err := s.restart(ctx)
			if err == nil {
				break
			}
			if ctx.Err() != nil || errors.Is(err, errStopped) || s.isStopped() {
				return nil
			}
			if attempt == cfg.Attempts {
				return fmt.Errorf("chserver: server at %s exited (%s) and did not start again in %d attempts (see %s): %w", s.Addr(), status, attempt, s.ErrorLog(), err)
			}
			s.logger.Error("clickhouse server did not start again; trying again", "attempt", attempt, "retry_in", backoff, "err", err)
		}
		s.logger.Info("clickhouse server restarted", "pid", s.PID(), "addr", s.Addr())
	}
}

// isStopped reports whether Stop was called.
func (s *Server) isStopped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopped
}

// exitStatus says how a process whose Wait returned err ended: "exit
// status 70", "signal: killed".
func exitStatus(err error) string {
	var exit *exec.ExitError
	switch {
	case err == nil:
		return "exit status 0"
	case errors.As(err, &exit):
		return exit.ProcessState.String()
	}
	return err.Error()
}
