package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/insights-runtime-extractor/controller/pkg/status"
	"github.com/insights-runtime-extractor/controller/pkg/testcluster"
)

// podsOnly narrows the policy to what SCC admission judges: pods at creation,
// and ephemeral containers added to them; no workload's template.
func podsOnly(t *testing.T, policy *admissionregistrationv1.ValidatingAdmissionPolicy) {
	t.Helper()
	rules := policy.Spec.MatchConstraints.ResourceRules
	rules = slices.DeleteFunc(slices.Clone(rules), func(r admissionregistrationv1.NamedRuleWithOperations) bool {
		return !slices.Equal(r.APIGroups, []string{""}) ||
			!(slices.Equal(r.Resources, []string{"pods"}) || slices.Equal(r.Resources, []string{"pods/ephemeralcontainers"}))
	})
	if len(rules) != 2 {
		t.Fatalf("the policy has %d rules for pods and their ephemeral containers, want 2: %+v", len(rules), rules)
	}
	policy.Spec.MatchConstraints.ResourceRules = rules
}

// TestSCCRefusalAtPodCreationNamesTheCause takes the path that OpenShift
// really takes when its SCC refuses the template: SCC admission judges pods
// only, so the DaemonSet is stored, and then the DaemonSet controller fails to
// create every pod (FailedCreate ... unable to validate against any security
// context constraint). The local cluster's policy judges templates too, which
// fails fast in the other tests and hides this path; here a pods-only variant
// of it takes its place, the same rules with one fact turned (the host PID
// namespace not allowed), so that the controller's own template is refused at
// pod creation. After the (shortened) rollout deadline,
// RuntimeExtractorDegraded turns True with reason RolloutStuck and its message
// carries the refusal. The policy is put back as the cluster installs it.
func TestSCCRefusalAtPodCreationNamesTheCause(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	variant, _, err := testcluster.SCCPolicy()
	if err != nil {
		t.Fatal(err)
	}
	podsOnly(t, variant)
	turnFacts(t, variant, map[string]string{"allowHostPID": "false"})

	vaps := e.kube.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	// Registered before the controller starts, so it runs after the
	// controller has stopped; it waits until the policy is in force again.
	t.Cleanup(func() {
		if err := e.cluster.InstallSCCPolicy(ctx); err != nil {
			t.Errorf("restore the SCC policy: %v", err)
		}
	})
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := vaps.Get(ctx, testcluster.SCCPolicyName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec = variant.Spec
		_, err = vaps.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("replace the SCC policy with its pods-only variant: %v", err)
	}
	// In force once the host's template, which the variant refuses, passes as
	// a DaemonSet and is refused as a pod.
	host := readDaemonSet(t, originalManifest)
	const refusal = "hostPID: host namespace may not be used"
	var last error
	e.eventually("the pods-only variant in force", func(context.Context) (bool, error) {
		if last = createDaemonSet(e.kube, host); last != nil {
			return false, nil
		}
		last = createPod(e.kube, podOf(host, e.cluster.Nodes[0]))
		return last != nil && strings.Contains(last.Error(), refusal), nil
	})
	t.Logf("the variant refuses the host's pod: %v", last)

	e.setConfig(enabledConfig)
	c, _ := e.stuckController()
	ds := e.waitDaemonSet("the DaemonSet stored", func(ds *appsv1.DaemonSet) bool { return ds != nil && ds.Spec.Template.Spec.HostPID })
	cond := e.waitCondition(status.ConditionDegraded, configv1.ConditionTrue, status.ReasonRolloutStuck)
	t.Logf("RuntimeExtractorDegraded=True %s, %s after the DaemonSet was created (--rollout-deadline %s): %s",
		cond.Reason, time.Since(ds.CreationTimestamp.Time).Round(time.Second), stuckDeadline, cond.Message)
	n := len(e.cluster.Nodes)
	for _, want := range []string{
		fmt.Sprintf("%d of %d nodes not ready", n, n),
		"FailedCreate",
		"unable to validate against any security context constraint",
		`[provider "insights-runtime-extractor-scc": ` + refusal + "]",
	} {
		if !strings.Contains(cond.Message, want) {
			t.Errorf("RolloutStuck message %q does not contain %q", cond.Message, want)
		}
	}
	for _, ct := range []configv1.ClusterStatusConditionType{status.ConditionAvailable, status.ConditionProgressing} {
		if other := e.condition(ct); other != nil {
			t.Logf("%s=%s %s: %s", ct, other.Status, other.Reason, other.Message)
		}
	}
	if v := c.stuckMetric(); v != 1 {
		t.Errorf("%s = %v while stuck, want 1", metricRolloutStuck, v)
	}
	pods, err := e.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(ds.Spec.Selector)})
	if err != nil {
		t.Fatal(err)
	}
	// Pods of an earlier test's DaemonSet may still be going away.
	ours := slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool {
		return !slices.ContainsFunc(p.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == ds.UID })
	})
	if len(ours) != 0 {
		t.Errorf("%d pods created through the variant, want none", len(ours))
	}
}
