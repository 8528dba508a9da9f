package ingest_test

import (
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/internal/chconn"
)

func TestMetricsLint(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := ingest.Config{Brokers: []string{"127.0.0.1:9092"}, ClickHouse: chconn.Config{Addr: "127.0.0.1:9000", Database: "heliostat"}}
	if _, err := ingest.New(cfg, nil, slog.New(slog.DiscardHandler), reg); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("metric %s: %s", p.Metric, p.Text)
	}
}

func TestConfigValidate(t *testing.T) {
	ch := chconn.Config{Addr: "127.0.0.1:9000", Database: "heliostat"}
	for _, tc := range []struct {
		name string
		cfg  ingest.Config
		ok   bool
	}{
		{"defaults", ingest.Config{Brokers: []string{"b:9092"}, ClickHouse: ch}, true},
		{"no brokers", ingest.Config{ClickHouse: ch}, false},
		{"batch too large", ingest.Config{Brokers: []string{"b"}, ClickHouse: ch, BatchRows: 2_000_000}, false},
		{"interval too short", ingest.Config{Brokers: []string{"b"}, ClickHouse: ch, BatchInterval: 1}, false},
		{"negative retention", ingest.Config{Brokers: []string{"b"}, ClickHouse: ch, Retention: -1}, false},
		{"bad database", ingest.Config{Brokers: []string{"b"}, ClickHouse: chconn.Config{Addr: "a", Database: "x;DROP"}}, false},
	} {
		err := tc.cfg.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v; want ok=%v", tc.name, err, tc.ok)
		}
	}
}
