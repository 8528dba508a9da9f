// Package buildinfo says which release a heliostat binary is: the version
// `heliostat version` prints and every part exports as heliostat_build_info.
package buildinfo

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// version is set at link time (make build:
// -X github.com/heliostat-dev/heliostat/internal/buildinfo.version=$(git describe));
// empty, Version asks the Go build information.
var version = ""

// Version returns the binary's version: the one set at link time, else the
// module version (go install …@v1.2.3), else the VCS revision the Go
// toolchain stamped (with -dirty for uncommitted changes), else "dev".
func Version() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	return fromBuildInfo(bi)
}

func fromBuildInfo(bi *debug.BuildInfo) string {
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, kv := range bi.Settings {
		switch {
		case kv.Key == "vcs.revision":
			rev = kv.Value
		case kv.Key == "vcs.modified" && kv.Value == "true":
			dirty = "-dirty"
		}
	}
	if rev == "" {
		return "dev"
	}
	return rev[:min(12, len(rev))] + dirty
}

// Collector returns heliostat_build_info: always 1, labelled with Version
// and the Go version, so that a dashboard or an alert can tell which parts
// run which release (during a rolling upgrade).
func Collector() prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "heliostat_build_info",
		Help:        "Always 1; the labels are the heliostat version and the Go version the binary was built with.",
		ConstLabels: prometheus.Labels{"version": Version(), "goversion": runtime.Version()},
	}, func() float64 { return 1 })
}
