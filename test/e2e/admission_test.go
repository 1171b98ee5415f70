package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/runtimeextractor"
	"github.com/insights-runtime-extractor/controller/pkg/status"
	"github.com/insights-runtime-extractor/controller/pkg/testcluster"
)

// refuseUpdatesPolicy names the ValidatingAdmissionPolicy, and its binding,
// that refuse every UPDATE of the managed DaemonSet (not of its status).
const refuseUpdatesPolicy = "e2e-refuse-runtime-extractor-updates"

// refuseDaemonSetUpdates installs the policy and its binding, waits until the
// API server enforces them, and returns a function that deletes the binding.
// Both are deleted when the test ends.
func (e *env) refuseDaemonSetUpdates() (allow func()) {
	e.t.Helper()
	policy := testcluster.FrozenUpdatesPolicy(refuseUpdatesPolicy, name)
	// The API server loads policies asynchronously: a dry-run update shows
	// when this one is enforced.
	return e.enforcePolicy(policy, e.updateRefused)
}

// enforcePolicy installs policy with a Deny binding of the same name (after
// removing any an aborted run left), waits until enforced reports it in
// force, and removes both when the test ends; removeBinding lifts it sooner.
func (e *env) enforcePolicy(policy *admissionregistrationv1.ValidatingAdmissionPolicy, enforced func() bool) (removeBinding func()) {
	e.t.Helper()
	ctx := context.Background()
	vap := e.kube.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	bindings := e.kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	removeBinding = func() {
		if err := bindings.Delete(ctx, policy.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			e.t.Errorf("delete ValidatingAdmissionPolicyBinding: %v", err)
		}
	}
	cleanup := func() {
		removeBinding()
		if err := vap.Delete(ctx, policy.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			e.t.Errorf("delete ValidatingAdmissionPolicy: %v", err)
		}
	}
	cleanup()
	e.t.Cleanup(cleanup)
	if _, err := vap.Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("create ValidatingAdmissionPolicy: %v", err)
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	if _, err := bindings.Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("create ValidatingAdmissionPolicyBinding: %v", err)
	}
	e.eventually("the admission policy "+policy.Name+" enforced", func(context.Context) (bool, error) { return enforced(), nil })
	return removeBinding
}

// updateRefused reports whether a (dry-run) update of the DaemonSet is refused
// by the admission policy.
func (e *env) updateRefused() bool {
	ds := e.daemonSet()
	if ds == nil {
		return false
	}
	ds = ds.DeepCopy()
	if ds.Labels == nil {
		ds.Labels = map[string]string{}
	}
	ds.Labels["e2e.example.com/dry-run"] = "true"
	_, err := e.kube.AppsV1().DaemonSets(ns).Update(context.Background(), ds, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
	return err != nil && strings.Contains(err.Error(), refuseUpdatesPolicy)
}

// TestRefusedUpgradeIsNotReportedDone: an admission policy refuses every update
// of the DaemonSet; the ClusterVersion moves to a new version, so the
// controller's apply fails and is retried. A status-only update of the
// DaemonSet (as the DaemonSet controller makes for its counters) must not make
// the controller believe the upgrade rolled out: the old pods' rollout is not
// the new version's. It must not report Running, nor Available at the new
// version, and it must show Progressing or Degraded. Once the policy is
// lifted, it converges to the new version.
func TestRefusedUpgradeIsNotReportedDone(t *testing.T) {
	const (
		target = "4.22.1"
		// watch is how long the controller's report is watched after the
		// status-only update: proof of absence needs a window.
		watch = 10 * time.Second
	)
	e := newEnv(t)
	c, _ := e.deployed(controllerOpts{})
	e.waitState(c, "Running")
	allow := e.refuseDaemonSetUpdates()

	degradedSeen := e.watchDegraded()
	e.setClusterVersion(target)
	// A refusal younger than the Degraded inertia is news for Progressing,
	// not Degraded: an upgrade that an admission policy holds up for a while
	// must not flap the ClusterOperator.
	progressing := e.waitConditionMessage(status.ConditionProgressing, refuseUpdatesPolicy)
	t.Logf("Progressing: %s", progressing.Message)
	if ds := e.daemonSet(); ds.Annotations[resources.VersionAnnotation] == target {
		t.Fatalf("the DaemonSet reached %s through the policy", target)
	}

	// A status-only update, as the DaemonSet controller makes: it passes the
	// policy, and wakes the controller's rollout check.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ds := e.daemonSet().DeepCopy()
		ds.Status.Conditions = append(ds.Status.Conditions, appsv1.DaemonSetCondition{
			Type: "E2EStatusOnly", Status: corev1.ConditionTrue, Reason: "Test", LastTransitionTime: metav1.Now(),
		})
		_, err := e.kube.AppsV1().DaemonSets(ns).UpdateStatus(context.Background(), ds, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("status-only update: %v", err)
	}
	updated := time.Now()
	for time.Since(updated) < watch {
		if problem := e.claimsDone(c, target); problem != "" {
			t.Fatalf("%s after the status-only update, while every update of the DaemonSet is refused: %s",
				time.Since(updated).Round(100*time.Millisecond), problem)
		}
		time.Sleep(200 * time.Millisecond) // polling a window of absence
	}
	t.Logf("for %s after the status-only update the controller reported neither Running nor Available at %s (state %s)", watch, target, c.state())

	allow()
	e.waitDaemonSet("the new version rolled out", func(ds *appsv1.DaemonSet) bool {
		return e.rolledOut(ds) && ds.Annotations[resources.VersionAnnotation] == target &&
			ds.Spec.Template.Annotations[resources.VersionAnnotation] == "" // the version is on the DaemonSet only
	})
	e.waitState(c, "Running")
	available := e.waitCondition(status.ConditionAvailable, configv1.ConditionTrue, status.ReasonAsExpected)
	if !strings.Contains(available.Message, target) {
		t.Errorf("Available does not name %s: %q", target, available.Message)
	}
	e.waitCondition(status.ConditionDegraded, configv1.ConditionFalse, "")
	e.waitCondition(status.ConditionProgressing, configv1.ConditionFalse, "")
	if seen := degradedSeen(); len(seen) > 0 {
		t.Errorf("an upgrade refused for less than the Degraded inertia (%s) made RuntimeExtractorDegraded True: %v", runtimeextractor.DefaultDegradedInertia, seen)
	}
}

// TestLastingRefusalIsDegraded is the test of the Degraded inertia, so it
// alone shortens it: an upgrade that an admission policy keeps refusing
// shows in Progressing first, then, once the refusal lasted the inertia, as
// RuntimeExtractorDegraded ApplyFailed, whose message retries do not change;
// it clears once the policy is lifted.
func TestLastingRefusalIsDegraded(t *testing.T) {
	const inertia = 20 * time.Second
	e := newEnv(t)
	c, _ := e.deployed(controllerOpts{args: []string{"--degraded-inertia", inertia.String()}})
	e.waitState(c, "Running")
	allow := e.refuseDaemonSetUpdates()
	e.setClusterVersion("4.22.1")
	refused := time.Now()
	e.waitConditionMessage(status.ConditionProgressing, refuseUpdatesPolicy)
	if d := e.condition(status.ConditionDegraded); d == nil || d.Status != configv1.ConditionFalse {
		t.Fatalf("Degraded before the inertia: %+v", d)
	}
	degraded := e.waitCondition(status.ConditionDegraded, configv1.ConditionTrue, status.ReasonApplyFailed)
	after := time.Since(refused)
	t.Logf("Degraded %s after the refused upgrade (inertia %s): %s", after.Round(100*time.Millisecond), inertia, degraded.Message)
	if after < inertia-time.Second {
		t.Errorf("Degraded %s after the refusal, before the inertia %s", after, inertia)
	}
	if !strings.Contains(degraded.Message, refuseUpdatesPolicy) {
		t.Errorf("Degraded does not name the refusing policy: %q", degraded.Message)
	}
	// The next retry (its backoff about 26 s by now) fails the same way: the
	// condition stays as it was.
	retries := c.logCount(retryLine)
	waitLogCount(t, c, retryLine, retries+1, time.Minute)
	if now := e.condition(status.ConditionDegraded); now == nil || now.Message != degraded.Message || !now.LastTransitionTime.Equal(&degraded.LastTransitionTime) {
		t.Errorf("a retry that failed the same way changed Degraded: %+v, was %+v", now, degraded)
	}
	allow()
	e.waitCondition(status.ConditionDegraded, configv1.ConditionFalse, "")
	e.waitCondition(status.ConditionAvailable, configv1.ConditionTrue, status.ReasonAsExpected)
}

// claimsDone returns what, in the controller's report, claims the upgrade to
// target is done while it is not; "" when nothing does.
func (e *env) claimsDone(c *controller, target string) string {
	if s := c.state(); s == "Running" {
		return "runtime_extractor_state is Running"
	}
	available := e.condition(status.ConditionAvailable)
	progressing := e.condition(status.ConditionProgressing)
	degraded := e.condition(status.ConditionDegraded)
	describe := func(c *configv1.ClusterOperatorStatusCondition) string {
		if c == nil {
			return "absent"
		}
		return fmt.Sprintf("%s %s %q", c.Status, c.Reason, c.Message)
	}
	if available != nil && available.Status == configv1.ConditionTrue && available.Reason == status.ReasonAsExpected {
		return "RuntimeExtractorAvailable is " + describe(available)
	}
	if (progressing == nil || progressing.Status != configv1.ConditionTrue) && (degraded == nil || degraded.Status != configv1.ConditionTrue) {
		return fmt.Sprintf("neither Progressing (%s) nor Degraded (%s)", describe(progressing), describe(degraded))
	}
	return ""
}
