package runtimeextractor

import (
	"github.com/insights-runtime-extractor/controller/pkg/config"
)

// ConfigFrom turns a host operator's own configuration into a ConfigNotifier. subscribe is the
// host's subscription (a change channel and its cleanup); the controller drains the channel at
// once, so the host may send on it blocking. disabled reports whether the host's configuration
// turns the runtime extractor off. Options add the DaemonSet's scheduling settings.
func ConfigFrom(subscribe func() (<-chan struct{}, func()), disabled func() bool, opts ...HostConfigOption) ConfigNotifier {
	h := &hostConfig{subscribe: subscribe, disabled: disabled}
	for _, o := range opts {
		o(h)
	}
	return h
}

// HostConfigOption adds an optional setting to ConfigFrom.
type HostConfigOption func(*hostConfig)

// WithScheduling reads the DaemonSet's scheduling settings (tolerations, node selector, priority
// class, resources) from the host's configuration.
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
