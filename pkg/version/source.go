// Package version tells the target release version: ClusterVersion's status.desired.version, else RELEASE_VERSION.
package version

import (
	"cmp"
	"context"
	"fmt"
	"sync/atomic"

	configv1 "github.com/openshift/api/config/v1"
	configclient "github.com/openshift/client-go/config/clientset/versioned"
	configv1informers "github.com/openshift/client-go/config/informers/externalversions/config/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/insights-runtime-extractor/controller/pkg/internal/configapi"
)

// ClusterVersionName names the cluster's singleton ClusterVersion; EnvReleaseVersion is read when there is no such API.
const ClusterVersionName, EnvReleaseVersion = "version", "RELEASE_VERSION"

// Source reports the target release version and signals when it changes.
type Source struct {
	informer cache.SharedIndexInformer // nil when the ClusterVersion API is absent
	version  atomic.Pointer[string]
	changed  chan struct{}
}

// NewSource watches the ClusterVersion "version" when config.openshift.io/v1 serves it, else reports fallback.
func NewSource(disco discovery.DiscoveryInterface, client configclient.Interface, fallback string) (*Source, error) {
	s := &Source{changed: make(chan struct{}, 1)}
	s.version.Store(&fallback)
	ok, err := configapi.Serves(disco, "clusterversions")
	if err != nil {
		return nil, err
	}
	if !ok {
		klog.Infof("ClusterVersion API not served; using %s=%q", EnvReleaseVersion, fallback)
		return s, nil
	}
	s.informer = configv1informers.NewFilteredClusterVersionInformer(client, 0, cache.Indexers{}, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector(metav1.ObjectNameField, ClusterVersionName).String()
	})
	observe := func(obj any) {
		if cv, ok := obj.(*configv1.ClusterVersion); ok && cv.Name == ClusterVersionName {
			s.set(cmp.Or(cv.Status.Desired.Version, fallback))
		}
	}
	if _, err := s.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
		DeleteFunc: func(any) { s.set(fallback) },
	}); err != nil {
		return nil, fmt.Errorf("watch clusterversion: %w", err)
	}
	return s, nil
}

func (s *Source) set(v string) {
	if old := s.version.Swap(&v); *old != v {
		select {
		case s.changed <- struct{}{}:
		default: // a notification is already pending; the reader reads the latest version
		}
	}
}

// Run runs the watch until ctx is done (a no-op for a static source).
func (s *Source) Run(ctx context.Context) {
	if s.informer != nil {
		s.informer.RunWithContext(ctx)
	}
}

// HasSynced reports whether the first list has been seen.
func (s *Source) HasSynced() bool { return s.informer == nil || s.informer.HasSynced() }

// Version returns the current target version ("" when unknown).
func (s *Source) Version() string { return *s.version.Load() }

// Changed signals (coalesced, never blocking the watch) that Version changed.
func (s *Source) Changed() <-chan struct{} { return s.changed }
