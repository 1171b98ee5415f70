package metrics

import (
	"fmt"
	"runtime"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Collectors returns every collector, for an embedder that registers them itself.
func (m *Metrics) Collectors() []prometheus.Collector {
	return slices.Clone(m.collectors)
}

// MustRegister registers every collector with reg and panics if one cannot be.
func (m *Metrics) MustRegister(reg prometheus.Registerer) {
	reg.MustRegister(m.Collectors()...)
}

// Register registers every collector with reg, or none (see RegisterAll).
func (m *Metrics) Register(reg prometheus.Registerer) error {
	return RegisterAll(reg, m.Collectors()...)
}

// RegisterLegacy registers every collector with component-base's legacy registry,
// which library-go's controllercmd serves on /metrics. Again on the same Metrics it
// is a no-op; a second Metrics fails on the names and leaves the first served.
func (m *Metrics) RegisterLegacy() error {
	m.legacyMu.Lock()
	defer m.legacyMu.Unlock()
	if m.legacyDone {
		return nil
	}
	// Not RawMustRegister: it marks the collectors resettable, and a DELETE on a
	// reset-enabled /metrics would drop the pre-initialised series.
	if err := m.Register(legacyregistry.Registerer()); err != nil {
		return err
	}
	m.legacyDone = true
	return nil
}

// RegisterAll registers collectors with reg, all or none: a failure undoes this call.
func RegisterAll(reg prometheus.Registerer, collectors ...prometheus.Collector) error {
	for i, c := range collectors {
		if err := reg.Register(c); err != nil {
			for _, done := range collectors[:i] {
				reg.Unregister(done)
			}
			return fmt.Errorf("register runtime extractor metrics: %w", err)
		}
	}
	return nil
}

// DevVersion is the version of a binary built with neither an -ldflags -X value
// nor a module version (go build in a work tree reports "(devel)").
const DevVersion = "v0.0.0-dev"

// NewBuildInfo returns the constant build_info gauge, labelled with version
// (DevVersion when empty) and the Go version; an embedder has its own.
func NewBuildInfo(version string) prometheus.Collector {
	if version == "" {
		version = DevVersion
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace:   Namespace,
		Name:        "build_info",
		Help:        "Constant 1, labelled with the version of the runtime extractor controller binary and the Go version that built it.",
		ConstLabels: prometheus.Labels{"version": version, "go_version": runtime.Version()},
	})
	g.Set(1)
	return g
}
