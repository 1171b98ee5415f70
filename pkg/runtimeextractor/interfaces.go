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

// ConfigNotifier provides the Insights configuration and its changes. config.Source implements
// it for the insights-config ConfigMap; an operator may pass its own.
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

// configSource is all the controller reads of its configuration: the seed's ConfigNotifier and
// what config.Source tells besides.
type configSource interface {
	ConfigNotifier
	HasGoodConfig() bool // a good configuration (or none: the defaults) was seen since the start
	LastError() error    // why the latest configuration was rejected, or nil
	HasSynced() bool
}

// configSourceOf gives n the answers it lacks: a host's own notifier always had a good
// configuration, reports no error and has no cache to wait for.
func configSourceOf(n ConfigNotifier) configSource {
	if s, ok := n.(configSource); ok {
		return s
	}
	s := notifierSource{ConfigNotifier: n, good: alwaysTrue, synced: alwaysTrue, lastError: func() error { return nil }}
	if k, ok := n.(interface{ HasGoodConfig() bool }); ok {
		s.good = k.HasGoodConfig
	}
	if r, ok := n.(interface{ LastError() error }); ok {
		s.lastError = r.LastError
	}
	if y, ok := n.(interface{ HasSynced() bool }); ok {
		s.synced = y.HasSynced
	}
	return s
}

func alwaysTrue() bool { return true }

type notifierSource struct {
	ConfigNotifier
	good, synced func() bool
	lastError    func() error
}

func (s notifierSource) HasGoodConfig() bool { return s.good() }
func (s notifierSource) LastError() error    { return s.lastError() }
func (s notifierSource) HasSynced() bool     { return s.synced() }
