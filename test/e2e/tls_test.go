package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/runtimeextractor"
	"github.com/insights-runtime-extractor/controller/pkg/status"
	"github.com/insights-runtime-extractor/controller/pkg/tlsprofile"
)

var (
	modernTLS       = &configv1.TLSSecurityProfile{Type: configv1.TLSProfileModernType, Modern: &configv1.ModernTLSProfile{}}
	intermediateTLS = &configv1.TLSSecurityProfile{Type: configv1.TLSProfileIntermediateType, Intermediate: &configv1.IntermediateTLSProfile{}}
	modernArgs      = []string{"--tls-min-version=VersionTLS13"}
)

// restoreTLSProfileAtEnd puts the APIServer cluster's TLS profile back as
// it is now when the test ends.
func (e *env) restoreTLSProfileAtEnd() {
	e.t.Helper()
	api, err := e.config.ConfigV1().APIServers().Get(context.Background(), tlsprofile.APIServerName, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { e.setTLSProfile(api.Spec.TLSSecurityProfile) })
}

// setTLSProfile sets the APIServer cluster's spec.tlsSecurityProfile.
func (e *env) setTLSProfile(p *configv1.TLSSecurityProfile) {
	e.t.Helper()
	ctx := context.Background()
	apis := e.config.ConfigV1().APIServers()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		api, err := apis.Get(ctx, tlsprofile.APIServerName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		api.Spec.TLSSecurityProfile = p
		_, err = apis.Update(ctx, api, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		e.t.Fatalf("set the TLS profile: %v", err)
	}
}

// tlsArgs are ds's kube-rbac-proxy TLS arguments (nil without ds).
func tlsArgs(t *testing.T, ds *appsv1.DaemonSet) []string {
	t.Helper()
	if ds == nil {
		return nil
	}
	args, ok := resources.KubeRBACProxyTLSArgsOf(ds)
	if !ok {
		t.Fatalf("the DaemonSet's kube-rbac-proxy has no TLS arguments to read")
	}
	return args
}

func (e *env) waitTLSArgs(want []string) *appsv1.DaemonSet {
	e.t.Helper()
	return e.waitDaemonSet("kube-rbac-proxy with "+strings.Join(want, " ")+", rolled out", func(ds *appsv1.DaemonSet) bool {
		return e.rolledOut(ds) && slices.Equal(tlsArgs(e.t, ds), want)
	})
}

// daemonSetWrites are user's writes of the DaemonSet in [from, to).
func (l *requestLog) daemonSetWrites(user string, from, to time.Time) []string {
	return slices.DeleteFunc(l.writes(user, from, to), func(w string) bool { return !strings.Contains(w, " daemonsets/") })
}

// eventsSince returns the Events of reason last seen at or after since.
func (e *env) eventsSince(reason string, since time.Time) []corev1.Event {
	e.t.Helper()
	var out []corev1.Event
	for _, ev := range e.events(reason) {
		if last := ev.LastTimestamp.Time; !last.Before(since.Truncate(time.Second)) {
			out = append(out, ev)
		}
	}
	return out
}

// TestTLSProfileChangeRollsOutOnce: the controller, as its ServiceAccount,
// deploys at the unset profile (Intermediate). The profile then set
// explicitly to Intermediate (same arguments) and to Modern is followed by
// exactly one DaemonSet write, counted in the audit log, and one new
// generation.
func TestTLSProfileChangeRollsOutOnce(t *testing.T) {
	e := newEnv(t)
	e.restoreTLSProfileAtEnd()
	e.setTLSProfile(nil)
	kubeconfig, user := e.controllerAccountKubeconfig()
	c := e.startController(controllerOpts{kubeconfig: kubeconfig})
	before := e.waitTLSArgs(resources.KubeRBACProxyTLSArgs(nil))
	e.waitState(c, "Running")
	requests := e.requestLog()
	from := time.Now()

	e.setTLSProfile(intermediateTLS)
	e.eventually("the controller to see the explicit Intermediate", func(context.Context) (bool, error) {
		return c.logContains("cluster TLS profile changed: Intermediate"), nil
	})
	e.setTLSProfile(modernTLS)
	after := e.waitTLSArgs(modernArgs)
	e.waitState(c, "Running")
	e.waitCondition(status.ConditionProgressing, configv1.ConditionFalse, status.ReasonAsExpected)
	requests.flush()
	writes := requests.daemonSetWrites(user, from, time.Now())
	t.Logf("DaemonSet writes after the profile changes: %s; generation %d -> %d", joinOrNone(writes), before.Generation, after.Generation)
	if len(writes) != 1 || !strings.HasPrefix(writes[0], "update daemonsets/"+name+" (200)") {
		t.Errorf("DaemonSet writes %s, want exactly one update", joinOrNone(writes))
	}
	if cur := e.daemonSet(); cur.Generation != before.Generation+1 {
		t.Errorf("generation %d -> %d, want one rollout", before.Generation, cur.Generation)
	}
	var followed bool
	for _, ev := range e.eventsSince(runtimeextractor.ReasonUpdated, from) {
		followed = followed || strings.Contains(ev.Message, "follows the cluster TLS profile: Modern")
	}
	if !followed {
		t.Errorf("no %s Event names the Modern profile", runtimeextractor.ReasonUpdated)
	}
}

// canReadAPIServer asks whether the controller's ServiceAccount may verb the
// APIServer cluster.
func (e *env) canReadAPIServer(verb string) bool {
	e.t.Helper()
	return e.controllerMay(authorizationv1.ResourceAttributes{
		Verb: verb, Group: configv1.GroupName, Resource: "apiservers", Name: tlsprofile.APIServerName,
	})
}

// setAPIServerRule removes the ClusterRole's apiservers rule (allow false)
// or puts rule back, and waits until RBAC says so.
func (e *env) setAPIServerRule(allow bool, rule rbacv1.PolicyRule) rbacv1.PolicyRule {
	e.t.Helper()
	ctx := context.Background()
	roles := e.kube.RbacV1().ClusterRoles()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		role, err := roles.Get(ctx, controllerAccount, metav1.GetOptions{})
		if err != nil {
			return err
		}
		role.Rules = slices.DeleteFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
			if slices.Contains(r.Resources, "apiservers") {
				rule = r
				return true
			}
			return false
		})
		if allow {
			role.Rules = append(role.Rules, rule)
		}
		_, err = roles.Update(ctx, role, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		e.t.Fatalf("update ClusterRole %s: %v", controllerAccount, err)
	}
	e.eventually("RBAC to settle", func(context.Context) (bool, error) {
		return e.canReadAPIServer("list") == allow && e.canReadAPIServer("watch") == allow, nil
	})
	return rule
}

// TestTLSProfileUnreadableAtStartChangesNothing: a DaemonSet deployed at
// Modern, then a controller whose ServiceAccount may not read the APIServer
// (the ClusterRole's rule removed). It starts after its 10 s wait, keeps the
// DaemonSet as it is (same generation, same arguments; its one adoption
// update is one the server finds unchanged), and says why in a Warning.
// Given the permission back, its watch reads Modern and nothing is written.
func TestTLSProfileUnreadableAtStartChangesNothing(t *testing.T) {
	e := newEnv(t)
	e.restoreTLSProfileAtEnd()
	e.setTLSProfile(modernTLS)
	first := e.startController(controllerOpts{})
	e.waitTLSArgs(modernArgs)
	e.waitState(first, "Running")
	first.stop()
	deployed := e.daemonSet()

	kubeconfig, user := e.controllerAccountKubeconfig()
	rule := e.setAPIServerRule(false, rbacv1.PolicyRule{})
	requests := e.requestLog()
	from := time.Now()
	c := e.startController(controllerOpts{kubeconfig: kubeconfig})
	var warning corev1.Event
	e.eventually("a TLS profile Warning", func(context.Context) (bool, error) {
		for _, ev := range e.eventsSince(runtimeextractor.ReasonTLSProfileUnknown, from) {
			warning = ev
			return true, nil
		}
		return false, nil
	})
	t.Logf("%s %s on %s: %s", warning.Type, warning.Reason, warning.InvolvedObject.Kind, warning.Message)
	if warning.Type != corev1.EventTypeWarning || warning.InvolvedObject.Kind != "DaemonSet" ||
		!strings.Contains(warning.Message, "forbidden") || !strings.Contains(warning.Message, "VersionTLS13") {
		t.Errorf("the Warning should be on the DaemonSet, say forbidden and name the kept VersionTLS13")
	}
	e.waitState(c, "Running")
	e.waitCondition(status.ConditionAvailable, configv1.ConditionTrue, status.ReasonAsExpected)
	e.waitCondition(status.ConditionProgressing, configv1.ConditionFalse, status.ReasonAsExpected)
	requests.flush()
	e.checkUnchanged(deployed, requests.daemonSetWrites(user, from, time.Now()))

	// The permission back: the watch retries by itself and reads Modern,
	// which the DaemonSet already has.
	e.setAPIServerRule(true, rule)
	e.eventually("the controller to read the profile", func(context.Context) (bool, error) {
		return c.logContains("cluster TLS profile known again (Modern)"), nil
	})
	e.waitState(c, "Running")
	requests.flush()
	e.checkUnchanged(deployed, requests.daemonSetWrites(user, from, time.Now()))
}

// checkUnchanged fails unless the DaemonSet has deployed's generation and
// TLS arguments, and writes are at most the adoption's one update (which
// the server found unchanged, as the generation shows).
func (e *env) checkUnchanged(deployed *appsv1.DaemonSet, writes []string) {
	e.t.Helper()
	cur := e.daemonSet()
	e.t.Logf("generation %d -> %d, kube-rbac-proxy %q -> %q; DaemonSet writes: %s",
		deployed.Generation, cur.Generation, tlsArgs(e.t, deployed), tlsArgs(e.t, cur), joinOrNone(writes))
	if cur.UID != deployed.UID || cur.Generation != deployed.Generation || !slices.Equal(tlsArgs(e.t, cur), tlsArgs(e.t, deployed)) {
		e.t.Errorf("the DaemonSet changed")
	}
	if len(writes) > 1 || len(writes) == 1 && !strings.HasPrefix(writes[0], "update daemonsets/"+name+" (200)") {
		e.t.Errorf("DaemonSet writes %s, want at most the adoption's update", joinOrNone(writes))
	}
}
