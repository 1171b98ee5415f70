package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	configclient "github.com/openshift/client-go/config/clientset/versioned"
	"github.com/openshift/library-go/pkg/operator/events"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientInformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/insights-runtime-extractor/controller/pkg/config"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/runtimeextractor"
	"github.com/insights-runtime-extractor/controller/pkg/status"
	"github.com/insights-runtime-extractor/controller/pkg/testcluster"
)

// The library embedded in a host that runs with the Insights Operator's RBAC
// as it ships (testdata/host/rbac.yaml), then with the additions
// the host series adds (hack/host/patches).

const (
	// hostAccount stands for the host's ServiceAccount openshift-insights/operator.
	hostAccount = "e2e-host-operator"
	// hostRBACName names the copies of the host's ClusterRole and Role, and
	// their bindings to hostAccount.
	hostRBACName = "e2e-host-insights-operator"
	// hostRBACUserAgent is the embedded library's and its host's user agent.
	hostRBACUserAgent = "e2e-embedded-with-host-rbac"
	// hostRBACFixture is the host's RBAC, copied with its provenance.
	hostRBACFixture = "../../testdata/host/rbac.yaml"
	// rbacPatches holds the patch of the host series that adds the rules
	// the library needs to the host's Role (hack/host/README.md).
	rbacPatches = "../../hack/host/patches/*-Let-the-operator-list-events-*.patch"
	// noSuchClass is a PriorityClass that does not exist: the DaemonSet
	// controller records FailedCreate for every pod.
	noSuchClass = "e2e-host-rbac-no-such-class"
)

// hostRules are the host's ClusterRole and Role (openshift-insights) rules
// from the fixture. It also checks that the fixture binds both to the host's
// ServiceAccount, so that they are the rules the host runs with.
func hostRules(t *testing.T) (cluster, namespaced []rbacv1.PolicyRule) {
	t.Helper()
	data, err := os.ReadFile(filepath.FromSlash(hostRBACFixture))
	if err != nil {
		t.Fatal(err)
	}
	return rulesOf(t, data)
}

// rulesOf are the rules of data, the fixture or a copy of it.
func rulesOf(t *testing.T, data []byte) (cluster, namespaced []rbacv1.PolicyRule) {
	t.Helper()
	const hostSA = "operator"
	var clusterRole, role string
	bound := map[string]bool{}
	for _, doc := range bytes.Split(data, []byte("\n---\n")) {
		if len(bytes.TrimSpace(doc)) == 0 || bytes.HasPrefix(bytes.TrimSpace(doc), []byte("#")) && !bytes.Contains(doc, []byte("\nkind:")) {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("decode %s: %v", hostRBACFixture, err)
		}
		switch o := obj.(type) {
		case *rbacv1.ClusterRole:
			cluster, clusterRole = o.Rules, o.Name
		case *rbacv1.Role:
			if o.Namespace == ns {
				namespaced, role = o.Rules, o.Name
			}
		case *rbacv1.ClusterRoleBinding:
			if bindsHostAccount(o.Subjects, hostSA) {
				bound["ClusterRole/"+o.RoleRef.Name] = o.RoleRef.Kind == "ClusterRole"
			}
		case *rbacv1.RoleBinding:
			if o.Namespace == ns && bindsHostAccount(o.Subjects, hostSA) {
				bound["Role/"+o.RoleRef.Name] = o.RoleRef.Kind == "Role"
			}
		}
	}
	if clusterRole == "" || role == "" || !bound["ClusterRole/"+clusterRole] || !bound["Role/"+role] {
		t.Fatalf("%s does not bind a ClusterRole and a Role in %s to %s/%s: ClusterRole %q, Role %q, bindings %v",
			hostRBACFixture, ns, ns, hostSA, clusterRole, role, bound)
	}
	return cluster, namespaced
}

func bindsHostAccount(subjects []rbacv1.Subject, name string) bool {
	for _, s := range subjects {
		if s.Kind == "ServiceAccount" && s.Namespace == ns && s.Name == name {
			return true
		}
	}
	return false
}

// seriesRules are the rules of the host's Role in openshift-insights that
// the host series changes: its RBAC patch's hunks of
// manifests/03-clusterrole.yaml applied to the fixture, whose documents are
// that file's, the Role's rules that then differ. The patch only adds, so the
// host's rules with these appended grant what the patched Role grants.
func seriesRules(t *testing.T) []rbacv1.PolicyRule {
	t.Helper()
	paths, err := filepath.Glob(filepath.FromSlash(rbacPatches))
	if err != nil || len(paths) != 1 {
		t.Fatalf("want one patch %s, found %v (%v)", rbacPatches, paths, err)
	}
	patch, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	fixture, err := os.ReadFile(filepath.FromSlash(hostRBACFixture))
	if err != nil {
		t.Fatal(err)
	}
	patched, err := applyHunks(string(fixture), string(patch), "manifests/03-clusterrole.yaml")
	if err != nil {
		t.Fatalf("%s on %s: %v", paths[0], hostRBACFixture, err)
	}
	_, before := rulesOf(t, fixture)
	_, after := rulesOf(t, []byte(patched))
	var changed []rbacv1.PolicyRule
	for i := range after {
		if i >= len(before) || !equality.Semantic.DeepEqual(after[i], before[i]) {
			changed = append(changed, after[i])
		}
	}
	if len(changed) == 0 {
		t.Fatalf("%s changes no rule of the Role in %s", paths[0], ns)
	}
	return changed
}

// applyHunks applies the hunks of a unified diff that change path to text.
// Each hunk's old lines (context and removals) must occur in text exactly
// once: the fixture holds only some of the file's documents, so the hunks'
// line numbers do not apply, and their context places them instead.
func applyHunks(text, patch, path string) (string, error) {
	var old, added []string
	inFile, inHunk, hunks := false, false, 0
	apply := func() error {
		if !inHunk {
			return nil
		}
		inHunk = false
		from, to := strings.Join(old, "\n")+"\n", strings.Join(added, "\n")+"\n"
		if n := strings.Count(text, from); n != 1 {
			return fmt.Errorf("hunk %d's old lines occur %d times, want once:\n%s", hunks, n, from)
		}
		text = strings.Replace(text, from, to, 1)
		return nil
	}
	for _, line := range strings.Split(patch, "\n") {
		switch {
		case strings.HasPrefix(line, "diff --git "), strings.HasPrefix(line, "+++ "), strings.HasPrefix(line, "@@"):
			if err := apply(); err != nil {
				return "", err
			}
			if strings.HasPrefix(line, "+++ ") {
				inFile = line == "+++ b/"+path
			}
			if inFile && strings.HasPrefix(line, "@@") {
				inHunk, old, added = true, nil, nil
				hunks++
			}
		case !inHunk:
		case strings.HasPrefix(line, " "):
			old, added = append(old, line[1:]), append(added, line[1:])
		case strings.HasPrefix(line, "-"):
			old = append(old, line[1:])
		case strings.HasPrefix(line, "+"):
			added = append(added, line[1:])
		default: // the end of the diff, or "\ No newline at end of file"
			if err := apply(); err != nil {
				return "", err
			}
		}
	}
	if err := apply(); err != nil {
		return "", err
	}
	if hunks == 0 {
		return "", fmt.Errorf("no hunk changes %s", path)
	}
	return text, nil
}

// installHostRBAC creates hostAccount and binds it to copies of the host's
// rules, the Role's with extra appended, under names of the test's own; it
// removes exactly those when the test ends. It returns the account's client
// configuration, once RBAC lets it create the DaemonSet.
func (e *env) installHostRBAC(extra []rbacv1.PolicyRule) *rest.Config {
	e.t.Helper()
	clusterRules, rules := hostRules(e.t)
	subjects := []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: hostAccount}}
	objs := []runtime.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hostAccount}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: hostRBACName}, Rules: clusterRules},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: hostRBACName}, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: hostRBACName}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hostRBACName}, Rules: append(rules, extra...)},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hostRBACName}, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: hostRBACName}},
	}
	ctx := context.Background()
	e.t.Cleanup(func() { deleteRBAC(e.t, e.kube, objs) })
	deleteRBAC(e.t, e.kube, objs) // left over by an aborted run
	for _, obj := range objs {
		var err error
		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			_, err = e.kube.CoreV1().ServiceAccounts(ns).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, err = e.kube.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = e.kube.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			_, err = e.kube.RbacV1().Roles(ns).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = e.kube.RbacV1().RoleBindings(ns).Create(ctx, o, metav1.CreateOptions{})
		}
		if err != nil {
			e.t.Fatalf("create %T: %v", obj, err)
		}
	}
	cfg, err := e.cluster.ServiceAccountKubeconfig(ctx, ns, hostAccount, filepath.Join(e.t.TempDir(), "host.kubeconfig"), time.Hour)
	if err != nil {
		e.t.Fatal(err)
	}
	cfg.UserAgent = hostRBACUserAgent
	e.eventually("RBAC to let "+hostAccount+" create the DaemonSet", func(ctx context.Context) (bool, error) {
		allowed, err := e.serviceAccountMay(ctx, hostAccount, authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Group: "apps", Resource: "daemonsets"})
		return err == nil && allowed, nil
	})
	return cfg
}

// embeddedHost is a fake host running as hostAccount: the library wired as
// in TestHostWiring, with the host's scheduling settings, and the host's
// status controller, all on the account's credential.
type embeddedHost struct {
	e          *env
	aggregator *hostConfigAggregator
	ctrl       *runtimeextractor.Controller
	status     *hostStatusController
	shutdown   func()

	mu         sync.Mutex
	scheduling config.RuntimeExtractor
}

// startEmbeddedHost runs the library in-process as hostAccount, with the
// rollout deadline of the stuck tests (stuck_test.go).
func (e *env) startEmbeddedHost(cfg *rest.Config) *embeddedHost {
	e.t.Helper()
	deadline, err := time.ParseDuration(stuckDeadline)
	if err != nil {
		e.t.Fatal(err)
	}
	kubeClient, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	configClient, err := configclient.NewForConfig(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	h := &embeddedHost{e: e}
	eventRecorder := events.NewKubeRecorder(kubeClient.CoreV1().Events(ns), "insights-operator",
		&corev1.ObjectReference{Kind: "Namespace", APIVersion: "v1", Name: ns, Namespace: ns}, clock.RealClock{})
	sends := newSendLog(time.Minute) // sends are timed in TestHostWiring, not here
	h.aggregator = &hostConfigAggregator{listeners: map[chan struct{}]struct{}{}, sends: sends}
	libCtx, stopLibrary := context.WithCancel(context.Background())
	hostCtx, stopHost := context.WithCancel(context.Background())

	updateCh := make(chan struct{}, 1)
	factory := clientInformers.NewSharedInformerFactoryWithOptions(kubeClient, 10*time.Minute, clientInformers.WithNamespace(ns))
	informer, err := runtimeextractor.NewResourceInformer(eventRecorder, factory)
	if err != nil {
		e.t.Fatal(err)
	}
	go factory.Start(libCtx.Done())
	go informer.Run(libCtx, 1)
	h.ctrl = runtimeextractor.NewRuntimeExtractorController(
		runtimeextractor.ConfigFrom(h.aggregator.ConfigChanged,
			func() bool { return h.aggregator.Config().DataReporting.DisableRuntimeExtractor },
			runtimeextractor.WithScheduling(h.currentScheduling)),
		updateCh, nil, kubeClient, eventRecorder, informer,
		runtimeextractor.WithRolloutDeadline(deadline),
		runtimeextractor.WithNodeNames(false), // as the host series has it
	)
	libraryDone := make(chan struct{})
	go func() { defer close(libraryDone); h.ctrl.Run(libCtx) }()

	h.status = &hostStatusController{
		client: configClient, ctrl: h.ctrl, source: runtimeExtractorSource{h.ctrl},
		updateCh: updateCh, sends: sends, trigger: make(chan struct{}, 1),
	}
	if err := h.status.updateStatus(hostCtx); err != nil {
		stopHost()
		stopLibrary()
		<-libraryDone
		e.t.Fatalf("the host's initial status write as %s failed, which makes the operator exit: %v", hostAccount, err)
	}
	statusDone := h.status.run(hostCtx)
	h.shutdown = sync.OnceFunc(func() {
		stopHost() // the host's senders first: see TestHostWiring
		<-statusDone
		stopLibrary()
		select {
		case <-libraryDone:
		case <-time.After(40 * time.Second):
			e.t.Error("the controller's Run did not return after its context was cancelled")
		}
	})
	e.t.Cleanup(h.shutdown)
	return h
}

func (h *embeddedHost) currentScheduling() config.RuntimeExtractor {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.scheduling
}

// schedule changes the host's scheduling settings and notifies the library.
func (h *embeddedHost) schedule(s config.RuntimeExtractor) {
	h.mu.Lock()
	h.scheduling = s
	h.mu.Unlock()
	h.aggregator.notifyListeners()
}

// shows waits until the host's ClusterOperator carries our condition typ as
// wanted, and returns it.
func (h *embeddedHost) shows(what string, typ configv1.ClusterStatusConditionType, st configv1.ConditionStatus, reason string) *configv1.ClusterOperatorStatusCondition {
	h.e.t.Helper()
	var c *configv1.ClusterOperatorStatusCondition
	h.e.eventually(what, func(context.Context) (bool, error) {
		c = h.e.condition(typ)
		return c != nil && c.Status == st && c.Reason == reason, nil
	})
	return c
}

// embeddedRun is what one run of the host's story saw.
type embeddedRun struct {
	// heldStuck is the RolloutStuck message of a rollout held on one node
	// (heldNode), and failedStuck that of a rollout whose pods the DaemonSet
	// controller cannot create (FailedCreate).
	heldStuck, failedStuck string
	heldNode               string
	// forbidden counts the host account's requests answered 403, as
	// "verb resource".
	forbidden map[string]int
	// span is how long the run's requests were counted.
	span time.Duration
	// log is the in-process log.
	log string
	// nodes is the number of the cluster's nodes.
	nodes int
}

// runHostStory runs the library embedded as the host, with the host's RBAC
// plus extra, through what it must do: deploy on enable, repair a deleted and
// a changed DaemonSet, report two stuck rollouts (held pods; FailedCreate),
// finish them, and delete on disable, each reported through the host's
// status controller. It returns what the stuck rollouts reported, and the
// account's requests answered 403.
func runHostStory(t *testing.T, extra []rbacv1.PolicyRule) embeddedRun {
	e := newInProcessEnv(t)
	e.restoreClusterOperatorAtEnd()
	t.Setenv("RELEASE_VERSION", testcluster.DefaultVersion)
	logPath := captureKlog(t)
	cfg := e.installHostRBAC(extra)
	ctx := context.Background()
	requests := e.requestLog()
	from := time.Now()
	h := e.startEmbeddedHost(cfg)
	run := embeddedRun{nodes: len(e.cluster.Nodes)}

	// Deploy on enable (the host's config enables it from the start).
	e.waitRolledOut()
	h.shows("our Available", status.ConditionAvailable, configv1.ConditionTrue, status.ReasonAsExpected)
	e.waitCondition(configv1.OperatorDegraded, configv1.ConditionFalse, "AsExpected")

	// Repair a deletion and a change.
	repaired := e.deleteDaemonSetDrift()
	e.waitDaemonSet("the deleted DaemonSet recreated and rolled out", func(ds *appsv1.DaemonSet) bool { return e.rolledOut(ds) && repaired(ds) })
	repaired = e.changeImageDrift()
	e.waitDaemonSet("the changed image restored and rolled out", func(ds *appsv1.DaemonSet) bool { return e.rolledOut(ds) && repaired(ds) })
	h.shows("our Available after the repairs", status.ConditionAvailable, configv1.ConditionTrue, status.ReasonAsExpected)

	// A rollout held on one node: every new pod stays Pending, and a
	// toleration more changes the template.
	if err := e.cluster.HoldPods(ctx, e.cluster.Nodes...); err != nil {
		t.Fatal(err)
	}
	held := true
	t.Cleanup(func() {
		if held {
			if err := e.cluster.HoldPods(ctx); err != nil {
				t.Errorf("lift the kwok hold: %v", err)
			}
		}
	})
	changed := time.Now()
	h.schedule(config.RuntimeExtractor{Tolerations: []corev1.Toleration{{Key: "e2e.example.com/stuck", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}})
	desired := int32(len(e.cluster.Nodes))
	ds := e.waitDaemonSet("the rollout held after one pod", func(ds *appsv1.DaemonSet) bool {
		return ds != nil && ds.Status.ObservedGeneration == ds.Generation && len(ds.Spec.Template.Spec.Tolerations) > 0 &&
			ds.Status.DesiredNumberScheduled == desired && ds.Status.UpdatedNumberScheduled == 1 && ds.Status.NumberAvailable == desired-1
	})
	run.heldNode = e.unreadyPodNode(ds, changed)
	// One node of n is within the DaemonSet's maxUnavailable: Progressing
	// says it, and neither our Degraded nor the host's turns True.
	run.heldStuck = e.waitConditionSays(status.ConditionProgressing, "rollout made no progress for").Message
	t.Logf("stuck (a pod held on %s): %s", run.heldNode, run.heldStuck)
	for _, typ := range []configv1.ClusterStatusConditionType{status.ConditionDegraded, configv1.OperatorDegraded} {
		if d := e.condition(typ); d == nil || d.Status != configv1.ConditionFalse {
			t.Errorf("%s is %+v for a rollout stuck on one node of %d, want False", typ, d, run.nodes)
		}
	}
	if err := e.cluster.HoldPods(ctx); err != nil {
		t.Fatal(err)
	}
	held = false
	e.waitRolledOut()
	h.shows("our Degraded cleared", status.ConditionDegraded, configv1.ConditionFalse, status.ReasonAsExpected)

	// A rollout whose pods cannot be created, on a DaemonSet deleted and
	// recreated meanwhile, so that no pod is left: too few pods, Degraded.
	h.schedule(config.RuntimeExtractor{PriorityClassName: noSuchClass})
	e.waitDaemonSet("the DaemonSet naming the unknown class", func(ds *appsv1.DaemonSet) bool {
		return ds != nil && ds.Spec.Template.Spec.PriorityClassName == noSuchClass
	})
	repaired = e.deleteDaemonSetDrift()
	e.waitDaemonSet("the deleted DaemonSet recreated with the unknown class", func(ds *appsv1.DaemonSet) bool {
		return repaired(ds) && ds.Spec.Template.Spec.PriorityClassName == noSuchClass
	})
	run.failedStuck = h.shows("our Degraded RolloutStuck, FailedCreate", status.ConditionDegraded, configv1.ConditionTrue, status.ReasonRolloutStuck).Message
	e.waitCondition(configv1.OperatorDegraded, configv1.ConditionTrue, status.ReasonRolloutStuck)
	t.Logf("RolloutStuck (FailedCreate): %s", run.failedStuck)
	h.schedule(config.RuntimeExtractor{})
	e.waitRolledOut()
	h.shows("our Degraded cleared again", status.ConditionDegraded, configv1.ConditionFalse, status.ReasonAsExpected)

	// Delete on disable.
	h.aggregator.setDisabled(true)
	e.waitDaemonSet("the DaemonSet deleted as the host's config disables it", func(ds *appsv1.DaemonSet) bool { return ds == nil })
	h.shows("our Available Disabled", status.ConditionAvailable, configv1.ConditionTrue, status.ReasonDisabled)

	h.shutdown()
	to := time.Now()
	// The library's Events replace library-go's generic ones, which the
	// release notes of the series say are gone.
	for _, reason := range []string{resources.EventReasonCreated, resources.EventReasonUpdated, resources.EventReasonDeleted} {
		if evs := e.eventsSince(reason, from); len(evs) > 0 {
			t.Errorf("%d library-go %s Events, want none: %s", len(evs), reason, evs[0].Message)
		}
	}
	for _, reason := range []string{runtimeextractor.ReasonCreated} {
		if len(e.eventsSince(reason, from)) == 0 {
			t.Errorf("no %s Event from the library", reason)
		}
	}
	h.status.mu.Lock()
	for _, err := range h.status.syncErrs {
		t.Errorf("a host status sync as %s failed: %v", hostAccount, err)
	}
	h.status.mu.Unlock()

	requests.flush()
	user := testcluster.ServiceAccountUser(ns, hostAccount)
	run.forbidden = map[string]int{}
	run.span = to.Sub(from)
	requestsMade := 0
	for _, ev := range requests.read {
		if ev.User != user || ev.Received.Before(from) || !ev.Received.Before(to) {
			continue
		}
		requestsMade++
		if ev.Code == 403 {
			run.forbidden[ev.Verb+" "+ev.Resource]++
		}
	}
	if requestsMade == 0 {
		t.Fatalf("the audit log shows no request of %s", user)
	}
	t.Logf("%s made %d requests; answered 403: %v", user, requestsMade, run.forbidden)
	klog.Flush()
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	run.log = string(data)
	return run
}

// deniedRechecks is the most times a denied read is asked in span: the
// first denial, then once 30 s after it, and after twice the previous wait
// each time (the library's schedule, up to an hour).
func deniedRechecks(span time.Duration) int {
	n, wait := 1, 30*time.Second
	for at := wait; at <= span; at += wait {
		n++
		wait = min(2*wait, time.Hour)
	}
	return n
}

// TestEmbeddedWithTheHostsRBAC runs the library in-process as a
// ServiceAccount bound to exactly the Insights Operator's rules as they ship
// (testdata/host/rbac.yaml), with the series' WithNodeNames(false), so that
// no pod is read. Everything works: deploy, repairs, status through the
// host's status controller, stuck rollouts reported with their counts,
// delete. What needs the missing permission (events list in
// openshift-insights) degrades and says so: the stuck messages say the
// newest warning is unavailable and why, and the list is logged once for the
// whole run and asked again only on the recheck schedule, whatever the
// number of diagnoses.
func TestEmbeddedWithTheHostsRBAC(t *testing.T) {
	run := runHostStory(t, nil)
	n := run.nodes
	for _, c := range []struct{ msg, want string }{
		{run.heldStuck, fmt.Sprintf("%d of %d nodes not ready; newest warning on the DaemonSet unavailable: events list forbidden", n-1, n)},
		{run.failedStuck, fmt.Sprintf("%d of %d nodes not ready; newest warning on the DaemonSet unavailable: events list forbidden", n, n)},
	} {
		if !strings.Contains(c.msg, c.want) {
			t.Errorf("RolloutStuck message %q does not contain %q", c.msg, c.want)
		}
	}
	if strings.Contains(run.heldStuck, run.heldNode) || strings.Contains(run.failedStuck, "FailedCreate") {
		t.Errorf("a message names what the host's RBAC does not let it read: %q, %q", run.heldStuck, run.failedStuck)
	}
	// A denied list is asked again 30 s after the denial, then twice as long
	// after each further one: never more often, however many diagnoses and
	// lookups.
	most := deniedRechecks(run.span)
	if n := run.forbidden["list events"]; n < 1 || n > most {
		t.Errorf("list events answered 403 %d times in %s, want 1 to %d (the first denial, then the recheck schedule): %v",
			n, run.span.Round(time.Second), most, run.forbidden)
	}
	if len(run.forbidden) != 1 {
		t.Errorf("requests answered 403: %v, want only list events", run.forbidden)
	}
	for _, read := range []string{status.DeniedEventsList} {
		lines := distinctLines(run.log, read+" in "+ns+" is forbidden")
		if len(lines) != 1 {
			t.Errorf("%d log lines saying %s is forbidden, want 1: %q", len(lines), read, lines)
			continue
		}
		t.Logf("logged once: %s", lines[0])
	}
}

// TestEmbeddedWithTheSeriesRBAC runs the same story with the host's
// rules plus the one the host series adds (hack/host): nothing is
// forbidden, and the RolloutStuck message names the DaemonSet controller's
// FailedCreate.
func TestEmbeddedWithTheSeriesRBAC(t *testing.T) {
	added := seriesRules(t)
	run := runHostStory(t, added)
	if len(run.forbidden) != 0 {
		t.Errorf("requests answered 403 with the series' rules: %v", run.forbidden)
	}
	for _, c := range []struct{ msg, want string }{
		{run.heldStuck, fmt.Sprintf("%d of %d nodes not ready", run.nodes-1, run.nodes)},
		{run.failedStuck, "newest warning on the DaemonSet: FailedCreate"},
		{run.failedStuck, noSuchClass},
	} {
		if !strings.Contains(c.msg, c.want) {
			t.Errorf("RolloutStuck message %q does not contain %q", c.msg, c.want)
		}
	}
	if strings.Contains(run.heldStuck+run.failedStuck, "unavailable:") {
		t.Errorf("a message says a read is still denied: %q, %q", run.heldStuck, run.failedStuck)
	}
	if lines := distinctLines(run.log, " in "+ns+" is forbidden, so"); len(lines) > 0 {
		t.Errorf("the log says a read is still denied: %q", lines)
	}
}

// distinctLines are the distinct lines of log containing s. klog writes a
// warning to the output of each severity up to it, and captureKlog sends
// them all to one file: a line and its copies are one (timestamps tell real
// repeats apart).
func distinctLines(log, s string) []string {
	seen := map[string]bool{}
	var out []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, s) && !seen[line] {
			seen[line] = true
			out = append(out, line)
		}
	}
	sort.Strings(out)
	return out
}
