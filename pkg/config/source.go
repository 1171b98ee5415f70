package config

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/openshift/library-go/pkg/operator/events"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/insights-runtime-extractor/controller/pkg/status"
)

// ReasonInvalidConfig is the reason of the Warning Event emitted when
// config.yaml is rejected.
const ReasonInvalidConfig = "InvalidConfig"

// Source watches the insights-config ConfigMap and keeps the last good
// configuration. It implements the runtime extractor controller's
// ConfigNotifier.
//
// A config that cannot be read never replaces the last good one: the Source
// emits one Warning Event per distinct bad content, exposes the error through
// LastError and does not notify subscribers. A deleted ConfigMap means the
// defaults (extractor enabled).
type Source struct {
	recorder events.Recorder
	informer cache.SharedIndexInformer
	synced   cache.InformerSynced

	mu          sync.Mutex
	config      *InsightsConfiguration // last good configuration
	good        bool                   // a good configuration (or none at all) was observed
	lastErr     error                  // error of the current content, nil when it is good
	badContent  *string                // config.yaml content that produced lastErr
	subscribers map[chan struct{}]struct{}

	// observed counts handled ConfigMap observations; tests wait on it.
	observed atomic.Int64
}

// NewSource returns a Source whose informer lists and watches only the
// openshift-insights/insights-config ConfigMap. Start it with Run.
func NewSource(client kubernetes.Interface, recorder events.Recorder) *Source {
	s := &Source{
		recorder:    recorder,
		config:      Default(),
		subscribers: map[chan struct{}]struct{}{},
	}
	// The field selector keeps every other ConfigMap of the namespace out of
	// the cache; resync is off because observe is level-based already.
	s.informer = coreinformers.NewFilteredConfigMapInformer(client, Namespace, 0, cache.Indexers{},
		func(opts *metav1.ListOptions) {
			opts.FieldSelector = fields.OneTermEqualSelector(metav1.ObjectNameField, ConfigMapName).String()
		})
	reg, err := s.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.handle(obj, false) },
		UpdateFunc: func(_, obj any) { s.handle(obj, false) },
		DeleteFunc: func(obj any) { s.handle(obj, true) },
	})
	if err != nil {
		// Only possible once the informer has stopped, which it cannot have yet.
		panic("config: add event handler to a new informer: " + err.Error())
	}
	// The registration has synced once the handler has seen the initial list,
	// so Config is meaningful from then on.
	s.synced = reg.HasSynced
	return s
}

// Run runs the informer until ctx is cancelled. Call it once.
func (s *Source) Run(ctx context.Context) {
	s.informer.RunWithContext(ctx)
}

// HasSynced reports whether the initial state of the ConfigMap (present or
// absent) has been observed.
func (s *Source) HasSynced() bool {
	return s.synced()
}

// ConfigChanged returns a new subscription: a channel that receives a value
// when the configuration changes, when a config is rejected (LastError tells;
// Config keeps the last good one), or when a good config follows a rejected
// one. Notifications coalesce and never block the Source. The returned
// function ends the subscription and closes the channel; it is idempotent.
func (s *Source) ConfigChanged() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	s.subscribers[ch] = struct{}{}
	s.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			delete(s.subscribers, ch)
			close(ch)
		})
	}
}

// Config returns a copy of the last good configuration, Default() before any
// ConfigMap has been seen.
func (s *Source) Config() *InsightsConfiguration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.config.DeepCopy()
}

// HasGoodConfig reports whether a good configuration, or the ConfigMap's
// absence (the defaults), has been observed since the Source started. Before
// that, after a rejected config, Config returns the defaults but nobody chose
// them: the controller then holds whatever the cluster shows.
func (s *Source) HasGoodConfig() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.good && s.synced() && len(s.informer.GetStore().ListKeys()) == 0 {
		// No ConfigMap in the initial list: no handler ran, and the defaults
		// are the admin's (absent) choice.
		s.good = true
	}
	return s.good
}

// LastError returns why the current config.yaml was rejected, or nil when
// the configuration in use is the current one.
func (s *Source) LastError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastErr
}

func (s *Source) handle(obj any, deleted bool) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	cm, ok := obj.(*corev1.ConfigMap)
	// The name check backs up the field selector, which not every client
	// (the fake clientset, for one) enforces.
	if !ok || cm.Namespace != Namespace || cm.Name != ConfigMapName {
		return
	}
	if deleted {
		cm = nil
	}
	s.observe(cm)
	s.observed.Add(1)
}

// observe applies one observation of the ConfigMap (nil when absent).
func (s *Source) observe(cm *corev1.ConfigMap) {
	cfg, err := FromConfigMap(cm)
	if err != nil {
		s.reject(cm.Data[ConfigKey], err)
		return
	}

	s.mu.Lock()
	notify := s.lastErr != nil || !equality.Semantic.DeepEqual(cfg, s.config)
	s.config = cfg
	s.good = true
	s.lastErr = nil
	s.badContent = nil
	if notify {
		s.notifyLocked()
	}
	s.mu.Unlock()
	if notify {
		klog.V(2).InfoS("Runtime extractor configuration changed",
			"configMap", klog.KRef(Namespace, ConfigMapName),
			"disableRuntimeExtractor", cfg.DataReporting.DisableRuntimeExtractor)
	}
}

// reject keeps the last good configuration and reports content once: a
// resync or a metadata-only update must not repeat the Event.
func (s *Source) reject(content string, err error) {
	s.mu.Lock()
	repeated := s.badContent != nil && *s.badContent == content
	s.lastErr = err
	s.badContent = &content
	if !repeated {
		// Subscribers learn of the rejection (to report it); Config() still
		// returns the last good configuration, so nothing acts on the bad one.
		s.notifyLocked()
	}
	s.mu.Unlock()
	if repeated {
		return
	}
	// Capped, the log line as the Event: the rejected value is the admin's,
	// of any size, and an Event must stay small.
	klog.InfoS("Rejected runtime extractor configuration, keeping the last good one",
		"configMap", klog.KRef(Namespace, ConfigMapName), "err", status.CapMessage(err.Error()))
	s.recorder.Warning(ReasonInvalidConfig, status.CapMessage(fmt.Sprintf("%v; keeping the last good configuration", err)))
}

// notifyLocked signals every subscriber without blocking: a full buffer
// already holds a pending notification. The caller holds s.mu, which also
// keeps cancel from closing a channel mid-send.
func (s *Source) notifyLocked() {
	for ch := range s.subscribers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
