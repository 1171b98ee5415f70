package metrics

import (
	"fmt"
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Collectors returns every collector, for an embedding operator that registers them
// itself.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		m.state,
		m.transitions,
		m.driftEvents,
		m.actions,
		m.actionDuration,
		m.retryBackoff,
		m.lastTransitionTime,
		m.rolloutStuck,
		m.repairs,
		m.degraded,
		m.conflictingWriter,
	}
}

// MustRegister registers every collector with reg and panics if one is already
// registered there.
func (m *Metrics) MustRegister(reg prometheus.Registerer) {
	reg.MustRegister(m.Collectors()...)
}

// Register registers every collector with reg, or none: when one cannot be
// registered (its name is taken, e.g. by another Metrics), it unregisters those
// it registered and returns the error.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	return RegisterAll(reg, m.Collectors()...)
}

// RegisterLegacy registers every collector with component-base's legacy registry,
// which library-go's controllercmd serves on /metrics. Calling it again on the same
// Metrics after it succeeded is a no-op; registering a second Metrics there is an
// error, as the names clash, and leaves the first one served.
func (m *Metrics) RegisterLegacy() error {
	m.legacyMu.Lock()
	defer m.legacyMu.Unlock()
	if m.legacyDone {
		return nil
	}
	// Registerer() is the legacy registry's Prometheus registry; unlike the
	// deprecated RawMustRegister it does not mark the collectors resettable, so a
	// DELETE on a reset-enabled /metrics cannot drop the pre-initialised series.
	if err := m.Register(legacyregistry.Registerer()); err != nil {
		return err
	}
	m.legacyDone = true
	return nil
}

// RegisterAll registers collectors with reg, all or none: on the first failure it
// unregisters the ones this call registered and returns the error.
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

// DevVersion is the version of a binary built without one: neither a -ldflags -X
// value nor a module version (go build in a work tree reports "(devel)").
const DevVersion = "v0.0.0-dev"

// NewBuildInfo returns the runtime_extractor_build_info gauge: constant 1, labelled
// with the binary's version (DevVersion when empty) and the Go version that built
// it. The standalone binary registers it; an embedding operator has its own.
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
