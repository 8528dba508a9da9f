package loop

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestActionSeriesStartAtZero: every kind and outcome of
// heliostat_actuator_actions_total exists at zero before any action, since
// increase() sees no increase in a series' first sample and a first failed
// action would otherwise not fire HeliostatActuatorActionsFailing.
func TestActionSeriesStartAtZero(t *testing.T) {
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(m.actions); n != 12 {
		t.Errorf("%d action series; want 3 kinds × 4 outcomes", n)
	}
	for _, kind := range []string{"set_priority", "power_down", "power_up"} {
		if v := testutil.ToFloat64(m.actions.WithLabelValues(kind, "failed")); v != 0 {
			t.Errorf("%s failed = %v; want 0", kind, v)
		}
	}
}
