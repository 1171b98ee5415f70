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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/insights-runtime-extractor/controller/pkg/runtimeextractor"
	"github.com/insights-runtime-extractor/controller/pkg/status"
	"github.com/insights-runtime-extractor/controller/pkg/testcluster"
)

// denyDeletePolicy names the ValidatingAdmissionPolicy, and its binding, that
// refuse the controller's DELETE of the DaemonSet.
const denyDeletePolicy = "e2e-deny-runtime-extractor-delete"

// denyDeletesBy installs a policy that refuses user's DELETE of the DaemonSet
// in openshift-insights (nobody else's, so the tests' own cleanup passes),
// waits until a dry-run DELETE by client is refused, and removes the policy
// when the test ends.
func (e *env) denyDeletesBy(user string, client kubernetes.Interface) {
	e.t.Helper()
	policy := testcluster.DaemonSetRefusalPolicy(denyDeletePolicy, name, admissionregistrationv1.Delete,
		"deleting the runtime extractor DaemonSet is refused by an admission policy")
	policy.Spec.MatchConstraints.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}
	policy.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{{
		Name: "the-controller", Expression: fmt.Sprintf("request.userInfo.username == %q", user),
	}}
	// Policies are loaded asynchronously: a dry-run DELETE as user shows when
	// this one is enforced.
	e.enforcePolicy(policy, func() bool {
		err := client.AppsV1().DaemonSets(ns).Delete(context.Background(), name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), denyDeletePolicy)
	})
}

// TestDeniedDeleteFollowsTheBackoff: an admission policy refuses the
// controller's DELETE of the DaemonSet. The DaemonSet is deleted by someone
// else, so the controller recreates it, and the extractor is disabled while
// that create's expectation is pending. Over 30 s the controller's DELETEs
// (read from the audit log) follow the retry backoff (100 ms doubling, up to
// 10 % jitter): 1 + the retries whose cumulative delay fits in 30 s, each at
// least its backoff after the one before, whatever timer fires meanwhile.
func TestDeniedDeleteFollowsTheBackoff(t *testing.T) {
	const window = 30 * time.Second
	e := newEnv(t)
	e.installRBAC()
	kubeconfig, cfg := e.controllerKubeconfig()
	user := testcluster.ServiceAccountUser(ns, controllerAccount)
	asController, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := e.startController(controllerOpts{kubeconfig: kubeconfig})
	e.waitRolledOut()
	e.waitState(c, "Running")
	e.denyDeletesBy(user, asController)

	requests := e.requestLog()
	old := e.deleteDaemonSetAsSomeoneElse()
	e.waitDaemonSet("the DaemonSet recreated", func(ds *appsv1.DaemonSet) bool { return ds != nil && ds.UID != old.UID })
	disabled := time.Now()
	e.setConfig(disabledConfig)

	// The first DELETE after the disable starts the window.
	deletes := func() []testcluster.AuditEvent {
		var out []testcluster.AuditEvent
		for _, ev := range requests.read {
			if ev.User == user && ev.Verb == "delete" && ev.Resource == "daemonsets" && ev.Subresource == "" &&
				!strings.Contains(ev.RequestURI, "dryRun") && !ev.Received.Before(disabled) {
				out = append(out, ev)
			}
		}
		return out
	}
	e.eventually("the controller's first DELETE", func(context.Context) (bool, error) {
		requests.flush()
		return len(deletes()) > 0, nil
	})
	first := deletes()[0].Received
	time.Sleep(time.Until(first.Add(window))) // the window itself
	requests.flush()
	var in []testcluster.AuditEvent
	for _, ev := range deletes() {
		if ev.Received.Before(first.Add(window)) {
			in = append(in, ev)
		}
	}

	// The schedule: retry i waits base·2^i, plus up to 10 % jitter.
	base := runtimeextractor.DefaultRetryBase
	minCount, maxCount := 1, 1
	for i, lo, hi := 0, time.Duration(0), time.Duration(0); ; i++ {
		d := base << i
		lo, hi = lo+d, hi+d+d/10
		if lo <= window {
			maxCount++
		}
		if hi <= window {
			minCount++
		}
		if lo > window {
			break
		}
	}
	// When each DELETE came, after the controller's create (whose
	// expectation lasts resources.ExpectationTimeout).
	created := requests.firstWrite(user, "create", "daemonsets")
	var at []string
	for _, ev := range in {
		at = append(at, ev.Received.Sub(created).Round(time.Millisecond).String())
	}
	// Each retry waits at least its backoff (5 % slack for timer noise).
	var gaps []string
	early := 0
	for i := 1; i < len(in); i++ {
		gap := in[i].Received.Sub(in[i-1].Received)
		gaps = append(gaps, gap.Round(time.Millisecond).String())
		nominal := runtimeextractor.DefaultRetryMax
		if i-1 < 20 {
			nominal = min(base<<(i-1), nominal)
		}
		if gap < nominal-nominal/20 {
			if early++; early == 1 {
				t.Errorf("DELETE %d came %s after the one before, want at least the backoff's %s", i+1, gap.Round(time.Millisecond), nominal)
			}
		}
	}
	if early > 1 {
		t.Errorf("%d DELETEs in all came before their backoff", early)
	}
	codes := map[int]int{}
	for _, ev := range in {
		codes[ev.Code]++
	}
	t.Logf("%d DELETEs by the controller in the %s after its first (schedule: %d to %d); response codes %v; gaps %s; at %s after its create",
		len(in), window, minCount, maxCount, codes, strings.Join(gaps, ", "), strings.Join(at, ", "))
	if len(in) < minCount-1 || len(in) > maxCount+1 {
		t.Errorf("%d DELETEs in %s, want about %d to %d (the backoff schedule)", len(in), window, minCount, maxCount)
	}
	if codes[200] > 0 || e.daemonSet() == nil {
		t.Errorf("a DELETE went through the policy")
	}
	// Younger than the Degraded inertia, the refusal is Progressing's news.
	p := e.waitConditionMessage(status.ConditionProgressing, denyDeletePolicy)
	t.Logf("Progressing: %s", p.Message)
	if d := e.condition(status.ConditionDegraded); d == nil || d.Status != configv1.ConditionFalse {
		t.Errorf("Degraded within the inertia: %+v", d)
	}
}
