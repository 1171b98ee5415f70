package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	configclient "github.com/openshift/client-go/config/clientset/versioned"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/runtimeextractor"
	"github.com/insights-runtime-extractor/controller/pkg/status"
	"github.com/insights-runtime-extractor/controller/pkg/testcluster"
)

const (
	ns   = resources.Namespace
	name = resources.DaemonSetName
	// statusQuiet is how long a status write may follow the change it reports:
	// a rollout in progress waits up to StatusMaxDelay, then a settled status
	// StatusSettle more. Windows that count status writes extend this far.
	statusQuiet = runtimeextractor.StatusMaxDelay + runtimeextractor.StatusSettle + time.Second
	// convergeTimeout bounds every wait; kwok rolls a DaemonSet out in seconds,
	// but the machine is small and shared.
	convergeTimeout = 90 * time.Second
)

// env is one test's view of the cluster it holds, reset to a known start.
type env struct {
	t       *testing.T
	cluster *testcluster.Cluster // the test's own, for its whole run (holdCluster)
	kube    kubernetes.Interface
	config  configclient.Interface
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvOn(t, holdCluster(t))
}

// newInProcessEnv is newEnv for a test that runs the library in this process
// (holdClusterAlone).
func newInProcessEnv(t *testing.T) *env {
	t.Helper()
	return newEnvOn(t, holdClusterAlone(t))
}

func newEnvOn(t *testing.T, c *testcluster.Cluster) *env {
	t.Helper()
	keepNodeAgentLogs(t, c)
	e := &env{t: t, cluster: c, kube: c.Client()}
	var err error
	if e.config, err = configclient.NewForConfig(c.RESTConfig); err != nil {
		t.Fatal(err)
	}
	e.reset()
	return e
}

// reset removes what earlier tests left: the DaemonSet, the config, the lease,
// taints, and puts the ClusterVersion back.
func (e *env) reset() {
	e.t.Helper()
	ctx := context.Background()
	_ = e.kube.AppsV1().DaemonSets(ns).Delete(ctx, name, metav1.DeleteOptions{})
	_ = e.kube.CoreV1().ConfigMaps(ns).Delete(ctx, resources.ConfigMapName, metav1.DeleteOptions{})
	_ = e.kube.CoordinationV1().Leases(ns).Delete(ctx, leaseLock, metav1.DeleteOptions{})
	e.setClusterVersion(testcluster.DefaultVersion)
	e.clearConditions()
	e.waitDaemonSet("no DaemonSet left from an earlier test", func(ds *appsv1.DaemonSet) bool { return ds == nil })
	// An earlier test may have ended while the DaemonSet controller was
	// creating its pods (see waitDaemonSetControllerDone).
	e.waitDaemonSetControllerDone(name)
}

// waitDaemonSetControllerDone waits until kube-controller-manager's
// DaemonSet controller has logged nothing about dsName for a second, after
// its deletion. A sync of the deleted DaemonSet that began before the
// controller saw the deletion creates pods for it, and then expects them
// under the name: if the next DaemonSet of the name exists by the time that
// sync ends, it takes the old one's status and gets no pod for 5 minutes,
// until the expectations expire. If it does not exist yet, the sync fails,
// and its retry finds the name gone and drops the expectations; both log,
// so a second with no line about the name means they are settled.
func (e *env) waitDaemonSetControllerDone(dsName string) {
	e.t.Helper()
	var last string
	since := time.Now()
	e.eventually("kube-controller-manager done with DaemonSet "+dsName, func(context.Context) (bool, error) {
		if line := e.cluster.ComponentLog("kube-controller-manager", dsName, 1); line != last {
			last, since = line, time.Now()
			return false, nil
		}
		return time.Since(since) >= time.Second, nil
	})
}

func (e *env) eventually(what string, cond func(ctx context.Context) (bool, error)) {
	e.t.Helper()
	if err := poll(cond); err != nil {
		e.t.Fatalf("timed out waiting for %s: %v", what, err)
	}
}

// poll is every wait's rhythm and bound.
func poll(cond func(ctx context.Context) (bool, error)) error {
	return wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, convergeTimeout, true, cond)
}

// getIfExists reads the object objName with get: nil when it does not exist;
// any other error fails the test, naming what it read.
func getIfExists[T any](t *testing.T, what string, get func(context.Context, string, metav1.GetOptions) (*T, error), objName string) *T {
	t.Helper()
	obj, err := get(context.Background(), objName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("get %s: %v", what, err)
	}
	return obj
}

func (e *env) daemonSet() *appsv1.DaemonSet {
	e.t.Helper()
	return getIfExists(e.t, "daemonset", e.kube.AppsV1().DaemonSets(ns).Get, name)
}

func (e *env) waitDaemonSet(what string, cond func(*appsv1.DaemonSet) bool) *appsv1.DaemonSet {
	e.t.Helper()
	var ds *appsv1.DaemonSet
	if err := poll(func(context.Context) (bool, error) {
		ds = e.daemonSet()
		return cond(ds), nil
	}); err != nil {
		e.logRollout(ds)
		e.t.Fatalf("timed out waiting for %s: %v", what, err)
	}
	return ds
}

// logRollout tells a failed wait what the rollout's parts showed: the
// DaemonSet's status, its pods, the nodes, and what kube-controller-manager
// logged about the DaemonSet. A DaemonSet with no pod and an unready count
// is the DaemonSet controller's; a pod left Pending is the node agents'.
func (e *env) logRollout(ds *appsv1.DaemonSet) {
	ctx := context.Background()
	var b strings.Builder
	dsName := name
	if ds != nil {
		dsName = ds.Name
		s := ds.Status
		fmt.Fprintf(&b, "DaemonSet uid %s generation %d: observed %d, desired %d, scheduled %d, updated %d, ready %d, available %d\n",
			ds.UID, ds.Generation, s.ObservedGeneration, s.DesiredNumberScheduled, s.CurrentNumberScheduled, s.UpdatedNumberScheduled, s.NumberReady, s.NumberAvailable)
	}
	if pods, err := e.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err != nil {
		fmt.Fprintf(&b, "pods: %v\n", err)
	} else {
		fmt.Fprintf(&b, "%d pods in %s:\n", len(pods.Items), ns)
		for _, p := range pods.Items {
			owner := "-"
			if ref := metav1.GetControllerOf(&p); ref != nil {
				owner = string(ref.UID)
			}
			fmt.Fprintf(&b, "  %s node %q phase %s ready %t deleting %t owner %s\n", p.Name, p.Spec.NodeName, p.Status.Phase, podIsReady(&p), p.DeletionTimestamp != nil, owner)
		}
	}
	if nodes, err := e.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
		fmt.Fprintf(&b, "nodes: %v\n", err)
	} else {
		for _, n := range nodes.Items {
			ready := "unknown"
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady {
					ready = fmt.Sprintf("%s (heartbeat %s)", c.Status, c.LastHeartbeatTime.Format(time.TimeOnly))
				}
			}
			fmt.Fprintf(&b, "  node %s ready %s taints %v\n", n.Name, ready, n.Spec.Taints)
		}
	}
	e.t.Logf("the rollout's parts at the timeout:\n%skube-controller-manager on the DaemonSet:\n%s", b.String(), e.cluster.ComponentLog("kube-controller-manager", dsName, 40))
}

// rolledOut: observed, updated and available on every node of the cluster,
// by the DaemonSet's status and by its pods. The status alone can show a
// rollout that has not happened: kube-controller-manager's status update
// re-reads the DaemonSet by name after a conflict, so a sync of a deleted
// DaemonSet can write its counts onto the new one of the same name (the
// generations are both 1). A test that then deletes the new DaemonSet does
// so while the DaemonSet controller is creating its pods, and the one after
// it gets no pod for 5 minutes (the controller waits for pods it will never
// see, until its expectations expire). TestRolledOutNeedsThePods shows both.
func (e *env) rolledOut(ds *appsv1.DaemonSet) bool {
	return e.statusRolledOut(ds) && e.readyOnEveryNode(ds)
}

// statusRolledOut: rolled out on every node by the DaemonSet's status alone.
func (e *env) statusRolledOut(ds *appsv1.DaemonSet) bool {
	r := resources.RolloutOf(ds)
	return r.FullyAvailable() && r.Desired == int32(len(e.cluster.Nodes))
}

// readyOnEveryNode: every node of the cluster runs a ready pod that ds
// controls and that is not being deleted.
func (e *env) readyOnEveryNode(ds *appsv1.DaemonSet) bool {
	selector, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return false
	}
	pods, err := e.cluster.Client().CoreV1().Pods(ds.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return false
	}
	nodes := map[string]bool{}
	for _, p := range pods.Items {
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.UID == ds.UID && p.DeletionTimestamp == nil && podIsReady(&p) {
			nodes[p.Spec.NodeName] = true
		}
	}
	for _, n := range e.cluster.Nodes {
		if !nodes[n] {
			return false
		}
	}
	return true
}

func (e *env) waitRolledOut() *appsv1.DaemonSet {
	e.t.Helper()
	return e.waitDaemonSet("the DaemonSet rolled out on all nodes", e.rolledOut)
}

func (e *env) setConfig(yaml string) {
	e.t.Helper()
	if err := testcluster.SetControllerConfig(context.Background(), e.kube, yaml); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) setClusterVersion(v string) {
	e.t.Helper()
	ctx := context.Background()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		cv, err := e.config.ConfigV1().ClusterVersions().Get(ctx, "version", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if cv.Status.Desired.Version == v {
			return true, nil
		}
		cv.Status.Desired.Version = v
		_, err = e.config.ConfigV1().ClusterVersions().UpdateStatus(ctx, cv, metav1.UpdateOptions{})
		return err == nil, nil
	})
	if err != nil {
		e.t.Fatalf("set ClusterVersion to %s: %v", v, err)
	}
}

func (e *env) condition(t configv1.ClusterStatusConditionType) *configv1.ClusterOperatorStatusCondition {
	co, err := e.config.ConfigV1().ClusterOperators().Get(context.Background(), "insights", metav1.GetOptions{})
	if err != nil {
		return nil
	}
	for i := range co.Status.Conditions {
		if co.Status.Conditions[i].Type == t {
			return &co.Status.Conditions[i]
		}
	}
	return nil
}

// waitConditionSays waits until condition t is True and its message
// contains says, and returns it.
func (e *env) waitConditionSays(t configv1.ClusterStatusConditionType, says string) *configv1.ClusterOperatorStatusCondition {
	e.t.Helper()
	var c *configv1.ClusterOperatorStatusCondition
	e.eventually(fmt.Sprintf("%s saying %q", t, says), func(context.Context) (bool, error) {
		c = e.condition(t)
		return c != nil && c.Status == configv1.ConditionTrue && strings.Contains(c.Message, says), nil
	})
	return c
}

func (e *env) waitCondition(t configv1.ClusterStatusConditionType, status configv1.ConditionStatus, reason string) *configv1.ClusterOperatorStatusCondition {
	e.t.Helper()
	var c *configv1.ClusterOperatorStatusCondition
	err := poll(func(context.Context) (bool, error) {
		c = e.condition(t)
		return c != nil && c.Status == status && (reason == "" || c.Reason == reason), nil
	})
	if err != nil {
		// What was there instead, and what the cluster showed: a stale view
		// of the DaemonSet and an unwritten status read differently.
		seen := "absent"
		if c != nil {
			seen = fmt.Sprintf("%s %s %q (since %s)", c.Status, c.Reason, c.Message, c.LastTransitionTime.Format(time.RFC3339))
		}
		var ds string
		if d := e.daemonSet(); d != nil {
			ds = fmt.Sprintf("generation %d, status %+v", d.Generation, d.Status)
		}
		e.t.Fatalf("timed out waiting for %s=%s (%s): it is %s; the DaemonSet: %s", t, status, reason, seen, ds)
	}
	return c
}

// waitConditionMessage waits for condition t's message to contain part.
func (e *env) waitConditionMessage(t configv1.ClusterStatusConditionType, part string) *configv1.ClusterOperatorStatusCondition {
	e.t.Helper()
	var c *configv1.ClusterOperatorStatusCondition
	e.eventually(fmt.Sprintf("%s saying %q", t, part), func(context.Context) (bool, error) {
		c = e.condition(t)
		return c != nil && strings.Contains(c.Message, part), nil
	})
	return c
}

// watchDegraded watches the ClusterOperator from now on; the function it
// returns stops the watch and lists every RuntimeExtractorDegraded=True it
// saw, as "Reason: message".
func (e *env) watchDegraded() func() []string {
	e.t.Helper()
	w, err := e.config.ConfigV1().ClusterOperators().Watch(context.Background(), metav1.ListOptions{FieldSelector: "metadata.name=insights"})
	if err != nil {
		e.t.Fatalf("watch the ClusterOperator: %v", err)
	}
	var seen []string
	var stopped atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if !stopped.Load() { // the server ended it: what came after is unseen
				seen = append(seen, "the watch ended before the test stopped it")
			}
		}()
		for ev := range w.ResultChan() {
			co, ok := ev.Object.(*configv1.ClusterOperator)
			if !ok {
				continue
			}
			for _, c := range co.Status.Conditions {
				if c.Type == status.ConditionDegraded && c.Status == configv1.ConditionTrue {
					seen = append(seen, c.Reason+": "+c.Message)
				}
			}
		}
	}()
	e.t.Cleanup(w.Stop)
	return func() []string {
		stopped.Store(true)
		w.Stop()
		<-done
		return seen
	}
}

// events returns the Events in openshift-insights with reason.
func (e *env) events(reason string) []corev1.Event {
	e.t.Helper()
	list, err := e.kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatalf("list events: %v", err)
	}
	var out []corev1.Event
	for _, ev := range list.Items {
		if ev.Reason == reason {
			out = append(out, ev)
		}
	}
	return out
}

// clearConditions removes the RuntimeExtractor* conditions an earlier test's
// controller wrote, so no test reads a stale one.
func (e *env) clearConditions() {
	e.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		co, err := e.config.ConfigV1().ClusterOperators().Get(context.Background(), "insights", metav1.GetOptions{})
		if err != nil {
			return err
		}
		var kept []configv1.ClusterOperatorStatusCondition
		for _, c := range co.Status.Conditions {
			if !strings.HasPrefix(string(c.Type), "RuntimeExtractor") {
				kept = append(kept, c)
			}
		}
		co.Status.Conditions = kept
		_, err = e.config.ConfigV1().ClusterOperators().UpdateStatus(context.Background(), co, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		e.t.Fatalf("clear ClusterOperator conditions: %v", err)
	}
}

// controller is one running controller process.
type controller struct {
	*testcluster.ControllerProcess
	t *testing.T
}

type controllerOpts struct {
	env        []string
	args       []string
	kubeconfig string
	// ownLogReport: the test shows this controller's log itself when it
	// fails; the cleanup does not (many controllers, one of interest).
	ownLogReport bool
}

// startController runs the real binary against the cluster, at the binary's
// defaults (the 10-minute resync included) except for a short leader election
// lease, so that a successor does not wait minutes for the lease of a killed
// process. Only TestResyncRepairsWhatTheBackoffWouldDelay shortens the
// resync. It is stopped (by PID) when the test ends, and its log is shown if
// the test failed.
func (e *env) startController(o controllerOpts) *controller {
	e.t.Helper()
	kubeconfig := o.kubeconfig
	if kubeconfig == "" {
		kubeconfig = e.cluster.Kubeconfig
	}
	args := []string{
		"--leader-elect-lease-duration", "6s", "--leader-elect-renew-deadline", "4s", "--leader-elect-retry-period", "1s",
		"-v", "4", // every transition, self-transitions included, in the log shown on failure
	}
	return e.runController(kubeconfig, append(args, o.args...), o.env, func(c *controller) {
		if !o.ownLogReport {
			e.t.Logf("controller %d log, whole (client-go's reflector lines say when the watch broke and re-listed):\n%s", c.PID(), wholeLog(c.Log))
		}
	})
}

// runController runs the binary against the cluster as kubeconfig's user,
// with args and env. It stops it (by PID) when the test ends and, if the test
// failed, then calls reportFailure to show what the process did.
func (e *env) runController(kubeconfig string, args, env []string, reportFailure func(*controller)) *controller {
	e.t.Helper()
	p, err := testcluster.StartController(testcluster.ControllerOptions{
		Binary:      binary,
		Kubeconfig:  kubeconfig,
		LogPath:     filepath.Join(e.t.TempDir(), "controller.log"),
		Args:        args,
		Env:         env,
		MetricsAuth: e.cluster.RESTConfig,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	c := &controller{ControllerProcess: p, t: e.t}
	e.t.Cleanup(func() {
		c.stop()
		if e.t.Failed() {
			reportFailure(c)
		}
	})
	return c
}

// keepNodeAgentLogs shows a failed test what the kubelets' part of the
// cluster did while it ran: a component that is down (no pod becomes ready
// without kwok), and kwok's whole log from the test's start, across kwok's
// restarts, for a failure after a restart is not explained by its tail.
func keepNodeAgentLogs(t *testing.T, cluster *testcluster.Cluster) {
	mark := cluster.LogMark("kwok")
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		if err := cluster.Exited(); err != nil {
			t.Logf("a cluster component is down: %v", err)
		}
		t.Logf("kwok's log while the test ran (the kubelets' part):\n%s", cluster.ComponentLogSince("kwok", mark))
	})
}

// stop sends SIGTERM to exactly this process and waits; SIGKILL after a grace.
func (c *controller) stop() {
	if c.Stop() {
		c.t.Errorf("controller %d ignored SIGTERM for 20s; killed it", c.PID())
	}
}

// kill sends SIGKILL, as a crash would.
func (c *controller) kill() { c.Kill() }

func (c *controller) logContains(s string) bool {
	raw, err := os.ReadFile(c.Log)
	return err == nil && strings.Contains(string(raw), s)
}

// metrics scrapes the controller's /metrics, retrying until it serves, and
// returns the exposition text (metricSum reads it).
func (c *controller) metrics() string {
	c.t.Helper()
	m, err := c.WaitScrape(context.Background(), 30*time.Second)
	if err != nil {
		c.t.Fatal(err)
	}
	return m.Text
}

// state is the state the controller's /metrics reports, "" when it cannot be read.
func (c *controller) state() string {
	s, err := c.State(context.Background())
	if err != nil {
		return ""
	}
	return s
}

// waitState waits until the controller reports state in its /metrics.
func (e *env) waitState(c *controller, state string) {
	e.t.Helper()
	e.eventually("the controller in state "+state, func(context.Context) (bool, error) { return c.state() == state, nil })
}

// wholeLog is the log at path, every line: on a failure, the library's lines
// (the reflector's broken watches and re-lists, a request's retries) are what
// tells a late correction's cause from another.
func wholeLog(path string) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return string(raw)
}

func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		lines = append(lines, s.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}
