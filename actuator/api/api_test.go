package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"github.com/heliostat-dev/heliostat/actuator/audit"
	"github.com/heliostat-dev/heliostat/actuator/ces"
	"github.com/heliostat-dev/heliostat/actuator/loop"
	"github.com/heliostat-dev/heliostat/actuator/qssf"
	"github.com/heliostat-dev/heliostat/predictor/live"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func TestMain(m *testing.M) { os.Exit(schematest.Main(m)) }

const token = "s3cret-token-of-32-bytes-0123456"

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// fixedView is a queue of three jobs in two partitions and the plan of one
// partition with an idle node to power down.
func fixedView(t testing.TB) *loop.View {
	t.Helper()
	c := qssf.Config{AgingRate: 1}
	jobs := []qssf.Job{
		{ID: "101", User: "alice", VC: "batch", GPUs: 8, Submit: t0.Add(-time.Hour), Predicted: 10 * time.Hour},
		{ID: "102", User: "bob", VC: "batch", GPUs: 1, Submit: t0.Add(-30 * time.Minute), Predicted: 20 * time.Minute},
		{ID: "103", User: "carol", VC: "debug", GPUs: 2, Submit: t0.Add(-time.Minute), Predicted: time.Hour},
	}
	var queue []loop.QueueEntry
	for _, r := range c.Rank(t0, jobs) {
		queue = append(queue, loop.QueueEntry{Rank: r.Rank, JobID: r.ID, User: r.User, Partition: r.VC, GPUs: r.GPUs, Submit: r.Submit,
			PredictedS: r.Predicted.Seconds(), UpperS: r.Predicted.Seconds(), Source: loop.SourceTimeLimit, GPUServiceS: r.Job.Service(),
			Score: r.Score, Priority: 4294901700, TargetPriority: loop.Priority(c, &r.Job), Managed: r.VC == "batch"})
	}
	cc := ces.DefaultConfig()
	cc.DownDelay = 0
	plan, err := cc.Plan(ces.Input{Now: t0, Demand: 1,
		Nodes:    []ces.Node{{Name: "gpu1", Powered: true, Busy: true}, {Name: "gpu2", Powered: true}, {Name: "gpu3", Powered: true}},
		Forecast: ces.Forecast{Issued: t0, Horizon: 11 * time.Minute, Point: 1, Max: 1, Upper: 1}})
	if err != nil {
		t.Fatal(err)
	}
	plans := []loop.PoolPlan{{Partition: "batch", Managed: true, Nodes: 3, Plan: &plan}, {Partition: "debug", Nodes: 2, Unusable: []string{"dbg1"}, Fixed: []string{"dbg2"}, Error: "no usable node"}}
	return loop.NewView(t0, "slurm", false, c, queue, plans)
}

type fixture struct {
	srv    *Server
	reg    *prometheus.Registry
	passes int
}

func newFixture(t *testing.T, withView bool) *fixture {
	t.Helper()
	cfg, conn := schematest.Database(t)
	al, err := audit.New(conn, cfg.Database, func() time.Time { return t0.Add(time.Second) })
	if err != nil {
		t.Fatal(err)
	}
	v1, v2 := int64(3999990000), int64(4294901700)
	recs := []audit.Record{
		{Cluster: "c", ID: "0001", Adapter: "slurm", Kind: "set_priority", Target: "102", Partition: "batch", Value: &v1, Previous: &v2,
			Reason: "qssf rank 1 of 3", Basis: `{"rank":1}`, DecidedAt: t0.Add(-time.Minute), Outcome: audit.Applied},
		{Cluster: "c", ID: "0002", Adapter: "slurm", Kind: "power_down", Target: "gpu2", Partition: "batch",
			Reason: "idle", Basis: `{"target":1}`, DryRun: true, DecidedAt: t0, Outcome: audit.Skipped, Error: "dry run"},
	}
	if err := al.Plan(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	if err := al.Settle(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	f := &fixture{reg: prometheus.NewRegistry()}
	view := fixedView(t)
	d := Deps{
		View: func() *loop.View {
			if withView {
				return view
			}
			return nil
		},
		Actions: al.List,
		Pass: func(context.Context) (loop.Report, error) {
			f.passes++
			return loop.Report{At: t0, Pending: 3}, nil
		},
		Cluster: "c", Token: token, Gatherer: f.reg, Now: func() time.Time { return t0 },
	}
	f.srv, err = New(Config{MaxBodyBytes: 1024, ActionsCacheTTL: -1}, d, nil, f.reg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) do(method, target, body string, hdr ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	f.srv.ServeHTTP(w, r)
	return w
}

// TestGolden checks each endpoint's answer, and the errors, against
// testdata/*.golden (status line, then the body), and against what
// openapi.yaml says of that answer; -update rewrites the golden files.
func TestGolden(t *testing.T) {
	f := newFixture(t, true)
	sp := loadSpec(t)
	auth := []string{"Authorization", "Bearer " + token}
	for _, tc := range []struct {
		name, method, target, body string
		hdr                        []string
	}{
		{"predict", "POST", "/v1/predict", `{"user": "dave", "name": "train", "partition": "batch", "gpus": 4, "time_limit_s": 1800, "submit_time": "2026-03-02T09:00:00Z"}`, nil},
		{"predict_no_limit", "POST", "/v1/predict", `{"user": "dave", "gpus": 1}`, nil},
		{"queue", "GET", "/v1/queue", "", nil},
		{"queue_partition_limit", "GET", "/v1/queue?partition=batch&limit=1", "", nil},
		{"power_plan", "GET", "/v1/power-plan", "", nil},
		{"power_plan_partition", "GET", "/v1/power-plan?partition=debug", "", nil},
		{"actions", "GET", "/v1/actions", "", nil},
		{"actions_filtered", "GET", "/v1/actions?kind=power_down&since=2026-03-02T09:00:00Z&limit=5", "", nil},
		{"actions_page", "GET", "/v1/actions?limit=1", "", nil},
		{"actions_next_page", "GET", "/v1/actions?limit=1&before=1772442000_0002", "", nil},
		{"err_before", "GET", "/v1/actions?before=0002", "", nil},
		{"passes", "POST", "/v1/passes", "", auth},
		{"healthz", "GET", "/healthz", "", nil},
		{"readyz", "GET", "/readyz", "", nil},
		{"err_unknown_field", "POST", "/v1/predict", `{"user": "x", "gpu": 1}`, nil},
		{"err_gpus", "POST", "/v1/predict", `{"user": "x", "gpus": -1}`, nil},
		{"err_gpus_type", "POST", "/v1/predict", `{"user": "x", "gpus": "two"}`, nil},
		{"err_syntax", "POST", "/v1/predict", `{"user": "x",`, nil},
		{"err_too_large", "POST", "/v1/predict", `{"user": "` + strings.Repeat("x", 2000) + `"}`, nil},
		{"err_content_type", "POST", "/v1/predict", `user=x`, []string{"Content-Type", "application/x-www-form-urlencoded"}},
		{"err_limit", "GET", "/v1/queue?limit=0", "", nil},
		{"err_param", "GET", "/v1/actions?sort=asc", "", nil},
		{"err_kind", "GET", "/v1/actions?kind=reboot", "", nil},
		{"err_no_token", "POST", "/v1/passes", "", nil},
		{"err_wrong_token", "POST", "/v1/passes", "", []string{"Authorization", "Bearer " + strings.Repeat("x", 32)}},
		{"err_method", "GET", "/v1/predict", "", nil},
		{"err_route", "GET", "/v2/queue", "", nil},
		{"err_unclean_path", "GET", "/v1//queue", "", nil},
		{"err_query_escape", "GET", "/v1/actions?kind=%zz", "", nil},
		{"err_since_range", "GET", "/v1/actions?since=2106-02-07T06:28:16Z", "", nil},
		{"err_field_case", "POST", "/v1/predict", `{"user": "dave", "GPUS": 4}`, nil},
		{"err_duplicate_field", "POST", "/v1/predict", `{"user": "dave", "gpus": 4, "gpus": 400}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := f.do(tc.method, tc.target, tc.body, tc.hdr...)
			got := fmt.Sprintf("%d\n%s", w.Code, indent(t, w.Body.Bytes()))
			path := filepath.Join("testdata", tc.name+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("%s %s =\n%s\nwant (%s)\n%s", tc.method, tc.target, got, path, want)
			}
			if ct := w.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q; want application/json", ct)
			}
			checkAnswer(t, sp, tc.method, tc.target, w)
		})
	}
}

func indent(t *testing.T, b []byte) string {
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		t.Fatalf("response is not JSON: %v: %s", err, b)
	}
	return out.String()
}

// TestAuth: the endpoint that changes anything runs only with the right
// token, and not at all when none is configured.
func TestAuth(t *testing.T) {
	f := newFixture(t, true)
	for _, tc := range []struct {
		hdr  string
		want int
	}{
		{"", http.StatusUnauthorized},
		{"Bearer", http.StatusUnauthorized},
		{"Basic " + token, http.StatusUnauthorized},
		{"Bearer " + token + "x", http.StatusUnauthorized},
		{"Bearer ", http.StatusUnauthorized},
		{token, http.StatusUnauthorized},
		{"Bearer " + token, http.StatusOK},
		// The scheme's name is matched in any case (RFC 9110, 11.1).
		{"bearer " + token, http.StatusOK},
		{"BEARER  " + token, http.StatusOK},
	} {
		w := f.do("POST", "/v1/passes", "", "Authorization", tc.hdr)
		if w.Code != tc.want {
			t.Errorf("Authorization %q: %d; want %d", tc.hdr, w.Code, tc.want)
		}
		if tc.want == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("Authorization %q: no WWW-Authenticate", tc.hdr)
		}
	}
	if f.passes != 3 {
		t.Errorf("passes run %d; want 3", f.passes)
	}
	f.srv.d.Token = ""
	if w := f.do("POST", "/v1/passes", "", "Authorization", "Bearer "+token); w.Code != http.StatusForbidden {
		t.Errorf("no token configured: %d; want 403", w.Code)
	}
	if w := f.do("POST", "/v1/passes", "x", "Authorization", "Bearer "+token); w.Code == http.StatusOK {
		t.Errorf("pass with a body: %d; want an error", w.Code)
	}
	for _, tc := range []struct {
		file, env string
		want      string
		err       bool
	}{
		{"", "", "", false},
		{"", token, token, false},
		{"f", "other-token-ignored-xx", token, false},
		{"", "short", "", true},
		{"missing", "", "", true},
		// Given but blank: an error, not endpoints left off.
		{"", " \n", "", true},
		{"blank", "", "", true},
		{"empty", token, "", true},
	} {
		got, err := ReadToken(Config{TokenFile: tc.file}, func(string) string { return tc.env }, func(name string) ([]byte, error) {
			switch name {
			case "f":
				return []byte(token + "\n"), nil
			case "blank":
				return []byte("\n\t \n"), nil
			case "empty":
				return nil, nil
			}
			return nil, os.ErrNotExist
		})
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("ReadToken(file %q, env %q) = %q, %v; want %q, error %v", tc.file, tc.env, got, err, tc.want, tc.err)
		}
	}
}

// TestValidation names the field at fault for each bad request.
func TestValidation(t *testing.T) {
	f := newFixture(t, true)
	for _, tc := range []struct {
		method, target, body string
		code                 int
		field                string
	}{
		{"POST", "/v1/predict", ``, 400, "body"},
		{"POST", "/v1/predict", `[]`, 400, "body"},
		{"POST", "/v1/predict", `{}`, 400, "user"},
		{"POST", "/v1/predict", `{"user": " "}`, 400, "user"},
		{"POST", "/v1/predict", `{"user": "` + strings.Repeat("u", 300) + `"}`, 400, "user"},
		{"POST", "/v1/predict", `{"user": "u", "name": "` + "\xff" + `"}`, 400, "body"},
		{"POST", "/v1/predict", `{"user": "u", "gpus": 100001}`, 400, "gpus"},
		{"POST", "/v1/predict", `{"user": "u", "gpus": 1.5}`, 400, "gpus"},
		{"POST", "/v1/predict", `{"user": "u", "time_limit_s": -1}`, 400, "time_limit_s"},
		{"POST", "/v1/predict", `{"user": "u", "time_limit_s": 1e300}`, 400, "time_limit_s"},
		{"POST", "/v1/predict", `{"user": "u", "mem_req_bytes": -1}`, 400, "mem_req_bytes"},
		{"POST", "/v1/predict", `{"user": "u", "mem_req_bytes": 1125899906842625}`, 400, "mem_req_bytes"},
		{"POST", "/v1/predict", `{"user": "u", "mem_req_bytes": 1.5e9}`, 400, "mem_req_bytes"},
		{"POST", "/v1/predict", `{"user": "u", "gpu_type": "a100 "}`, 400, "gpu_type"},
		{"POST", "/v1/predict", `{"user": "u", "gpu_type": "a100,v100"}`, 400, "gpu_type"},
		{"POST", "/v1/predict", `{"user": "u", "gpu_type": "` + strings.Repeat("a", 65) + `"}`, 400, "gpu_type"},
		{"POST", "/v1/predict", `{"user": "u", "gpu_type": 100}`, 400, "gpu_type"},
		{"POST", "/v1/predict", `{"user": "u", "submit_time": "yesterday"}`, 400, "submit_time"},
		{"POST", "/v1/predict", `{"user": "u", "submit_time": "1970-01-01T00:00:00Z"}`, 400, "submit_time"},
		{"POST", "/v1/predict", `{"user": "u", "partition": 3}`, 400, "partition"},
		{"POST", "/v1/predict", `{"user": "u", "extra": true}`, 400, "extra"},
		{"POST", "/v1/predict", `{"user": "u"} {"user": "v"}`, 400, "body"},
		{"POST", "/v1/predict", `{"user": "u"} x`, 400, "body"},
		{"GET", "/v1/queue?limit=10001", "", 400, "limit"},
		{"GET", "/v1/queue?limit=abc", "", 400, "limit"},
		{"GET", "/v1/queue?limit=1&limit=2", "", 400, "limit"},
		{"GET", "/v1/queue?since=x", "", 400, "since"},
		{"GET", "/v1/power-plan?limit=2", "", 400, "limit"},
		{"GET", "/v1/actions?since=-5", "", 400, "since"},
		{"GET", "/v1/actions?since=tomorrow", "", 400, "since"},
		{"GET", "/v1/actions?kind=x", "", 400, "kind"},
		{"GET", "/v1/actions?limit=10001", "", 400, "limit"},
		{"GET", "/v1/actions?before=x_0002", "", 400, "before"},
		// Names are matched exactly: encoding/json alone takes "USER" for
		// "user", a later "Gpus" over "gpus", and "time_limit_\u017f" (the
		// long s) for "time_limit_s".
		{"POST", "/v1/predict", `{"USER": "dave", "GPUS": 4}`, 400, "USER"},
		{"POST", "/v1/predict", `{"user": "dave", "gpus": 4, "Gpus": 400}`, 400, "Gpus"},
		{"POST", "/v1/predict", `{"user": "dave", "time_limit_\u017f": 60}`, 400, "time_limit_\u017f"},
		// A name given twice is refused, not read as its last value; also
		// when one of the two is escaped.
		{"POST", "/v1/predict", `{"user": "dave", "gpus": 4, "gpus": 400}`, 400, "gpus"},
		{"POST", "/v1/predict", `{"user": "dave", "\u0075ser": "eve"}`, 400, "user"},
		{"POST", "/v1/predict", `{"user": "dave", "name": null, "name": "x"}`, 400, "name"},
		{"POST", "/v1/predict", `{"user": "dave", "gpus": 4, "Gpus": 1, "gpus": 400}`, 400, "Gpus"},
		// maxLength counts characters; submit_time's years are UTC's.
		{"POST", "/v1/predict", `{"user": "` + strings.Repeat("\u00fc", 257) + `"}`, 400, "user"},
		{"POST", "/v1/predict", `{"user": "u", "submit_time": "2000-01-01T00:30:00+01:00"}`, 400, "submit_time"},
		{"POST", "/v1/predict", `{"user": "u", "submit_time": "2201-01-01T00:00:00Z"}`, 400, "submit_time"},
		// A query that does not parse is refused, not read in part (which
		// dropped the filter and listed everything).
		{"GET", "/v1/actions?kind=%zz", "", 400, "kind"},
		{"GET", "/v1/actions?kind=power_down;", "", 400, "kind"},
		{"GET", "/v1/queue?limit=1;", "", 400, "limit"},
		{"GET", "/v1/queue?partition=%zz", "", 400, "partition"},
		{"GET", "/v1/queue?%zz=1", "", 400, "query"},
		{"GET", "/v1/queue?a;b=1", "", 400, "query"},
		{"GET", "/v1/queue?partition=" + strings.Repeat("p", 257), "", 400, "partition"},
		// since beyond what a DateTime holds wrapped around to 1970 and
		// listed every action.
		{"GET", "/v1/actions?since=4294967296", "", 400, "since"},
		{"GET", "/v1/actions?since=2106-02-07T06:28:16Z", "", 400, "since"},
		{"GET", "/v1/actions?since=9999-01-01T00:00:00Z", "", 400, "since"},
		{"GET", "/v1/actions?since=1969-12-31T23:59:59Z", "", 400, "since"},
		// limit is a parameter of the lists only.
		{"GET", "/v1/power-plan?limit=1", "", 400, "limit"},
	} {
		w := f.do(tc.method, tc.target, tc.body)
		var e ErrorResponse
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
			t.Errorf("%s %s %q: body is not JSON: %s", tc.method, tc.target, tc.body, w.Body)
			continue
		}
		if w.Code != tc.code || e.Field != tc.field || e.Error == "" {
			t.Errorf("%s %s %.60q = %d %+v; want %d naming %q", tc.method, tc.target, tc.body, w.Code, e, tc.code, tc.field)
		}
	}
	// Good requests of every endpoint, and the metrics pass promlint.
	for _, target := range []string{"/v1/queue?limit=2&partition=batch", "/v1/actions?since=1772441000&target=gpu2", "/v1/openapi.yaml", "/metrics"} {
		if w := f.do("GET", target, ""); w.Code != 200 {
			t.Errorf("GET %s = %d %s", target, w.Code, w.Body)
		}
	}
	problems, err := promlint.NewWithMetricFamilies(mustGather(t, f.reg)).Lint()
	if err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %+v", err, problems)
	}
}

func mustGather(t *testing.T, g prometheus.Gatherer) []*dto.MetricFamily {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

// TestNotReady: before the loop's first pass /readyz is 503, the queue and
// the plans empty, without a time (once the zero time, year 1) and as
// openapi.yaml says; a prediction ranks first of one.
func TestNotReady(t *testing.T) {
	f := newFixture(t, false)
	if w := f.do("GET", "/readyz", ""); w.Code != http.StatusServiceUnavailable {
		t.Errorf("/readyz before a pass: %d; want 503", w.Code)
	}
	sp := loadSpec(t)
	for _, target := range []string{"/v1/queue", "/v1/power-plan"} {
		w := f.do("GET", target, "")
		var resp map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil || resp["at"] != nil {
			t.Errorf("GET %s before a pass = %d %s; want no \"at\"", target, w.Code, w.Body)
		}
		checkAnswer(t, sp, "GET", target, w)
	}
	w := f.do("GET", "/v1/queue", "")
	var q QueueResponse
	if err := json.Unmarshal(w.Body.Bytes(), &q); err != nil || w.Code != 200 || len(q.Jobs) != 0 {
		t.Errorf("/v1/queue before a pass: %d %s", w.Code, w.Body)
	}
	w = f.do("POST", "/v1/predict", `{"user": "u", "gpus": 2, "time_limit_s": 60}`)
	var p PredictResponse
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.Rank != 1 || p.QueueLength != 1 || p.GPUServiceS != 120 || p.Source != loop.SourceTimeLimit {
		t.Errorf("/v1/predict before a pass: %d %s", w.Code, w.Body)
	}
}

// TestReadyFollowsDeps: with a view, /readyz answers 503 with what
// Deps.Ready says is failing, and 200 again once it holds; Ready (what
// heliostat_ready follows) says the same.
func TestReadyFollowsDeps(t *testing.T) {
	view := fixedView(t)
	var failing error
	var v *loop.View
	srv, err := New(Config{}, Deps{View: func() *loop.View { return v }, Ready: func() error { return failing }, Now: func() time.Time { return t0 }}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	get := func() (int, string) {
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, httptest.NewRequest("GET", "/readyz", nil))
		var e ErrorResponse
		_ = json.Unmarshal(w.Body.Bytes(), &e)
		ready := ""
		if err := srv.Ready(); err != nil {
			ready = err.Error()
		}
		if ready != e.Error {
			t.Errorf("Ready() = %q; /readyz said %q", ready, e.Error)
		}
		return w.Code, e.Error
	}
	if code, e := get(); code != http.StatusServiceUnavailable || e != "no pass of the control loop yet" {
		t.Errorf("/readyz before a pass: %d %q; want 503", code, e)
	}
	failing = errors.New("actuator: failing for 1s (since 2026-03-02T09:00:00Z): loop: read scheduler: sinfo: exit status 1")
	if code, e := get(); code != http.StatusServiceUnavailable || e != "not ready:\n"+failing.Error() {
		t.Errorf("/readyz after a failed first pass: %d %q; want 503 naming the failure", code, e)
	}
	failing = nil
	v = view
	if code, _ := get(); code != http.StatusOK {
		t.Errorf("/readyz with nothing failing: %d; want 200", code)
	}
	failing = errors.New("actuator: failing for 42s (since 2026-03-02T09:00:00Z): loop: read scheduler: squeue: exit status 1")
	if code, e := get(); code != http.StatusServiceUnavailable || e != "not ready:\n"+failing.Error() {
		t.Errorf("/readyz with a failing pass: %d %q; want 503 naming it", code, e)
	}
	failing = nil
	if code, _ := get(); code != http.StatusOK {
		t.Errorf("/readyz after recovery: %d; want 200", code)
	}
}

// TestOpenAPICoversRoutes: openapi.yaml documents every route the server
// answers, and nothing else.
func TestOpenAPICoversRoutes(t *testing.T) {
	var documented []string
	sc := bufio.NewScanner(bytes.NewReader(OpenAPI))
	inPaths, path := false, ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "paths:":
			inPaths = true
		case inPaths && len(line) > 0 && line[0] != ' ':
			inPaths = false
		case inPaths && strings.HasPrefix(line, "  /") && strings.HasSuffix(line, ":"):
			path = strings.TrimSuffix(strings.TrimSpace(line), ":")
		case inPaths && path != "" && strings.HasPrefix(line, "    ") && !strings.HasPrefix(line, "     ") && strings.HasSuffix(line, ":"):
			m := strings.TrimSuffix(strings.TrimSpace(line), ":")
			if slices.Contains([]string{"get", "post", "put", "patch", "delete"}, m) {
				documented = append(documented, strings.ToUpper(m)+" "+path)
			}
		}
	}
	slices.Sort(documented)
	routes := slices.Sorted(slices.Values(Routes))
	if !slices.Equal(documented, routes) {
		t.Errorf("openapi.yaml documents\n%q\nthe server answers\n%q", documented, routes)
	}
	if !bytes.HasPrefix(OpenAPI, []byte("openapi: 3.")) {
		t.Error("openapi.yaml is not OpenAPI 3")
	}
	// Every route answers something other than 404.
	f := newFixture(t, true)
	for _, r := range Routes {
		m, p, _ := strings.Cut(r, " ")
		if w := f.do(m, p, "", "Authorization", "Bearer "+token); w.Code == http.StatusNotFound {
			t.Errorf("%s: 404", r)
		}
	}
}

func FuzzDecodePredict(f *testing.F) {
	for _, s := range []string{`{"user": "dave", "name": "train", "partition": "batch", "gpus": 4, "time_limit_s": 1800, "submit_time": "2026-03-02T09:00:00Z"}`,
		`{"user": "x", "gpus": "two"}`, `{"user":`, `{"user": "u"} x`,
		`{"USER": "dave", "GPUS": 4}`, `{"user": "dave", "gpus": 4, "Gpus": 400}`, `{"\u0075ser": "dave"}`, `{"\u0055SER": "dave"}`,
		`{ "name" : "a\"}, \"Gpus\": 1" , "user":"u" , "gpus" : 4 , "time_limit_s":null }`,
		`{"user": "dave", "gpus": 4, "gpus": 400}`, `{"user": "dave", "\u0075ser": "eve"}`, `{"user": "a\"", "name": "\"gpus\":1", "gpus": 1}`,
		`{"user": "dave", "gpus": 4, "mem_req_bytes": 68719476736}`, `{"user": "dave", "mem_req_bytes": -5}`,
		`{"user": "dave", "gpus": 8, "gpu_type": "h100"}`, `{"user": "dave", "gpu_type": "h100:8"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req, submit, err := decodePredict(bytes.NewReader(b), 4096)
		if err != nil {
			var fe *fieldError
			if !errors.As(err, &fe) && !errors.Is(err, errTooLarge) {
				t.Errorf("decodePredict error without a field: %v", err)
			}
			return
		}
		if req.User == "" || req.GPUs < 0 || req.GPUs > maxGPUs || req.TimeLimitS < 0 || !submit.IsZero() && submit.Year() < 2000 ||
			req.MemReqBytes < 0 || req.MemReqBytes > maxMemBytes || len(req.GPUType) > maxGPUType || strings.ContainsAny(req.GPUType, " ,:\x00") {
			t.Errorf("decodePredict accepted %+v", req)
		}
		// Every name exactly one of the request's, as encoding/json reads
		// the names.
		var names map[string]json.RawMessage
		if err := json.Unmarshal(b, &names); err != nil {
			t.Errorf("decodePredict accepted %q, not a JSON object: %v", b, err)
		}
		for name := range names {
			if !predictName([]byte(name)) {
				t.Errorf("decodePredict accepted %q, with the name %q", b, name)
			}
		}
		// No name twice: encoding/json keeps the last value of a name
		// given twice, which the map above cannot show.
		seen := map[string]bool{}
		for _, name := range objectNames(t, b) {
			if seen[name] {
				t.Errorf("decodePredict accepted %q, with the name %q twice", b, name)
			}
			seen[name] = true
		}
	})
}

// objectNames returns the names of the JSON object b, unescaped, in order,
// as json.Decoder reads them.
func objectNames(t *testing.T, b []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("%q: not a JSON object: %v %v", b, tok, err)
	}
	var names []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("%q: read a name: %v", b, err)
		}
		names = append(names, tok.(string))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%q: read the value of %q: %v", b, tok, err)
		}
	}
	return names
}

func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{"limit=5&since=2026-03-02T09:00:00Z&kind=power_down", "since=1772441000&target=gpu2", "limit=0", "x=1", "before=1772442000_0002&limit=1", "before=_",
		"kind=%zz", "kind=power_down;", "since=4294967296", "limit=1&&limit=2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := parseQuery(raw, 100, audit.MaxLimit, "limit", "since", "kind", "target", "before")
		if err != nil {
			var fe *fieldError
			if !errors.As(err, &fe) || fe.Field == "" {
				t.Errorf("parseQuery(%q) error without a field: %v", raw, err)
			}
			return
		}
		if _, err := url.ParseQuery(raw); err != nil {
			t.Errorf("parseQuery(%q) accepted a query url.ParseQuery refuses: %v", raw, err)
		}
		if q.Limit < 1 || q.Limit > audit.MaxLimit {
			t.Errorf("parseQuery(%q) limit %d", raw, q.Limit)
		}
		if !q.Since.IsZero() && (q.Since.Unix() < 0 || q.Since.Unix() > 1<<32-1) {
			t.Errorf("parseQuery(%q) since %v, which the audit table cannot hold", raw, q.Since)
		}
		if !q.Before.IsZero() && q.Before.ID == "" {
			t.Errorf("parseQuery(%q) cursor without an action id: %v", raw, q.Before)
		}
	})
}

// TestPassBody: POST /v1/passes takes no body, of a known length or not
// (chunked), and runs no pass when given one.
func TestPassBody(t *testing.T) {
	f := newFixture(t, true)
	for _, tc := range []struct {
		name    string
		body    string
		chunked bool
		want    int
	}{
		{"no body", "", false, http.StatusOK},
		{"body", "x", false, http.StatusBadRequest},
		{"chunked body", "x", true, http.StatusBadRequest},
		{"chunked, empty", "", true, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.passes
			r := httptest.NewRequest("POST", "/v1/passes", strings.NewReader(tc.body))
			r.Header.Set("Authorization", "Bearer "+token)
			if tc.chunked {
				r.ContentLength, r.TransferEncoding = -1, []string{"chunked"}
			}
			w := httptest.NewRecorder()
			f.srv.ServeHTTP(w, r)
			if w.Code != tc.want {
				t.Errorf("POST /v1/passes with body %q (chunked %v) = %d %s; want %d", tc.body, tc.chunked, w.Code, w.Body, tc.want)
			}
			if ran := f.passes - before; ran != 0 && tc.want != http.StatusOK {
				t.Errorf("POST /v1/passes with body %q ran %d passes; want none", tc.body, ran)
			}
		})
	}
}

// TestPassAuditError: a pass that sent its actions but could not record
// their outcomes answers 200 with the actions and audit_error, where it once
// answered 503 and hid what was applied; a pass that failed before acting
// still answers 503.
func TestPassAuditError(t *testing.T) {
	f := newFixture(t, true)
	v := int64(7)
	f.srv.d.Pass = func(context.Context) (loop.Report, error) {
		return loop.Report{At: t0, Pending: 1, Actions: []audit.Record{{Cluster: "c", ID: "0003", Kind: "set_priority", Target: "5", Value: &v,
				Outcome: audit.Applied, DecidedAt: t0, RecordedAt: t0}}},
			fmt.Errorf("%w (1 actions; retried next pass): %w", loop.ErrOutcomesNotRecorded, errors.New("connection refused"))
	}
	w := f.do("POST", "/v1/passes", "", "Authorization", "Bearer "+token)
	var got PassResponse
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Code != http.StatusOK || len(got.Actions) != 1 || got.Actions[0].Outcome != audit.Applied ||
		!strings.Contains(got.AuditError, "connection refused") {
		t.Errorf("POST /v1/passes, outcomes not recorded = %d %s; want 200 with the applied action and audit_error", w.Code, w.Body)
	}
	f.srv.d.Pass = func(context.Context) (loop.Report, error) {
		return loop.Report{}, errors.New("loop: read scheduler: squeue: exit status 1")
	}
	if w := f.do("POST", "/v1/passes", "", "Authorization", "Bearer "+token); w.Code != http.StatusServiceUnavailable {
		t.Errorf("POST /v1/passes, scheduler unreadable = %d %s; want 503", w.Code, w.Body)
	}
}

// TestBadRequestsCounted: every rejected request counts in
// heliostat_actuator_api_bad_requests_total under the field it names — a
// wrong Content-Type (415) and a body on POST /v1/passes among them.
func TestBadRequestsCounted(t *testing.T) {
	f := newFixture(t, true)
	for _, tc := range []struct {
		method, target, body string
		hdr                  []string
		code                 int
		field                string // the label
	}{
		{"POST", "/v1/predict", `{"user": "u"}`, []string{"Content-Type", "text/plain"}, 415, "Content-Type"},
		{"POST", "/v1/passes", "x", []string{"Authorization", "Bearer " + token}, 400, "body"},
		{"GET", "/v1/actions?before=x_0002", "", nil, 400, "before"},
		{"GET", "/v1/queue?=1", "", nil, 400, "query"},
		{"GET", "/v1/queue?what=1", "", nil, 400, "other"},
		{"POST", "/v1/predict", `{"user": "u", "gpus": 4, "gpus": 400}`, nil, 400, "gpus"},
	} {
		w := f.do(tc.method, tc.target, tc.body, tc.hdr...)
		if w.Code != tc.code {
			t.Errorf("%s %s = %d %s; want %d", tc.method, tc.target, w.Code, w.Body, tc.code)
		}
		if n := testutil.ToFloat64(f.srv.m.badRequests.WithLabelValues(tc.field)); n != 1 {
			t.Errorf("%s %s: bad_requests_total{field=%q} = %v; want 1", tc.method, tc.target, tc.field, n)
		}
	}
}

// TestPassOutlastsWriteTimeout: a pass that takes longer than the server's
// write timeout still gets its answer to the client.
func TestPassOutlastsWriteTimeout(t *testing.T) {
	f := newFixture(t, true)
	f.srv.d.Pass = func(context.Context) (loop.Report, error) {
		time.Sleep(700 * time.Millisecond)
		return loop.Report{At: t0, Pending: 3}, nil
	}
	ts := httptest.NewUnstartedServer(f.srv)
	ts.Config.WriteTimeout = 200 * time.Millisecond
	ts.Start()
	defer ts.Close()
	req, err := http.NewRequest("POST", ts.URL+"/v1/passes", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatalf("POST /v1/passes taking longer than the write timeout: %v; want its answer", err)
	}
	defer resp.Body.Close()
	var got PassResponse
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != http.StatusOK || got.Pending != 3 {
		t.Errorf("POST /v1/passes = %d, %+v, %v; want 200 with pending 3", resp.StatusCode, got, err)
	}
}

// TestQueueSeveralPartitions: GET /v1/queue?partition= lists a job
// submitted to several partitions under each.
func TestQueueSeveralPartitions(t *testing.T) {
	f := newFixture(t, true)
	queue := []loop.QueueEntry{{Rank: 1, JobID: "1", Partition: "batch"}, {Rank: 2, JobID: "2", Partition: "batch,debug"}, {Rank: 3, JobID: "3", Partition: "debug"}}
	v := loop.NewView(t0, "slurm", false, qssf.Config{AgingRate: 1}, queue, nil)
	f.srv.d.View = func() *loop.View { return v }
	for _, tc := range []struct {
		partition string
		want      []string
	}{
		{"batch", []string{"1", "2"}},
		{"debug", []string{"2", "3"}},
		{"batch,debug", []string{"2"}},
		{"other", []string{}},
	} {
		w := f.do("GET", "/v1/queue?partition="+url.QueryEscape(tc.partition), "")
		var resp QueueResponse
		if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil || w.Code != http.StatusOK {
			t.Fatalf("GET /v1/queue?partition=%s = %d %s", tc.partition, w.Code, w.Body)
		}
		got := []string{}
		for _, e := range resp.Jobs {
			got = append(got, e.JobID)
		}
		if !slices.Equal(got, tc.want) || resp.Total != len(tc.want) {
			t.Errorf("GET /v1/queue?partition=%s = %v (total %d); want %v", tc.partition, got, resp.Total, tc.want)
		}
	}
}

// TestAccepted: requests at the edges of what openapi.yaml allows are
// answered 200, their answers as it says.
func TestAccepted(t *testing.T) {
	f := newFixture(t, true)
	sp := loadSpec(t)
	for _, tc := range []struct {
		name, method, target, body string
	}{
		{"user of 256 characters, 512 bytes", "POST", "/v1/predict", `{"user": "` + strings.Repeat("\u00fc", 256) + `"}`},
		{"first submit_time", "POST", "/v1/predict", `{"user": "u", "submit_time": "2000-01-01T00:00:00Z"}`},
		{"last submit_time", "POST", "/v1/predict", `{"user": "u", "submit_time": "2200-12-31T23:59:59Z"}`},
		{"first since", "GET", "/v1/actions?since=0", ""},
		{"last since", "GET", "/v1/actions?since=4294967295", ""},
		{"last since, RFC 3339", "GET", "/v1/actions?since=2106-02-07T06:28:15Z", ""},
		{"partition of 256 characters", "GET", "/v1/queue?partition=" + url.QueryEscape(strings.Repeat("\u00fc", 256)), ""},
		{"empty parameters", "GET", "/v1/queue?&limit=2&", ""},
		{"HEAD", "HEAD", "/v1/queue", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := f.do(tc.method, tc.target, tc.body)
			if w.Code != http.StatusOK {
				t.Errorf("%s %s %.40q = %d %s; want 200", tc.method, tc.target, tc.body, w.Code, w.Body)
			}
			if tc.method != "HEAD" {
				checkAnswer(t, sp, tc.method, tc.target, w)
			}
		})
	}
}

// TestContentType: POST /v1/predict takes a body of media type
// application/json, whose name is matched in any case (RFC 9110, 8.3.1),
// with any parameters, or of none; any other gets 415 naming Content-Type.
func TestContentType(t *testing.T) {
	f := newFixture(t, true)
	for _, tc := range []struct {
		ct   string
		want int
	}{
		{"", http.StatusOK},
		{"application/json", http.StatusOK},
		{"Application/JSON; charset=utf-8", http.StatusOK},
		{"application/json;charset=UTF-8", http.StatusOK},
		{"application/jsonx", http.StatusUnsupportedMediaType},
		{"application/json-seq", http.StatusUnsupportedMediaType},
		{"text/plain", http.StatusUnsupportedMediaType},
		{"application/json; charset", http.StatusUnsupportedMediaType},
	} {
		var hdr []string
		if tc.ct != "" {
			hdr = []string{"Content-Type", tc.ct}
		}
		w := f.do("POST", "/v1/predict", `{"user": "dave"}`, hdr...)
		var e ErrorResponse
		_ = json.Unmarshal(w.Body.Bytes(), &e)
		if w.Code != tc.want || tc.want != http.StatusOK && e.Field != "Content-Type" {
			t.Errorf("POST /v1/predict, Content-Type %q = %d %s; want %d", tc.ct, w.Code, w.Body, tc.want)
		}
	}
}

// TestErrorNamesFirstParameter: with several bad query parameters the error
// names the first in the query, every time (it named a random one).
func TestErrorNamesFirstParameter(t *testing.T) {
	f := newFixture(t, true)
	for _, tc := range []struct {
		target, want string
	}{
		{"/v1/actions?limit=0&kind=reboot", "limit"},
		{"/v1/actions?kind=reboot&limit=0", "kind"},
		{"/v1/actions?since=x&sort=asc&before=y", "since"},
		{"/v1/queue?what=1&limit=1&limit=2", "what"},
		{"/v1/queue?limit=1&limit=2&what=1", "limit"},
		// A query that does not parse is refused before any parameter is
		// read.
		{"/v1/actions?limit=0&kind=%zz", "kind"},
	} {
		for range 20 {
			w := f.do("GET", tc.target, "")
			var e ErrorResponse
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || w.Code != http.StatusBadRequest || e.Field != tc.want {
				t.Errorf("GET %s = %d %s; want 400 naming %q", tc.target, w.Code, w.Body, tc.want)
				break
			}
		}
	}
}

// TestUncleanPath: a path the mux would clean (and redirect to, with a
// text/html 307) is no route: 404 with the JSON error.
func TestUncleanPath(t *testing.T) {
	f := newFixture(t, true)
	for _, target := range []string{"/v1//queue", "//v1/queue", "/v1/./queue", "/v1/x/../queue", "/v1/queue/", "/v1/queue/.", "//healthz"} {
		w := f.do("GET", target, "")
		var e ErrorResponse
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || w.Code != http.StatusNotFound || w.Header().Get("Content-Type") != "application/json" ||
			!strings.HasPrefix(e.Error, "no route ") {
			t.Errorf("GET %s = %d %q %s; want 404 JSON naming no route", target, w.Code, w.Header().Get("Content-Type"), w.Body)
		}
	}
}

// specPredictor answers every spec with an hour and keeps the last spec.
type specPredictor struct{ last live.Spec }

func (p *specPredictor) Predict(s live.Spec) (live.Estimate, error) {
	p.last = s
	return live.Estimate{ModelVersion: 1, Point: time.Hour, Low: time.Hour, High: time.Hour, PredictedS: 3600, LowerS: 3600, UpperS: 3600,
		GPUServiceS: 3600 * float64(max(s.GPUs, 1)), Segment: "exact", Fitted: true}, nil
}

// TestPredictReadsActuatorCluster: /v1/predict asks the predictor for the
// history of the actuator's cluster: a user of the same name on another
// cluster sharing the database is someone else (live.Spec.Cluster). The
// request's memory and GPU type reach the predictor too.
func TestPredictReadsActuatorCluster(t *testing.T) {
	p := &specPredictor{}
	view := fixedView(t)
	srv, err := New(Config{}, Deps{View: func() *loop.View { return view }, Predictor: p, Cluster: "c7", Now: func() time.Time { return t0 }}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, httptest.NewRequest("POST", "/v1/predict", strings.NewReader(`{"user": "alice", "gpus": 2, "partition": "batch", "mem_req_bytes": 1024, "gpu_type": "h100"}`)))
	if w.Code != 200 || p.last.Cluster != "c7" || p.last.User != "alice" || p.last.Partition != "batch" || p.last.MemBytes != 1024 || p.last.GPUType != "h100" {
		t.Errorf("POST /v1/predict = %d %s, predictor asked %+v; want 200 and the spec of alice on batch of cluster c7, 1024 bytes, h100", w.Code, w.Body, p.last)
	}
}

// TestPostRefusesQuery: the POST endpoints list no query parameter, so any
// is refused (400 naming it) as on the GET lists, rather than ignored: a
// client's POST /v1/passes?dry_run=true ran a pass that applied its actions,
// and POST /v1/predict?partition=debug predicted for no partition.
func TestPostRefusesQuery(t *testing.T) {
	f := newFixture(t, true)
	auth := []string{"Authorization", "Bearer " + token}
	for _, tc := range []struct {
		target, body string
		hdr          []string
		code         int
		field        string
	}{
		{"/v1/passes?dry_run=true", "", auth, 400, "dry_run"},
		{"/v1/passes?apply=0", "", auth, 400, "apply"},
		{"/v1/passes?x=%zz", "", auth, 400, "x"},
		{"/v1/predict?partition=debug", `{"user": "dave"}`, nil, 400, "partition"},
		{"/v1/predict?gpus=4", `{"user": "dave"}`, nil, 400, "gpus"},
		// Without a token the query is not read: 401 as before.
		{"/v1/passes?dry_run=true", "", nil, 401, "Authorization"},
		// An empty query is none.
		{"/v1/passes?", "", auth, 200, ""},
		{"/v1/predict?", `{"user": "dave"}`, nil, 200, ""},
	} {
		before := f.passes
		w := f.do("POST", tc.target, tc.body, tc.hdr...)
		var e ErrorResponse
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || w.Code != tc.code || e.Field != tc.field {
			t.Errorf("POST %s = %d %s; want %d naming %q", tc.target, w.Code, w.Body, tc.code, tc.field)
		}
		if ran := f.passes - before; tc.code != 200 && ran != 0 {
			t.Errorf("POST %s ran %d passes; want none", tc.target, ran)
		}
	}
}

// TestPredictRankTies: a job whose QSSF key equals a queued job's is ranked
// as qssf.Compare orders them, by submission: behind a job submitted
// earlier, ahead of one submitted later. With the fixture's aging rate of 1
// and whole seconds, keys tie exactly (job 103: 2 GPUs × 1 h, submitted a
// minute before the pass, has the key of 2 GPUs × 3570 s submitted at it).
func TestPredictRankTies(t *testing.T) {
	f := newFixture(t, true)
	for _, tc := range []struct {
		name, body string
		rank       int
	}{
		{"key below 103's", `{"user": "u", "gpus": 2, "time_limit_s": 3569}`, 2},
		{"key of 103's, submitted after it", `{"user": "u", "gpus": 2, "time_limit_s": 3570}`, 3},
		{"key of 103's, submitted after it, 1 GPU", `{"user": "u", "gpus": 1, "time_limit_s": 7140}`, 3},
		{"key of 103's, submitted before it", `{"user": "u", "gpus": 1, "time_limit_s": 7260, "submit_time": "2026-03-02T08:58:00Z"}`, 2},
		{"103 itself", `{"user": "u", "gpus": 2, "time_limit_s": 3600, "submit_time": "2026-03-02T08:59:00Z"}`, 2},
		{"key above 103's", `{"user": "u", "gpus": 2, "time_limit_s": 3571}`, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := f.do("POST", "/v1/predict", tc.body)
			var p PredictResponse
			if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || w.Code != http.StatusOK || p.Rank != tc.rank || p.QueueLength != 4 {
				t.Errorf("POST /v1/predict %s = %d %s; want rank %d of 4", tc.body, w.Code, w.Body, tc.rank)
			}
		})
	}
}

// TestTokenWhitespace: the token is read without the whitespace around it,
// from $HELIOSTAT_ACTUATOR_TOKEN as from --actuator.token-file (a secret
// put in the environment often ends in a newline), and the server then
// takes it: a header's value loses that whitespace on the way, so a token
// kept with it answered every POST /v1/passes 401.
func TestTokenWhitespace(t *testing.T) {
	for _, tc := range []struct {
		name, file, env string
	}{
		{"env, trailing newline", "", token + "\n"},
		{"env, CRLF", "", token + "\r\n"},
		{"env, spaces around", "", "  " + token + " "},
		{"file, trailing newline", "f", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadToken(Config{TokenFile: tc.file}, func(string) string { return tc.env }, func(string) ([]byte, error) {
				return []byte(token + "\n"), nil
			})
			if err != nil || got != token {
				t.Errorf("ReadToken = %q, %v; want %q", got, err, token)
			}
			srv, err := New(Config{}, Deps{Token: got, Pass: func(context.Context) (loop.Report, error) { return loop.Report{At: t0}, nil }}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest("POST", "/v1/passes", nil)
			r.Header.Set("Authorization", "Bearer "+token)
			w := httptest.NewRecorder()
			srv.ServeHTTP(w, r)
			if w.Code != http.StatusOK {
				t.Errorf("POST /v1/passes with the token = %d %s; want 200", w.Code, w.Body)
			}
		})
	}
}

// TestMaxBodyBytesBounds: --actuator.max-body-bytes from 0 (the default)
// to 1 GiB is taken; a negative one, or one past 1 GiB (near MaxInt64 it
// overflowed the read of limit+1 bytes, and every predict body was refused
// as empty), is refused at start, naming the flag.
func TestMaxBodyBytesBounds(t *testing.T) {
	for _, tc := range []struct {
		n  int64
		ok bool
	}{{0, true}, {1, true}, {1 << 30, true}, {-1, false}, {1<<30 + 1, false}, {math.MaxInt64, false}} {
		err := Config{MaxBodyBytes: tc.n}.Validate()
		if (err == nil) != tc.ok || err != nil && !strings.Contains(err.Error(), "--actuator.max-body-bytes") {
			t.Errorf("Validate(max body %d) = %v; want ok %v, an error naming the flag", tc.n, err, tc.ok)
		}
	}
}

// TestMetricsElsewhere: /metrics answers 404 naming where the metrics are
// when the process serves them on another port (MetricsAt, as heliostat up
// does), and 404 without a registry; openapi.yaml documents both.
func TestMetricsElsewhere(t *testing.T) {
	sp := loadSpec(t)
	for _, tc := range []struct {
		name string
		cfg  Config
		d    Deps
		want string
	}{
		{"served elsewhere", Config{MetricsAt: "127.0.0.1:9400"}, Deps{Gatherer: prometheus.NewRegistry()}, "127.0.0.1:9400"},
		{"no registry", Config{}, Deps{}, "no metrics registry"},
	} {
		srv, err := New(tc.cfg, tc.d, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
		if w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), tc.want) {
			t.Errorf("%s: GET /metrics = %d %s; want 404 naming %q", tc.name, w.Code, w.Body, tc.want)
		}
		checkAnswer(t, sp, "GET", "/metrics", w)
	}
}
