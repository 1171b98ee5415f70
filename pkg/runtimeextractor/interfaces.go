// Package runtimeextractor manages the lifecycle of the insights-runtime-extractor
// DaemonSet from the DisableRuntimeExtractor configuration option, the cluster
// version and what its informers observe. It is the embedding API of the project:
// NewResourceInformer and NewRuntimeExtractorController keep the signatures of the
// insights operator's original controller, and behind them an explicit state
// machine (package fsm) decides every action.
package runtimeextractor

import (
	"context"

	configv1 "github.com/openshift/api/config/v1"
	"github.com/openshift/library-go/pkg/controller/factory"

	"github.com/insights-runtime-extractor/controller/pkg/config"
)

// ConfigNotifier provides access to Insights configuration and notifications about
// configuration changes. config.Source implements it for the insights-config
// ConfigMap; an operator may pass its own.
type ConfigNotifier interface {
	// ConfigChanged returns a channel that receives notifications when configuration
	// changes and a cleanup function to close the notification channel.
	ConfigChanged() (<-chan struct{}, func())
	// Config returns the current Insights configuration.
	Config() *config.InsightsConfiguration
}

// ResourceInformer provides notifications when runtime-extractor resources are
// modified externally (not by this controller). This enables drift detection and
// reconciliation.
type ResourceInformer interface {
	factory.Controller
	// ResourceModified returns a channel that receives notifications when resources
	// are modified.
	ResourceModified() <-chan struct{}
}

// ResourceManager manages the lifecycle of runtime extractor Kubernetes resources.
// resources.Manager implements it.
type ResourceManager interface {
	// ApplyRuntimeExtractorResources creates or updates all runtime extractor resources.
	ApplyRuntimeExtractorResources(ctx context.Context, tlsProfile *configv1.TLSSecurityProfile) error
	// DeleteRuntimeExtractorResources removes all runtime extractor resources.
	DeleteRuntimeExtractorResources(ctx context.Context) error
	// ResourcesExists checks if runtime extractor resources are deployed.
	ResourcesExists(ctx context.Context) bool
}

// configSource is all the controller reads of its configuration: the seed's
// ConfigNotifier and what config.Source tells besides. The constructor turns
// any ConfigNotifier into one (configSourceOf).
type configSource interface {
	ConfigNotifier
	// HasGoodConfig: a good configuration (or none, which means the
	// defaults) was seen since the source started.
	HasGoodConfig() bool
	// LastError says why the latest configuration was rejected; nil when it
	// was not.
	LastError() error
	// HasSynced: the source's cache has synced.
	HasSynced() bool
}

// configSourceOf gives n the answers it lacks: a host's own notifier,
// which has only the seed's two methods, always had a good configuration,
// reports no error and has no cache to wait for.
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

// notifierSource is a ConfigNotifier with the answers configSourceOf found.
type notifierSource struct {
	ConfigNotifier
	good, synced func() bool
	lastError    func() error
}

func (s notifierSource) HasGoodConfig() bool { return s.good() }
func (s notifierSource) LastError() error    { return s.lastError() }
func (s notifierSource) HasSynced() bool     { return s.synced() }
