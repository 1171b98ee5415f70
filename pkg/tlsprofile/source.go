// Package tlsprofile follows the cluster TLS profile (APIServer "cluster" spec.tlsSecurityProfile) for kube-rbac-proxy.
// Once listed (absent: Intermediate) it stays known if the watch fails; before, Profile errs: the caller keeps its own.
package tlsprofile

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	configclient "github.com/openshift/client-go/config/clientset/versioned"
	configv1informers "github.com/openshift/client-go/config/informers/externalversions/config/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/insights-runtime-extractor/controller/pkg/internal/configapi"
)

// APIServerName names the singleton APIServer; StartTimeout caps how long an unread profile keeps HasSynced false.
const APIServerName, StartTimeout = "cluster", 10 * time.Second

// ErrUnknown is wrapped by every error Profile returns.
var ErrUnknown = errors.New("the cluster TLS profile is unknown")

// Source reports the cluster's TLS security profile and signals when it changes.
type Source struct {
	informer cache.SharedIndexInformer  // nil when the profile is fixed (no APIServer API)
	clock    clock.WithDelayedExecution // tests step a fake one
	changed  chan struct{}

	mu      sync.Mutex
	known   bool
	profile *configv1.TLSSecurityProfile // read-only: the informer cache's
	gaveUp  bool                         // StartTimeout passed while unknown
	lastErr error                        // the watch's latest list or watch error
}

// NewSource watches the APIServer "cluster" if config.openshift.io/v1 serves it; without (not OpenShift) it is unset.
func NewSource(disco discovery.DiscoveryInterface, client configclient.Interface) (*Source, error) {
	ok, err := configapi.Serves(disco, "apiservers")
	if err != nil {
		return nil, err
	}
	if !ok {
		klog.Infof("APIServer API not served; kube-rbac-proxy gets the Intermediate TLS profile")
		return &Source{known: true, changed: make(chan struct{}, 1)}, nil
	}
	s := &Source{changed: make(chan struct{}, 1), clock: clock.RealClock{}}
	s.informer = configv1informers.NewFilteredAPIServerInformer(client, 0, cache.Indexers{}, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector(metav1.ObjectNameField, APIServerName).String()
	})
	_, err = s.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.refresh() },
		UpdateFunc: func(_, _ any) { s.refresh() },
		DeleteFunc: func(any) { s.refresh() },
	})
	if err == nil {
		err = s.informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
			s.mu.Lock()
			s.lastErr = err
			s.mu.Unlock()
			cache.DefaultWatchErrorHandler(ctx, r, err)
		})
	}
	if err != nil {
		return nil, fmt.Errorf("watch apiserver %s: %w", APIServerName, err)
	}
	return s, nil
}

// Run runs the watch until ctx is done (a no-op for a static source).
func (s *Source) Run(ctx context.Context) {
	if s.informer == nil {
		return
	}
	giveUp := s.clock.AfterFunc(StartTimeout, func() { // ends HasSynced's wait; the profile stays unknown until read
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.known {
			s.gaveUp = true
			klog.Warningf("%v", s.unknownLocked())
		}
	})
	defer giveUp.Stop()
	var wg sync.WaitGroup
	wg.Go(func() { s.informer.RunWithContext(ctx) })
	if cache.WaitForCacheSync(ctx.Done(), s.informer.HasSynced) { // refresh skipped the events before it
		s.refresh()
	}
	wg.Wait()
}

// refresh reads the listed state once the first list is complete: before, absence proves nothing.
func (s *Source) refresh() {
	if !s.informer.HasSynced() {
		return
	}
	var p *configv1.TLSSecurityProfile
	obj, _, _ := s.informer.GetStore().GetByKey(APIServerName)
	if api, ok := obj.(*configv1.APIServer); ok {
		p = api.Spec.TLSSecurityProfile
	}
	s.mu.Lock()
	wasKnown := s.known
	// A reader saw another answer only if HasSynced was true: known before, or given up.
	notify := wasKnown && !equality.Semantic.DeepEqual(p, s.profile) || !wasKnown && s.gaveUp
	s.known, s.profile = true, p
	s.mu.Unlock()
	if !wasKnown {
		klog.Infof("cluster TLS profile read from APIServer %s: %s", APIServerName, Describe(p))
	} else if notify {
		klog.Infof("cluster TLS profile changed: %s", Describe(p))
	}
	if notify {
		select {
		case s.changed <- struct{}{}:
		default: // a notification is pending; the reader reads the latest profile
		}
	}
}

// HasSynced reports whether the profile is known or StartTimeout has passed since Run started.
func (s *Source) HasSynced() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.known || s.gaveUp
}

// Profile returns the cluster TLS profile (nil means Intermediate), or why it is unknown.
func (s *Source) Profile() (*configv1.TLSSecurityProfile, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.known {
		return s.profile, nil
	}
	return nil, s.unknownLocked()
}

func (s *Source) unknownLocked() error {
	what := fmt.Sprintf("APIServer %s not read", APIServerName)
	if s.gaveUp {
		what += fmt.Sprintf(" within %s", StartTimeout)
	}
	if s.lastErr != nil {
		return fmt.Errorf("%w: %s: %w", ErrUnknown, what, s.lastErr)
	}
	return fmt.Errorf("%w: %s", ErrUnknown, what)
}

// Changed signals (coalesced, never blocking the watch) that Profile's answer changed after HasSynced.
func (s *Source) Changed() <-chan struct{} { return s.changed }

// Describe names a profile for logs and Events.
func Describe(p *configv1.TLSSecurityProfile) string {
	if p == nil || p.Type == "" {
		return "unset (Intermediate)"
	}
	return string(p.Type)
}
