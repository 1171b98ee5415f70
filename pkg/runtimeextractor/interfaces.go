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

// configErrorReporter is implemented by config notifiers that can tell why the
// latest configuration was rejected (config.Source does), so status can show it.
type configErrorReporter interface {
	LastError() error
}

// configKnower is implemented by config notifiers that can tell whether they
// have seen a good configuration (or its absence, which means the defaults)
// since they started; config.Source does.
type configKnower interface {
	HasGoodConfig() bool
}

// syncer is implemented by sources with a cache the controller must wait for.
type syncer interface {
	HasSynced() bool
}
