package status

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	configv1 "github.com/openshift/api/config/v1"
	configfake "github.com/openshift/client-go/config/clientset/versioned/fake"
	configinformers "github.com/openshift/client-go/config/informers/externalversions"
	configv1listers "github.com/openshift/client-go/config/listers/config/v1"
	"github.com/openshift/library-go/pkg/config/clusteroperator/v1helpers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/internal/testwait"
	"github.com/insights-runtime-extractor/controller/pkg/internal/fakeapi"
)

var (
	t0 = time.Date(2026, 4, 1, 10, 0, 0, 0, time.UTC)

	deploying = Snapshot{State: fsm.StateDeploying, Version: "4.22.1", Present: true, AppliedVersion: "4.22.1", Desired: 3, Updated: 1, Available: 1}
	upgrading = Snapshot{State: fsm.StateUpgrading, Version: "4.22.2", Present: true, AppliedVersion: "4.22.2", Desired: 3, Updated: 1, Available: 3}
	running   = Snapshot{State: fsm.StateRunning, Version: "4.22.1", Present: true, AppliedVersion: "4.22.1", RolledOut: true, Desired: 3, Updated: 3, Available: 3}
)

// othersOf is the Insights Operator's own conditions, which must survive every write.
func othersOf() []configv1.ClusterOperatorStatusCondition {
	return []configv1.ClusterOperatorStatusCondition{
		{Type: configv1.OperatorAvailable, Status: configv1.ConditionTrue, Reason: "AsExpected", Message: "Insights works", LastTransitionTime: metav1.NewTime(t0.Add(-48 * time.Hour))},
		{Type: configv1.OperatorDegraded, Status: configv1.ConditionFalse, Reason: "AsExpected", LastTransitionTime: metav1.NewTime(t0.Add(-47 * time.Hour))},
		{Type: "UploadDegraded", Status: configv1.ConditionTrue, Reason: "UploadFailed", Message: "upload failed", LastTransitionTime: metav1.NewTime(t0.Add(-time.Hour))},
	}
}

func clusterOperator(conds ...configv1.ClusterOperatorStatusCondition) *configv1.ClusterOperator {
	return &configv1.ClusterOperator{
		ObjectMeta: metav1.ObjectMeta{Name: "insights", ResourceVersion: "7"},
		Status:     configv1.ClusterOperatorStatus{Conditions: conds},
	}
}

// fixture is a Reporter on a fake clientset (with server-side apply) and a
// settable clock.
type fixture struct {
	client   *configfake.Clientset
	reporter *Reporter
	clock    *clocktesting.FakePassiveClock
}

func newFixture(objects ...runtime.Object) *fixture {
	f := &fixture{client: configfake.NewClientset(objects...), clock: clocktesting.NewFakePassiveClock(t0)}
	f.reporter = NewReporter(f.client.ConfigV1(), "")
	f.reporter.clock = f.clock
	return f
}

func (f *fixture) get(t *testing.T) *configv1.ClusterOperator {
	t.Helper()
	co, err := f.client.ConfigV1().ClusterOperators().Get(context.Background(), "insights", metav1.GetOptions{})
	require.NoError(t, err)
	return co
}

// count returns how many recorded actions have the verb (and subresource, "" for none).
func (f *fixture) count(verb, subresource string) int {
	n := 0
	for _, a := range f.client.Actions() {
		if a.GetVerb() == verb && a.GetSubresource() == subresource && a.GetResource().Resource == "clusteroperators" {
			n++
		}
	}
	return n
}

// observe starts a one-object informer on the fake and hands it to the Reporter.
func (f *fixture) observe(t *testing.T) {
	t.Helper()
	factory := configinformers.NewSharedInformerFactory(f.client, 0)
	require.NoError(t, f.reporter.Observe(factory.Config().V1().ClusterOperators()))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); factory.Shutdown() })
	watching := fakeapi.WatchStarted(f.client, "clusteroperators")
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	testwait.For(t, "the watch to start", fakeapi.Closed(watching))
}

// waitCached waits until the informer shows a ClusterOperator for which ok holds.
func (f *fixture) waitCached(t *testing.T, ok func(*configv1.ClusterOperator) bool) {
	t.Helper()
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, testwait.Patience, true, func(context.Context) (bool, error) {
		co, err := f.reporter.lister.Get("insights")
		return err == nil && ok(co), nil
	}))
}

func condition(t *testing.T, co *configv1.ClusterOperator, typ configv1.ClusterStatusConditionType) configv1.ClusterOperatorStatusCondition {
	t.Helper()
	c := v1helpers.FindStatusCondition(co.Status.Conditions, typ)
	require.NotNil(t, c, "condition %s present", typ)
	return *c
}

func TestReportAppliesOncePerChangeWithoutReads(t *testing.T) {
	ctx := context.Background()
	f := newFixture(clusterOperator(othersOf()...))

	require.NoError(t, f.reporter.Report(ctx, deploying))
	assert.Equal(t, 1, f.count("patch", "status"), "first report applies")
	assert.Equal(t, 0, f.count("get", ""), "no read")
	assert.Equal(t, 0, f.count("update", "status"), "no update")
	for _, a := range f.client.Actions() {
		if p, ok := a.(clienttesting.PatchActionImpl); ok {
			assert.Equal(t, types.ApplyPatchType, p.PatchType)
			assert.Equal(t, FieldManager, p.PatchOptions.FieldManager)
			require.NotNil(t, p.PatchOptions.Force)
			assert.True(t, *p.PatchOptions.Force, "our conditions are ours: force")
		}
	}

	before := len(f.client.Actions())
	for range 3 {
		require.NoError(t, f.reporter.Report(ctx, deploying))
	}
	assert.Len(t, f.client.Actions(), before, "an unchanged report makes no API call at all")

	require.NoError(t, f.reporter.Report(ctx, running))
	assert.Equal(t, 2, f.count("patch", "status"), "a change is applied")
	require.NoError(t, f.reporter.Report(ctx, running))
	assert.Equal(t, 2, f.count("patch", "status"))

	co := f.get(t)
	assert.Equal(t, "True AsExpected", summary(condition(t, co, ConditionAvailable)))
	assert.Equal(t, "False AsExpected", summary(condition(t, co, ConditionProgressing)))
	assert.Equal(t, "False AsExpected", summary(condition(t, co, ConditionDegraded)))
}

func TestReportPreservesOtherConditions(t *testing.T) {
	ctx := context.Background()
	f := newFixture(clusterOperator(othersOf()...))

	require.NoError(t, f.reporter.Report(ctx, deploying))
	require.NoError(t, f.reporter.Report(ctx, Snapshot{State: fsm.StateRunning, Failures: 2, LastError: errors.New("boom")}))

	co := f.get(t)
	require.Len(t, co.Status.Conditions, len(othersOf())+3)
	for _, want := range othersOf() {
		got := condition(t, co, want.Type)
		assert.Equal(t, summary(want), summary(got))
		assert.Equal(t, want.Message, got.Message)
		assert.True(t, want.LastTransitionTime.Equal(&got.LastTransitionTime), "%s keeps its time", want.Type)
	}
	for _, typ := range ConditionTypes {
		condition(t, co, typ)
	}
}

// The host's status controller rewrites the whole list with UpdateStatus after
// a GET; our applies carry no resourceVersion, so neither side conflicts and
// both sets of conditions survive.
func TestReportDoesNotConflictWithAnUpdateStatusWriter(t *testing.T) {
	ctx := context.Background()
	f := newFixture(clusterOperator(othersOf()...))
	require.NoError(t, f.reporter.Report(ctx, deploying))

	hostView := f.get(t) // the host read before our next apply
	require.NoError(t, f.reporter.Report(ctx, running))
	hostView.Status.Conditions = append(othersOf()[:1:1], hostView.Status.Conditions[1:]...)
	_, err := f.client.ConfigV1().ClusterOperators().UpdateStatus(ctx, hostView, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) { // as the host does: read again, write again
		hostView = f.get(t)
		_, err = f.client.ConfigV1().ClusterOperators().UpdateStatus(ctx, hostView, metav1.UpdateOptions{})
	}
	require.NoError(t, err)
	require.NoError(t, f.reporter.Report(ctx, Snapshot{State: fsm.StateRunning, Version: "4.22.2", Present: true, AppliedVersion: "4.22.2", RolledOut: true, Desired: 3, Updated: 3, Available: 3}))
	co := f.get(t)
	assert.Contains(t, condition(t, co, ConditionAvailable).Message, "4.22.2")
	condition(t, co, "UploadDegraded")
}

func TestReportKeepsLastTransitionTimeWhileStatusHolds(t *testing.T) {
	ctx := context.Background()
	f := newFixture(clusterOperator(othersOf()...))

	require.NoError(t, f.reporter.Report(ctx, deploying))
	co := f.get(t)
	assert.True(t, condition(t, co, ConditionProgressing).LastTransitionTime.Time.Equal(t0))

	// Progressing stays True (reason and message change): its time is kept.
	f.clock.SetTime(t0.Add(time.Minute))
	require.NoError(t, f.reporter.Report(ctx, upgrading))
	co = f.get(t)
	progressing := condition(t, co, ConditionProgressing)
	assert.Equal(t, "True Upgrading", summary(progressing))
	assert.True(t, progressing.LastTransitionTime.Time.Equal(t0))
	assert.True(t, condition(t, co, ConditionAvailable).LastTransitionTime.Time.Equal(t0))

	// Progressing turns False: its time moves; Available (still True) keeps t0.
	f.clock.SetTime(t0.Add(2 * time.Minute))
	require.NoError(t, f.reporter.Report(ctx, running))
	co = f.get(t)
	assert.True(t, condition(t, co, ConditionProgressing).LastTransitionTime.Time.Equal(t0.Add(2*time.Minute)))
	assert.True(t, condition(t, co, ConditionAvailable).LastTransitionTime.Time.Equal(t0))
	assert.True(t, condition(t, co, ConditionDegraded).LastTransitionTime.Time.Equal(t0))
}

// After a restart the Reporter knows what the informer shows: conditions
// already on the ClusterOperator that match are not rewritten, and a change
// keeps the observed transition time.
func TestReportAfterRestartDoesNotRewriteMatchingConditions(t *testing.T) {
	ctx := context.Background()
	earlier := metav1.NewTime(t0.Add(-time.Hour))
	existing := Conditions(running)
	for i := range existing {
		existing[i].LastTransitionTime = earlier
	}
	f := newFixture(clusterOperator(append(othersOf(), existing...)...))
	f.observe(t)
	f.client.ClearActions()

	require.NoError(t, f.reporter.Report(ctx, running))
	assert.Empty(t, f.client.Actions(), "conditions already as wanted: no request at all")

	// A message change keeps the original time, as Status did not move.
	require.NoError(t, f.reporter.Report(ctx, Snapshot{State: fsm.StateRunning, Version: "4.22.1", Present: true, AppliedVersion: "4.22.1", RolledOut: true, Desired: 4, Updated: 4, Available: 4}))
	assert.Equal(t, 1, f.count("patch", "status"))
	assert.Equal(t, 0, f.count("get", ""))
	assert.True(t, condition(t, f.get(t), ConditionAvailable).LastTransitionTime.Time.Equal(earlier.Time))
}

// Someone else removes our conditions: the informer signals Changed, and the
// next Report puts them back; until the cache shows our own apply, the
// Reporter does not apply the same conditions twice.
func TestReportRestoresConditionsRemovedBySomeoneElse(t *testing.T) {
	ctx := context.Background()
	f := newFixture(clusterOperator(othersOf()...))
	f.observe(t)
	require.NoError(t, f.reporter.Report(ctx, running))
	require.NoError(t, f.reporter.Report(ctx, running))
	assert.Equal(t, 1, f.count("patch", "status"), "a lagging cache does not cause a second apply")
	f.waitCached(t, func(co *configv1.ClusterOperator) bool { return len(co.Status.Conditions) == len(othersOf())+3 })
	drainChanged(f.reporter)

	co := f.get(t)
	co.Status.Conditions = othersOf()
	co.ResourceVersion = "8" // the fake does not move it as a server does
	_, err := f.client.ConfigV1().ClusterOperators().UpdateStatus(ctx, co, metav1.UpdateOptions{})
	require.NoError(t, err)
	select {
	case <-f.reporter.Changed():
	case <-time.After(testwait.Patience):
		t.Fatal("no Changed signal for someone else's write")
	}
	f.waitCached(t, func(co *configv1.ClusterOperator) bool { return len(co.Status.Conditions) == len(othersOf()) })
	require.NoError(t, f.reporter.Report(ctx, running))
	assert.Equal(t, 2, f.count("patch", "status"))
	condition(t, f.get(t), ConditionAvailable)
}

func drainChanged(r *Reporter) {
	for {
		select {
		case <-r.Changed():
		default:
			return
		}
	}
}

func TestReportReturnsErrorsAndRetriesNextTime(t *testing.T) {
	ctx := context.Background()
	f := newFixture(clusterOperator(othersOf()...))
	fail := true
	f.client.PrependReactor("patch", "clusteroperators", func(clienttesting.Action) (bool, runtime.Object, error) {
		if !fail {
			return false, nil, nil
		}
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "config.openshift.io", Resource: "clusteroperators"}, "insights", errors.New("no RBAC"))
	})

	err := f.reporter.Report(ctx, deploying)
	require.Error(t, err)
	assert.True(t, apierrors.IsForbidden(err), "the API error is wrapped, not replaced: %v", err)
	assert.Contains(t, err.Error(), "clusteroperator insights")

	fail = false
	require.NoError(t, f.reporter.Report(ctx, deploying), "the same snapshot is tried again after a failure")
	assert.Equal(t, "True RollingOut", summary(condition(t, f.get(t), ConditionProgressing)))
}

// logSink records log lines for the "log once" assertions.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (s *logSink) context() context.Context {
	logger := funcr.New(func(prefix, args string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.lines = append(s.lines, fmt.Sprint(prefix, args))
	}, funcr.Options{})
	return klog.NewContext(context.Background(), logger)
}

func (s *logSink) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lines...)
}

// A missing ClusterOperator is not an error worth a warning, but nothing was
// written: ErrMissing says so, so that the caller writes once it appears.
func TestReportMissingClusterOperatorLogsOnceAndRecovers(t *testing.T) {
	logs := &logSink{}
	ctx := logs.context()
	f := newFixture() // no ClusterOperator
	f.observe(t)

	for range 5 {
		require.ErrorIs(t, f.reporter.Report(ctx, deploying), ErrMissing, "nothing was written")
	}
	require.Len(t, logs.all(), 1, "one line for the whole absence")
	assert.Contains(t, logs.all()[0], "ClusterOperator not found")
	assert.Contains(t, logs.all()[0], `"clusterOperator"="insights"`)
	assert.Equal(t, 0, f.count("patch", "status"), "the informer says it is absent: no request")

	_, err := f.client.ConfigV1().ClusterOperators().Create(context.Background(), clusterOperator(othersOf()...), metav1.CreateOptions{})
	require.NoError(t, err)
	f.waitCached(t, func(*configv1.ClusterOperator) bool { return true })
	require.NoError(t, f.reporter.Report(ctx, deploying))
	assert.Equal(t, "True RollingOut", summary(condition(t, f.get(t), ConditionProgressing)), "reporting starts once it exists")
	require.Len(t, logs.all(), 2)
	assert.Contains(t, logs.all()[1], "ClusterOperator found")
}

func TestReportMissingCRD(t *testing.T) {
	cases := map[string]error{
		"no kind match": &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "config.openshift.io", Kind: "ClusterOperator"}},
		"no resource match": &meta.NoResourceMatchError{PartialResource: schema.GroupVersionResource{
			Group: "config.openshift.io", Version: "v1", Resource: "clusteroperators"}},
		// A cluster without the CRD, or without the object, answers with a plain 404.
		"not found": apierrors.NewNotFound(schema.GroupResource{Group: "config.openshift.io", Resource: "clusteroperators"}, "insights"),
	}
	for name, missingErr := range cases {
		t.Run(name, func(t *testing.T) {
			logs := &logSink{}
			f := newFixture()
			f.client.PrependReactor("patch", "clusteroperators", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, missingErr
			})
			for range 3 {
				err := f.reporter.Report(logs.context(), running)
				require.ErrorIs(t, err, ErrMissing, "nothing was written")
				require.ErrorIs(t, err, missingErr, "the API error is kept")
			}
			assert.Len(t, logs.all(), 1)
			assert.Equal(t, 3, f.count("patch", "status"), "unknown absence: tried on every report")
		})
	}
}

func TestNewReporterName(t *testing.T) {
	client := configfake.NewClientset()
	assert.Equal(t, DefaultClusterOperatorName, NewReporter(client.ConfigV1(), "").Name())
	assert.Equal(t, "custom", NewReporter(client.ConfigV1(), "custom").Name())
}

func TestReportIsSafeForConcurrentUse(t *testing.T) {
	f := newFixture(clusterOperator(othersOf()...))
	ctx := logr.NewContext(context.Background(), logr.Discard())
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := running
			if i%2 == 0 {
				s = deploying
			}
			assert.NoError(t, f.reporter.Report(ctx, s))
		}()
	}
	wg.Wait()
	require.Len(t, f.get(t).Status.Conditions, len(othersOf())+3, "no condition duplicated")
}

// A change event that predates our own apply reaches the cache after the
// apply returned: the second status writer of the e2e test updates the
// ClusterOperator just before our apply, and its event arrives just after.
// That version lacks our conditions only because it is older than our write:
// it is no reason to apply again (the e2e test saw two writes for one step).
// A version newer than our write that lacks them is someone's removal, and
// they are applied again.
func TestReportTrustsItsApplyOverAnOlderCachedVersion(t *testing.T) {
	ctx := context.Background()
	server := clusterOperator(othersOf()...)
	server.ResourceVersion = "7"
	f := newFixture(server)
	cached := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	show := func(rv string, conds []configv1.ClusterOperatorStatusCondition) {
		t.Helper()
		co := clusterOperator(conds...)
		co.ResourceVersion = rv
		require.NoError(t, cached.Update(co))
	}
	f.reporter.lister, f.reporter.synced = configv1listers.NewClusterOperatorLister(cached), func() bool { return true }

	show("5", othersOf()) // the cache is behind the server's 6 and 7
	require.NoError(t, f.reporter.Report(ctx, running))
	require.Equal(t, 1, f.count("patch", "status"))
	written := f.get(t).ResourceVersion

	show("6", othersOf()) // someone's write before ours, seen after it
	require.NoError(t, f.reporter.Report(ctx, running))
	assert.Equal(t, 1, f.count("patch", "status"), "a cached version older than our write (%s) made us apply again", written)

	show(written, f.get(t).Status.Conditions) // our write, seen
	require.NoError(t, f.reporter.Report(ctx, running))
	assert.Equal(t, 1, f.count("patch", "status"))

	show("100", othersOf()) // someone removed our conditions after our write
	require.NoError(t, f.reporter.Report(ctx, running))
	assert.Equal(t, 2, f.count("patch", "status"), "conditions removed after our write are applied again")
}

// The informer shows the ClusterOperator but the write finds none: an API
// server that just restarted and does not serve the custom resource yet. No
// change of the object will follow, so this is a failure to retry, not an
// absence to wait for (ErrMissing would wait for Changed).
func TestReportNotFoundWhileTheInformerShowsItIsRetried(t *testing.T) {
	logs := &logSink{}
	f := newFixture(clusterOperator(othersOf()...))
	f.observe(t)
	notFound := apierrors.NewNotFound(schema.GroupResource{Group: "config.openshift.io", Resource: "clusteroperators"}, "insights")
	f.client.PrependReactor("patch", "clusteroperators", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, notFound
	})
	err := f.reporter.Report(logs.context(), running)
	require.Error(t, err)
	require.NotErrorIs(t, err, ErrMissing, "the informer shows it: not an absence")
	require.ErrorIs(t, err, notFound, "the API error is kept")
	assert.Empty(t, logs.all(), "no absence logged")
}
