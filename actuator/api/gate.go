package api

import (
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Gate is the actuator's HTTP handler from the moment it listens, before
// its API can be built (ClickHouse not reachable yet): /healthz answers
// 200, /metrics serves the registry, and /readyz and every other endpoint
// answer 503 with what the actuator waits for. Once Open, every request
// goes to the API.
type Gate struct {
	metrics http.Handler
	why     atomic.Pointer[error]
	api     atomic.Pointer[gated]
}

type gated struct {
	h     http.Handler
	ready func() error
}

// errStarting is what a Gate says before Open.
var errStarting = errors.New("starting")

// NewGate returns a closed gate serving g's metrics.
func NewGate(g prometheus.Gatherer) *Gate {
	return &Gate{metrics: promhttp.HandlerFor(g, promhttp.HandlerOpts{})}
}

// Waiting records what the actuator waits for (nil: nothing named).
func (g *Gate) Waiting(reason error) {
	if reason == nil {
		g.why.Store(nil)
		return
	}
	g.why.Store(&reason)
}

// Open hands every later request to h, ready while ready says so.
func (g *Gate) Open(h http.Handler, ready func() error) {
	g.api.Store(&gated{h: h, ready: ready})
}

// Ready returns nil when /readyz answers 200: the API's readiness once
// open, "starting" and what it waits for before.
func (g *Gate) Ready() error {
	if a := g.api.Load(); a != nil {
		return a.ready()
	}
	if why := g.why.Load(); why != nil {
		return fmt.Errorf("%w: %w", errStarting, *why)
	}
	return errStarting
}

func (g *Gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if a := g.api.Load(); a != nil {
		a.h.ServeHTTP(w, r)
		return
	}
	// HEAD as GET, as the API answers it.
	get := r.Method == http.MethodGet || r.Method == http.MethodHead
	switch {
	case get && r.URL.Path == "/healthz":
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	case get && r.URL.Path == "/metrics":
		g.metrics.ServeHTTP(w, r)
	default:
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, "", g.Ready().Error())
	}
}
