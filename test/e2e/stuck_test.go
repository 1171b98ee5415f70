package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/insights-runtime-extractor/controller/pkg/runtimeextractor"
	"github.com/insights-runtime-extractor/controller/pkg/status"
)

// stuckDeadline is the rollout deadline of the tests of that deadline (these,
// and TestUnreadyPodSameConditionsAfterRestartAndUpgrade), and only of these:
// the default (10 minutes) is what every other test runs with.
const stuckDeadline = "20s"

const metricRolloutStuck = "runtime_extractor_rollout_stuck"

// stuckController runs the controller as its ServiceAccount (so that the
// shipped RBAC must allow the diagnosis's reads, and the audit log tells its
// requests apart) with the shortened deadline.
func (e *env) stuckController() (*controller, string) {
	e.t.Helper()
	kubeconfig, user := e.controllerAccountKubeconfig()
	c := e.startController(controllerOpts{kubeconfig: kubeconfig, args: []string{"--rollout-deadline", stuckDeadline}})
	return c, user
}

// readVerbsSince counts user's reads of resource received from since on, by
// verb.
func (l *requestLog) readVerbsSince(user, resource string, since time.Time) map[string]int {
	out := map[string]int{}
	for _, ev := range l.read {
		if ev.User == user && ev.Resource == resource && !ev.IsWrite() && !ev.Received.Before(since) {
			out[ev.Verb]++
		}
	}
	return out
}

// firstWrite is when the API server received user's first verb on resource;
// zero when there was none.
func (l *requestLog) firstWrite(user, verb, resource string) time.Time {
	var first time.Time
	for _, ev := range l.read {
		if ev.User == user && ev.Verb == verb && ev.Resource == resource && ev.Subresource == "" &&
			(first.IsZero() || ev.Received.Before(first)) {
			first = ev.Received
		}
	}
	return first
}

// stuckMetric is the controller's runtime_extractor_rollout_stuck.
func (c *controller) stuckMetric() float64 {
	c.t.Helper()
	return metricSum(c.metrics(), metricRolloutStuck)
}

// stuckConfig changes the pod template (one toleration more), so that every
// pod is to be replaced.
const stuckConfig = "dataReporting:\n  disableRuntimeExtractor: false\n  runtimeExtractor:\n    tolerations:\n" +
	"    - key: e2e.example.com/stuck\n      operator: Exists\n      effect: NoSchedule\n"

// TestStuckRolloutNamesTheNodeAndClears rolls out, then holds every new pod
// Pending (a kwok stage that skips every node; ready pods stay ready) and
// changes the pod template. The DaemonSet controller replaces one pod, whose
// successor never becomes ready, and with maxUnavailable used up updates no
// other: pods are left to update and nothing progresses. (A pod held
// unready with nothing left to update is no stuck rollout:
// TestUnreadyPodSameConditionsAfterRestartAndUpgrade.) After the shortened
// deadline RuntimeExtractorProgressing names the node; one node of three is
// within the DaemonSet's maxUnavailable, so Degraded stays False. Pods
// and Events are read once, for the one diagnosis, and never while the
// rollout progressed. Lifting the hold lets the rollout finish: the
// condition clears by itself.
func TestStuckRolloutNamesTheNodeAndClears(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.setConfig(enabledConfig)
	c, user := e.stuckController()
	e.waitRolledOut()
	e.waitState(c, "Running")
	if err := e.cluster.HoldPods(ctx, e.cluster.Nodes...); err != nil {
		t.Fatal(err)
	}
	released := false
	t.Cleanup(func() {
		if !released {
			if err := e.cluster.HoldPods(ctx); err != nil {
				t.Errorf("lift the kwok hold: %v", err)
			}
		}
	})
	requests := e.requestLog()
	changed := time.Now()
	e.setConfig(stuckConfig)

	desired := int32(len(e.cluster.Nodes))
	ds := e.waitDaemonSet("the rollout held after one pod", func(ds *appsv1.DaemonSet) bool {
		return ds != nil && ds.Status.ObservedGeneration == ds.Generation && len(ds.Spec.Template.Spec.Tolerations) > 0 &&
			ds.Status.DesiredNumberScheduled == desired && ds.Status.UpdatedNumberScheduled == 1 && ds.Status.NumberAvailable == desired-1
	})
	held := e.unreadyPodNode(ds, changed)
	requests.flush()
	if got := requests.readVerbsSince(user, "pods", changed); len(got) != 0 {
		t.Errorf("pods read while the rollout progressed (deadline not passed): %v", got)
	}

	cond := e.waitConditionSays(status.ConditionProgressing, "rollout made no progress for")
	t.Logf("RolloutStuck: %s", cond.Message)
	for _, want := range []string{fmt.Sprintf("%d of %d nodes not ready", desired-1, desired), "(" + held} {
		if !strings.Contains(cond.Message, want) {
			t.Errorf("Progressing message %q does not contain %q", cond.Message, want)
		}
	}
	if d := e.condition(status.ConditionDegraded); d == nil || d.Status != configv1.ConditionFalse {
		t.Errorf("Degraded is %+v for a rollout stuck on one node of %d, want False", d, desired)
	}
	if v := c.stuckMetric(); v != 1 {
		t.Errorf("%s = %v while stuck, want 1", metricRolloutStuck, v)
	}
	e.eventually("a RolloutStuck Event on the DaemonSet", func(context.Context) (bool, error) {
		for _, ev := range e.events(runtimeextractor.ReasonRolloutStuck) {
			if ev.InvolvedObject.Kind == "DaemonSet" && ev.InvolvedObject.Name == name && strings.Contains(ev.Message, held) {
				return true, nil
			}
		}
		return false, nil
	})
	// One stall, one diagnosis: one list of the pods, one of the Events.
	requests.flush()
	if got := requests.readVerbsSince(user, "pods", changed); got["list"] != 1 || len(got) != 1 {
		t.Errorf("pod reads for one stall: %v, want exactly one list", got)
	}
	if got := requests.readVerbsSince(user, "events", changed); got["list"] != 1 || len(got) != 1 {
		t.Errorf("Event reads for one stall: %v, want exactly one list", got)
	}

	// Fix the stage: kwok makes the held pod ready, the rollout completes.
	if err := e.cluster.HoldPods(ctx); err != nil {
		t.Fatal(err)
	}
	released = true
	e.waitRolledOut()
	e.waitState(c, "Running")
	e.waitCondition(status.ConditionDegraded, configv1.ConditionFalse, "")
	e.eventually(metricRolloutStuck+" back to 0", func(context.Context) (bool, error) { return c.stuckMetric() == 0, nil })
}

// unreadyPodNode is the node of the one pod of ds, created since, that is not
// ready.
func (e *env) unreadyPodNode(ds *appsv1.DaemonSet, since time.Time) string {
	e.t.Helper()
	var nodes []string
	e.eventually("one pod not ready", func(ctx context.Context) (bool, error) {
		pods, err := e.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(ds.Spec.Selector)})
		if err != nil {
			return false, nil
		}
		nodes = nodes[:0]
		for _, p := range pods.Items {
			// Only pods created since (creation times are in whole seconds):
			// an older pod may be slow to turn ready again after an earlier
			// test restarted kwok.
			if p.DeletionTimestamp == nil && p.Spec.NodeName != "" && !podIsReady(&p) &&
				!p.CreationTimestamp.Before(&metav1.Time{Time: since.Truncate(time.Second)}) {
				nodes = append(nodes, p.Spec.NodeName)
			}
		}
		return len(nodes) == 1, nil
	})
	return nodes[0]
}

func podIsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// TestUnknownPriorityClassNamesFailedCreate names a PriorityClass that does
// not exist: the DaemonSet controller cannot create a single pod and records
// FailedCreate. After the deadline the condition names the warning and the
// class; naming a class that exists lets the rollout through and clears it.
func TestUnknownPriorityClassNamesFailedCreate(t *testing.T) {
	e := newEnv(t)
	const class = "e2e-no-such-priority-class"
	e.setConfig("dataReporting:\n  disableRuntimeExtractor: false\n  runtimeExtractor:\n    priorityClassName: " + class + "\n")
	c, _ := e.stuckController()

	e.waitDaemonSet("the DaemonSet naming the unknown class", func(ds *appsv1.DaemonSet) bool {
		return ds != nil && ds.Spec.Template.Spec.PriorityClassName == class
	})
	cond := e.waitCondition(status.ConditionDegraded, configv1.ConditionTrue, status.ReasonRolloutStuck)
	n := len(e.cluster.Nodes)
	for _, want := range []string{fmt.Sprintf("%d of %d nodes not ready", n, n), "FailedCreate", class} {
		if !strings.Contains(cond.Message, want) {
			t.Errorf("RolloutStuck message %q does not contain %q", cond.Message, want)
		}
	}
	if v := c.stuckMetric(); v != 1 {
		t.Errorf("%s = %v while stuck, want 1", metricRolloutStuck, v)
	}

	e.setConfig(enabledConfig)
	e.waitRolledOut()
	e.waitState(c, "Running")
	e.waitCondition(status.ConditionDegraded, configv1.ConditionFalse, "")
	if v := c.stuckMetric(); v != 0 {
		t.Errorf("%s = %v after the rollout completed, want 0", metricRolloutStuck, v)
	}
}
