package e2e

import (
	"context"
	"path/filepath"
	"sort"
	"sync"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	configclient "github.com/openshift/client-go/config/clientset/versioned"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/insights-runtime-extractor/controller/pkg/status"
	"github.com/insights-runtime-extractor/controller/pkg/testcluster"
)

// What the tests of a host operator's status controller share: its way of
// writing the ClusterOperator, and a record of every version of it.

// clusterOperator is the ClusterOperator the host owns and our conditions go to.
const clusterOperator = status.DefaultClusterOperatorName

// uploadDegraded is one of the Insights Operator's own condition types.
const uploadDegraded configv1.ClusterStatusConditionType = "UploadDegraded"

// restConfigAs is the test's admin credential with its own User-Agent, so the
// audit log tells this client's requests from the test's other ones.
func (e *env) restConfigAs(userAgent string) *rest.Config {
	cfg := rest.CopyConfig(e.cluster.RESTConfig)
	cfg.UserAgent = userAgent
	return cfg
}

func (e *env) configClientAs(userAgent string) configclient.Interface {
	e.t.Helper()
	c, err := configclient.NewForConfig(e.restConfigAs(userAgent))
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

func (e *env) kubeClientAs(userAgent string) *kubernetes.Clientset {
	e.t.Helper()
	c, err := kubernetes.NewForConfig(e.restConfigAs(userAgent))
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// controllerAccountKubeconfig installs the shipped RBAC and returns a
// kubeconfig of the controller's ServiceAccount and the user name its
// requests carry in the audit log.
func (e *env) controllerAccountKubeconfig() (path, user string) {
	e.t.Helper()
	e.installRBAC()
	path, _ = e.controllerKubeconfig()
	return path, testcluster.ServiceAccountUser(ns, controllerAccount)
}

// controllerKubeconfig writes a kubeconfig with an hour's token of the
// controller's ServiceAccount (installRBAC grants it the shipped RBAC) and
// returns its path and the same credentials as a REST config.
func (e *env) controllerKubeconfig() (string, *rest.Config) {
	e.t.Helper()
	path := filepath.Join(e.t.TempDir(), "controller.kubeconfig")
	cfg, err := e.cluster.ServiceAccountKubeconfig(context.Background(), ns, controllerAccount, path, time.Hour)
	if err != nil {
		e.t.Fatal(err)
	}
	return path, cfg
}

// restoreClusterOperatorAtEnd puts the ClusterOperator's status back as it is
// now when the test ends, so the host's conditions and versions a test wrote
// do not outlive it. Register it before starting controllers: cleanups run
// last-in first-out, so they are stopped by then.
func (e *env) restoreClusterOperatorAtEnd() {
	e.t.Helper()
	co, err := e.config.ConfigV1().ClusterOperators().Get(context.Background(), clusterOperator, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	saved := co.Status.DeepCopy()
	e.t.Cleanup(func() {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := e.config.ConfigV1().ClusterOperators().Get(context.Background(), clusterOperator, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Status = *saved.DeepCopy()
			_, err = e.config.ConfigV1().ClusterOperators().UpdateStatus(context.Background(), cur, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			e.t.Errorf("restore the ClusterOperator's status: %v", err)
		}
	})
}

// hostConditions rebuilds a whole conditions list the way the Insights
// Operator's status controller does: every condition it read is kept (types
// it does not know included), the ones it sets replace theirs, and the list is
// sorted by type. A condition whose status does not change keeps its
// transition time.
func hostConditions(read []configv1.ClusterOperatorStatusCondition, set []configv1.ClusterOperatorStatusCondition, now metav1.Time) []configv1.ClusterOperatorStatusCondition {
	byType := map[configv1.ClusterStatusConditionType]configv1.ClusterOperatorStatusCondition{}
	for _, c := range read {
		byType[c.Type] = c
	}
	for _, c := range set {
		c.LastTransitionTime = now
		if old, ok := byType[c.Type]; ok && old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		byType[c.Type] = c
	}
	out := make([]configv1.ClusterOperatorStatusCondition, 0, len(byType))
	for _, c := range byType {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}

// ownHostConditions are the conditions a healthy host sets on every sync.
func ownHostConditions() []configv1.ClusterOperatorStatusCondition {
	return []configv1.ClusterOperatorStatusCondition{
		{Type: configv1.OperatorAvailable, Status: configv1.ConditionTrue, Reason: "AsExpected", Message: "Insights works as expected"},
		{Type: configv1.OperatorProgressing, Status: configv1.ConditionFalse, Reason: "AsExpected", Message: "Monitoring the cluster"},
		{Type: configv1.OperatorDegraded, Status: configv1.ConditionFalse, Reason: "AsExpected", Message: "Insights works as expected"},
		{Type: uploadDegraded, Status: configv1.ConditionFalse, Reason: "AsExpected", Message: "uploads succeed"},
	}
}

// coVersion is one version of the ClusterOperator, as a watch delivered it.
type coVersion struct {
	at         time.Time
	rv         string
	conditions map[configv1.ClusterStatusConditionType]configv1.ClusterOperatorStatusCondition
}

// degradedWith returns the versions whose RuntimeExtractorDegraded condition
// has reason.
func degradedWith(versions []coVersion, reason string) []coVersion {
	var out []coVersion
	for _, v := range versions {
		if d, ok := v.conditions[status.ConditionDegraded]; ok && d.Reason == reason {
			out = append(out, v)
		}
	}
	return out
}

// coRecorder watches the ClusterOperator and keeps every version of it, so a
// check over its conditions misses no intermediate state (a poll would).
type coRecorder struct {
	mu       sync.Mutex
	versions []coVersion
	// gaps counts watches that ended with an error event: versions may be
	// missing there.
	gaps int
	done chan struct{}
}

// recordClusterOperator records every version from now until ctx is done;
// wait for done before reading the result.
func (e *env) recordClusterOperator(ctx context.Context) *coRecorder {
	e.t.Helper()
	client := e.configClientAs("e2e-clusteroperator-recorder")
	co, err := client.ConfigV1().ClusterOperators().Get(ctx, clusterOperator, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	r := &coRecorder{done: make(chan struct{})}
	r.add(co)
	go func() {
		defer close(r.done)
		rv := co.ResourceVersion
		for ctx.Err() == nil {
			w, err := client.ConfigV1().ClusterOperators().Watch(ctx, metav1.ListOptions{
				FieldSelector: fields.OneTermEqualSelector("metadata.name", clusterOperator).String(), ResourceVersion: rv,
			})
			if err != nil {
				// ctx done, or the API server briefly busy: watch again.
				select {
				case <-ctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
				continue
			}
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					if ctx.Err() != nil {
						break // the end of the recording, not a gap
					}
					r.mu.Lock()
					r.gaps++
					r.mu.Unlock()
					if cur, err := client.ConfigV1().ClusterOperators().Get(ctx, clusterOperator, metav1.GetOptions{}); err == nil {
						r.add(cur)
						rv = cur.ResourceVersion
					}
					break
				}
				if obj, ok := ev.Object.(*configv1.ClusterOperator); ok {
					r.add(obj)
					rv = obj.ResourceVersion
				}
			}
			w.Stop()
		}
	}()
	return r
}

func (r *coRecorder) add(co *configv1.ClusterOperator) {
	v := coVersion{at: time.Now(), rv: co.ResourceVersion, conditions: map[configv1.ClusterStatusConditionType]configv1.ClusterOperatorStatusCondition{}}
	for _, c := range co.Status.Conditions {
		v.conditions[c.Type] = c
	}
	r.mu.Lock()
	r.versions = append(r.versions, v)
	r.mu.Unlock()
}

func (r *coRecorder) result() ([]coVersion, int) {
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.versions, r.gaps
}

// dsRecorder keeps every watch event of the DaemonSet from a resourceVersion on.
type dsRecorder struct {
	mu     sync.Mutex
	events []watch.Event
	done   chan struct{}
}

func (e *env) recordDaemonSet(ctx context.Context, rv string) *dsRecorder {
	e.t.Helper()
	r := &dsRecorder{done: make(chan struct{})}
	w, err := e.kube.AppsV1().DaemonSets(ns).Watch(ctx, metav1.ListOptions{
		ResourceVersion: rv, FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(),
	})
	if err != nil {
		e.t.Fatalf("watch the DaemonSet: %v", err)
	}
	go func() {
		defer close(r.done)
		defer w.Stop()
		for ev := range w.ResultChan() {
			if ev.Type == watch.Bookmark || (ev.Type == watch.Error && ctx.Err() != nil) {
				continue // an error at the end is the watch being stopped
			}
			r.mu.Lock()
			r.events = append(r.events, ev)
			r.mu.Unlock()
		}
	}()
	return r
}

// result waits for the watch to end (its ctx done) and returns what it saw.
// A watch that ended early with an error event is reported as such by the
// caller: it is in the list.
func (r *dsRecorder) result() []watch.Event {
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.events
}

// deleteDaemonSetAsSomeoneElse deletes the DaemonSet as someone else would
// and returns it as it was.
func (e *env) deleteDaemonSetAsSomeoneElse() *appsv1.DaemonSet {
	e.t.Helper()
	ds := e.daemonSet()
	if ds == nil {
		e.t.Fatal("no DaemonSet to delete")
	}
	if err := e.kube.AppsV1().DaemonSets(ns).Delete(context.Background(), name, metav1.DeleteOptions{
		Preconditions: metav1.NewUIDPreconditions(string(ds.UID)),
	}); err != nil {
		e.t.Fatal(err)
	}
	return ds
}

// changeImageAsSomeoneElse sets the first container's image to another one and
// returns the image the controller must restore and the generation written.
func (e *env) changeImageAsSomeoneElse() (want string, generation int64) {
	e.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ds := e.daemonSet().DeepCopy()
		want = ds.Spec.Template.Spec.Containers[0].Image
		ds.Spec.Template.Spec.Containers[0].Image = "quay.io/someone/else:latest"
		upd, err := e.kube.AppsV1().DaemonSets(ns).Update(context.Background(), ds, metav1.UpdateOptions{})
		if err == nil {
			generation = upd.Generation
		}
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return want, generation
}

// deleteDaemonSetDrift deletes the DaemonSet; repaired: another one is there.
func (e *env) deleteDaemonSetDrift() func(*appsv1.DaemonSet) bool {
	old := e.deleteDaemonSetAsSomeoneElse()
	return func(ds *appsv1.DaemonSet) bool { return ds != nil && ds.UID != old.UID }
}

// changeImageDrift changes an image; repaired: the image is back, in a newer
// generation than the change.
func (e *env) changeImageDrift() func(*appsv1.DaemonSet) bool {
	want, gen := e.changeImageAsSomeoneElse()
	return func(ds *appsv1.DaemonSet) bool {
		return ds != nil && ds.Spec.Template.Spec.Containers[0].Image == want && ds.Generation > gen
	}
}
