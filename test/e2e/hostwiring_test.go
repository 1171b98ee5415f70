package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	configclient "github.com/openshift/client-go/config/clientset/versioned"
	"github.com/openshift/library-go/pkg/operator/events"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientInformers "k8s.io/client-go/informers"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/runtimeextractor"
	"github.com/insights-runtime-extractor/controller/pkg/status"
	"github.com/insights-runtime-extractor/controller/pkg/testcluster"
)

// A fake host operator, wired as the Insights Operator's Operator.Run wires its
// own runtime extractor controller, with this module in its place.

// User agents of the fake host's two clients: the library's is the one the
// host hands it, so the audit log tells the library's requests from the host's.
const (
	hostUserAgent    = "e2e-fake-insights-operator"
	libraryUserAgent = "e2e-fake-insights-operator-runtime-extractor"
)

// hostInsightsConfiguration is the host's own config type, as the Insights
// Operator's config.InsightsConfiguration: not this module's.
type hostInsightsConfiguration struct {
	DataReporting struct {
		DisableRuntimeExtractor bool
	}
}

// sendLog times the host's blocking sends.
type sendLog struct {
	mu       sync.Mutex
	count    map[string]int
	longest  map[string]time.Duration
	over     []string // sends slower than the bound
	bound    time.Duration
	inFlight map[string]time.Time // per kind, the start of a send not yet returned
}

func newSendLog(bound time.Duration) *sendLog {
	return &sendLog{count: map[string]int{}, longest: map[string]time.Duration{}, inFlight: map[string]time.Time{}, bound: bound}
}

// send is the host's blocking send on ch, timed.
func (l *sendLog) send(kind string, ch chan<- struct{}) {
	start := time.Now()
	l.mu.Lock()
	l.inFlight[kind] = start
	l.mu.Unlock()
	ch <- struct{}{}
	d := time.Since(start)
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.inFlight, kind)
	l.count[kind]++
	l.longest[kind] = max(l.longest[kind], d)
	if d > l.bound {
		l.over = append(l.over, fmt.Sprintf("%s send %d took %s", kind, l.count[kind], d))
	}
}

// blocked is how long the oldest send in flight has waited so far (0 when none).
func (l *sendLog) blocked() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var longest time.Duration
	for _, start := range l.inFlight {
		longest = max(longest, time.Since(start))
	}
	return longest
}

func (l *sendLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var kinds []string
	for k := range l.count {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var parts []string
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%s: %d sends, longest %s", k, l.count[k], l.longest[k]))
	}
	return strings.Join(parts, "; ")
}

// hostConfigAggregator is the host's config notifier: every listener gets a
// channel with a buffer of 1, and is notified with a blocking send, as the
// Insights Operator's ConfigAggregator does.
type hostConfigAggregator struct {
	mu        sync.Mutex
	config    hostInsightsConfiguration
	listeners map[chan struct{}]struct{}
	sends     *sendLog
}

func (a *hostConfigAggregator) Config() *hostInsightsConfiguration {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.config
	return &c
}

func (a *hostConfigAggregator) ConfigChanged() (<-chan struct{}, func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ch := make(chan struct{}, 1)
	a.listeners[ch] = struct{}{}
	return ch, func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		close(ch)
		delete(a.listeners, ch)
	}
}

func (a *hostConfigAggregator) notifyListeners() {
	a.mu.Lock()
	var chans []chan struct{}
	for ch := range a.listeners {
		chans = append(chans, ch)
	}
	a.mu.Unlock()
	for _, ch := range chans {
		a.sends.send("config", ch)
	}
}

func (a *hostConfigAggregator) setDisabled(disabled bool) {
	a.mu.Lock()
	a.config.DataReporting.DisableRuntimeExtractor = disabled
	a.mu.Unlock()
	a.notifyListeners()
}

// hostSummary is the host's controllerstatus.Summary, as far as the adapter
// fills it.
type hostSummary struct {
	Healthy         bool
	Reason, Message string
}

// runtimeExtractorSource adapts the controller to the host's status source
// interface (Name, CurrentStatus): not ready until the controller has read its
// caches (State is empty until then), unhealthy while our Degraded is True.
type runtimeExtractorSource struct{ ctrl *runtimeextractor.Controller }

func (s runtimeExtractorSource) Name() string { return "runtimeextractor" }

func (s runtimeExtractorSource) CurrentStatus() (hostSummary, bool) {
	snapshot := s.ctrl.Status()
	if snapshot.State == "" {
		return hostSummary{}, false
	}
	for _, c := range status.Conditions(snapshot) {
		if c.Type == status.ConditionDegraded && c.Status == configv1.ConditionTrue {
			return hostSummary{Reason: c.Reason, Message: c.Message}, true
		}
	}
	return hostSummary{Healthy: true}, true
}

// hostStatusController owns the ClusterOperator, as the Insights Operator's
// status controller does: every sync reads it, rebuilds the whole conditions
// list (keeping types it does not know), aggregates its sources, and writes it
// with UpdateStatus. When RELEASE_VERSION differs from the operator version it
// reported, it signals updateCh with a blocking send. Here a sync is retried on
// conflict, and it also copies our three conditions into its list.
type hostStatusController struct {
	client   configclient.Interface
	ctrl     *runtimeextractor.Controller
	source   runtimeExtractorSource
	updateCh chan struct{}
	sends    *sendLog
	trigger  chan struct{}

	mu       sync.Mutex
	syncErrs []error
}

func (h *hostStatusController) merge(co *configv1.ClusterOperator) *configv1.ClusterOperator {
	co = co.DeepCopy()
	set := ownHostConditions()
	if summary, ready := h.source.CurrentStatus(); ready && !summary.Healthy {
		for i := range set {
			if set[i].Type == configv1.OperatorDegraded {
				set[i].Status, set[i].Reason, set[i].Message = configv1.ConditionTrue, summary.Reason, summary.Message
			}
		}
	}
	// Before the controller has read its caches its Status is the zero
	// Snapshot, whose conditions mean nothing yet: ours are added from then on.
	if snapshot := h.ctrl.Status(); snapshot.State != "" {
		set = append(set, status.Conditions(snapshot)...)
	}
	co.Status.Conditions = hostConditions(co.Status.Conditions, set, metav1.Now())
	if v := os.Getenv("RELEASE_VERSION"); v != "" {
		changed := len(co.Status.Versions) > 0 && co.Status.Versions[0].Version != v
		co.Status.Versions = []configv1.OperandVersion{{Name: "operator", Version: v}}
		if changed {
			h.sends.send("updateCh", h.updateCh)
		}
	}
	return co
}

func (h *hostStatusController) updateStatus(ctx context.Context) error {
	co, err := h.client.ConfigV1().ClusterOperators().Get(ctx, clusterOperator, metav1.GetOptions{})
	if err != nil {
		return err
	}
	merged := h.merge(co)
	if reflect.DeepEqual(merged.Status, co.Status) {
		return nil
	}
	_, err = h.client.ConfigV1().ClusterOperators().UpdateStatus(ctx, merged, metav1.UpdateOptions{})
	return err
}

// run syncs on every change of our status, on a trigger and every second,
// until ctx is done. It is StatusChanged's only consumer.
func (h *hostStatusController) run(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-h.ctrl.StatusChanged():
			case <-h.trigger:
			case <-tick.C:
			}
			if err := retry.RetryOnConflict(retry.DefaultRetry, func() error { return h.updateStatus(ctx) }); err != nil && ctx.Err() == nil {
				h.mu.Lock()
				h.syncErrs = append(h.syncErrs, err)
				h.mu.Unlock()
			}
		}
	}()
	return done
}

func (h *hostStatusController) triggerSync() {
	select {
	case h.trigger <- struct{}{}:
	default:
	}
}

// captureKlog sends klog's output (the in-process controller's log) to a
// file for the test's duration, and shows its tail if the test fails. It
// returns the file's path (klog.Flush before reading it).
func captureKlog(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "library.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	klog.LogToStderr(false)
	klog.SetOutput(f)
	t.Cleanup(func() {
		klog.Flush()
		klog.LogToStderr(true)
		f.Close()
		if t.Failed() {
			t.Logf("in-process controller log, whole:\n%s", wholeLog(path))
		}
	})
	return path
}

// TestHostWiring runs the library in-process, wired exactly as the Insights
// Operator wires its own runtime extractor controller in Operator.Run: a
// namespaced informer factory started by the host, NewResourceInformer and its
// Run, the host's own config type through ConfigFrom behind a notifier that
// sends with blocking sends on channels with a buffer of 1, a blocking updateCh
// signalled by the host's status controller on a version change, and the
// original six constructor arguments with no option. The host's status
// controller owns the ClusterOperator and aggregates our status through
// Status/StatusChanged. It must converge, repair a deletion, follow a version
// change (without rolling pods), follow the host's config, never hold up a
// host send, and the library must write nothing to the ClusterOperator.
func TestHostWiring(t *testing.T) {
	const (
		// sendBound: a blocking send on a channel the library drains at once.
		sendBound = 100 * time.Millisecond
		// churnPeriod: the host's config observers notify this often.
		churnPeriod = 25 * time.Millisecond
		upgradeTo   = "4.22.1"
	)
	e := newInProcessEnv(t)
	e.restoreClusterOperatorAtEnd()
	t.Setenv("RELEASE_VERSION", testcluster.DefaultVersion) // the operator pod's environment
	captureKlog(t)
	requests := e.requestLog()
	from := time.Now()

	// The host's clients: its own, and the one it hands the library (the same
	// credentials, another user agent).
	hostConfigClient := e.configClientAs(hostUserAgent)
	hostKube := e.kubeClientAs(hostUserAgent)
	kubeClient := e.kubeClientAs(libraryUserAgent)
	eventRecorder := events.NewKubeRecorder(hostKube.CoreV1().Events(ns), "insights-operator",
		&corev1.ObjectReference{Kind: "Namespace", APIVersion: "v1", Name: ns, Namespace: ns}, clock.RealClock{})
	t.Cleanup(eventRecorder.Shutdown)

	sends := newSendLog(sendBound)
	configAggregator := &hostConfigAggregator{listeners: map[chan struct{}]struct{}{}, sends: sends}
	libCtx, stopLibrary := context.WithCancel(context.Background())
	hostCtx, stopHost := context.WithCancel(context.Background())

	// Operator.Run, with this module in place of its own package.
	updateCh := make(chan struct{}, 1)
	var tlsProfile *configv1.TLSSecurityProfile
	if api, err := hostConfigClient.ConfigV1().APIServers().Get(libCtx, "cluster", metav1.GetOptions{}); err == nil {
		tlsProfile = api.Spec.TLSSecurityProfile
	}
	runtimeExtractorInformerFactory := clientInformers.NewSharedInformerFactoryWithOptions(
		kubeClient, 10*time.Minute, clientInformers.WithNamespace(ns))
	runtimeExtractorResourceInformer, err := runtimeextractor.NewResourceInformer(eventRecorder, runtimeExtractorInformerFactory)
	if err != nil {
		t.Fatal(err)
	}
	go runtimeExtractorInformerFactory.Start(libCtx.Done())
	go runtimeExtractorResourceInformer.Run(libCtx, 1)
	runtimeExtractorCtrl := runtimeextractor.NewRuntimeExtractorController(
		runtimeextractor.ConfigFrom(configAggregator.ConfigChanged, func() bool { return configAggregator.Config().DataReporting.DisableRuntimeExtractor }),
		updateCh,
		tlsProfile,
		kubeClient,
		eventRecorder,
		runtimeExtractorResourceInformer,
	)
	libraryDone := make(chan struct{})
	go func() { defer close(libraryDone); runtimeExtractorCtrl.Run(libCtx) }()

	// shutdown stops the host's senders first (a real host stops them with
	// the process), then the library: once Run has returned, nothing drains
	// the host's channels and its cleanup has closed the config one. A send
	// still blocked is a stalled host. It also runs when the test fails
	// early, so no controller outlives the test.
	stopped := make(chan struct{})
	close(stopped)
	churnDone, statusDone := (<-chan struct{})(stopped), (<-chan struct{})(stopped) // until they start
	shutdown := sync.OnceFunc(func() {
		stopHost()
		for what, done := range map[string]<-chan struct{}{"the config notifier": churnDone, "the host's status controller": statusDone} {
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Errorf("%s did not stop: a blocking send has waited %s", what, sends.blocked())
				return // leave the library running: cancelling it could close a channel under a send
			}
		}
		stopLibrary()
		select {
		case <-libraryDone:
		case <-time.After(40 * time.Second): // Run returns once an action in flight (at most 30 s) returns
			t.Error("the controller's Run did not return after its context was cancelled")
		}
	})
	t.Cleanup(shutdown)

	hostStatus := &hostStatusController{
		client: hostConfigClient, ctrl: runtimeExtractorCtrl, source: runtimeExtractorSource{runtimeExtractorCtrl},
		updateCh: updateCh, sends: sends, trigger: make(chan struct{}, 1),
	}
	// The host's Start: one write with no retry; the operator exits if it fails.
	if err := hostStatus.updateStatus(hostCtx); err != nil {
		t.Fatalf("the host's initial status write failed, which makes the operator exit: %v", err)
	}
	statusDone = hostStatus.run(hostCtx)
	// The host's config observers notify all the time, with blocking sends.
	churning := make(chan struct{})
	churnDone = churning
	go func() {
		defer close(churning)
		tick := time.NewTicker(churnPeriod)
		defer tick.Stop()
		for {
			select {
			case <-hostCtx.Done():
				return
			case <-tick.C:
				configAggregator.notifyListeners()
			}
		}
	}()

	// hostShows waits until the host's list carries our condition as wanted.
	hostShows := func(what string, typ configv1.ClusterStatusConditionType, st configv1.ConditionStatus, reason, inMessage string) {
		t.Helper()
		e.eventually(what, func(context.Context) (bool, error) {
			c := e.condition(typ)
			return c != nil && c.Status == st && c.Reason == reason && strings.Contains(c.Message, inMessage), nil
		})
	}

	// 1. Converge: rolled out, and the host's aggregated conditions show ours.
	ds := e.waitRolledOut()
	if got := ds.Annotations[resources.VersionAnnotation]; got != testcluster.DefaultVersion {
		t.Fatalf("version annotation %q, want RELEASE_VERSION %s", got, testcluster.DefaultVersion)
	}
	hostShows("our Available at "+testcluster.DefaultVersion, status.ConditionAvailable, configv1.ConditionTrue, status.ReasonAsExpected, testcluster.DefaultVersion)
	e.waitCondition(configv1.OperatorDegraded, configv1.ConditionFalse, "AsExpected")

	// 2. Repair drift: a deletion.
	repaired := e.deleteDaemonSetDrift()
	e.waitDaemonSet("the deleted DaemonSet recreated and rolled out", func(ds *appsv1.DaemonSet) bool { return e.rolledOut(ds) && repaired(ds) })
	e.eventually("the controller back in Running", func(context.Context) (bool, error) {
		return runtimeExtractorCtrl.State() == fsm.StateRunning, nil
	})
	hostShows("our Available after the repair", status.ConditionAvailable, configv1.ConditionTrue, status.ReasonAsExpected, testcluster.DefaultVersion)

	// 3. A version change: the cluster moves to a new release, the operator's
	// RELEASE_VERSION with it; the host's status controller sees it differ from
	// the version it reported and signals updateCh.
	before := e.daemonSet()
	e.setClusterVersion(upgradeTo)
	t.Setenv("RELEASE_VERSION", upgradeTo)
	hostStatus.triggerSync()
	ds = e.waitDaemonSet("the new version recorded and rolled out", func(ds *appsv1.DaemonSet) bool {
		return e.rolledOut(ds) && ds.Annotations[resources.VersionAnnotation] == upgradeTo
	})
	if ds.UID != before.UID || ds.Generation != before.Generation {
		t.Errorf("a version change without new images replaced the DaemonSet or rolled its pods: generation %d -> %d", before.Generation, ds.Generation)
	}
	hostShows("our Available at "+upgradeTo, status.ConditionAvailable, configv1.ConditionTrue, status.ReasonAsExpected, upgradeTo)

	// 4. The host's own config type disables, then enables, the extractor.
	configAggregator.setDisabled(true)
	e.waitDaemonSet("the DaemonSet deleted as the host's config disables it", func(ds *appsv1.DaemonSet) bool { return ds == nil })
	hostShows("our Available Disabled", status.ConditionAvailable, configv1.ConditionTrue, status.ReasonDisabled, "")
	configAggregator.setDisabled(false)
	e.waitRolledOut()
	hostShows("our Available again", status.ConditionAvailable, configv1.ConditionTrue, status.ReasonAsExpected, upgradeTo)

	shutdown()
	to := time.Now()

	t.Logf("host sends (bound %s): %s", sendBound, sends)
	for _, o := range sends.over {
		t.Errorf("a host send was held up: %s", o)
	}
	if sends.count["updateCh"] == 0 {
		t.Error("the host's status controller never signalled updateCh: the version change was not seen as such")
	}
	hostStatus.mu.Lock()
	for _, err := range hostStatus.syncErrs {
		t.Errorf("a host status sync failed: %v", err)
	}
	hostStatus.mu.Unlock()

	// The library alone wrote nothing to the ClusterOperator.
	requests.flush()
	var libraryCO, libraryReads, libraryWrites, hostCOWrites int
	for _, ev := range requests.read {
		if ev.Received.Before(from) || !ev.Received.Before(to) {
			continue
		}
		switch ev.UserAgent {
		case libraryUserAgent:
			if ev.Resource == "clusteroperators" {
				libraryCO++
				if ev.IsWrite() {
					t.Errorf("the library wrote the ClusterOperator: %s %s/%s %s (%d)", ev.Verb, ev.Resource, ev.Subresource, ev.Name, ev.Code)
				}
			}
			if ev.IsWrite() {
				libraryWrites++
			} else {
				libraryReads++
			}
		case hostUserAgent:
			if ev.Resource == "clusteroperators" && ev.IsWrite() {
				hostCOWrites++
			}
		}
	}
	t.Logf("audit log: the library (user agent %s) made %d reads and %d writes, %d of them on clusteroperators; the host wrote the ClusterOperator %d times",
		libraryUserAgent, libraryReads, libraryWrites, libraryCO, hostCOWrites)
	// The filter must see each client, or "no write" proves nothing.
	if libraryWrites == 0 || hostCOWrites == 0 {
		t.Errorf("the audit log does not show the library's DaemonSet writes (%d) or the host's status writes (%d) by user agent", libraryWrites, hostCOWrites)
	}
}
