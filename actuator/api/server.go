// Package api is heliostat's advisory HTTP/JSON API (`heliostat actuator`),
// documented in openapi.yaml (served at /v1/openapi.yaml):
//
//	POST /v1/predict      a job spec → predicted duration, interval, GPU service time, QSSF rank
//	GET  /v1/queue        the pending queue in QSSF order
//	GET  /v1/power-plan   the current power plan of each partition
//	GET  /v1/actions      the action history from the audit table
//	POST /v1/passes       run one pass of the control loop now (bearer token)
//	GET  /healthz, /readyz, /metrics
//
// Reads need no credentials; what changes anything needs
// "Authorization: Bearer <token>". Bad requests get a 4xx JSON body
// {"error": …, "field": …} naming the field at fault.
package api

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/heliostat-dev/heliostat/actuator/adapter"
	"github.com/heliostat-dev/heliostat/actuator/audit"
	"github.com/heliostat-dev/heliostat/actuator/ces"
	"github.com/heliostat-dev/heliostat/actuator/loop"
	"github.com/heliostat-dev/heliostat/actuator/qssf"
	"github.com/heliostat-dev/heliostat/internal/web"
	"github.com/heliostat-dev/heliostat/predictor/live"
)

// OpenAPI is the API's OpenAPI 3 description.
//
//go:embed openapi.yaml
var OpenAPI []byte

// Config is the API's settings.
type Config struct {
	// Listen is the address. Default ":9403".
	Listen string
	// TokenFile holds the bearer token of the endpoints that change
	// anything; when empty the token comes from $HELIOSTAT_ACTUATOR_TOKEN.
	// With neither, those endpoints answer 403.
	TokenFile string
	// MaxBodyBytes caps a request body. Default 64 KiB.
	MaxBodyBytes int64
	// TLSCertFile and TLSKeyFile, when set, serve the API over HTTPS with
	// this certificate, reloaded when the files change (TLSConfig).
	TLSCertFile, TLSKeyFile string
	// TLSClientCAFile, with a certificate, requires clients to present a
	// certificate signed by one of these CAs.
	TLSClientCAFile string
	// ActionsCacheTTL is how long an /v1/actions answer is reused for the
	// same query; up to twice as old it is still served while one
	// background query refreshes it, and concurrent misses of one query
	// share a single query of the audit table. Default 1s; negative: never
	// cached.
	ActionsCacheTTL time.Duration
	// MetricsAt, when set, is where the process serves its metrics instead
	// of the API's port (heliostat up serves one registry, at its
	// --web.listen-address): the API's /metrics answers 404 naming it, so
	// that a Prometheus scraping both ports does not count every series
	// twice. Not a flag.
	MetricsAt string
}

// RegisterFlags adds the --actuator.* flags of the API to fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Listen, "actuator.listen-address", ":9403", "address of the advisory API, /metrics and the probes")
	fs.StringVar(&c.TokenFile, "actuator.token-file", "", "file holding the bearer token of the endpoints that change anything (default: $HELIOSTAT_ACTUATOR_TOKEN)")
	fs.Int64Var(&c.MaxBodyBytes, "actuator.max-body-bytes", 64<<10, "largest request body accepted, at most 1 GiB")
	fs.StringVar(&c.TLSCertFile, "actuator.tls.cert", "", "PEM certificate (chain) to serve the API over HTTPS, read again when it changes (with --actuator.tls.key)")
	fs.StringVar(&c.TLSKeyFile, "actuator.tls.key", "", "PEM key of --actuator.tls.cert")
	fs.StringVar(&c.TLSClientCAFile, "actuator.tls.client-ca", "", "PEM CAs whose client certificates the API requires (mutual TLS; default: none required), read again when it changes")
	fs.DurationVar(&c.ActionsCacheTTL, "actuator.actions-cache-ttl", time.Second, "how long a /v1/actions answer is reused for the same query; up to twice as old it is served while one query refreshes it (negative: never cached)")
}

// maxBodyLimit is the largest --actuator.max-body-bytes.
const maxBodyLimit = 1 << 30

// Validate checks the settings.
func (c Config) Validate() error {
	if c.MaxBodyBytes < 0 {
		return fmt.Errorf("api: --actuator.max-body-bytes %d is negative", c.MaxBodyBytes)
	}
	if c.MaxBodyBytes > maxBodyLimit {
		// A job spec is a few hundred bytes; a limit near MaxInt64 also
		// overflowed the read of limit+1 bytes, refusing every body.
		return fmt.Errorf("api: --actuator.max-body-bytes %d is over %d (1 GiB)", c.MaxBodyBytes, int64(maxBodyLimit))
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return errors.New("api: --actuator.tls.cert and --actuator.tls.key go together: give both or neither")
	}
	if c.TLSClientCAFile != "" && c.TLSCertFile == "" {
		return errors.New("api: --actuator.tls.client-ca needs --actuator.tls.cert and --actuator.tls.key")
	}
	return nil
}

// Deps are what the API serves from.
type Deps struct {
	// View returns the control loop's latest view; nil before the first
	// pass (then /readyz is 503 and the queue is empty).
	View func() *loop.View
	// Ready says why the actuator cannot do its work (a failing pass, the
	// scheduler refusing actions, the predictor or publisher failing);
	// /readyz answers 503 with it. Nil: ready once there is a View.
	Ready func() error
	// Predictor answers /v1/predict; nil or failing: the time limit.
	Predictor loop.Predictor
	// Actions reads the audit table; nil: /v1/actions answers 503.
	Actions func(ctx context.Context, q audit.Query) ([]audit.Record, error)
	// Pass runs a pass of the control loop; nil: /v1/passes answers 503.
	Pass func(ctx context.Context) (loop.Report, error)
	// Cluster is the cluster of the audit rows listed, and whose history
	// of users and partitions /v1/predict reads.
	Cluster string
	// UnknownDuration is assumed for a spec with neither a prediction nor
	// a time limit (the loop's Config.UnknownDuration).
	UnknownDuration time.Duration
	// QSSF ranks a spec when there is no view yet.
	QSSF qssf.Config
	// Token is the bearer token; "" disables the endpoints that change
	// anything.
	Token string
	// Gatherer serves /metrics; nil: no /metrics.
	Gatherer prometheus.Gatherer
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// ReadToken returns the token from cfg.TokenFile or, without one, from
// $HELIOSTAT_ACTUATOR_TOKEN, without the whitespace around it (which no
// Authorization header can carry). A token shorter than 16 bytes is refused,
// and so is a file or a set variable that holds only whitespace: an
// operator who gave a token meant to enable the endpoints that change
// anything, not to leave them off (403) without a word. Neither given: "".
func ReadToken(cfg Config, getenv func(string) string, readFile func(string) ([]byte, error)) (string, error) {
	raw, from := getenv("HELIOSTAT_ACTUATOR_TOKEN"), "$HELIOSTAT_ACTUATOR_TOKEN"
	if cfg.TokenFile != "" {
		b, err := readFile(cfg.TokenFile)
		if err != nil {
			return "", fmt.Errorf("api: read --actuator.token-file: %w", err)
		}
		raw, from = string(b), "--actuator.token-file "+cfg.TokenFile
	}
	tok := strings.TrimSpace(raw)
	switch {
	case raw != "" && tok == "":
		return "", fmt.Errorf("api: %s holds only whitespace, no bearer token", from)
	case raw == "" && cfg.TokenFile != "":
		return "", fmt.Errorf("api: %s is empty, no bearer token", from)
	case tok != "" && len(tok) < 16:
		return "", errors.New("api: the bearer token is shorter than 16 bytes")
	}
	return tok, nil
}

// Server is the API's HTTP handler.
type Server struct {
	cfg    Config
	d      Deps
	logger *slog.Logger
	mux    *http.ServeMux
	m      *metrics
	token  [32]byte

	// noRoute answers a request for no route.
	noRoute http.Handler

	// actionsCache keeps /v1/actions answers (nil: not cached).
	actionsCache *queryCache

	// Answers computed from one View are reused until the View changes
	// (views are immutable).
	viewMu    sync.Mutex
	viewOf    *loop.View
	viewCache map[string][]byte
}

// fromView returns the answer under key for v, computing it with make on a
// miss.
func (s *Server) fromView(v *loop.View, key string, make func() any) []byte {
	s.viewMu.Lock()
	if s.viewCache == nil || s.viewOf != v || len(s.viewCache) > 256 {
		s.viewOf, s.viewCache = v, map[string][]byte{}
	}
	b, ok := s.viewCache[key]
	s.viewMu.Unlock()
	if ok {
		return b
	}
	b, err := json.Marshal(make())
	if err != nil {
		b = []byte(`{"error":"encode response"}`)
	}
	b = append(b, '\n')
	s.viewMu.Lock()
	if s.viewOf == v {
		s.viewCache[key] = b
	}
	s.viewMu.Unlock()
	return b
}

// Routes lists every route the server answers, as "METHOD /path": the
// OpenAPI file must document each.
var Routes = []string{
	"POST /v1/predict",
	"GET /v1/queue",
	"GET /v1/power-plan",
	"GET /v1/actions",
	"POST /v1/passes",
	"GET /v1/openapi.yaml",
	"GET /healthz",
	"GET /readyz",
	"GET /metrics",
}

// New returns a Server. Metrics are registered on reg unless it is nil.
func New(cfg Config, d Deps, logger *slog.Logger, reg prometheus.Registerer) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = 64 << 10
	}
	if cfg.ActionsCacheTTL == 0 {
		cfg.ActionsCacheTTL = time.Second
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.View == nil {
		d.View = func() *loop.View { return nil }
	}
	if d.UnknownDuration == 0 {
		d.UnknownDuration = 24 * time.Hour
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, d: d, logger: logger, mux: http.NewServeMux(), m: m}
	if cfg.ActionsCacheTTL > 0 {
		s.actionsCache = newQueryCache(cfg.ActionsCacheTTL, 2, d.Now)
	}
	if d.Token != "" {
		s.token = sha256.Sum256([]byte(d.Token))
	}
	handlers := map[string]http.HandlerFunc{
		"POST /v1/predict":     s.predict,
		"GET /v1/queue":        s.queue,
		"GET /v1/power-plan":   s.powerPlan,
		"GET /v1/actions":      s.actions,
		"POST /v1/passes":      s.auth(s.pass),
		"GET /v1/openapi.yaml": s.openapi,
		"GET /healthz":         s.healthz,
		"GET /readyz":          s.readyz,
		"GET /metrics":         s.metrics,
	}
	// Patterns without methods, so that a wrong method gets a JSON 405
	// rather than the mux's plain-text one.
	for _, route := range Routes {
		method, path, _ := strings.Cut(route, " ")
		h := handlers[route]
		s.mux.Handle(path, s.instrument(path, func(w http.ResponseWriter, r *http.Request) {
			if r.Method != method && !(method == http.MethodGet && r.Method == http.MethodHead) {
				w.Header().Set("Allow", method)
				writeError(w, http.StatusMethodNotAllowed, "", "method "+r.Method+" not allowed on "+path+"; use "+method)
				return
			}
			h(w, r)
		}))
	}
	s.noRoute = s.instrument("other", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "", "no route "+r.URL.Path)
	})
	s.mux.Handle("/", s.noRoute)
	return s, nil
}

// ServeHTTP serves the API. A path that is not clean ("/v1//queue",
// "/v1/./queue") is no route: the mux would answer it with a text/html
// redirect to the clean one.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p := r.URL.Path; p != path.Clean(p) {
		s.noRoute.ServeHTTP(w, r)
		return
	}
	s.mux.ServeHTTP(w, r)
}

func (s *Server) instrument(route string, h http.HandlerFunc) http.Handler {
	// The route's series are looked up once, not per request.
	dur := s.m.duration.WithLabelValues(route)
	var byClass [6]prometheus.Counter
	for c := 1; c < len(byClass); c++ {
		byClass[c] = s.m.requests.WithLabelValues(route, codeClass(c*100))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		begin := time.Now()
		sw := web.NewStatusRecorder(w)
		h(sw, r)
		if c := sw.Code / 100; c >= 1 && c < len(byClass) {
			byClass[c].Inc()
		} else {
			s.m.requests.WithLabelValues(route, codeClass(sw.Code)).Inc()
		}
		dur.Observe(time.Since(begin).Seconds())
	})
}

func codeClass(c int) string {
	return strconv.Itoa(c/100) + "xx"
}

// auth wraps h with the bearer-token check.
func (s *Server) auth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.d.Token == "" {
			writeError(w, http.StatusForbidden, "Authorization", "disabled: no token configured (--actuator.token-file or $HELIOSTAT_ACTUATOR_TOKEN)")
			return
		}
		tok, ok := bearerToken(r.Header.Get("Authorization"))
		sum := sha256.Sum256([]byte(tok))
		if !ok || subtle.ConstantTimeCompare(sum[:], s.token[:]) != 1 {
			s.m.authFailures.Inc()
			w.Header().Set("WWW-Authenticate", `Bearer realm="heliostat"`)
			writeError(w, http.StatusUnauthorized, "Authorization", "missing or wrong bearer token")
			return
		}
		h(w, r)
	}
}

// bearerToken returns the token of an Authorization header of the Bearer
// scheme, whose name is matched in any case (RFC 9110, 11.1).
func bearerToken(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimLeft(tok, " "), true
}

// PredictResponse is the answer of POST /v1/predict.
type PredictResponse struct {
	PredictedS   float64 `json:"predicted_s"`
	LowerS       float64 `json:"lower_s"`
	UpperS       float64 `json:"upper_s"`
	GPUServiceS  float64 `json:"gpu_service_s"`
	Source       string  `json:"source"`
	ModelVersion uint64  `json:"model_version"`
	Note         string  `json:"note,omitempty"`
	// Rank is the place the job would take in the current pending queue,
	// from 1, of QueueLength (the queue with it).
	Rank        int       `json:"rank"`
	QueueLength int       `json:"queue_length"`
	Priority    int64     `json:"priority"`
	SubmitTime  time.Time `json:"submit_time"`
}

func (s *Server) predict(w http.ResponseWriter, r *http.Request) {
	// No parameter is listed: one is refused, not ignored.
	if _, err := parseQuery(r.URL.RawQuery, 0, 0); err != nil {
		s.badRequest(w, err)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		// The type is matched in any case, with any parameters (RFC 9110, 8.3.1).
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			s.badRequest(w, &fieldError{Field: "Content-Type", Reason: "want application/json, got " + ct, Code: http.StatusUnsupportedMediaType})
			return
		}
	}
	req, submit, err := decodePredict(r.Body, s.cfg.MaxBodyBytes)
	if err != nil {
		s.badRequest(w, err)
		return
	}
	v := s.d.View()
	if submit.IsZero() {
		submit = s.d.Now().UTC().Truncate(time.Second)
		if v != nil {
			submit = v.At.UTC()
		}
	}
	limit := time.Duration(req.TimeLimitS * float64(time.Second))
	resp := PredictResponse{SubmitTime: submit}
	var note string
	if s.d.Predictor != nil {
		e, err := s.d.Predictor.Predict(live.Spec{Cluster: s.d.Cluster, User: req.User, Name: req.Name, Partition: req.Partition, GPUs: req.GPUs, TimeLimit: limit, Submit: submit, MemBytes: req.MemReqBytes, GPUType: req.GPUType})
		if err == nil {
			resp.PredictedS, resp.LowerS, resp.UpperS, resp.Source, resp.ModelVersion = e.PredictedS, e.LowerS, e.UpperS, loop.SourceModel, e.ModelVersion
		} else {
			note = "no model prediction: " + err.Error()
		}
	} else {
		note = "no predictor configured"
	}
	if resp.Source == "" {
		d := limit
		resp.Source = loop.SourceTimeLimit
		if d <= 0 {
			d, resp.Source = s.d.UnknownDuration, loop.SourceUnknown
		}
		resp.PredictedS, resp.UpperS = d.Seconds(), d.Seconds()
		resp.Note = note
	}
	j := qssf.Job{User: req.User, VC: req.Partition, GPUs: req.GPUs, Submit: submit, Predicted: time.Duration(resp.PredictedS * float64(time.Second))}
	resp.GPUServiceS = j.Service()
	c := s.d.QSSF
	if v != nil {
		c = v.QSSF
		resp.Rank, resp.QueueLength = v.RankOf(&j)
	} else {
		resp.Rank, resp.QueueLength = 1, 1
	}
	resp.Priority = loop.Priority(c, &j)
	writeJSON(w, http.StatusOK, resp)
}

// QueueResponse is the answer of GET /v1/queue.
type QueueResponse struct {
	// At is the latest pass's; absent before the first.
	At      time.Time         `json:"at,omitzero"`
	Adapter string            `json:"adapter"`
	Apply   bool              `json:"apply"`
	Total   int               `json:"total"`
	Jobs    []loop.QueueEntry `json:"jobs"`
}

func (s *Server) queue(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r.URL.RawQuery, 100, 10000, "limit", "partition")
	if err != nil {
		s.badRequest(w, err)
		return
	}
	v := s.d.View()
	writeRaw(w, http.StatusOK, s.fromView(v, "queue "+strconv.Itoa(q.Limit)+" "+strconv.Quote(q.Partition), func() any {
		resp := QueueResponse{Jobs: []loop.QueueEntry{}}
		if v == nil {
			return resp
		}
		resp.At, resp.Adapter, resp.Apply = v.At, v.Adapter, v.Apply
		for _, e := range v.Queue {
			if q.Partition != "" && e.Partition != q.Partition && !slices.Contains(adapter.SplitPartitions(e.Partition), q.Partition) {
				continue // a job submitted to several partitions is in each
			}
			resp.Total++
			if len(resp.Jobs) < q.Limit {
				resp.Jobs = append(resp.Jobs, e)
			}
		}
		return resp
	}))
}

// PowerPlanResponse is the answer of GET /v1/power-plan.
type PowerPlanResponse struct {
	// At is the latest pass's; absent before the first.
	At      time.Time       `json:"at,omitzero"`
	Adapter string          `json:"adapter"`
	Apply   bool            `json:"apply"`
	Plans   []loop.PoolPlan `json:"plans"`
}

func (s *Server) powerPlan(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r.URL.RawQuery, 0, 0, "partition")
	if err != nil {
		s.badRequest(w, err)
		return
	}
	v := s.d.View()
	writeRaw(w, http.StatusOK, s.fromView(v, "power-plan "+strconv.Quote(q.Partition), func() any {
		resp := PowerPlanResponse{Plans: []loop.PoolPlan{}}
		if v == nil {
			return resp
		}
		resp.At, resp.Adapter, resp.Apply = v.At, v.Adapter, v.Apply
		for _, p := range v.Plans {
			if q.Partition == "" || p.Partition == q.Partition {
				resp.Plans = append(resp.Plans, withActionLists(p))
			}
		}
		return resp
	}))
}

// withActionLists returns p with its plan's power_down and power_up as []
// rather than null when empty (ces leaves them nil), as openapi.yaml
// documents them. The view's plan is shared, so it is copied.
func withActionLists(p loop.PoolPlan) loop.PoolPlan {
	if p.Plan == nil || p.Plan.PowerDown != nil && p.Plan.PowerUp != nil {
		return p
	}
	plan := *p.Plan
	if plan.PowerDown == nil {
		plan.PowerDown = []ces.Action{}
	}
	if plan.PowerUp == nil {
		plan.PowerUp = []ces.Action{}
	}
	p.Plan = &plan
	return p
}

// ActionsResponse is the answer of GET /v1/actions.
type ActionsResponse struct {
	Actions []audit.Record `json:"actions"`
	// Next is the before= of the next page, present when this page is full
	// (there may be more).
	Next string `json:"next,omitempty"`
}

func (s *Server) actions(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r.URL.RawQuery, 100, audit.MaxLimit, "limit", "since", "kind", "target", "before")
	if err != nil {
		s.badRequest(w, err)
		return
	}
	if s.d.Actions == nil {
		writeError(w, http.StatusServiceUnavailable, "", "no audit table configured")
		return
	}
	aq := audit.Query{Cluster: s.d.Cluster, Since: q.Since, Kind: q.Kind, Target: q.Target, Limit: q.Limit, Before: q.Before}
	fetch := func(ctx context.Context) ([]byte, error) {
		recs, err := s.d.Actions(ctx, aq)
		if err != nil {
			return nil, err
		}
		if recs == nil {
			recs = []audit.Record{}
		}
		body, err := json.Marshal(ActionsResponse{Actions: recs, Next: audit.Next(aq, recs).String()})
		if err != nil {
			return nil, fmt.Errorf("encode actions: %w", err)
		}
		return append(body, '\n'), nil
	}
	var body []byte
	if s.actionsCache != nil {
		body, err = s.actionsCache.get(r.Context(), fmt.Sprintf("%d|%d|%q|%q|%q", aq.Limit, aq.Since.UnixNano(), aq.Kind, aq.Target, aq.Before), fetch)
	} else {
		body, err = fetch(r.Context())
	}
	if err != nil {
		s.logger.Warn("list actions", "err", err)
		writeError(w, http.StatusServiceUnavailable, "", "audit table unavailable: "+err.Error())
		return
	}
	writeRaw(w, http.StatusOK, body)
}

// PassWriteTimeout is how long POST /v1/passes may take to answer, in place
// of the server's write timeout: two passes' reads and actions (one it may
// wait for, then its own), with room to spare.
const PassWriteTimeout = 10 * time.Minute

// PassResponse is the answer of POST /v1/passes.
type PassResponse struct {
	At      time.Time      `json:"at"`
	Pending int            `json:"pending"`
	Actions []audit.Record `json:"actions"`
	// AuditError says why the actions' outcomes could not be written to
	// the audit table (a later pass writes them); absent when they were.
	AuditError string `json:"audit_error,omitempty"`
}

func (s *Server) pass(w http.ResponseWriter, r *http.Request) {
	// No parameter is listed: one (?dry_run=true) is refused rather than
	// ignored by a pass that applies its actions.
	if _, err := parseQuery(r.URL.RawQuery, 0, 0); err != nil {
		s.badRequest(w, err)
		return
	}
	// -1 is a body of unknown length (chunked): a body all the same.
	if r.ContentLength != 0 {
		s.badRequest(w, bad("body", "takes no body"))
		return
	}
	if s.d.Pass == nil {
		writeError(w, http.StatusServiceUnavailable, "", "no control loop configured")
		return
	}
	// A pass can outlast the server's write timeout: it first waits for a
	// scheduled pass to end, then sends its actions for up to
	// loop.ActTimeout. The client must still hear what a pass that ran did,
	// or it might ask for another.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(PassWriteTimeout))
	rep, err := s.d.Pass(r.Context())
	resp := PassResponse{At: rep.At, Pending: rep.Pending, Actions: rep.Actions}
	switch {
	case errors.Is(err, loop.ErrOutcomesNotRecorded):
		// The actions were sent: the client must hear which, or it
		// might ask for them again.
		resp.AuditError = err.Error()
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, "", "pass failed: "+err.Error())
		return
	}
	if resp.Actions == nil {
		resp.Actions = []audit.Record{}
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) openapi(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write(OpenAPI)
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	if err := s.Ready(); err != nil {
		writeError(w, http.StatusServiceUnavailable, "", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// Ready returns nil when /readyz answers 200, and otherwise the error its
// 503 carries (what the actuator command's heliostat_ready gauge follows).
func (s *Server) Ready() error {
	// What Deps.Ready says comes first: before a view, it says why there
	// is none (a first pass that failed, and how).
	if s.d.Ready != nil {
		if err := s.d.Ready(); err != nil {
			return fmt.Errorf("not ready:\n%w", err)
		}
	}
	if s.d.View() == nil {
		return errors.New("no pass of the control loop yet")
	}
	return nil
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	if s.cfg.MetricsAt != "" {
		writeError(w, http.StatusNotFound, "", "metrics are served at "+s.cfg.MetricsAt+", not on the API's port")
		return
	}
	if s.d.Gatherer == nil {
		writeError(w, http.StatusNotFound, "", "no metrics registry")
		return
	}
	promhttp.HandlerFor(s.d.Gatherer, promhttp.HandlerOpts{}).ServeHTTP(w, r)
}

func (s *Server) badRequest(w http.ResponseWriter, err error) {
	if errors.Is(err, errTooLarge) {
		s.m.badRequests.WithLabelValues("body").Inc()
		writeError(w, http.StatusRequestEntityTooLarge, "body", fmt.Sprintf("larger than %d bytes", s.cfg.MaxBodyBytes))
		return
	}
	var fe *fieldError
	if errors.As(err, &fe) {
		s.m.badRequests.WithLabelValues(metricField(fe.Field)).Inc()
		writeError(w, cmp.Or(fe.Code, http.StatusBadRequest), fe.Field, fe.Reason)
		return
	}
	s.m.badRequests.WithLabelValues("other").Inc()
	writeError(w, http.StatusBadRequest, "", err.Error())
}

// metricField keeps the field label's values to the known fields.
func metricField(f string) string {
	switch f {
	case "user", "name", "partition", "gpus", "time_limit_s", "submit_time", "mem_req_bytes", "gpu_type", "body", "limit", "since", "kind", "target",
		"before", "query", "Content-Type":
		return f
	}
	return "other"
}

// ErrorResponse is every error's body.
type ErrorResponse struct {
	Error string `json:"error"`
	Field string `json:"field,omitempty"`
}

func writeError(w http.ResponseWriter, code int, field, msg string) {
	writeJSON(w, code, ErrorResponse{Error: msg, Field: field})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"error":"encode response"}`)
	}
	writeRaw(w, code, append(b, '\n'))
}

// Header values shared by every answer (net/http only reads them).
var (
	headerJSON    = []string{"application/json"}
	headerNoStore = []string{"no-store"}
)

func writeRaw(w http.ResponseWriter, code int, b []byte) {
	h := w.Header()
	// Canonical keys set directly: no canonicalization or allocation.
	h["Content-Type"] = headerJSON
	h["Cache-Control"] = headerNoStore
	// A known length lets net/http send the answer unchunked.
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(code)
	_, _ = w.Write(b)
}
