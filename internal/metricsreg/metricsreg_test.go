package metricsreg

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func counter(name string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: name + "."})
}

// TestRegister: all or none. A failure midway leaves none of the collectors
// registered, so that a retry with a fixed list succeeds.
func TestRegister(t *testing.T) {
	reg := prometheus.NewRegistry()
	taken := counter("taken_total")
	if err := reg.Register(taken); err != nil {
		t.Fatal(err)
	}
	a, b := counter("a_total"), counter("b_total")
	err := Register(reg, a, b, counter("taken_total"))
	var are prometheus.AlreadyRegisteredError
	if !errors.As(err, &are) {
		t.Fatalf("Register with a duplicate = %v; want AlreadyRegisteredError", err)
	}
	if mfs, _ := reg.Gather(); len(mfs) != 1 {
		t.Errorf("after the failure %d metric families are registered; want only taken_total", len(mfs))
	}
	if err := Register(reg, a, b); err != nil {
		t.Fatalf("Register after the failure = %v; want nil (a and b were unregistered)", err)
	}
	if mfs, _ := reg.Gather(); len(mfs) != 3 {
		t.Errorf("%d metric families registered; want 3", len(mfs))
	}
	if err := Register(nil, a); err == nil {
		t.Error("Register(nil) = nil; want an error")
	}
	if err := Register(reg); err != nil {
		t.Errorf("Register with no collectors = %v", err)
	}
}
