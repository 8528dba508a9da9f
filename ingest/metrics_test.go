package ingest_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/internal/chconn"
	"github.com/heliostat-dev/heliostat/schemas"
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

// TestMetricsStartAtZero: the series the alerts read with increase() or
// rate() exist at zero before anything happened, since those functions see
// no increase in a series' first sample (a first dead letter exported as a
// new series at 1 would not fire HeliostatDeadLetters).
func TestMetricsStartAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := ingest.Config{Brokers: []string{"127.0.0.1:9092"}, ClickHouse: chconn.Config{Addr: "127.0.0.1:9000", Database: "heliostat"}}
	in, err := ingest.New(cfg, nil, slog.New(slog.DiscardHandler), reg)
	if err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += " " + l.GetName() + "=" + l.GetValue()
			}
			series[key] = m.GetCounter().GetValue()
		}
	}
	want := []string{"heliostat_ingest_errors_total kind=insert", "heliostat_ingest_errors_total kind=commit"}
	for _, k := range schemas.DecodeErrorKinds() {
		want = append(want, "heliostat_ingest_errors_total kind=decode_"+k) // HeliostatIngestErrors
	}
	for _, topic := range in.Topics() {
		want = append(want,
			"heliostat_ingest_messages_total outcome=deadletter topic="+topic,
			"heliostat_ingest_messages_total outcome=resent topic="+topic,
			"heliostat_ingest_sequence_gaps_total topic="+topic)
	}
	for _, k := range want {
		if v, ok := series[k]; !ok || v != 0 {
			t.Errorf("%s: present %v, value %v; want a series at 0", k, ok, v)
		}
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
		{"negative retry backoff", ingest.Config{Brokers: []string{"b"}, ClickHouse: ch, RetryMax: -time.Second}, false},
		{"bad database", ingest.Config{Brokers: []string{"b"}, ClickHouse: chconn.Config{Addr: "a", Database: "x;DROP"}}, false},
	} {
		err := tc.cfg.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v; want ok=%v", tc.name, err, tc.ok)
		}
	}
}
