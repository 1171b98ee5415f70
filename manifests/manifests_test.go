package manifests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/distribution/reference"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

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
		"NetworkPolicy openshift-insights/runtime-extractor-controller-default-deny",
		"NetworkPolicy openshift-insights/runtime-extractor-controller-to-api-server",
		"NetworkPolicy openshift-insights/runtime-extractor-controller-metrics-from-monitoring",
		"ServiceMonitor openshift-insights/runtime-extractor-controller",
		"PrometheusRule openshift-insights/runtime-extractor-controller",
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

// verbs returns a request for each of the space-separated verbs on one object.
func verbs(verbs, namespace, group, resource, name string) []request {
	var reqs []request
	for _, verb := range strings.Fields(verbs) {
		reqs = append(reqs, request{namespace, verb, group, resource, name})
	}
	return reqs
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
	for _, req := range slices.Concat(
		// The managed DaemonSet: name-selected informer, live read, apply, delete.
		verbs("list watch get update delete", ns, "apps", "daemonsets", resources.DaemonSetName),
		verbs("create", ns, "apps", "daemonsets", ""),
		// config.yaml, through a name-selected informer.
		verbs("list watch get", ns, "", "configmaps", config.ConfigMapName),
		// Events and their aggregation.
		verbs("create", ns, "", "events", ""),
		verbs("patch update", ns, "", "events", "some-event"),
		verbs("list", ns, "", "events", ""), // a stuck rollout's warnings
		verbs("list", ns, "", "pods", ""),   // a stuck rollout's pods
		// Leader election.
		verbs("get update", ns, "coordination.k8s.io", "leases", leaseName),
		verbs("create", ns, "coordination.k8s.io", "leases", ""),
		// The Events' involved object.
		verbs("get", ns, "", "pods", "runtime-extractor-controller-5d9c7-abcde"),
		verbs("get", ns, "apps", "replicasets", "runtime-extractor-controller-5d9c7"),
		// Cluster-scoped: version, TLS profile, status, delegated auth.
		verbs("list watch", "", "config.openshift.io", "clusterversions", version.ClusterVersionName),
		verbs("list watch", "", "config.openshift.io", "apiservers", "cluster"),
		verbs("get", "", "config.openshift.io", "infrastructures", "cluster"), // leader election timings by topology
		verbs("list watch", "", "config.openshift.io", "clusteroperators", status.DefaultClusterOperatorName),
		verbs("patch", "", "config.openshift.io", "clusteroperators/status", status.DefaultClusterOperatorName),
		verbs("create", "", "authentication.k8s.io", "tokenreviews", ""),
		verbs("create", "", "authorization.k8s.io", "subjectaccessreviews", ""),
		// Delegated authentication's configuration.
		verbs("get watch", "kube-system", "", "configmaps", "extension-apiserver-authentication"),
	) {
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
		{"", "get", "config.openshift.io", "infrastructures", "another-infrastructure"},
		{"", "list", "config.openshift.io", "infrastructures", "cluster"},
		{"", "watch", "config.openshift.io", "infrastructures", "cluster"},
		{"", "update", "config.openshift.io", "infrastructures/status", "cluster"},
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
	// POD_NAME is the Lease identity (and names the Events' pod).
	if e := env["POD_NAME"]; e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("POD_NAME = %+v, want the downward API's metadata.name", e)
	}
	if env[version.EnvReleaseVersion].Value == "" {
		t.Errorf("%s is not set", version.EnvReleaseVersion)
	}
	// The RELATED_IMAGE_* variables: TestDeploymentRunsNoMutableDefaultImage.

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
	var objs []runtime.Object
	for _, o := range mustObjects(t) {
		if u, ok := o.(*unstructured.Unstructured); ok {
			// A custom resource: kubectl applies it, CreateAll refuses it.
			if err := CreateAll(ctx, fake.NewClientset(), []runtime.Object{u}); err == nil || !strings.Contains(err.Error(), u.GetKind()) {
				t.Errorf("CreateAll of a %s: err = %v, want one naming it", u.GetKind(), err)
			}
			continue
		}
		objs = append(objs, o)
	}
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
	if _, err := client.NetworkingV1().NetworkPolicies(resources.Namespace).Get(ctx, "runtime-extractor-controller-default-deny", metav1.GetOptions{}); err != nil {
		t.Errorf("NetworkPolicy not created: %v", err)
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

// The platform conventions of OpenShift's payload operators (issue 19, part 4).

const (
	monitoringNamespace = "openshift-monitoring"
	// apiServerPort is the port kube-apiserver listens on (OpenShift: 6443 on
	// the control-plane hosts). A network policy sees a connection to the
	// kubernetes Service after its translation, at this port.
	apiServerPort = 6443
	// servingCertDir is where controllercmd looks for tls.crt and tls.key.
	servingCertDir = "/var/run/secrets/serving-cert"
)

func controllerDeployment(t *testing.T, objs []runtime.Object) *appsv1.Deployment {
	t.Helper()
	ds := only[*appsv1.Deployment](objs)
	if len(ds) != 1 {
		t.Fatalf("%d Deployments, want 1", len(ds))
	}
	return ds[0]
}

func namespaceObject(t *testing.T, objs []runtime.Object) *corev1.Namespace {
	t.Helper()
	for _, ns := range only[*corev1.Namespace](objs) {
		if ns.Name == resources.Namespace {
			return ns
		}
	}
	t.Fatalf("no Namespace %s", resources.Namespace)
	return nil
}

// listenPort is the port of the Deployment's --listen argument.
func listenPort(t *testing.T, d *appsv1.Deployment) int32 {
	t.Helper()
	for _, arg := range d.Spec.Template.Spec.Containers[0].Args {
		if addr, ok := strings.CutPrefix(arg, "--listen="); ok {
			_, port, err := net.SplitHostPort(addr)
			if err != nil {
				t.Fatalf("--listen=%s: %v", addr, err)
			}
			n, err := strconv.ParseInt(port, 10, 32)
			if err != nil {
				t.Fatalf("--listen=%s: %v", addr, err)
			}
			return int32(n)
		}
	}
	t.Fatal("the Deployment passes no --listen")
	return 0
}

func TestNamespaceHasThePlatformLabels(t *testing.T) {
	ns := namespaceObject(t, mustObjects(t))
	for k, want := range map[string]string{
		"openshift.io/node-selector":    "",
		"workload.openshift.io/allowed": "management",
	} {
		if got, ok := ns.Annotations[k]; !ok || got != want {
			t.Errorf("annotation %s = %q (present %v), want %q", k, got, ok, want)
		}
	}
	if got := ns.Labels["openshift.io/cluster-monitoring"]; got != "true" {
		t.Errorf(`label openshift.io/cluster-monitoring = %q, want "true": the platform Prometheus would ignore the ServiceMonitor`, got)
	}

	// The level must admit the DaemonSet the controller deploys here: host
	// PID or a privileged container is allowed by the privileged level only.
	ds, err := resources.DesiredDaemonSet(resources.Desired{Images: resources.DefaultImages(), Version: "4.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	pod := ds.Spec.Template.Spec
	privileged := pod.HostPID || slices.ContainsFunc(pod.Containers, func(c corev1.Container) bool {
		return c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged
	})
	if !privileged {
		t.Fatal("the DaemonSet is no longer privileged: revisit the namespace's Pod Security level")
	}
	for _, mode := range []string{"enforce", "audit", "warn"} {
		if got := ns.Labels["pod-security.kubernetes.io/"+mode]; got != "privileged" {
			t.Errorf("label pod-security.kubernetes.io/%s = %q, want privileged (the extractor is privileged)", mode, got)
		}
	}
}

func TestDeploymentRunsOnTheControlPlaneAsClusterOperatorsDo(t *testing.T) {
	objs := mustObjects(t)
	d := controllerDeployment(t, objs)
	tmpl := d.Spec.Template
	if got := tmpl.Annotations["openshift.io/required-scc"]; got != "restricted-v2" {
		t.Errorf("openshift.io/required-scc = %q, want restricted-v2", got)
	}
	var wm map[string]string
	if err := json.Unmarshal([]byte(tmpl.Annotations["target.workload.openshift.io/management"]), &wm); err != nil ||
		!maps.Equal(wm, map[string]string{"effect": "PreferredDuringScheduling"}) {
		t.Errorf("target.workload.openshift.io/management = %q (%v), want {\"effect\": \"PreferredDuringScheduling\"}",
			tmpl.Annotations["target.workload.openshift.io/management"], err)
	}
	if namespaceObject(t, objs).Annotations["workload.openshift.io/allowed"] != "management" {
		t.Error("the namespace does not allow management workloads: the pod's annotation would be refused")
	}

	pod := tmpl.Spec
	if v, ok := pod.NodeSelector["node-role.kubernetes.io/master"]; !ok || v != "" {
		t.Errorf("nodeSelector = %v, want node-role.kubernetes.io/master: \"\"", pod.NodeSelector)
	}
	if pod.PriorityClassName != "system-cluster-critical" {
		t.Errorf("priorityClassName = %q, want system-cluster-critical", pod.PriorityClassName)
	}
	seconds := int64(120)
	for _, want := range []corev1.Toleration{
		{Key: "node-role.kubernetes.io/master", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &seconds},
		{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &seconds},
	} {
		if !slices.ContainsFunc(pod.Tolerations, func(t corev1.Toleration) bool {
			return t.MatchToleration(&want) && ptr.Equal(t.TolerationSeconds, want.TolerationSeconds)
		}) {
			t.Errorf("tolerations %v lack %v", pod.Tolerations, want)
		}
	}
	// A control-plane node's taint is tolerated, a worker's custom one is not.
	if !tolerates(pod.Tolerations, corev1.Taint{Key: "node-role.kubernetes.io/master", Effect: corev1.TaintEffectNoSchedule}) ||
		tolerates(pod.Tolerations, corev1.Taint{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}) {
		t.Errorf("tolerations %v: want the master taint tolerated and no blanket toleration", pod.Tolerations)
	}

	// restricted-v2 assigns the user from the namespace's range and refuses a
	// fixed one outside it.
	if pod.SecurityContext != nil && pod.SecurityContext.RunAsUser != nil {
		t.Error("the pod fixes runAsUser: restricted-v2 chooses it")
	}
	for _, c := range pod.Containers {
		if c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
			t.Errorf("container %s fixes runAsUser: restricted-v2 chooses it", c.Name)
		}
	}
}

// tolerates applies the toleration rules of the operators Exists and Equal.
func tolerates(tolerations []corev1.Toleration, taint corev1.Taint) bool {
	return slices.ContainsFunc(tolerations, func(t corev1.Toleration) bool {
		if t.Effect != "" && t.Effect != taint.Effect {
			return false
		}
		if t.Key == "" {
			return t.Operator == corev1.TolerationOpExists // tolerates every taint
		}
		return t.Key == taint.Key && (t.Operator == corev1.TolerationOpExists || t.Value == taint.Value)
	})
}

// TestDeploymentRunsNoMutableDefaultImage: the shipped Deployment leaves the
// images for the admin to pin, and the binary refuses them unset; nothing
// turns the refusal off.
func TestDeploymentRunsNoMutableDefaultImage(t *testing.T) {
	d := controllerDeployment(t, mustObjects(t))
	c := d.Spec.Template.Spec.Containers[0]
	for _, arg := range c.Args {
		if strings.HasPrefix(arg, "--allow-default-images") {
			t.Errorf("the Deployment passes %s: the extractor would run from :latest", arg)
		}
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	for _, name := range []string{resources.EnvExtractorImage, resources.EnvExporterImage, resources.EnvKubeRBACProxyImage} {
		value, ok := env[name]
		if !ok {
			t.Errorf("%s is not in the Deployment's environment: the admin has no place to pin it", name)
			continue
		}
		if value == "" {
			continue
		}
		if ref, err := reference.ParseNamed(value); err != nil {
			t.Errorf("%s = %q: %v", name, value, err)
		} else if _, pinned := ref.(reference.Canonical); !pinned {
			t.Errorf("%s = %q: not pinned by digest", name, value)
		}
	}

	// as the binary without --allow-default-images
	images, err := resources.ImagesFromEnv(func(k string) string { return env[k] }, false)
	for _, img := range []string{images.Extractor, images.Exporter, images.KubeRBACProxy} {
		if strings.HasSuffix(img, ":latest") {
			t.Errorf("the binary would run %s", img)
		}
	}
	if err != nil && !errors.Is(err, resources.ErrImagesUnset) {
		t.Errorf("images in the Deployment's environment: %v", err)
	}
}

func TestDockerfileBaseImagesArePinnedByDigest(t *testing.T) {
	data, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	stages := map[string]bool{}
	var bases int
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 || !strings.EqualFold(fields[0], "FROM") {
			continue
		}
		image := fields[1]
		for _, f := range fields[2:] {
			if strings.HasPrefix(f, "--") {
				t.Errorf("FROM %s: flags after the image are not expected", image)
			}
		}
		if strings.HasPrefix(image, "--") {
			t.Errorf("%q: a --platform (or other) flag: revisit this test", line)
			continue
		}
		if !stages[strings.ToLower(image)] { // not an earlier stage
			bases++
			if ref, err := reference.ParseNamed(image); err != nil {
				t.Errorf("FROM %s: %v", image, err)
			} else if _, ok := ref.(reference.Canonical); !ok {
				t.Errorf("FROM %s: not pinned by digest (@sha256:...)", image)
			}
		}
		if len(fields) == 4 && strings.EqualFold(fields[2], "AS") {
			stages[strings.ToLower(fields[3])] = true
		}
	}
	if bases == 0 {
		t.Fatal("the Dockerfile has no FROM line")
	}
}

func TestServiceMonitorScrapesTheServiceOverTLS(t *testing.T) {
	objs := mustObjects(t)
	d := controllerDeployment(t, objs)
	svc := only[*corev1.Service](objs)[0]
	if namespaceObject(t, objs).Labels["openshift.io/cluster-monitoring"] != "true" {
		t.Error("the namespace is not monitored by the platform Prometheus")
	}

	var monitors []*unstructured.Unstructured
	for _, u := range only[*unstructured.Unstructured](objs) {
		if u.GetKind() == "ServiceMonitor" {
			monitors = append(monitors, u)
		}
	}
	if len(monitors) != 1 {
		t.Fatalf("%d ServiceMonitors, want 1", len(monitors))
	}
	sm := monitors[0]
	if sm.GetAPIVersion() != "monitoring.coreos.com/v1" || sm.GetNamespace() != svc.Namespace {
		t.Errorf("ServiceMonitor %s in %q, want monitoring.coreos.com/v1 in %q", sm.GetAPIVersion(), sm.GetNamespace(), svc.Namespace)
	}
	names, _, _ := unstructured.NestedStringSlice(sm.Object, "spec", "namespaceSelector", "matchNames")
	if !slices.Equal(names, []string{svc.Namespace}) {
		t.Errorf("namespaceSelector.matchNames = %q, want [%s]", names, svc.Namespace)
	}
	matchLabels, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	if len(matchLabels) == 0 || !labels.SelectorFromSet(matchLabels).Matches(labels.Set(svc.Labels)) {
		t.Errorf("selector %v does not select the Service (labels %v)", matchLabels, svc.Labels)
	}

	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(endpoints) != 1 {
		t.Fatalf("%d endpoints, want 1", len(endpoints))
	}
	ep, _ := endpoints[0].(map[string]any)
	str := func(path ...string) string {
		v, _, _ := unstructured.NestedString(ep, path...)
		return v
	}
	port := slices.IndexFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == str("port") })
	if port < 0 {
		t.Fatalf("endpoint port %q is no port name of the Service", str("port"))
	}
	if got := portNumber(d.Spec.Template.Spec.Containers[0], svc.Spec.Ports[port].TargetPort.String()); got != listenPort(t, d) {
		t.Errorf("the endpoint's Service port targets container port %d, want the --listen port %d", got, listenPort(t, d))
	}
	if s := strings.ToLower(str("scheme")); s != "https" {
		t.Errorf("scheme = %q, want https", s)
	}
	if p := str("path"); p != "" && p != "/metrics" {
		t.Errorf("path = %q, want /metrics", p)
	}
	if skip, _, _ := unstructured.NestedBool(ep, "tlsConfig", "insecureSkipVerify"); skip {
		t.Error("tlsConfig.insecureSkipVerify: the serving certificate would not be checked")
	}
	// The service CA signs the serving certificate for <service>.<namespace>.svc.
	if got, want := str("tlsConfig", "serverName"), svc.Name+"."+svc.Namespace+".svc"; got != want {
		t.Errorf("tlsConfig.serverName = %q, want %q", got, want)
	}
	if ca := str("tlsConfig", "caFile"); !strings.HasSuffix(ca, "/service-ca.crt") {
		t.Errorf("tlsConfig.caFile = %q, want the service CA bundle", ca)
	}
	if str("tlsConfig", "certFile") == "" || str("tlsConfig", "keyFile") == "" {
		t.Error("no client certificate: /metrics requires authentication")
	}

	// The certificate the ServiceMonitor checks is the one the controller
	// serves: the Service's serving-cert Secret, mounted where controllercmd
	// reads it.
	secret := svc.Annotations["service.beta.openshift.io/serving-cert-secret-name"]
	if secret == "" {
		t.Fatal("the Service has no service.beta.openshift.io/serving-cert-secret-name annotation")
	}
	pod := d.Spec.Template.Spec
	vol := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Secret != nil && v.Secret.SecretName == secret })
	if vol < 0 {
		t.Fatalf("the Deployment does not mount the Secret %s", secret)
	}
	if !slices.ContainsFunc(pod.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == pod.Volumes[vol].Name && m.MountPath == servingCertDir
	}) {
		t.Errorf("the Secret %s is not mounted at %s", secret, servingCertDir)
	}
}

// peer is one end of a connection to or from the controller's pod.
type peer struct {
	namespace string            // "" for a host (the API server, the node)
	labels    map[string]string // a pod's labels
	ip        string
}

// netPolicyAllows evaluates the NetworkPolicies of objs for a connection of
// the pod (labels podLabels in namespace ns) with other, the way the
// NetworkPolicy API defines it: a pod that no policy of that direction
// selects is not isolated; otherwise some rule of a selecting policy must
// admit the peer and the port. Namespaces carry only the
// kubernetes.io/metadata.name label here.
func netPolicyAllows(objs []runtime.Object, ns string, podLabels map[string]string, dir networkingv1.PolicyType,
	other peer, port int32, proto corev1.Protocol) (isolated, allowed bool) {
	for _, p := range only[*networkingv1.NetworkPolicy](objs) {
		if p.Namespace != ns {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
		if err != nil || !sel.Matches(labels.Set(podLabels)) {
			continue
		}
		types := p.Spec.PolicyTypes
		if len(types) == 0 {
			types = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
			if len(p.Spec.Egress) > 0 {
				types = append(types, networkingv1.PolicyTypeEgress)
			}
		}
		if !slices.Contains(types, dir) {
			continue
		}
		isolated = true
		type rule struct {
			peers []networkingv1.NetworkPolicyPeer
			ports []networkingv1.NetworkPolicyPort
		}
		var rules []rule
		if dir == networkingv1.PolicyTypeIngress {
			for _, r := range p.Spec.Ingress {
				rules = append(rules, rule{r.From, r.Ports})
			}
		} else {
			for _, r := range p.Spec.Egress {
				rules = append(rules, rule{r.To, r.Ports})
			}
		}
		for _, r := range rules {
			if portsMatch(r.ports, port, proto) && (len(r.peers) == 0 ||
				slices.ContainsFunc(r.peers, func(pp networkingv1.NetworkPolicyPeer) bool { return peerMatches(pp, p.Namespace, other) })) {
				allowed = true
			}
		}
	}
	return isolated, !isolated || allowed
}

func portsMatch(ports []networkingv1.NetworkPolicyPort, port int32, proto corev1.Protocol) bool {
	if len(ports) == 0 {
		return true
	}
	return slices.ContainsFunc(ports, func(p networkingv1.NetworkPolicyPort) bool {
		want := corev1.ProtocolTCP
		if p.Protocol != nil {
			want = *p.Protocol
		}
		if want != proto {
			return false
		}
		if p.Port == nil {
			return true
		}
		if p.Port.Type != intstr.Int { // a named port: not used here
			return false
		}
		end := p.Port.IntVal
		if p.EndPort != nil {
			end = *p.EndPort
		}
		return port >= p.Port.IntVal && port <= end
	})
}

func peerMatches(pp networkingv1.NetworkPolicyPeer, policyNamespace string, other peer) bool {
	if pp.IPBlock != nil {
		_, cidr, err := net.ParseCIDR(pp.IPBlock.CIDR)
		ip := net.ParseIP(other.ip)
		if err != nil || ip == nil || !cidr.Contains(ip) {
			return false
		}
		for _, except := range pp.IPBlock.Except {
			if _, ex, err := net.ParseCIDR(except); err == nil && ex.Contains(ip) {
				return false
			}
		}
		return true
	}
	if other.namespace == "" {
		return false // pod and namespace selectors select pods only
	}
	if pp.NamespaceSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(pp.NamespaceSelector)
		if err != nil || !sel.Matches(labels.Set{"kubernetes.io/metadata.name": other.namespace}) {
			return false
		}
	} else if other.namespace != policyNamespace {
		return false
	}
	if pp.PodSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(pp.PodSelector)
		if err != nil || !sel.Matches(labels.Set(other.labels)) {
			return false
		}
	}
	return true
}

func TestNetworkPoliciesAllowOnlyWhatTheControllerUses(t *testing.T) {
	objs := mustObjects(t)
	d := controllerDeployment(t, objs)
	ns, pod := d.Namespace, d.Spec.Template.Labels
	metrics := listenPort(t, d)
	if portNumber(d.Spec.Template.Spec.Containers[0], fmt.Sprint(metrics)) != metrics {
		t.Fatalf("the container does not expose the --listen port %d", metrics)
	}

	apiServer := peer{ip: "10.0.0.10"} // a control-plane host
	prometheus := peer{namespace: monitoringNamespace, labels: map[string]string{"app.kubernetes.io/name": "prometheus"}, ip: "10.128.2.20"}
	dnsPod := peer{namespace: "openshift-dns", labels: map[string]string{"dns.operator.openshift.io/daemonset-dns": "default"}, ip: "10.128.0.5"}
	insightsOperator := peer{namespace: resources.Namespace, labels: map[string]string{"app": "insights-operator"}, ip: "10.128.0.9"}
	userMonitoring := peer{namespace: "openshift-user-workload-monitoring", labels: map[string]string{"app.kubernetes.io/name": "prometheus"}, ip: "10.128.3.3"}
	internet := peer{ip: "203.0.113.7"}

	for _, tc := range []struct {
		what  string
		dir   networkingv1.PolicyType
		other peer
		port  int32
		proto corev1.Protocol
		want  bool
	}{
		{"egress to the API server", networkingv1.PolicyTypeEgress, apiServer, apiServerPort, corev1.ProtocolTCP, true},
		{"ingress to /metrics from openshift-monitoring", networkingv1.PolicyTypeIngress, prometheus, metrics, corev1.ProtocolTCP, true},
		// The in-cluster config names the API server by IP: no DNS.
		{"egress to DNS (udp)", networkingv1.PolicyTypeEgress, dnsPod, 5353, corev1.ProtocolUDP, false},
		{"egress to DNS (tcp)", networkingv1.PolicyTypeEgress, dnsPod, 53, corev1.ProtocolTCP, false},
		{"egress to the internet", networkingv1.PolicyTypeEgress, internet, 443, corev1.ProtocolTCP, false},
		{"egress to a pod at the API server's port", networkingv1.PolicyTypeEgress, insightsOperator, apiServerPort, corev1.ProtocolUDP, false},
		{"ingress to /metrics from its own namespace", networkingv1.PolicyTypeIngress, insightsOperator, metrics, corev1.ProtocolTCP, false},
		{"ingress to /metrics from user workload monitoring", networkingv1.PolicyTypeIngress, userMonitoring, metrics, corev1.ProtocolTCP, false},
		{"ingress to /metrics from outside", networkingv1.PolicyTypeIngress, internet, metrics, corev1.ProtocolTCP, false},
		{"ingress to another port from openshift-monitoring", networkingv1.PolicyTypeIngress, prometheus, 9090, corev1.ProtocolTCP, false},
	} {
		isolated, allowed := netPolicyAllows(objs, ns, pod, tc.dir, tc.other, tc.port, tc.proto)
		if !isolated {
			t.Errorf("%s: no policy isolates the controller's pod for %s", tc.what, tc.dir)
		}
		if allowed != tc.want {
			t.Errorf("%s (%s/%d): allowed = %v, want %v", tc.what, tc.proto, tc.port, allowed, tc.want)
		}
	}

	// Deny by default: a policy that allows nothing isolates the pod in both
	// directions, so dropping an allow policy cannot open it up.
	var denyAll []runtime.Object
	for _, p := range only[*networkingv1.NetworkPolicy](objs) {
		if len(p.Spec.Ingress) == 0 && len(p.Spec.Egress) == 0 {
			denyAll = append(denyAll, p)
		}
	}
	for _, dir := range []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress} {
		if isolated, allowed := netPolicyAllows(denyAll, ns, pod, dir, apiServer, apiServerPort, corev1.ProtocolTCP); !isolated || allowed {
			t.Errorf("no deny-all policy isolates the controller's pod for %s", dir)
		}
	}

	// The namespace is shared: the policies select the controller's pods and
	// nothing else, neither the Insights Operator nor the DaemonSet.
	ds, err := resources.DesiredDaemonSet(resources.Desired{Images: resources.DefaultImages(), Version: "4.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	for who, podLabels := range map[string]map[string]string{
		"the Insights Operator":           {"app": "insights-operator"},
		"the extractor's pods":            ds.Spec.Template.Labels,
		"a pod with no labels":            {},
		"a gathering pod of the operator": {"insights-gathering": ""},
	} {
		for _, dir := range []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress} {
			if isolated, _ := netPolicyAllows(objs, ns, podLabels, dir, internet, 443, corev1.ProtocolTCP); isolated {
				t.Errorf("a policy isolates %s (%s)", who, dir)
			}
		}
	}
}
