package web

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestReadyProbe(t *testing.T) {
	tests := []struct {
		name     string
		ready    bool
		check    func() error
		wantCode int
		wantBody string
	}{
		{"starting", false, nil, http.StatusServiceUnavailable, "not ready: starting"},
		{"ready without a check", true, nil, http.StatusOK, "ready"},
		{"check passes", true, func() error { return nil }, http.StatusOK, "ready"},
		{"check fails", true, func() error {
			return errors.Join(errors.New("kafka: joining consumer group g"), errors.New("clickhouse: failing for 3s"))
		}, http.StatusServiceUnavailable, "not ready:\nkafka: joining consumer group g\nclickhouse: failing for 3s\n"},
		{"a failing check waits for SetReady", false, func() error { return errors.New("x") }, http.StatusServiceUnavailable, "not ready: starting"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Listen("127.0.0.1:0", prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer s.ln.Close()
			if tt.check != nil {
				s.SetCheck(tt.check)
			}
			s.SetReady(tt.ready)
			w := httptest.NewRecorder()
			s.mux.ServeHTTP(w, httptest.NewRequest("GET", "/-/ready", nil))
			body, _ := io.ReadAll(w.Body)
			if w.Code != tt.wantCode || !strings.Contains(string(body), tt.wantBody) {
				t.Errorf("/-/ready = %d %q; want %d with %q", w.Code, body, tt.wantCode, tt.wantBody)
			}
		})
	}
}
