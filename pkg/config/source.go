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

// ReasonInvalidConfig is the reason of the Warning Event for a rejected config.yaml.
const ReasonInvalidConfig = "InvalidConfig"

// Source watches insights-config, keeping the last good configuration; it implements the controller's ConfigNotifier.
type Source struct {
	recorder events.Recorder
	informer cache.SharedIndexInformer
	synced   cache.InformerSynced

	mu          sync.Mutex
	config      *InsightsConfiguration // last good configuration
	good        bool                   // a good configuration (or none at all) was observed
	lastErr     error                  // error of the current content, nil when it is good
	badContent  string                 // config.yaml content that produced lastErr
	subscribers map[chan struct{}]struct{}

	observed atomic.Int64 // handled ConfigMap observations; tests wait on it
}

// NewSource returns a Source watching only the insights-config ConfigMap; start it with Run.
func NewSource(client kubernetes.Interface, recorder events.Recorder) *Source {
	s := &Source{recorder: recorder, config: Default(), subscribers: map[chan struct{}]struct{}{}}
	// Only this ConfigMap is cached; no resync, as handle is level-based already.
	s.informer = coreinformers.NewFilteredConfigMapInformer(client, Namespace, 0, cache.Indexers{}, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector(metav1.ObjectNameField, ConfigMapName).String()
	})
	reg, err := s.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.handle(obj, false) },
		UpdateFunc: func(_, obj any) { s.handle(obj, false) },
		DeleteFunc: func(obj any) { s.handle(obj, true) },
	})
	if err != nil { // only once the informer has stopped, which it cannot have yet
		panic("config: add event handler to a new informer: " + err.Error())
	}
	s.synced = reg.HasSynced // the handler has seen the initial list: Config means something
	return s
}

// Run runs the informer until ctx is cancelled. Call it once.
func (s *Source) Run(ctx context.Context) { s.informer.RunWithContext(ctx) }

// HasSynced reports whether the ConfigMap's initial state (present or absent) was observed.
func (s *Source) HasSynced() bool { return s.synced() }

// ConfigChanged subscribes: the channel receives a coalesced value when the configuration changes, a config is
// rejected (see LastError), or a good one follows. The idempotent function returned ends it and closes the channel.
func (s *Source) ConfigChanged() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	s.subscribers[ch] = struct{}{}
	s.mu.Unlock()
	return ch, sync.OnceFunc(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.subscribers, ch)
		close(ch)
	})
}

// Config returns a copy of the last good configuration (Default() until one is seen).
func (s *Source) Config() *InsightsConfiguration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.config.DeepCopy()
}

// HasGoodConfig reports whether a good configuration, or no ConfigMap, was seen: before, Config's are nobody's.
func (s *Source) HasGoodConfig() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.good = s.good || s.synced() && len(s.informer.GetStore().ListKeys()) == 0 // none listed: the admin chose the defaults
	return s.good
}

// LastError returns why the current config.yaml was rejected, nil when it is in use.
func (s *Source) LastError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastErr
}

// handle applies one observation of the ConfigMap (deleted means defaults). A rejected config keeps the last good
// one and is reported once per content: a resync or a metadata-only update must not repeat the Event.
func (s *Source) handle(obj any, deleted bool) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok || cm.Namespace != Namespace || cm.Name != ConfigMapName { // the fake clientset ignores field selectors
		return
	}
	defer s.observed.Add(1)
	if deleted {
		cm = nil
	}
	cfg, err := FromConfigMap(cm)
	s.mu.Lock()
	var notify bool
	if err != nil {
		notify = s.lastErr == nil || s.badContent != cm.Data[ConfigKey]
		s.lastErr, s.badContent = err, cm.Data[ConfigKey]
	} else {
		notify = s.lastErr != nil || !equality.Semantic.DeepEqual(cfg, s.config)
		s.config, s.good, s.lastErr = cfg, true, nil
	}
	if !notify {
		s.mu.Unlock()
		return
	}
	// Never blocks: a full buffer already holds a notification. s.mu keeps a cancel from closing a channel mid-send.
	for ch := range s.subscribers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	s.mu.Unlock()
	if err != nil {
		// Capped, the log line as the Event: the admin's value may be any size; an Event must not.
		klog.InfoS("Rejected runtime extractor configuration, keeping the last good one",
			"configMap", klog.KRef(Namespace, ConfigMapName), "err", status.CapMessage(err.Error()))
		s.recorder.Warning(ReasonInvalidConfig, status.CapMessage(fmt.Sprintf("%v; keeping the last good configuration", err)))
		return
	}
	klog.V(2).InfoS("Runtime extractor configuration changed", "configMap", klog.KRef(Namespace, ConfigMapName),
		"disableRuntimeExtractor", cfg.DataReporting.DisableRuntimeExtractor)
}
