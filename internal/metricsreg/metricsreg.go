// Package metricsreg registers a component's Prometheus collectors all at
// once or not at all, so that a component whose construction fails leaves
// nothing behind on the registry (a second attempt on the same registry
// then fails for its own reason, not with "duplicate metrics collector").
package metricsreg

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers cs on reg in order. If one fails, it unregisters those
// it registered and returns that failure; a nil reg is an error.
func Register(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	if reg == nil {
		return errors.New("metricsreg: nil prometheus.Registerer")
	}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, d := range cs[:i] {
				reg.Unregister(d)
			}
			return err
		}
	}
	return nil
}
