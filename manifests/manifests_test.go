package manifests

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/insights-runtime-extractor/controller/pkg/config"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/status"
	"github.com/insights-runtime-extractor/controller/pkg/version"
)

const (
	serviceAccount = "runtime-extractor-controller"
	// leaseName is the binary's component name plus "-lock" (library-go's
	// controllercmd names the Lease so).
	leaseName = "runtime-extractor-controller-lock"
)

func mustObjects(t *testing.T) []runtime.Object {
	t.Helper()
	objs, err := Objects()
	if err != nil {
		t.Fatalf("Objects: %v", err)
	}
	return objs
}

func only[T runtime.Object](objs []runtime.Object) []T {
	var out []T
	for _, o := range objs {
		if v, ok := o.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

func TestObjectsInApplyOrder(t *testing.T) {
	var got []string
	for _, o := range mustObjects(t) {
		got = append(got, describe(o))
	}
	want := []string{
		"Namespace openshift-insights",
		"ServiceAccount openshift-insights/runtime-extractor-controller",
		"Role openshift-insights/runtime-extractor-controller",
		"RoleBinding openshift-insights/runtime-extractor-controller",
		"ClusterRole runtime-extractor-controller",
		"ClusterRoleBinding runtime-extractor-controller",
		"RoleBinding kube-system/runtime-extractor-controller-authentication-reader",
		"Service openshift-insights/runtime-extractor-controller",
		"Deployment openshift-insights/runtime-extractor-controller",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("objects:\n got %q\nwant %q", got, want)
	}
}

func TestDecodeIsStrict(t *testing.T) {
	_, err := Decode([]byte("apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: x\n  namespce: y\n"))
	if err == nil || !strings.Contains(err.Error(), "namespce") {
		t.Fatalf("Decode with a misspelt field: err = %v, want an error naming it", err)
	}
}

func TestDecodeSkipsEmptyDocuments(t *testing.T) {
	objs, err := Decode([]byte("# comment only\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n---\n\n---\n"))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if len(objs) != 1 {
		t.Fatalf("Decode returned %d objects, want 1", len(objs))
	}
}

// request is one API request the controller makes, or must not be allowed to.
type request struct {
	namespace string // "" for cluster-scoped
	verb      string
	group     string
	resource  string // "resource" or "resource/subresource"
	name      string // "" for create and for a list or watch without a name selector
}

func (r request) String() string {
	return fmt.Sprintf("%s %s.%s %q in %q", r.verb, r.resource, r.group, r.name, r.namespace)
}

// builtinRoles are the Roles the manifests bind but Kubernetes itself creates.
var builtinRoles = map[string][]rbacv1.PolicyRule{
	"kube-system/extension-apiserver-authentication-reader": {{
		APIGroups: []string{""}, Resources: []string{"configmaps"},
		ResourceNames: []string{"extension-apiserver-authentication"}, Verbs: []string{"get", "list", "watch"},
	}},
}

// allowed evaluates req for the controller's service account the way RBAC
// does: the rules of every Role bound in req's namespace and of every bound
// ClusterRole; a rule with resourceNames matches only a request for one of them.
func allowed(objs []runtime.Object, req request) bool {
	isSubject := func(subjects []rbacv1.Subject) bool {
		return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
			return s.Kind == rbacv1.ServiceAccountKind && s.Name == serviceAccount && s.Namespace == resources.Namespace
		})
	}
	roles := map[string][]rbacv1.PolicyRule{}
	for k, v := range builtinRoles {
		roles[k] = v
	}
	for _, r := range only[*rbacv1.Role](objs) {
		roles[r.Namespace+"/"+r.Name] = r.Rules
	}
	clusterRoles := map[string][]rbacv1.PolicyRule{}
	for _, r := range only[*rbacv1.ClusterRole](objs) {
		clusterRoles[r.Name] = r.Rules
	}

	var rules []rbacv1.PolicyRule
	for _, b := range only[*rbacv1.ClusterRoleBinding](objs) {
		if isSubject(b.Subjects) {
			rules = append(rules, clusterRoles[b.RoleRef.Name]...)
		}
	}
	for _, b := range only[*rbacv1.RoleBinding](objs) {
		if req.namespace == "" || b.Namespace != req.namespace || !isSubject(b.Subjects) {
			continue
		}
		if b.RoleRef.Kind == "ClusterRole" {
			rules = append(rules, clusterRoles[b.RoleRef.Name]...)
		} else {
			rules = append(rules, roles[b.Namespace+"/"+b.RoleRef.Name]...)
		}
	}
	for _, rule := range rules {
		if matches(rule.Verbs, req.verb) && matches(rule.APIGroups, req.group) && matches(rule.Resources, req.resource) &&
			(len(rule.ResourceNames) == 0 || (req.name != "" && slices.Contains(rule.ResourceNames, req.name))) {
			return true
		}
	}
	return false
}

func matches(values []string, v string) bool {
	return slices.Contains(values, v) || slices.Contains(values, "*")
}

func TestRBACAllowsWhatTheControllerDoes(t *testing.T) {
	ns := resources.Namespace
	objs := mustObjects(t)
	for _, req := range []request{
		// The managed DaemonSet: name-selected informer, live read, apply, delete.
		{ns, "list", "apps", "daemonsets", resources.DaemonSetName},
		{ns, "watch", "apps", "daemonsets", resources.DaemonSetName},
		{ns, "get", "apps", "daemonsets", resources.DaemonSetName},
		{ns, "create", "apps", "daemonsets", ""},
		{ns, "update", "apps", "daemonsets", resources.DaemonSetName},
		{ns, "delete", "apps", "daemonsets", resources.DaemonSetName},
		// config.yaml, through a name-selected informer.
		{ns, "list", "", "configmaps", config.ConfigMapName},
		{ns, "watch", "", "configmaps", config.ConfigMapName},
		{ns, "get", "", "configmaps", config.ConfigMapName},
		// Events and their aggregation.
		{ns, "create", "", "events", ""},
		{ns, "patch", "", "events", "some-event"},
		{ns, "update", "", "events", "some-event"},
		{ns, "list", "", "events", ""}, // a stuck rollout's warnings
		{ns, "list", "", "pods", ""},   // a stuck rollout's pods
		// Leader election.
		{ns, "get", "coordination.k8s.io", "leases", leaseName},
		{ns, "create", "coordination.k8s.io", "leases", ""},
		{ns, "update", "coordination.k8s.io", "leases", leaseName},
		// The Events' involved object.
		{ns, "get", "", "pods", "runtime-extractor-controller-5d9c7-abcde"},
		{ns, "get", "apps", "replicasets", "runtime-extractor-controller-5d9c7"},
		// Cluster-scoped: version, TLS profile, status, delegated auth.
		{"", "list", "config.openshift.io", "clusterversions", version.ClusterVersionName},
		{"", "watch", "config.openshift.io", "clusterversions", version.ClusterVersionName},
		{"", "list", "config.openshift.io", "apiservers", "cluster"},
		{"", "watch", "config.openshift.io", "apiservers", "cluster"},
		{"", "list", "config.openshift.io", "clusteroperators", status.DefaultClusterOperatorName},
		{"", "watch", "config.openshift.io", "clusteroperators", status.DefaultClusterOperatorName},
		{"", "patch", "config.openshift.io", "clusteroperators/status", status.DefaultClusterOperatorName},
		{"", "create", "authentication.k8s.io", "tokenreviews", ""},
		{"", "create", "authorization.k8s.io", "subjectaccessreviews", ""},
		// Delegated authentication's configuration.
		{"kube-system", "get", "", "configmaps", "extension-apiserver-authentication"},
		{"kube-system", "watch", "", "configmaps", "extension-apiserver-authentication"},
	} {
		if !allowed(objs, req) {
			t.Errorf("denied, but the controller needs it: %s", req)
		}
	}
}

func TestRBACIsLeastPrivilege(t *testing.T) {
	ns := resources.Namespace
	objs := mustObjects(t)
	for _, req := range []request{
		{ns, "list", "apps", "daemonsets", ""}, // every DaemonSet of the namespace
		{ns, "update", "apps", "daemonsets", "another-daemonset"},
		{ns, "delete", "apps", "daemonsets", "another-daemonset"},
		{ns, "patch", "apps", "daemonsets", resources.DaemonSetName},
		{"kube-system", "get", "apps", "daemonsets", resources.DaemonSetName},
		{ns, "list", "", "configmaps", ""},
		{ns, "get", "", "configmaps", "another-config"},
		{ns, "update", "", "configmaps", config.ConfigMapName},
		{ns, "get", "", "secrets", resources.TLSSecretName},
		{ns, "watch", "", "pods", ""},
		{"kube-system", "list", "", "pods", ""},
		{ns, "update", "coordination.k8s.io", "leases", "another-lock"},
		{ns, "delete", "coordination.k8s.io", "leases", leaseName},
		{"", "patch", "config.openshift.io", "clusteroperators/status", "another-operator"},
		{"", "update", "config.openshift.io", "clusteroperators/status", status.DefaultClusterOperatorName},
		{"", "update", "config.openshift.io", "clusteroperators", status.DefaultClusterOperatorName},
		{"", "update", "config.openshift.io", "clusterversions", version.ClusterVersionName},
		{"", "list", "config.openshift.io", "clusterversions", ""},
		{"", "list", "config.openshift.io", "apiservers", ""},
		{"", "update", "config.openshift.io", "apiservers", "cluster"},
		{"", "list", "", "nodes", ""},
		{"kube-system", "get", "", "configmaps", "another-config"},
	} {
		if allowed(objs, req) {
			t.Errorf("allowed, but the controller never needs it: %s", req)
		}
	}
}

func TestDeploymentRunsTheController(t *testing.T) {
	objs := mustObjects(t)
	deployments := only[*appsv1.Deployment](objs)
	if len(deployments) != 1 {
		t.Fatalf("%d Deployments, want 1", len(deployments))
	}
	d := deployments[0]
	pod := d.Spec.Template.Spec
	if pod.ServiceAccountName != serviceAccount {
		t.Errorf("serviceAccountName = %q, want %q", pod.ServiceAccountName, serviceAccount)
	}
	if got := only[*corev1.ServiceAccount](objs); len(got) != 1 || got[0].Name != serviceAccount {
		t.Errorf("ServiceAccounts = %v, want one named %q", got, serviceAccount)
	}
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || !selector.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("selector %v does not match the pod labels %v (err %v)", d.Spec.Selector, d.Spec.Template.Labels, err)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	for _, arg := range []string{"--namespace=" + resources.Namespace, "--listen=0.0.0.0:8443"} {
		if !slices.Contains(c.Args, arg) {
			t.Errorf("args %q lack %q", c.Args, arg)
		}
	}

	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if e := env["POD_NAME"]; e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("POD_NAME = %+v, want the downward API's metadata.name", e)
	}
	if env[version.EnvReleaseVersion].Value == "" {
		t.Errorf("%s is not set", version.EnvReleaseVersion)
	}
	for _, name := range []string{resources.EnvExtractorImage, resources.EnvExporterImage, resources.EnvKubeRBACProxyImage} {
		if env[name].Value == "" {
			t.Errorf("%s is not set", name)
		}
	}
	if _, err := resources.ImagesFromEnv(func(k string) string { return env[k].Value }); err != nil {
		t.Errorf("images in the Deployment's environment: %v", err)
	}

	for name, probe := range map[string]*corev1.Probe{"/readyz": c.ReadinessProbe, "/healthz": c.LivenessProbe} {
		if probe == nil || probe.HTTPGet == nil {
			t.Errorf("probe %s: missing", name)
			continue
		}
		g := probe.HTTPGet
		if g.Path != name || g.Scheme != corev1.URISchemeHTTPS || portNumber(c, g.Port.String()) != 8443 {
			t.Errorf("probe %s: %s %s port %s, want HTTPS on 8443", name, g.Scheme, g.Path, g.Port.String())
		}
	}
}

// TestDeploymentIsRestricted checks the fields of the restricted Pod Security
// profile, and that the root filesystem can stay read-only.
func TestDeploymentIsRestricted(t *testing.T) {
	d := only[*appsv1.Deployment](mustObjects(t))[0]
	pod := d.Spec.Template.Spec
	if psc := pod.SecurityContext; psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext = %+v, want runAsNonRoot and the RuntimeDefault seccomp profile", psc)
	}
	if pod.HostNetwork || pod.HostPID || pod.HostIPC {
		t.Error("the pod uses a host namespace")
	}
	c := pod.Containers[0]
	sc := c.SecurityContext
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 ||
		(sc.Privileged != nil && *sc.Privileged) || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("container securityContext = %+v, want no privilege escalation, all capabilities dropped, read-only root", sc)
	}
	// controllercmd writes a self-signed serving certificate under the temp dir.
	if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/tmp" && !m.ReadOnly }) {
		t.Error("no writable /tmp for the self-signed serving certificate")
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("resource requests = %v, want cpu and memory", c.Resources.Requests)
	}
}

func TestServiceSelectsTheControllerPod(t *testing.T) {
	objs := mustObjects(t)
	d := only[*appsv1.Deployment](objs)[0]
	svcs := only[*corev1.Service](objs)
	if len(svcs) != 1 {
		t.Fatalf("%d Services, want 1", len(svcs))
	}
	svc := svcs[0]
	if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("Service selector %v does not match pod labels %v", svc.Spec.Selector, d.Spec.Template.Labels)
	}
	for _, p := range svc.Spec.Ports {
		if portNumber(d.Spec.Template.Spec.Containers[0], p.TargetPort.String()) == 0 {
			t.Errorf("Service port %s targets %s, which the container does not expose", p.Name, p.TargetPort.String())
		}
	}
}

func TestCreateAll(t *testing.T) {
	ctx := context.Background()
	objs := mustObjects(t)
	existing := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: resources.Namespace}}
	client := fake.NewClientset(existing)
	if err := CreateAll(ctx, client, objs); err != nil {
		t.Fatalf("CreateAll: %v", err)
	}
	if err := CreateAll(ctx, client, objs); err != nil {
		t.Fatalf("CreateAll again (everything exists): %v", err)
	}
	if _, err := client.AppsV1().Deployments(resources.Namespace).Get(ctx, "runtime-extractor-controller", metav1.GetOptions{}); err != nil {
		t.Errorf("Deployment not created: %v", err)
	}
	if _, err := client.RbacV1().RoleBindings("kube-system").Get(ctx, "runtime-extractor-controller-authentication-reader", metav1.GetOptions{}); err != nil {
		t.Errorf("kube-system RoleBinding not created: %v", err)
	}
	if err := CreateAll(ctx, client, []runtime.Object{&corev1.Secret{}}); err == nil {
		t.Error("CreateAll of an unsupported kind succeeded")
	}
}

// portNumber resolves a container port given by number or name; 0 if absent.
func portNumber(c corev1.Container, port string) int32 {
	for _, p := range c.Ports {
		if p.Name == port || fmt.Sprint(p.ContainerPort) == port {
			return p.ContainerPort
		}
	}
	return 0
}
