package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/insights-runtime-extractor/controller/manifests"
	"github.com/insights-runtime-extractor/controller/pkg/runtimeextractor"
	"github.com/insights-runtime-extractor/controller/pkg/status"
	"github.com/insights-runtime-extractor/controller/pkg/testcluster"
)

// controllerAccount is the ServiceAccount the shipped manifests bind the
// controller's permissions to.
const controllerAccount = "runtime-extractor-controller"

// installRBAC creates the shipped ServiceAccount, Roles, ClusterRole and
// bindings (not the Deployment: the test runs the binary itself) and removes
// them again when the test ends. It returns the Role in openshift-insights.
func (e *env) installRBAC() *rbacv1.Role {
	e.t.Helper()
	objs, err := manifests.Objects()
	if err != nil {
		e.t.Fatalf("load manifests: %v", err)
	}
	var rbac []runtime.Object
	var role *rbacv1.Role
	for _, obj := range objs {
		switch o := obj.(type) {
		case *corev1.ServiceAccount, *rbacv1.RoleBinding, *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding:
			rbac = append(rbac, obj)
		case *rbacv1.Role:
			rbac = append(rbac, obj)
			if o.Namespace == ns {
				role = o.DeepCopy()
			}
		}
	}
	if role == nil {
		e.t.Fatalf("the manifests have no Role in %s", ns)
	}
	ctx := context.Background()
	e.t.Cleanup(func() { deleteRBAC(e.t, e.kube, rbac) })
	deleteRBAC(e.t, e.kube, rbac) // left over by an aborted run, possibly edited
	if err := manifests.CreateAll(ctx, e.kube, rbac); err != nil {
		e.t.Fatalf("apply RBAC manifests: %v", err)
	}
	return role
}

func deleteRBAC(t *testing.T, kube kubernetes.Interface, objs []runtime.Object) {
	ctx := context.Background()
	for _, obj := range objs {
		var err error
		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			err = kube.CoreV1().ServiceAccounts(o.Namespace).Delete(ctx, o.Name, metav1.DeleteOptions{})
		case *rbacv1.Role:
			err = kube.RbacV1().Roles(o.Namespace).Delete(ctx, o.Name, metav1.DeleteOptions{})
		case *rbacv1.RoleBinding:
			err = kube.RbacV1().RoleBindings(o.Namespace).Delete(ctx, o.Name, metav1.DeleteOptions{})
		case *rbacv1.ClusterRole:
			err = kube.RbacV1().ClusterRoles().Delete(ctx, o.Name, metav1.DeleteOptions{})
		case *rbacv1.ClusterRoleBinding:
			err = kube.RbacV1().ClusterRoleBindings().Delete(ctx, o.Name, metav1.DeleteOptions{})
		}
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete %T: %v", obj, err)
		}
	}
}

// can asks the API server whether the controller's ServiceAccount may do verb
// on the managed DaemonSet.
func (e *env) can(verb string) bool {
	e.t.Helper()
	return e.controllerMay(authorizationv1.ResourceAttributes{
		Namespace: ns, Verb: verb, Group: "apps", Resource: "daemonsets", Name: name,
	})
}

// controllerMay asks the API server whether the controller's ServiceAccount
// may do what attrs describe; an error fails the test.
func (e *env) controllerMay(attrs authorizationv1.ResourceAttributes) bool {
	e.t.Helper()
	allowed, err := e.serviceAccountMay(context.Background(), controllerAccount, attrs)
	if err != nil {
		e.t.Fatalf("subject access review: %v", err)
	}
	return allowed
}

// serviceAccountMay asks the API server, by a SubjectAccessReview, whether
// the ServiceAccount account in openshift-insights may do what attrs describe.
func (e *env) serviceAccountMay(ctx context.Context, account string, attrs authorizationv1.ResourceAttributes) (bool, error) {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               testcluster.ServiceAccountUser(ns, account),
		Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
		ResourceAttributes: &attrs,
	}}
	res, err := e.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return res.Status.Allowed, nil
}

func (e *env) waitCan(verb string, want bool) {
	e.t.Helper()
	e.eventually("RBAC to settle", func(context.Context) (bool, error) { return e.can(verb) == want, nil })
}

func (e *env) updateRole(role *rbacv1.Role) {
	e.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := e.kube.RbacV1().Roles(role.Namespace).Get(context.Background(), role.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Rules = role.Rules
		_, err = e.kube.RbacV1().Roles(role.Namespace).Update(context.Background(), cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		e.t.Fatalf("update Role %s: %v", role.Name, err)
	}
}

// withoutVerb returns a copy of role whose DaemonSet rules lack verb.
func withoutVerb(role *rbacv1.Role, verb string) *rbacv1.Role {
	out := role.DeepCopy()
	out.Rules = nil
	for _, r := range role.Rules {
		if slices.Contains(r.Resources, "daemonsets") {
			r = *r.DeepCopy()
			r.Verbs = slices.DeleteFunc(r.Verbs, func(v string) bool { return v == verb })
			if len(r.Verbs) == 0 {
				continue
			}
		}
		out.Rules = append(out.Rules, r)
	}
	return out
}

// expectForbidden fails unless err is the API server's Forbidden.
func expectForbidden(t *testing.T, what string, err error) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Errorf("%s: got %v, want Forbidden", what, err)
		return
	}
	t.Logf("%s: forbidden, as it should be", what)
}

// TestLeastPrivilege runs the binary as the shipped ServiceAccount, bound only
// by the shipped RBAC manifests: it converges, its credential cannot read
// Secrets or touch DaemonSets elsewhere, a permission removed at runtime shows
// as Degraded and a Warning Event naming the denial, and restoring the
// permission lets it recover.
func TestLeastPrivilege(t *testing.T) {
	e := newEnv(t)
	role := e.installRBAC()
	ctx := context.Background()
	kubeconfig, restConfig := e.controllerKubeconfig()
	c := e.startController(controllerOpts{kubeconfig: kubeconfig})
	e.waitRolledOut()
	e.waitCondition(status.ConditionAvailable, configv1.ConditionTrue, status.ReasonAsExpected)
	e.waitCondition(status.ConditionDegraded, configv1.ConditionFalse, "")
	if !c.logContains("runtime extractor controller started") {
		t.Fatal("the controller did not start")
	}

	// The same credential, used directly.
	sa, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	_, err = sa.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	expectForbidden(t, "list Secrets in "+ns, err)
	_, err = sa.CoreV1().Secrets(ns).Get(ctx, "insights-runtime-extractor-tls", metav1.GetOptions{})
	expectForbidden(t, "get Secret "+ns+"/insights-runtime-extractor-tls", err)
	_, err = sa.AppsV1().DaemonSets("kube-system").List(ctx, metav1.ListOptions{})
	expectForbidden(t, "list DaemonSets in kube-system", err)
	other := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
	_, err = sa.AppsV1().DaemonSets("default").Create(ctx, other, metav1.CreateOptions{})
	expectForbidden(t, "create a DaemonSet in default", err)
	err = sa.AppsV1().DaemonSets("kube-system").Delete(ctx, "kube-proxy", metav1.DeleteOptions{})
	expectForbidden(t, "delete a DaemonSet in kube-system", err)
	_, err = sa.AppsV1().DaemonSets(ns).Get(ctx, "someone-elses", metav1.GetOptions{})
	expectForbidden(t, "get another DaemonSet in "+ns, err)
	if _, err := sa.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Fatalf("the credential cannot read the managed DaemonSet: %v", err)
	}

	// Take the update permission away, then change the DaemonSet's image.
	e.updateRole(withoutVerb(role, "update"))
	e.waitCan("update", false)
	ds := e.daemonSet().DeepCopy()
	want := ds.Spec.Template.Spec.Containers[0].Image
	ds.Spec.Template.Spec.Containers[0].Image = "quay.io/someone/else:latest"
	if _, err := e.kube.AppsV1().DaemonSets(ns).Update(ctx, ds, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The refusal is RBAC's, by the controller's own ServiceAccount (earlier
	// tests' Events may say forbidden for other reasons).
	const byRBAC = `forbidden: User "system:serviceaccount:`
	progressing := e.waitConditionMessage(status.ConditionProgressing, byRBAC)
	t.Logf("Progressing: %s", progressing.Message)
	e.eventually("a Warning Event saying forbidden", func(context.Context) (bool, error) {
		for _, ev := range e.events(runtimeextractor.ReasonApplyFailed) {
			if ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Message, byRBAC) {
				t.Logf("Warning Event %s: %s", ev.Reason, ev.Message)
				return true, nil
			}
		}
		return false, nil
	})
	if !c.alive() {
		t.Fatalf("controller %d exited on a permission error", c.pid())
	}

	// Give it back: the controller's next retry succeeds.
	e.updateRole(role)
	e.waitCan("update", true)
	e.waitDaemonSet("the image restored", func(cur *appsv1.DaemonSet) bool {
		return cur != nil && cur.Spec.Template.Spec.Containers[0].Image == want
	})
	e.waitRolledOut()
	e.waitCondition(status.ConditionDegraded, configv1.ConditionFalse, "")
	e.waitCondition(status.ConditionAvailable, configv1.ConditionTrue, status.ReasonAsExpected)
}
