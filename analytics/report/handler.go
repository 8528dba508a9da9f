package report

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/analytics"
	"github.com/heliostat-dev/heliostat/internal/web"
)

// HandlerConfig configures Handler.
type HandlerConfig struct {
	// Database holds heliostat's tables.
	Database string
	// Cluster is reported on when a request names none (?cluster=); ""
	// picks the cluster with the most jobs in the window.
	Cluster string
	// MaxAge is how long a rendered page is served before it is rendered
	// again from ClickHouse. Default 1 minute.
	MaxAge time.Duration
	// Registry, when set, gets heliostat_report_requests_total{code}.
	Registry prometheus.Registerer
}

// Handler serves the latest report over HTTP (heliostat up mounts it at
// /report). Without query parameters it reports on the characterized window
// that reaches furthest (the longest of those, so the month so far rather than
// today); ?window=SINCE/UNTIL and ?cluster=NAME choose another. Pages are
// cached for MaxAge. A bad window, or a parameter it does not know, gets a
// 400 that names it.
type Handler struct {
	cfg      HandlerConfig
	conn     driver.Conn
	logger   *slog.Logger
	now      func() time.Time
	requests *prometheus.CounterVec

	mu    sync.Mutex
	cache map[string]cached
}

type cached struct {
	page []byte
	at   time.Time
}

// NewHandler returns a Handler reading through conn. It fails only when
// cfg.Registry refuses its metric.
func NewHandler(cfg HandlerConfig, conn driver.Conn, logger *slog.Logger, now func() time.Time) (*Handler, error) {
	if cfg.MaxAge == 0 {
		cfg.MaxAge = time.Minute
	}
	h := &Handler{cfg: cfg, conn: conn, logger: logger, now: now, cache: map[string]cached{},
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "heliostat_report_requests_total",
			Help: "Requests to /report by HTTP status: 400 for a bad parameter, 404 before any result, 500 when ClickHouse fails.",
		}, []string{"code"})}
	for _, code := range []string{"200", "400", "404", "405", "500"} {
		h.requests.WithLabelValues(code)
	}
	if cfg.Registry != nil {
		if err := cfg.Registry.Register(h.requests); err != nil {
			return nil, fmt.Errorf("report: register metrics: %w", err)
		}
	}
	return h, nil
}

// ServeHTTP renders (or serves from the cache) the report.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	cw := web.NewStatusRecorder(w)
	defer func() { h.requests.WithLabelValues(strconv.Itoa(cw.Code)).Inc() }()
	h.serve(cw, r)
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	q := r.URL.Query()
	for name, values := range q {
		switch {
		case name != "window" && name != "cluster":
			http.Error(w, fmt.Sprintf("unknown parameter %q (known: window, cluster)", name), http.StatusBadRequest)
			return
		case len(values) > 1:
			http.Error(w, fmt.Sprintf("parameter %s given %d times; give it once", name, len(values)), http.StatusBadRequest)
			return
		}
	}
	windowID, cluster := q.Get("window"), q.Get("cluster")
	var win analytics.Window // zero: the latest characterized
	if windowID != "" {
		var err error
		if win, err = analytics.ParseWindow(windowID); err != nil {
			http.Error(w, "parameter window: "+err.Error(), http.StatusBadRequest)
			return
		}
	}
	if cluster == "" {
		cluster = h.cfg.Cluster
	}
	key := windowID + "\x00" + cluster
	h.mu.Lock() // one render at a time: a burst of requests costs one
	defer h.mu.Unlock()
	c, ok := h.cache[key]
	if !ok || h.now().Sub(c.at) >= h.cfg.MaxAge {
		page, err := h.render(r.Context(), win, cluster)
		switch {
		case errors.Is(err, analytics.ErrNoResults):
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, "<!DOCTYPE html><title>no report yet</title><p>No characterization results yet: %s. The analytics runner writes them every few minutes; <code>heliostat analytics run</code> writes them now.</p>\n", html.EscapeString(err.Error()))
			return
		case err != nil:
			h.logger.Warn("report render failed", "window", windowID, "cluster", cluster, "err", err)
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if len(h.cache) > 64 { // windows asked for by hand: keep the cache small
			clear(h.cache)
		}
		c = cached{page: page, at: h.now()}
		h.cache[key] = c
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", fmt.Sprintf("max-age=%d", int(h.cfg.MaxAge.Seconds())))
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:")
	_, _ = w.Write(c.page)
}

// render renders the report of win (the zero Window: the latest
// characterized) for cluster.
func (h *Handler) render(ctx context.Context, win analytics.Window, cluster string) ([]byte, error) {
	if win.Since.IsZero() {
		ws, err := analytics.ReadWindows(ctx, h.conn, h.cfg.Database)
		if err != nil {
			return nil, err
		}
		if len(ws) == 0 {
			return nil, fmt.Errorf("%w: no window has been characterized", analytics.ErrNoResults)
		}
		win = LatestWindow(ws)
	}
	if cluster == "" {
		hs, err := analytics.ReadHeadlines(ctx, h.conn, h.cfg.Database, win)
		if err != nil {
			return nil, err
		}
		best := hs[0]
		for _, x := range hs[1:] {
			if x.Jobs > best.Jobs {
				best = x
			}
		}
		cluster = best.Cluster
	}
	rep, err := Load(ctx, h.conn, LoadOptions{Database: h.cfg.Database, Window: win, Cluster: cluster})
	if err != nil {
		return nil, err
	}
	rep.Title = "heliostat report: " + cluster
	rep.Source = "ClickHouse database " + h.cfg.Database
	rep.Generated = h.now()
	var buf bytes.Buffer
	if err := Render(&buf, rep); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// LatestWindow picks, of characterized windows, the one that reaches
// furthest, and of those the longest.
func LatestWindow(ws []analytics.WindowRun) analytics.Window {
	best := ws[0].Window
	for _, w := range ws[1:] {
		if u := w.Window.Until; u.After(best.Until) || u.Equal(best.Until) && w.Window.Since.Before(best.Since) {
			best = w.Window
		}
	}
	return best
}
