package web

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/internal/testpki"
	"github.com/heliostat-dev/heliostat/internal/tlsfiles"
)

func TestReadyProbe(t *testing.T) {
	tests := []struct {
		name     string
		ready    bool
		waiting  error // given to Starting
		check    func() error
		wantCode int
		wantBody string
	}{
		{"starting", false, nil, nil, http.StatusServiceUnavailable, "not ready:\nstarting"},
		{"starting, waiting for a dependency", false, errors.New("clickhouse: connection refused"), nil, http.StatusServiceUnavailable, "not ready:\nstarting: clickhouse: connection refused\n"},
		{"ready without a check", true, nil, nil, http.StatusOK, "ready"},
		{"ready once the wait is over", true, errors.New("clickhouse: connection refused"), nil, http.StatusOK, "ready"},
		{"check passes", true, nil, func() error { return nil }, http.StatusOK, "ready"},
		{"check fails", true, nil, func() error {
			return errors.Join(errors.New("kafka: joining consumer group g"), errors.New("clickhouse: failing for 3s"))
		}, http.StatusServiceUnavailable, "not ready:\nkafka: joining consumer group g\nclickhouse: failing for 3s\n"},
		{"a failing check waits for SetReady", false, nil, func() error { return errors.New("x") }, http.StatusServiceUnavailable, "not ready:\nstarting"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Listen("127.0.0.1:0", nil, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer s.ln.Close()
			if tt.check != nil {
				s.AddCheck(tt.check)
			}
			s.Starting(tt.waiting)
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

// TestHTTPS: with a TLS configuration the probes and /metrics are served
// over HTTPS only, and URL says so.
func TestHTTPS(t *testing.T) {
	pki := testpki.New(t)
	tc, err := tlsfiles.Server{Prefix: "--web.tls", CertFile: pki.CertFile, KeyFile: pki.KeyFile}.Config(time.Now, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Listen("127.0.0.1:0", tc, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	if want := "https://" + s.Addr() + "/metrics"; s.URL("/metrics") != want {
		t.Errorf("URL = %q; want %q", s.URL("/metrics"), want)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.CAPool}}}
	resp, err := client.Get(s.URL("/-/healthy"))
	if err != nil {
		t.Fatalf("GET over HTTPS: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /-/healthy over HTTPS: %s", resp.Status)
	}
	if resp, err := http.Get("http://" + s.Addr() + "/-/healthy"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP answered 200; want HTTPS only")
		}
	}
}

func TestDisplayAddr(t *testing.T) {
	for in, want := range map[string]string{":9400": "localhost:9400", "0.0.0.0:9400": "localhost:9400", "[::]:9400": "localhost:9400",
		"127.0.0.1:9400": "127.0.0.1:9400", "[::1]:9400": "[::1]:9400", "metrics.example:443": "metrics.example:443", "nonsense": "nonsense"} {
		if got := DisplayAddr(in); got != want {
			t.Errorf("DisplayAddr(%q) = %q; want %q", in, got, want)
		}
	}
}

func TestStatusRecorder(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    func(w http.ResponseWriter)
		want int
	}{
		{"no header written", func(w http.ResponseWriter) { _, _ = w.Write([]byte("ok")) }, http.StatusOK},
		{"not found", func(w http.ResponseWriter) { http.Error(w, "no", http.StatusNotFound) }, http.StatusNotFound},
		{"flushed through the controller", func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusAccepted)
			if err := http.NewResponseController(w).Flush(); err != nil {
				t.Errorf("Flush through StatusRecorder: %v", err)
			}
		}, http.StatusAccepted},
	} {
		rec := httptest.NewRecorder()
		sr := NewStatusRecorder(rec)
		tc.h(sr)
		if sr.Code != tc.want || rec.Code != tc.want {
			t.Errorf("%s: recorded %d, written %d; want %d", tc.name, sr.Code, rec.Code, tc.want)
		}
	}
}
