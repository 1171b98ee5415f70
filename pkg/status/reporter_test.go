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
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
)

var (
	t0 = time.Date(2026, 4, 1, 10, 0, 0, 0, time.UTC)

	deploying = Snapshot{State: fsm.StateDeploying, Version: "4.22.1", Desired: 3, Updated: 1, Available: 1}
	upgrading = Snapshot{State: fsm.StateUpgrading, Version: "4.22.2", Desired: 3, Updated: 1, Available: 3}
	running   = Snapshot{State: fsm.StateRunning, Version: "4.22.1", Desired: 3, Updated: 3, Available: 3}
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

// fixture is a Reporter on a fake clientset with a settable clock.
type fixture struct {
	client   *configfake.Clientset
	reporter *Reporter
	now      time.Time
}

func newFixture(objects ...runtime.Object) *fixture {
	f := &fixture{client: configfake.NewClientset(objects...), now: t0}
	f.reporter = NewReporter(f.client.ConfigV1(), "")
	f.reporter.now = func() time.Time { return f.now }
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

func condition(t *testing.T, co *configv1.ClusterOperator, typ configv1.ClusterStatusConditionType) configv1.ClusterOperatorStatusCondition {
	t.Helper()
	i := indexOf(co.Status.Conditions, typ)
	require.GreaterOrEqual(t, i, 0, "condition %s present", typ)
	return co.Status.Conditions[i]
}

func TestReportWritesOncePerChange(t *testing.T) {
	ctx := context.Background()
	f := newFixture(clusterOperator(othersOf()...))

	require.NoError(t, f.reporter.Report(ctx, deploying))
	assert.Equal(t, 1, f.count("update", "status"), "first report writes")
	assert.Equal(t, 0, f.count("update", ""), "only the status subresource is written")
	for _, a := range f.client.Actions() {
		if u, ok := a.(clienttesting.UpdateActionImpl); ok {
			assert.Equal(t, resources.FieldManager, u.UpdateOptions.FieldManager)
			assert.Equal(t, "7", u.Object.(*configv1.ClusterOperator).ResourceVersion, "written under the read resourceVersion")
		}
	}

	before := len(f.client.Actions())
	for range 3 {
		require.NoError(t, f.reporter.Report(ctx, deploying))
	}
	assert.Len(t, f.client.Actions(), before, "an unchanged report makes no API call at all")

	require.NoError(t, f.reporter.Report(ctx, running))
	assert.Equal(t, 2, f.count("update", "status"), "a change is written")
	require.NoError(t, f.reporter.Report(ctx, running))
	assert.Equal(t, 2, f.count("update", "status"))

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
	assert.Equal(t, othersOf(), co.Status.Conditions[:len(othersOf())], "other conditions untouched, in place")
	for _, typ := range ConditionTypes {
		condition(t, co, typ)
	}
}

func TestReportKeepsLastTransitionTimeWhileStatusHolds(t *testing.T) {
	ctx := context.Background()
	f := newFixture(clusterOperator(othersOf()...))

	require.NoError(t, f.reporter.Report(ctx, deploying))
	co := f.get(t)
	assert.Equal(t, t0, condition(t, co, ConditionProgressing).LastTransitionTime.Time)

	// Progressing stays True (reason and message change): its time is kept.
	f.now = t0.Add(time.Minute)
	require.NoError(t, f.reporter.Report(ctx, upgrading))
	co = f.get(t)
	progressing := condition(t, co, ConditionProgressing)
	assert.Equal(t, "True Upgrading", summary(progressing))
	assert.Equal(t, t0, progressing.LastTransitionTime.Time)
	assert.Equal(t, t0, condition(t, co, ConditionAvailable).LastTransitionTime.Time)

	// Progressing turns False: its time moves; Available (still True) keeps t0.
	f.now = t0.Add(2 * time.Minute)
	require.NoError(t, f.reporter.Report(ctx, running))
	co = f.get(t)
	assert.Equal(t, t0.Add(2*time.Minute), condition(t, co, ConditionProgressing).LastTransitionTime.Time)
	assert.Equal(t, t0, condition(t, co, ConditionAvailable).LastTransitionTime.Time)
	assert.Equal(t, t0, condition(t, co, ConditionDegraded).LastTransitionTime.Time)
}

// After a restart the Reporter knows nothing; conditions already on the
// ClusterOperator that match are not rewritten, and matching times are kept.
func TestReportAfterRestartDoesNotRewriteMatchingConditions(t *testing.T) {
	ctx := context.Background()
	earlier := metav1.NewTime(t0.Add(-time.Hour))
	existing := Conditions(running)
	for i := range existing {
		existing[i].LastTransitionTime = earlier
	}
	f := newFixture(clusterOperator(append(othersOf(), existing...)...))

	require.NoError(t, f.reporter.Report(ctx, running))
	assert.Equal(t, 1, f.count("get", ""))
	assert.Equal(t, 0, f.count("update", "status"), "conditions already as wanted")

	require.NoError(t, f.reporter.Report(ctx, running))
	assert.Equal(t, 1, f.count("get", ""), "verified once, then trusted")

	// A message change keeps the original time, as Status did not move.
	require.NoError(t, f.reporter.Report(ctx, Snapshot{State: fsm.StateRunning, Version: "4.22.1", Desired: 4, Updated: 4, Available: 4}))
	assert.Equal(t, 1, f.count("update", "status"))
	assert.Equal(t, earlier.Time, condition(t, f.get(t), ConditionAvailable).LastTransitionTime.Time)
}

// Someone else wipes the conditions: the Reporter puts them back at its next
// verification, even though the state never changed.
func TestReportRestoresConditionsRemovedBySomeoneElse(t *testing.T) {
	ctx := context.Background()
	f := newFixture(clusterOperator(othersOf()...))
	require.NoError(t, f.reporter.Report(ctx, running))

	co := f.get(t)
	co.Status.Conditions = othersOf()
	_, err := f.client.ConfigV1().ClusterOperators().UpdateStatus(ctx, co, metav1.UpdateOptions{})
	require.NoError(t, err)
	writes := f.count("update", "status")

	f.now = t0.Add(DefaultVerifyInterval - time.Second)
	require.NoError(t, f.reporter.Report(ctx, running))
	assert.Equal(t, writes, f.count("update", "status"), "trusted until the verify interval passes")

	f.now = t0.Add(DefaultVerifyInterval)
	require.NoError(t, f.reporter.Report(ctx, running))
	assert.Equal(t, writes+1, f.count("update", "status"))
	condition(t, f.get(t), ConditionAvailable)
}

func TestReportRetriesOnConflict(t *testing.T) {
	ctx := context.Background()
	f := newFixture(clusterOperator(othersOf()...))
	conflicts := 2
	f.client.PrependReactor("update", "clusteroperators", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "status" || conflicts == 0 {
			return false, nil, nil
		}
		conflicts--
		return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "config.openshift.io", Resource: "clusteroperators"}, "insights", errors.New("the object has been modified"))
	})

	require.NoError(t, f.reporter.Report(ctx, deploying))
	assert.Equal(t, 3, f.count("get", ""), "re-read after each conflict")
	assert.Equal(t, 3, f.count("update", "status"))
	assert.Equal(t, "True RollingOut", summary(condition(t, f.get(t), ConditionProgressing)))
}

func TestReportReturnsOtherErrorsAndRetriesNextTime(t *testing.T) {
	ctx := context.Background()
	f := newFixture(clusterOperator(othersOf()...))
	fail := true
	f.client.PrependReactor("update", "clusteroperators", func(clienttesting.Action) (bool, runtime.Object, error) {
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

func TestReportMissingClusterOperatorLogsOnceAndRecovers(t *testing.T) {
	logs := &logSink{}
	ctx := logs.context()
	f := newFixture() // no ClusterOperator

	for range 5 {
		require.NoError(t, f.reporter.Report(ctx, deploying))
	}
	require.Len(t, logs.all(), 1, "one line for the whole absence")
	assert.Contains(t, logs.all()[0], "ClusterOperator not found")
	assert.Contains(t, logs.all()[0], `"clusterOperator"="insights"`)
	assert.Equal(t, 5, f.count("get", ""), "keeps looking on every report")

	_, err := f.client.ConfigV1().ClusterOperators().Create(context.Background(), clusterOperator(othersOf()...), metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, f.reporter.Report(ctx, deploying))
	assert.Equal(t, "True RollingOut", summary(condition(t, f.get(t), ConditionProgressing)), "reporting starts once it exists")
	require.Len(t, logs.all(), 2)
	assert.Contains(t, logs.all()[1], "ClusterOperator found")

	// Gone again: one more line, not one per report.
	require.NoError(t, f.client.ConfigV1().ClusterOperators().Delete(context.Background(), "insights", metav1.DeleteOptions{}))
	for range 3 {
		require.NoError(t, f.reporter.Report(ctx, running))
	}
	assert.Len(t, logs.all(), 3)
}

func TestReportMissingCRD(t *testing.T) {
	cases := map[string]error{
		"no kind match": &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "config.openshift.io", Kind: "ClusterOperator"}},
		"no resource match": &meta.NoResourceMatchError{PartialResource: schema.GroupVersionResource{
			Group: "config.openshift.io", Version: "v1", Resource: "clusteroperators"}},
		// A cluster without the CRD answers the typed client's GET with a plain 404.
		"not served": apierrors.NewNotFound(schema.GroupResource{Group: "config.openshift.io", Resource: "clusteroperators"}, "insights"),
	}
	for name, missingErr := range cases {
		t.Run(name, func(t *testing.T) {
			logs := &logSink{}
			f := newFixture()
			f.client.PrependReactor("get", "clusteroperators", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, missingErr
			})
			for range 3 {
				require.NoError(t, f.reporter.Report(logs.context(), running))
			}
			assert.Len(t, logs.all(), 1)
			assert.Equal(t, 0, f.count("update", "status"))
		})
	}
}

// A real read failure is an error, not a "missing" line.
func TestReportGetErrorIsReturned(t *testing.T) {
	logs := &logSink{}
	f := newFixture(clusterOperator())
	f.client.PrependReactor("get", "clusteroperators", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInternalError(errors.New("etcd timeout"))
	})
	require.Error(t, f.reporter.Report(logs.context(), running))
	assert.Empty(t, logs.all())
}

func TestNewReporterName(t *testing.T) {
	client := configfake.NewClientset()
	assert.Equal(t, DefaultClusterOperatorName, NewReporter(client.ConfigV1(), "").name)
	assert.Equal(t, "custom", NewReporter(client.ConfigV1(), "custom").name)
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
