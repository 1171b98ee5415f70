package resources

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/openshift/library-go/pkg/operator/events"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	appslisters "k8s.io/client-go/listers/apps/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

var daemonSetsResource = appsv1.SchemeGroupVersion.WithResource("daemonsets")

// fakeCluster is client-go's fake clientset with the API server behaviour
// the manager depends on: UIDs, resourceVersion conflicts and a generation
// that moves only when the spec changes. Its lister reads an indexer that
// the test syncs explicitly, so a stale cache can be staged.
type fakeCluster struct {
	t        *testing.T
	client   *fake.Clientset
	indexer  cache.Indexer
	lister   appslisters.DaemonSetLister
	recorder events.InMemoryRecorder
	serial   int
}

func newFakeCluster(t *testing.T) *fakeCluster {
	t.Helper()
	fc := &fakeCluster{
		t:        t,
		client:   fake.NewClientset(),
		indexer:  cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		recorder: events.NewInMemoryRecorder("test", clocktesting.NewFakePassiveClock(fakeNow)),
	}
	fc.lister = appslisters.NewDaemonSetLister(fc.indexer)
	fc.client.PrependReactor("create", "daemonsets", fc.create)
	fc.client.PrependReactor("update", "daemonsets", fc.update)
	return fc
}

func (fc *fakeCluster) next() string {
	fc.serial++
	return strconv.Itoa(fc.serial)
}

func (fc *fakeCluster) create(action clienttesting.Action) (bool, runtime.Object, error) {
	ds := action.(clienttesting.CreateAction).GetObject().(*appsv1.DaemonSet).DeepCopy()
	applyAPIDefaults(ds)
	ds.UID = types.UID("uid-" + fc.next())
	ds.Generation = 1
	ds.ResourceVersion = fc.next()
	if err := fc.client.Tracker().Create(daemonSetsResource, ds, ds.Namespace); err != nil {
		return true, nil, err
	}
	return true, ds.DeepCopy(), nil
}

func (fc *fakeCluster) update(action clienttesting.Action) (bool, runtime.Object, error) {
	ds := action.(clienttesting.UpdateAction).GetObject().(*appsv1.DaemonSet).DeepCopy()
	applyAPIDefaults(ds)
	obj, err := fc.client.Tracker().Get(daemonSetsResource, ds.Namespace, ds.Name)
	if err != nil {
		return true, nil, err
	}
	old := obj.(*appsv1.DaemonSet)
	if ds.ResourceVersion != old.ResourceVersion {
		return true, nil, apierrors.NewConflict(appsv1.Resource("daemonsets"), ds.Name,
			fmt.Errorf("resourceVersion %q is not the current %q", ds.ResourceVersion, old.ResourceVersion))
	}
	ds.UID = old.UID
	ds.Generation = old.Generation
	if !equality.Semantic.DeepEqual(old.Spec, ds.Spec) {
		ds.Generation++
	}
	ds.ResourceVersion = fc.next()
	if err := fc.client.Tracker().Update(daemonSetsResource, ds, ds.Namespace); err != nil {
		return true, nil, err
	}
	return true, ds.DeepCopy(), nil
}

// applyAPIDefaults sets the defaults the API server adds to a DaemonSet
// that the manifest leaves out, so stored objects are supersets of the
// desired one as in a real cluster.
func applyAPIDefaults(ds *appsv1.DaemonSet) {
	if ds.Spec.RevisionHistoryLimit == nil {
		ds.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	}
	pod := &ds.Spec.Template.Spec
	if pod.RestartPolicy == "" {
		pod.RestartPolicy = corev1.RestartPolicyAlways
	}
	if pod.DNSPolicy == "" {
		pod.DNSPolicy = corev1.DNSClusterFirst
	}
	if pod.SchedulerName == "" {
		pod.SchedulerName = corev1.DefaultSchedulerName
	}
	if pod.SecurityContext == nil {
		pod.SecurityContext = &corev1.PodSecurityContext{}
	}
	if pod.EnableServiceLinks == nil {
		pod.EnableServiceLinks = ptr.To(true)
	}
	pod.DeprecatedServiceAccount = pod.ServiceAccountName
	for i := range pod.Containers {
		c := &pod.Containers[i]
		if c.TerminationMessagePath == "" {
			c.TerminationMessagePath = corev1.TerminationMessagePathDefault
		}
	}
	for i := range pod.Volumes {
		v := &pod.Volumes[i]
		if v.ConfigMap != nil && v.ConfigMap.DefaultMode == nil {
			v.ConfigMap.DefaultMode = ptr.To(corev1.ConfigMapVolumeSourceDefaultMode)
		}
		if v.Secret != nil && v.Secret.DefaultMode == nil {
			v.Secret.DefaultMode = ptr.To(corev1.SecretVolumeSourceDefaultMode)
		}
	}
}

// sync makes the cache show what the API server holds, like a caught-up informer.
func (fc *fakeCluster) sync() {
	fc.t.Helper()
	obj, err := fc.client.Tracker().Get(daemonSetsResource, Namespace, DaemonSetName)
	switch {
	case apierrors.IsNotFound(err):
		for _, cached := range fc.indexer.List() {
			if err := fc.indexer.Delete(cached); err != nil {
				fc.t.Fatalf("clear cache: %v", err)
			}
		}
	case err != nil:
		fc.t.Fatalf("read tracker: %v", err)
	default:
		if err := fc.indexer.Update(obj); err != nil {
			fc.t.Fatalf("update cache: %v", err)
		}
	}
}

// stored returns the DaemonSet the API server holds, or nil.
func (fc *fakeCluster) stored() *appsv1.DaemonSet {
	fc.t.Helper()
	obj, err := fc.client.Tracker().Get(daemonSetsResource, Namespace, DaemonSetName)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		fc.t.Fatalf("read tracker: %v", err)
	}
	return obj.(*appsv1.DaemonSet)
}

// edit changes the stored DaemonSet through the API, as another actor
// would, then syncs the cache and forgets the actions it took.
func (fc *fakeCluster) edit(mutate func(*appsv1.DaemonSet)) {
	fc.t.Helper()
	ds := fc.stored().DeepCopy()
	mutate(ds)
	if _, _, err := fc.update(clienttesting.NewUpdateAction(daemonSetsResource, ds.Namespace, ds)); err != nil {
		fc.t.Fatalf("edit: %v", err)
	}
	fc.sync()
	fc.client.ClearActions()
}

// requests counts the recorded API requests: reads (get/list/watch) and
// writes (create/update/patch/delete), with the verbs in order.
type requests struct {
	Reads, Writes int
	Verbs         []string
}

func (fc *fakeCluster) requests() requests {
	var r requests
	for _, a := range fc.client.Actions() {
		r.Verbs = append(r.Verbs, a.GetVerb())
		switch a.GetVerb() {
		case "get", "list", "watch":
			r.Reads++
		default:
			r.Writes++
		}
	}
	return r
}

// reasons returns the reasons of the recorded events, in order.
func (fc *fakeCluster) reasons() []string {
	var out []string
	for _, e := range fc.recorder.Events() {
		out = append(out, e.Reason)
	}
	return out
}
