package config

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openshift/library-go/pkg/operator/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"

	"github.com/insights-runtime-extractor/controller/internal/testwait"
	"github.com/insights-runtime-extractor/controller/pkg/internal/fakeapi"
	"github.com/insights-runtime-extractor/controller/pkg/internal/logcapture"
	"github.com/insights-runtime-extractor/controller/pkg/status"
)

const (
	pollInterval = 5 * time.Millisecond
	pollTimeout  = testwait.Patience
)

type sourceFixture struct {
	t        *testing.T
	client   *fake.Clientset
	recorder events.InMemoryRecorder
	source   *Source
	watching <-chan struct{} // closed once the informer's watch is registered
}

// startSource runs a Source against a fake clientset holding objs and waits
// until it has synced. The Source stops when the test ends.
func startSource(t *testing.T, objs ...runtime.Object) *sourceFixture {
	t.Helper()
	f := newSourceFixture(t, objs...)
	f.run()
	return f
}

func newSourceFixture(t *testing.T, objs ...runtime.Object) *sourceFixture {
	client := fake.NewClientset(objs...)
	recorder := events.NewInMemoryRecorder("config-test", clock.RealClock{})
	return &sourceFixture{t: t, client: client, recorder: recorder, source: NewSource(client, recorder),
		watching: fakeapi.WatchStarted(client, "configmaps")}
}

func (f *sourceFixture) run() {
	f.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.source.Run(ctx)
	}()
	f.t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(pollTimeout):
			f.t.Error("Source.Run did not return after its context was cancelled")
		}
	})
	f.waitFor("sync", f.source.HasSynced)
	f.waitFor("the watch to start", fakeapi.Closed(f.watching))
}

func (f *sourceFixture) waitFor(what string, cond func() bool) {
	f.t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), pollInterval, pollTimeout, true,
		func(context.Context) (bool, error) { return cond(), nil })
	require.NoError(f.t, err, "waiting for %s", what)
}

// write creates or updates the insights-config ConfigMap and waits until the
// Source has handled the resulting watch event.
func (f *sourceFixture) write(content string, labels map[string]string) {
	f.t.Helper()
	before := f.source.observed.Load()
	cm := insightsConfig(content)
	cm.Labels = labels
	cms := f.client.CoreV1().ConfigMaps(Namespace)
	_, err := cms.Update(context.Background(), cm, metav1.UpdateOptions{})
	if err != nil {
		_, err = cms.Create(context.Background(), cm, metav1.CreateOptions{})
	}
	require.NoError(f.t, err)
	f.waitFor("the ConfigMap write to be observed", func() bool { return f.source.observed.Load() > before })
}

func (f *sourceFixture) delete() {
	f.t.Helper()
	before := f.source.observed.Load()
	err := f.client.CoreV1().ConfigMaps(Namespace).Delete(context.Background(), ConfigMapName, metav1.DeleteOptions{})
	require.NoError(f.t, err)
	f.waitFor("the ConfigMap delete to be observed", func() bool { return f.source.observed.Load() > before })
}

func (f *sourceFixture) warnings() []*corev1.Event {
	var out []*corev1.Event
	for _, e := range f.recorder.Events() {
		if e.Type == corev1.EventTypeWarning {
			out = append(out, e)
		}
	}
	return out
}

func insightsConfig(content string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: ConfigMapName},
		Data:       map[string]string{ConfigKey: content},
	}
}

func pending(ch <-chan struct{}) bool {
	select {
	case _, ok := <-ch:
		return ok
	default:
		return false
	}
}

const (
	disableYAML = "dataReporting:\n  disableRuntimeExtractor: true\n"
	enableYAML  = "dataReporting:\n  disableRuntimeExtractor: false\n"
	badYAML     = "dataReporting:\n  disableRuntimeExtractor: \"sometimes\"\n"
)

func TestSourceWithoutConfigMapIsEnabled(t *testing.T) {
	f := startSource(t)
	assertConfigEqual(t, Default(), f.source.Config())
	assert.NoError(t, f.source.LastError())
	assert.Empty(t, f.recorder.Events())
}

func TestSourceReadsInitialConfigMap(t *testing.T) {
	f := startSource(t, insightsConfig(disableYAML))
	// HasSynced covers the handler, so the initial object is already applied.
	assertConfigEqual(t, disabled(true), f.source.Config())
	assert.NoError(t, f.source.LastError())
}

func TestSourceRejectsInitialBadConfigMap(t *testing.T) {
	f := startSource(t, insightsConfig(badYAML))
	assertConfigEqual(t, Default(), f.source.Config())
	require.Error(t, f.source.LastError())
	assert.Len(t, f.warnings(), 1)
}

func TestSourceWatchesOnlyInsightsConfig(t *testing.T) {
	other := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: "other"},
		Data:       map[string]string{ConfigKey: disableYAML},
	}
	f := newSourceFixture(t, other)
	var mu sync.Mutex
	var selectors []string
	record := func(namespace, selector string) {
		mu.Lock()
		defer mu.Unlock()
		selectors = append(selectors, namespace+" "+selector)
	}
	f.client.PrependReactor("list", "configmaps", func(a clienttesting.Action) (bool, runtime.Object, error) {
		record(a.GetNamespace(), a.(clienttesting.ListAction).GetListRestrictions().Fields.String())
		return false, nil, nil
	})
	f.client.PrependWatchReactor("configmaps", func(a clienttesting.Action) (bool, watch.Interface, error) {
		record(a.GetNamespace(), a.(clienttesting.WatchAction).GetWatchRestrictions().Fields.String())
		return false, nil, nil
	})
	f.run()

	// The fake clientset ignores field selectors, so the unrelated ConfigMap
	// reaches the informer; the Source must still ignore it.
	before := f.source.observed.Load()
	_, err := f.client.CoreV1().ConfigMaps(Namespace).Update(context.Background(), other, metav1.UpdateOptions{})
	require.NoError(t, err)
	f.write(enableYAML, nil) // a barrier: handlers run in order
	assert.Equal(t, before+1, f.source.observed.Load(), "only insights-config is observed")
	assertConfigEqual(t, disabled(false), f.source.Config())

	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, selectors)
	for _, s := range selectors {
		assert.Equal(t, "openshift-insights metadata.name=insights-config", s)
	}
}

func TestSourceNotifiesOnlyRealChanges(t *testing.T) {
	f := startSource(t, insightsConfig(enableYAML))
	ch, cancel := f.source.ConfigChanged()
	defer cancel()

	f.write(disableYAML, nil)
	assert.True(t, pending(ch), "a changed config notifies")
	assertConfigEqual(t, disabled(true), f.source.Config())

	// Same meaning, different text and metadata: nothing to tell.
	f.write("dataReporting:\n  disableRuntimeExtractor: \"TRUE\"\n", map[string]string{"touched": "yes"})
	assert.False(t, pending(ch), "an equivalent config does not notify")

	f.write(enableYAML+"  runtimeExtractor:\n    priorityClassName: high\n", nil)
	assert.True(t, pending(ch), "a scheduling change notifies")
	assert.Equal(t, "high", f.source.Config().DataReporting.RuntimeExtractor.PriorityClassName)
	assert.Empty(t, f.recorder.Events())
}

func TestSourceKeepsLastGoodConfigOnBadInput(t *testing.T) {
	f := startSource(t, insightsConfig(disableYAML))
	ch, cancel := f.source.ConfigChanged()
	defer cancel()

	f.write(badYAML, nil)
	assertConfigEqual(t, disabled(true), f.source.Config())
	// A rejection notifies so status can show it; the config stays the last good one.
	assert.True(t, pending(ch), "a rejected config notifies (for status)")
	lastErr := f.source.LastError()
	require.Error(t, lastErr)
	assert.Equal(t, `invalid config.yaml in ConfigMap openshift-insights/insights-config: `+
		`dataReporting.disableRuntimeExtractor: Invalid value: "sometimes": `+boolMsg, lastErr.Error())

	warnings := f.warnings()
	require.Len(t, warnings, 1)
	assert.Equal(t, ReasonInvalidConfig, warnings[0].Reason)
	assert.Equal(t, lastErr.Error()+"; keeping the last good configuration", warnings[0].Message)

	// The same content again (a resync, a label change) is not news.
	f.write(badYAML, map[string]string{"touched": "yes"})
	assert.Len(t, f.warnings(), 1, "the same bad content warns once")
	assert.False(t, pending(ch))

	// Malformed YAML is different bad content: one more Warning.
	f.write("dataReporting: [\n", nil)
	require.Len(t, f.warnings(), 2)
	assert.Contains(t, f.warnings()[1].Message, "openshift-insights/insights-config")
	assert.Contains(t, f.warnings()[1].Message, "is not valid YAML")
	assertConfigEqual(t, disabled(true), f.source.Config())

	// A good config equal to the last good one still notifies, so that the
	// controller can clear its Degraded condition.
	f.write(disableYAML, nil)
	assert.NoError(t, f.source.LastError())
	assert.True(t, pending(ch), "recovery notifies")
	assertConfigEqual(t, disabled(true), f.source.Config())

	// After recovery the old bad content is news again.
	f.write(badYAML, nil)
	assert.Len(t, f.warnings(), 3)
}

func TestSourceDeleteMeansEnabled(t *testing.T) {
	f := startSource(t, insightsConfig(disableYAML))
	ch, cancel := f.source.ConfigChanged()
	defer cancel()

	f.delete()
	assert.True(t, pending(ch))
	assertConfigEqual(t, Default(), f.source.Config())
	assert.NoError(t, f.source.LastError())
}

func TestSourceDeleteClearsRejectedConfig(t *testing.T) {
	f := startSource(t, insightsConfig(badYAML))
	ch, cancel := f.source.ConfigChanged()
	defer cancel()

	f.delete()
	assert.NoError(t, f.source.LastError())
	assert.True(t, pending(ch), "leaving the rejected state notifies")
}

func TestSourceMissingKeyMeansEnabled(t *testing.T) {
	f := startSource(t, insightsConfig(disableYAML))
	before := f.source.observed.Load()
	cm := insightsConfig("")
	cm.Data = map[string]string{"unrelated": "x"}
	_, err := f.client.CoreV1().ConfigMaps(Namespace).Update(context.Background(), cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	f.waitFor("update", func() bool { return f.source.observed.Load() > before })
	assertConfigEqual(t, Default(), f.source.Config())
}

func TestSourceSubscriptions(t *testing.T) {
	f := startSource(t)
	first, cancelFirst := f.source.ConfigChanged()
	second, cancelSecond := f.source.ConfigChanged()
	defer cancelSecond()

	// Notifications coalesce: three changes leave one pending signal.
	f.write(disableYAML, nil)
	f.write(enableYAML, nil)
	f.write(disableYAML, nil)
	assert.True(t, pending(first))
	assert.False(t, pending(first), "notifications coalesce")
	assert.True(t, pending(second), "every subscriber is notified")

	cancelFirst()
	cancelFirst() // idempotent
	_, open := <-first
	assert.False(t, open, "cancel closes the channel")

	// A closed subscription is no longer written to (that would panic).
	f.write(enableYAML, nil)
	assert.True(t, pending(second))
}

func TestSourceConfigIsACopy(t *testing.T) {
	f := startSource(t, insightsConfig(enableYAML+"  runtimeExtractor:\n    nodeSelector: {a: b}\n"))
	cfg := f.source.Config()
	cfg.DataReporting.DisableRuntimeExtractor = true
	cfg.DataReporting.RuntimeExtractor.NodeSelector["a"] = "changed"
	got := f.source.Config()
	assert.False(t, got.DataReporting.DisableRuntimeExtractor)
	assert.Equal(t, "b", got.DataReporting.RuntimeExtractor.NodeSelector["a"])
}

func TestSourceWarningNamesEveryFieldError(t *testing.T) {
	f := startSource(t)
	f.write("dataReporting:\n  runtimeExtractor:\n    tolerations:\n    - {operator: Exists}\n    - {key: a, effect: Sometimes}\n", nil)
	warnings := f.warnings()
	require.Len(t, warnings, 1)
	assert.True(t, strings.Contains(warnings[0].Message,
		`dataReporting.runtimeExtractor.tolerations[1].effect: Unsupported value: "Sometimes": supported values: "NoExecute", "NoSchedule", "PreferNoSchedule"`),
		warnings[0].Message)
}

// A huge invalid value (700 KB) is rejected with a Warning Event of about
// 1 KiB, not the whole value; the last good config stays.
func TestHugeInvalidValueGivesACappedWarning(t *testing.T) {
	f := startSource(t, insightsConfig("dataReporting:\n  disableRuntimeExtractor: true\n"))
	f.write("dataReporting:\n  disableRuntimeExtractor: "+strings.Repeat("x", 700*1024)+"\n", nil)
	warnings := f.warnings()
	require.Len(t, warnings, 1)
	assert.Equal(t, ReasonInvalidConfig, warnings[0].Reason)
	assert.LessOrEqual(t, len(warnings[0].Message), status.MaxMessageBytes, "the Event carries the rejected value whole")
	assert.True(t, f.source.Config().DataReporting.DisableRuntimeExtractor, "the last good config is kept")
}

// The log line of a rejection is capped as its Event is: a 700 KB invalid
// value gives a line of about 1 KiB that still says what was rejected.
func TestHugeInvalidValueGivesACappedLogLine(t *testing.T) {
	logged := logcapture.Klog(t)
	f := startSource(t, insightsConfig("dataReporting:\n  disableRuntimeExtractor: true\n"))
	f.write("dataReporting:\n  disableRuntimeExtractor: "+strings.Repeat("x", 700*1024)+"\n", nil)
	var lines []string
	for _, l := range strings.Split(logged(), "\n") {
		if strings.Contains(l, "Rejected runtime extractor configuration") {
			lines = append(lines, l)
		}
	}
	require.Len(t, lines, 1, "one log line for one rejection")
	assert.Contains(t, lines[0], "disableRuntimeExtractor")
	// klog's header and the line's own words come on top of the capped error.
	assert.LessOrEqual(t, len(lines[0]), status.MaxMessageBytes+300, "the log line carries the rejected value whole")
}
