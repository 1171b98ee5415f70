package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	"github.com/openshift/library-go/pkg/crypto"
	"github.com/openshift/library-go/pkg/operator/events"
	"github.com/openshift/library-go/pkg/operator/resource/resourceapply"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"

	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/status"
	"github.com/insights-runtime-extractor/controller/pkg/testcluster"
)

// originalManifest is the DaemonSet the Insights Operator's own runtime
// extractor controller declares (see the file's header).
const originalManifest = "../../testdata/original/daemonset.yaml"

// originalTLSArgs are the arguments the original controller appends to
// kube-rbac-proxy's for the cluster TLS profile: with none set, Intermediate's
// ciphers in IANA names (those Go knows), then its minimum version.
func originalTLSArgs() []string {
	profile := configv1.TLSProfiles[configv1.TLSProfileIntermediateType]
	var ciphers []string
	for _, name := range crypto.OpenSSLToIANACipherSuites(profile.Ciphers) {
		if _, err := crypto.CipherSuite(name); err == nil {
			ciphers = append(ciphers, name)
		}
	}
	return []string{"--tls-cipher-suites=" + strings.Join(ciphers, ","), "--tls-min-version=" + string(profile.MinTLSVersion)}
}

// createAsTheOriginalController leaves the DaemonSet as the original controller
// would have: its manifest, images from RELATED_IMAGE_* (unset, so its
// defaults), the TLS arguments, written by library-go's ApplyDaemonSet as the
// original does (which adds the spec-hash annotation).
func (e *env) createAsTheOriginalController() *appsv1.DaemonSet {
	e.t.Helper()
	ds, err := testcluster.ReadDaemonSet(originalManifest)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := range ds.Spec.Template.Spec.Containers {
		if c := &ds.Spec.Template.Spec.Containers[i]; c.Name == resources.ContainerKubeRBACProxy {
			c.Args = append(c.Args, originalTLSArgs()...)
		}
	}
	recorder := events.NewInMemoryRecorder("insights-operator", clock.RealClock{})
	created, changed, err := resourceapply.ApplyDaemonSet(context.Background(), e.kube.AppsV1(), recorder, ds, -1)
	if err != nil || !changed {
		e.t.Fatalf("create the original DaemonSet: changed %v, %v", changed, err)
	}
	return created
}

// TestAdoptsTheOriginalControllersDaemonSet: the DaemonSet the Insights
// Operator's own controller left behind is running when this controller starts
// in its place. It must adopt it: the same object (UID), never deleted, and at
// most one rolling update (one write of the DaemonSet, its generation moving
// at most once), then Running and Available at the cluster's version.
func TestAdoptsTheOriginalControllersDaemonSet(t *testing.T) {
	e := newEnv(t)
	kubeconfig, user := e.controllerAccountKubeconfig()
	orig := e.createAsTheOriginalController()
	if _, ok := orig.Labels[resources.LabelManagedBy]; ok {
		t.Fatalf("the original DaemonSet carries %s: it is not the original's", resources.LabelManagedBy)
	}
	orig = e.waitDaemonSet("the original DaemonSet rolled out", func(ds *appsv1.DaemonSet) bool {
		return e.rolledOut(ds) && ds.UID == orig.UID
	})

	requests := e.requestLog()
	ctx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	changes := e.recordDaemonSet(ctx, orig.ResourceVersion)
	from := time.Now()
	c := e.startController(controllerOpts{kubeconfig: kubeconfig})
	ds := e.waitDaemonSet("the DaemonSet adopted and rolled out", func(ds *appsv1.DaemonSet) bool {
		return e.rolledOut(ds) && ds.Annotations[resources.VersionAnnotation] == testcluster.DefaultVersion &&
			ds.Labels[resources.LabelManagedBy] == resources.ManagedByValue
	})
	e.waitState(c, "Running")
	e.waitCondition(status.ConditionAvailable, configv1.ConditionTrue, status.ReasonAsExpected)
	// A window of absence: a second write (one that mistook its own for
	// drift) would come within moments of the first.
	quiet := e.quietFor(ds.ResourceVersion, 5*time.Second)
	to := time.Now()
	stopWatch()
	requests.flush()

	if ds.UID != orig.UID {
		t.Fatalf("the DaemonSet was replaced: UID %s, the original's %s", ds.UID, orig.UID)
	}
	generations := map[int64]bool{orig.Generation: true}
	for _, ev := range append(changes.result(), quiet...) {
		cur, ok := ev.Object.(*appsv1.DaemonSet)
		switch {
		case ev.Type == watch.Deleted:
			t.Errorf("the DaemonSet was deleted")
		case !ok:
			t.Errorf("DaemonSet watch: %s event %T", ev.Type, ev.Object)
		default:
			generations[cur.Generation] = true
		}
	}
	writes := requests.writes(user, from, to)
	var dsWrites []string
	for _, w := range writes {
		if strings.Contains(w, " daemonsets/") {
			dsWrites = append(dsWrites, w)
		}
	}
	t.Logf("adopted UID %s: generation %d -> %d; DaemonSet writes by the controller: %s",
		orig.UID, orig.Generation, ds.Generation, joinOrNone(dsWrites))
	if len(dsWrites) > 1 {
		t.Errorf("%d writes of the DaemonSet, want at most one: %s", len(dsWrites), strings.Join(dsWrites, ", "))
	}
	for _, w := range dsWrites {
		if !strings.HasPrefix(w, "update daemonsets/") && !strings.HasPrefix(w, "patch daemonsets/") {
			t.Errorf("the adoption wrote other than an update: %s", w)
		}
	}
	if len(generations) > 2 || ds.Generation > orig.Generation+1 {
		t.Errorf("the generation moved more than once: from %d, seen %v, now %d", orig.Generation, generations, ds.Generation)
	}
	// What adoption keeps of the original: the selector (immutable), the
	// images, and the annotations it does not own.
	for _, key := range []string{"capability.openshift.io/name", "include.release.openshift.io/self-managed-high-availability"} {
		if ds.Annotations[key] != orig.Annotations[key] {
			t.Errorf("annotation %s: %q, the original's %q", key, ds.Annotations[key], orig.Annotations[key])
		}
	}
	for i, want := range imagesByName(orig) {
		if got := imagesByName(ds)[i]; got != want {
			t.Errorf("container %s: image %q, the original's %q", i, got, want)
		}
	}
}

func imagesByName(ds *appsv1.DaemonSet) map[string]string {
	out := map[string]string{}
	for _, c := range ds.Spec.Template.Spec.Containers {
		out[c.Name] = c.Image
	}
	return out
}
