package runtimeextractor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/openshift/library-go/pkg/operator/events"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/workqueue"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/internal/testwait"
	"github.com/insights-runtime-extractor/controller/pkg/config"
	"github.com/insights-runtime-extractor/controller/pkg/internal/fakeapi"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/testcluster"
)

// settableVersion is a VersionSource the test moves by hand.
type settableVersion struct {
	mu      sync.Mutex
	v       string
	changed chan struct{}
	reads   atomic.Int64 // calls of Version: the loop reads it when it acts on a version signal
}

func newSettableVersion(v string) *settableVersion {
	return &settableVersion{v: v, changed: make(chan struct{}, 1)}
}

func (s *settableVersion) Version() string {
	s.reads.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.v
}

func (s *settableVersion) Changed() <-chan struct{} { return s.changed }

func (s *settableVersion) HasSynced() bool { return true }

func (s *settableVersion) set(v string) {
	s.mu.Lock()
	s.v = v
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// fakeConfig is a ConfigNotifier the test sets by hand: the last good
// config's DisableRuntimeExtractor, whether the current content is rejected
// (the last good value stays), and whether a good config was seen since the
// process started. It is a configKnower, and one whose HasGoodConfig is false
// makes the controller hold: newFakeConfig starts with good set, so the
// controller acts as on a notifier that is no configKnower.
//
// Tests that run the controller on its goroutines change it with set, under
// mu; the simulation, on one goroutine, writes the fields directly.
type fakeConfig struct {
	mu       sync.Mutex
	ch       chan struct{} // ConfigChanged's; nil in the simulation, which wakes the loop itself
	disabled bool          // the last good config's
	invalid  bool          // the current content is rejected
	good     bool          // a good config was seen since the process started
	priority string        // the last good config's runtimeExtractor.priorityClassName
}

// newFakeConfig is an enabled, valid config with a notification channel of
// buffer 1, as the host's.
func newFakeConfig() *fakeConfig {
	return &fakeConfig{ch: make(chan struct{}, 1), good: true}
}

func (f *fakeConfig) set(disabled, invalid bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.disabled, f.invalid = disabled, invalid
}

func (f *fakeConfig) ConfigChanged() (<-chan struct{}, func()) { return f.ch, func() {} }

func (f *fakeConfig) Config() *config.InsightsConfiguration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &config.InsightsConfiguration{DataReporting: config.DataReporting{DisableRuntimeExtractor: f.disabled,
		RuntimeExtractor: config.RuntimeExtractor{PriorityClassName: f.priority}}}
}

func (f *fakeConfig) HasGoodConfig() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.good
}

func (f *fakeConfig) LastError() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.invalid {
		return errors.New("config.yaml: mapping expected (injected)")
	}
	return nil
}

// String is what the model's fingerprint prints: the fields that make the
// state, not the lock or the channel.
func (f *fakeConfig) String() string {
	return fmt.Sprintf("{disabled:%v invalid:%v good:%v priority:%q}", f.disabled, f.invalid, f.good, f.priority)
}

// recordingLimiter records every backoff the controller asks for.
type recordingLimiter struct {
	workqueue.TypedRateLimiter[string]
	waits syncList[time.Duration]
}

func (r *recordingLimiter) When(item string) time.Duration {
	d := r.TypedRateLimiter.When(item)
	r.waits.add(d)
	return d
}

type harness struct {
	t        *testing.T
	api      *fakeapi.Server
	recorder *hostRecorder // the host's: config warnings
	changes  *eventLog     // the controller's own Events
	opts     []Option      // more options, set by a prepare hook
	ctrl     *Controller
	updateCh chan struct{}
	version  *settableVersion
	limiter  *recordingLimiter
	// limiterOverride, set by a prepare func, replaces the recording limiter.
	limiterOverride workqueue.TypedRateLimiter[string]
	// notifier, set by a prepare func, is the host's config in place of a
	// config.Source over the fake API (which the harness then also runs).
	notifier ConfigNotifier
	// informerClient, set by a prepare func, is what the informer lists and
	// watches through in place of api.Client (the controller still writes
	// through api.Client).
	informerClient kubernetes.Interface
	cancel         context.CancelFunc
	done           chan struct{}
}

// start runs the whole controller, as the seed's Usage wires it, against the
// fake API server holding objs.
func start(t *testing.T, objs ...metav1.Object) *harness {
	t.Helper()
	return startWith(t, nil, objs...)
}

// startWith lets the test, in prepare, install reactors on the fake API before
// anything runs and set the harness's options (the config notifier, the
// informer's client, the rate limiter, the host's updateCh, more Options).
// The controller stops in a Cleanup registered here: a Cleanup the test
// registers after startWith returns runs before it.
func startWith(t *testing.T, prepare func(*harness), objs ...metav1.Object) *harness {
	t.Helper()
	h := &harness{
		t:        t,
		updateCh: make(chan struct{}),
		version:  newSettableVersion("4.21.0"),
		limiter:  &recordingLimiter{TypedRateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, time.Second)},
		recorder: newHostRecorder("test"),
		done:     make(chan struct{}),
	}
	h.api = fakeapi.New()
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.ConfigMap:
			if _, err := h.api.Client.CoreV1().ConfigMaps(o.Namespace).Create(context.Background(), o, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		case *appsv1.DaemonSet:
			if _, err := h.api.Client.AppsV1().DaemonSets(o.Namespace).Create(context.Background(), o, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if prepare != nil {
		prepare(h)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel

	informerClient := h.informerClient
	if informerClient == nil {
		informerClient = h.api.Client
	}
	factory := informers.NewSharedInformerFactoryWithOptions(informerClient, 0, informers.WithNamespace(resources.Namespace))
	ri, err := NewResourceInformer(h.recorder, factory)
	if err != nil {
		t.Fatal(err)
	}
	cfg, runConfig := h.notifier, func(context.Context) {} // a test's notifier needs no goroutine
	if cfg == nil {
		src := config.NewSource(h.api.Client, h.recorder)
		cfg, runConfig = src, src.Run
	}
	var limiter workqueue.TypedRateLimiter[string] = h.limiter
	if h.limiterOverride != nil {
		limiter = h.limiterOverride
	}
	h.changes = &eventLog{}
	h.ctrl = NewRuntimeExtractorController(cfg, h.updateCh, nil, h.api.Client, h.recorder, ri,
		append([]Option{WithImages(resources.DefaultImages()), WithVersionSource(h.version), WithRateLimiter(limiter), WithEventRecorder(h.changes)}, h.opts...)...)

	watching := watchRequested(informerClient)
	factory.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); runConfig(ctx) }()
	go func() { defer wg.Done(); ri.Run(ctx, 1) }()
	go func() {
		defer wg.Done()
		// The fake API server's watch sends only what happens after it opens
		// (the real one replays from the list's resourceVersion): on a
		// loaded machine the controller's first writes could land between
		// the informer's list and its watch and never be seen.
		select {
		case <-watching:
		case <-ctx.Done():
			return
		}
		h.ctrl.Run(ctx)
	}()
	go func() { wg.Wait(); factory.Shutdown(); close(h.done) }()
	t.Cleanup(h.stop)
	return h
}

// watchRequested is closed when the informer asks c for its first
// DaemonSet watch (at once when c is no fake clientset). It only observes:
// the reactors behind it, a test's included, serve the watch.
func watchRequested(c kubernetes.Interface) <-chan struct{} {
	requested := make(chan struct{})
	fc, ok := c.(*fake.Clientset)
	if !ok {
		close(requested)
		return requested
	}
	var once sync.Once
	fc.PrependWatchReactor("daemonsets", func(clienttesting.Action) (bool, watch.Interface, error) {
		once.Do(func() { close(requested) })
		return false, nil, nil
	})
	return requested
}

func (h *harness) stop() {
	h.cancel()
	select {
	case <-h.done:
	case <-time.After(testwait.Patience):
		h.t.Errorf("controller did not stop within %s of cancel", testwait.Patience)
	}
}

// startStoppedWhenRunning runs the controller until its DaemonSet is rolled
// out, then stops the loop, so that the test drives onDrift by hand on its own
// goroutine. It returns the DaemonSet as rolled out.
func startStoppedWhenRunning(t *testing.T) (*harness, *appsv1.DaemonSet) {
	t.Helper()
	h := start(t)
	h.rollOut()
	h.waitState(fsm.StateRunning)
	h.stop()
	return h, h.stored()
}

func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	waitFor(h.t, what, cond, func() string { return "state " + string(h.ctrl.State()) })
}

func (h *harness) waitState(want fsm.State) {
	h.t.Helper()
	h.eventually("state "+string(want), func() bool { return h.ctrl.State() == want })
}

func (h *harness) stored() *appsv1.DaemonSet {
	h.t.Helper()
	ds, err := h.api.Stored(resources.Namespace, resources.DaemonSetName)
	if err != nil {
		h.t.Fatal(err)
	}
	return ds
}

func (h *harness) waitStored(what string, cond func(*appsv1.DaemonSet) bool) *appsv1.DaemonSet {
	h.t.Helper()
	var ds *appsv1.DaemonSet
	h.eventually(what, func() bool { ds = h.stored(); return cond(ds) })
	return ds
}

// rollOut plays the DaemonSet controller: the current generation is observed and
// available on three nodes.
func (h *harness) rollOut() {
	h.t.Helper()
	ds := h.waitStored("a DaemonSet to roll out", func(ds *appsv1.DaemonSet) bool { return ds != nil })
	ds = ds.DeepCopy()
	ds.Status = appsv1.DaemonSetStatus{
		ObservedGeneration: ds.Generation, DesiredNumberScheduled: 3, CurrentNumberScheduled: 3,
		UpdatedNumberScheduled: 3, NumberAvailable: 3, NumberReady: 3,
	}
	if _, err := h.api.Client.AppsV1().DaemonSets(ds.Namespace).UpdateStatus(context.Background(), ds, metav1.UpdateOptions{}); err != nil {
		h.t.Fatalf("update status: %v", err)
	}
}

func (h *harness) setConfig(yaml string) {
	h.t.Helper()
	if err := testcluster.SetControllerConfig(context.Background(), h.api.Client, yaml); err != nil {
		h.t.Fatal(err)
	}
}

func configMap(yaml string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: resources.Namespace, Name: resources.ConfigMapName},
		Data:       map[string]string{resources.ConfigMapKey: yaml},
	}
}

const disabledConfig = "dataReporting:\n  disableRuntimeExtractor: true\n"
const enabledConfig = "dataReporting:\n  disableRuntimeExtractor: false\n"

func (h *harness) eventCount(reason string) int {
	return len(h.changes.with(reason)) + len(h.recorder.log.with(reason))
}

// hostRecorder is the host's events.Recorder in the harness, safe for
// concurrent use. library-go's in-memory recorder is not, and the race
// detector flags it: (*inMemoryEventRecorder).Events in
// pkg/operator/events/recorder_in_memory.go (github.com/openshift/library-go)
// reads the slice that Event and Warning append to under its lock without
// taking it, and the tests poll the Events while the config Source records
// its warnings.
type hostRecorder struct {
	log       *eventLog
	component string
}

var _ events.Recorder = (*hostRecorder)(nil)

func newHostRecorder(component string) *hostRecorder {
	return &hostRecorder{log: &eventLog{}, component: component}
}

func (r *hostRecorder) Event(reason, message string) {
	r.log.Event(nil, corev1.EventTypeNormal, reason, message)
}

func (r *hostRecorder) Eventf(reason, format string, args ...any) {
	r.Event(reason, fmt.Sprintf(format, args...))
}

func (r *hostRecorder) Warning(reason, message string) {
	r.log.Event(nil, corev1.EventTypeWarning, reason, message)
}

func (r *hostRecorder) Warningf(reason, format string, args ...any) {
	r.Warning(reason, fmt.Sprintf(format, args...))
}

// ForComponent returns a copy that shares the log, as library-go's recorder
// that writes to the API server does (the in-memory one renames itself, so
// every component would share the last name given).
func (r *hostRecorder) ForComponent(component string) events.Recorder {
	return &hostRecorder{log: r.log, component: component}
}

func (r *hostRecorder) WithComponentSuffix(suffix string) events.Recorder {
	return r.ForComponent(r.component + "-" + suffix)
}

func (r *hostRecorder) WithContext(context.Context) events.Recorder { return r }
func (r *hostRecorder) ComponentName() string                       { return r.component }
func (r *hostRecorder) Shutdown()                                   {}

// loggedEvent is one Event the controller recorded.
type loggedEvent struct {
	object                  *corev1.ObjectReference
	eventType, reason, text string
}

// eventLog is a record.EventRecorder that keeps every Event, synchronously.
type eventLog struct {
	events syncList[loggedEvent]
}

func (l *eventLog) Event(object runtime.Object, eventType, reason, message string) {
	ref, _ := object.(*corev1.ObjectReference)
	l.events.add(loggedEvent{object: ref, eventType: eventType, reason: reason, text: message})
}

func (l *eventLog) Eventf(object runtime.Object, eventType, reason, format string, args ...any) {
	l.Event(object, eventType, reason, fmt.Sprintf(format, args...))
}

func (l *eventLog) AnnotatedEventf(object runtime.Object, _ map[string]string, eventType, reason, format string, args ...any) {
	l.Eventf(object, eventType, reason, format, args...)
}

// with returns the Events of reason ("" for all), in order.
func (l *eventLog) with(reason string) []loggedEvent {
	var out []loggedEvent
	for _, e := range l.events.list() {
		if reason == "" || e.reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// mentions reports whether an Event of reason has text in its message.
func (l *eventLog) mentions(reason, text string) bool {
	return l.events.any(func(e loggedEvent) bool { return e.reason == reason && strings.Contains(e.text, text) })
}

// signalVersion sends on updateCh as the host does (a blocking send) and waits
// until the control loop has handled it; the start-up re-assert comes first.
func (h *harness) signalVersion() {
	h.t.Helper()
	h.eventually("the controller to start", func() bool { return h.ctrl.Status().State != "" })
	n := h.version.reads.Load()
	h.updateCh <- struct{}{}
	h.eventually("the loop to handle the updateCh signal", func() bool { return h.version.reads.Load() > n })
}
