// Package runtimeextractor manages the insights-runtime-extractor DaemonSet, the project's
// embedding API: NewResourceInformer and NewRuntimeExtractorController keep the insights
// operator's original signatures, and a state machine (package fsm) decides every action.
package runtimeextractor

import (
	"context"

	configv1 "github.com/openshift/api/config/v1"
	"github.com/openshift/library-go/pkg/controller/factory"

	"github.com/insights-runtime-extractor/controller/pkg/config"
)

// ConfigNotifier provides the Insights configuration and its changes (config.Source, or an operator's own).
type ConfigNotifier interface {
	// ConfigChanged returns the change channel and a cleanup that closes it.
	ConfigChanged() (<-chan struct{}, func())
	Config() *config.InsightsConfiguration
}

// ResourceInformer notifies when someone other than this controller modifies the resources.
type ResourceInformer interface {
	factory.Controller
	ResourceModified() <-chan struct{}
}

// ResourceManager manages the runtime extractor's resources; resources.Manager implements it.
type ResourceManager interface {
	ApplyRuntimeExtractorResources(ctx context.Context, tlsProfile *configv1.TLSSecurityProfile) error
	DeleteRuntimeExtractorResources(ctx context.Context) error
	ResourcesExists(ctx context.Context) bool
}

// What the controller reads of its configuration beyond the seed's two methods, as config.Source
// tells it: a host's notifier lacking a method always had a good config, has no error and no cache.

func hasGoodConfig(n ConfigNotifier) bool {
	g, ok := n.(interface{ HasGoodConfig() bool })
	return !ok || g.HasGoodConfig()
}

func configError(n ConfigNotifier) error {
	if e, ok := n.(interface{ LastError() error }); ok {
		return e.LastError()
	}
	return nil
}

func configSynced(n ConfigNotifier) bool {
	s, ok := n.(interface{ HasSynced() bool })
	return !ok || s.HasSynced()
}

// ConfigFrom makes a ConfigNotifier of a host operator's configuration: subscribe gives a change channel (drained at
// once, so its sends may block) and its cleanup; disabled, whether the host turns the runtime extractor off.
func ConfigFrom(subscribe func() (<-chan struct{}, func()), disabled func() bool, opts ...HostConfigOption) ConfigNotifier {
	h := &hostConfig{subscribe: subscribe, disabled: disabled}
	for _, o := range opts {
		o(h)
	}
	return h
}

// HostConfigOption adds an optional setting to ConfigFrom.
type HostConfigOption func(*hostConfig)

// WithScheduling reads the DaemonSet's scheduling (tolerations, node selector, priority class, resources) from the host.
func WithScheduling(scheduling func() config.RuntimeExtractor) HostConfigOption {
	return func(h *hostConfig) { h.scheduling = scheduling }
}

type hostConfig struct {
	subscribe  func() (<-chan struct{}, func())
	disabled   func() bool
	scheduling func() config.RuntimeExtractor
}

func (h *hostConfig) ConfigChanged() (<-chan struct{}, func()) { return h.subscribe() }

// Config reads the host's configuration anew each time.
func (h *hostConfig) Config() *config.InsightsConfiguration {
	cfg := config.Default()
	cfg.DataReporting.DisableRuntimeExtractor = h.disabled()
	if h.scheduling != nil {
		s := h.scheduling()
		s.DeepCopyInto(&cfg.DataReporting.RuntimeExtractor)
	}
	return cfg
}
