package api

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestGate(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "gate_test_gauge", Help: "x"}))
	g := NewGate(reg)
	apiHandler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"api": r.URL.Path})
	})
	notReady := errors.New("no pass of the control loop yet")
	type call struct {
		method, path string
		code         int
		body         string // substring
	}
	for _, tc := range []struct {
		name  string
		setup func()
		ready string // "" ready; else substring of Ready's error
		calls []call
	}{
		{"closed", func() {}, "starting", []call{
			{"GET", "/healthz", 200, `"status":"ok"`},
			{"GET", "/metrics", 200, "gate_test_gauge 0"},
			// HEAD as GET, as the API answers it once open.
			{"HEAD", "/healthz", 200, ""},
			{"HEAD", "/metrics", 200, ""},
			{"GET", "/readyz", 503, `{"error":"starting"}`},
			{"GET", "/v1/queue", 503, `{"error":"starting"}`},
			{"POST", "/v1/predict", 503, `{"error":"starting"}`},
			{"POST", "/healthz", 503, `"error":"starting"`},
		}},
		{"waiting for ClickHouse", func() { g.Waiting(errors.New("waiting for ClickHouse at ch:9000: connection refused")) },
			"starting: waiting for ClickHouse at ch:9000: connection refused", []call{
				{"GET", "/readyz", 503, `{"error":"starting: waiting for ClickHouse at ch:9000: connection refused"}`},
				{"GET", "/v1/actions", 503, "waiting for ClickHouse"},
			}},
		{"open, the API not ready", func() { g.Open(apiHandler, func() error { return notReady }) }, "no pass of the control loop yet", []call{
			{"GET", "/readyz", 200, `"api":"/readyz"`},
			{"GET", "/v1/queue", 200, `"api":"/v1/queue"`},
		}},
		{"open and ready", func() { g.Open(apiHandler, func() error { return nil }) }, "", []call{
			{"GET", "/metrics", 200, `"api":"/metrics"`},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.setup()
			err := g.Ready()
			if (tc.ready == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.ready) {
				t.Errorf("Ready() = %v; want %q", err, tc.ready)
			}
			for _, c := range tc.calls {
				w := httptest.NewRecorder()
				g.ServeHTTP(w, httptest.NewRequest(c.method, c.path, nil))
				if w.Code != c.code || !strings.Contains(w.Body.String(), c.body) {
					t.Errorf("%s %s = %d %q; want %d with %q", c.method, c.path, w.Code, w.Body.String(), c.code, c.body)
				}
			}
		})
	}
}
