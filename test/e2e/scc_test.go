package e2e

import (
	"context"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/insights-runtime-extractor/controller/pkg/testcluster"
)

// The DaemonSets the SCC policy is tried on: the host's own, ours as the golden
// files lock it in, and main's at 59c7f46 (which added SYS_ADMIN).
const (
	desiredDefaultManifest    = "../../testdata/resources/daemonset-default.yaml"
	desiredSchedulingManifest = "../../testdata/resources/daemonset-scheduling.yaml"
	main59c7f46Manifest       = "../../testdata/admission/daemonset-59c7f46.yaml"
)

// sccCluster is the cluster the test holds, and its admin client.
func sccCluster(t *testing.T) (*testcluster.Cluster, kubernetes.Interface) {
	t.Helper()
	c := holdCluster(t)
	return c, c.Client()
}

func readDaemonSet(t *testing.T, path string) *appsv1.DaemonSet {
	t.Helper()
	ds, err := testcluster.ReadDaemonSet(path)
	if err != nil {
		t.Fatal(err)
	}
	// Its own name: a dry-run create of the live DaemonSet's name would end in
	// AlreadyExists, after admission, and hide its verdict.
	ds.Name = "e2e-scc-" + filepath.Base(filepath.Dir(path)) + "-" + strings.TrimSuffix(filepath.Base(path), ".yaml")
	ds.Namespace = ns
	return ds
}

// podOf is the pod a DaemonSet's controller would create from its template.
func podOf(ds *appsv1.DaemonSet, node string) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: *ds.Spec.Template.ObjectMeta.DeepCopy(), Spec: *ds.Spec.Template.Spec.DeepCopy()}
	pod.Name, pod.Namespace = ds.Name, ns
	pod.Spec.NodeName = node
	return pod
}

var dryRun = metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}

func createDaemonSet(kube kubernetes.Interface, ds *appsv1.DaemonSet) error {
	_, err := kube.AppsV1().DaemonSets(ds.Namespace).Create(context.Background(), ds, dryRun)
	return err
}

func createPod(kube kubernetes.Interface, pod *corev1.Pod) error {
	_, err := kube.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, dryRun)
	return err
}

// refusedBy fails the test unless err is the policy's Forbidden refusal
// carrying every one of words.
func refusedBy(t *testing.T, policy string, err error, words ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("admitted; want a refusal by %s", policy)
	}
	msg := err.Error()
	if !apierrors.IsForbidden(err) || !strings.Contains(msg, "ValidatingAdmissionPolicy '"+policy+"'") {
		t.Fatalf("refused, but not as Forbidden by %s: %v", policy, err)
	}
	for _, w := range words {
		if !strings.Contains(msg, w) {
			t.Errorf("the refusal does not say %q: %s", w, msg)
		}
	}
}

func container(t *testing.T, spec *corev1.PodSpec, name string) *corev1.Container {
	t.Helper()
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return &spec.Containers[i]
		}
	}
	t.Fatalf("no container %s", name)
	return nil
}

func extractor(t *testing.T, spec *corev1.PodSpec) *corev1.Container {
	t.Helper()
	return container(t, spec, "extractor")
}

// TestSCCPolicyAdmitsTheExtractor: the policy that stands for the SCC
// insights-runtime-extractor-scc admits the host's own DaemonSet and ours, and
// their pods, and the SCC's RunAsAny strategies accept any user and SELinux
// context.
func TestSCCPolicyAdmitsTheExtractor(t *testing.T) {
	sc, kube := sccCluster(t)
	for _, path := range []string{originalManifest, desiredDefaultManifest, desiredSchedulingManifest} {
		ds := readDaemonSet(t, path)
		if err := createDaemonSet(kube, ds); err != nil {
			t.Errorf("%s refused: %v", path, err)
		}
		if err := createPod(kube, podOf(ds, sc.Nodes[0])); err != nil {
			t.Errorf("the pod of %s refused: %v", path, err)
		}
	}

	ds := readDaemonSet(t, originalManifest)
	spec := &ds.Spec.Template.Spec
	spec.SecurityContext = &corev1.PodSecurityContext{
		RunAsUser:      ptr.To[int64](0),
		SELinuxOptions: &corev1.SELinuxOptions{Type: "spc_t", Level: "s0:c1,c2"},
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		FSGroup:        ptr.To[int64](4242),
	}
	extractor(t, spec).SecurityContext.RunAsUser = ptr.To[int64](1234)
	if err := createDaemonSet(kube, ds); err != nil {
		t.Errorf("root, an SELinux context and runtime/default refused: %v", err)
	}
}

// TestSCCPolicyRefusesWhatTheSCCRefuses: main's template at 59c7f46, and
// templates that break each rule of the SCC that can be broken, are refused,
// as DaemonSets and as pods, with the policy named.
func TestSCCPolicyRefusesWhatTheSCCRefuses(t *testing.T) {
	sc, kube := sccCluster(t)
	policy := testcluster.SCCPolicyName

	t.Run("main at 59c7f46", func(t *testing.T) {
		ds := readDaemonSet(t, main59c7f46Manifest)
		err := createDaemonSet(kube, ds)
		refusedBy(t, policy, err, "container extractor adds SYS_ADMIN", "capability may not be added", "CAP_SYS_ADMIN")
		t.Logf("59c7f46's DaemonSet: %v", err)
		err = createPod(kube, podOf(ds, sc.Nodes[0]))
		refusedBy(t, policy, err, "container extractor adds SYS_ADMIN")
		t.Logf("59c7f46's pod: %v", err)
	})

	for _, tc := range []struct {
		name   string
		mutate func(t *testing.T, spec *corev1.PodSpec, meta *metav1.ObjectMeta)
		words  []string
	}{
		{"a capability not allowed", func(t *testing.T, spec *corev1.PodSpec, _ *metav1.ObjectMeta) {
			container(t, spec, "exporter").SecurityContext.Capabilities.Add = []corev1.Capability{"CAP_NET_ADMIN"}
		}, []string{"container exporter adds CAP_NET_ADMIN", "capability may not be added"}},
		{"an init container's capability", func(t *testing.T, spec *corev1.PodSpec, _ *metav1.ObjectMeta) {
			spec.InitContainers = []corev1.Container{{Name: "setup", Image: spec.Containers[0].Image,
				SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_PTRACE"}}}}}
		}, []string{"container setup adds SYS_PTRACE"}},
		{"hostNetwork", func(t *testing.T, spec *corev1.PodSpec, _ *metav1.ObjectMeta) {
			spec.HostNetwork = true
		}, []string{"hostNetwork", "host namespace may not be used"}},
		{"hostIPC", func(t *testing.T, spec *corev1.PodSpec, _ *metav1.ObjectMeta) {
			spec.HostIPC = true
		}, []string{"hostIPC", "host namespace may not be used"}},
		{"a host port", func(t *testing.T, spec *corev1.PodSpec, _ *metav1.ObjectMeta) {
			spec.Containers[0].Ports = append(spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: 9000, HostPort: 9000})
		}, []string{"hostPort 9000", "host ports are not allowed"}},
		{"an unconfined pod", func(t *testing.T, spec *corev1.PodSpec, _ *metav1.ObjectMeta) {
			spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}
		}, []string{"pod unconfined", "not an allowed seccomp profile"}},
		{"a container's own seccomp profile", func(t *testing.T, spec *corev1.PodSpec, _ *metav1.ObjectMeta) {
			extractor(t, spec).SecurityContext.SeccompProfile = &corev1.SeccompProfile{
				Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("extractor.json")}
		}, []string{"container extractor localhost/extractor.json", "not an allowed seccomp profile"}},
		{"only the label says it is the extractor", func(t *testing.T, spec *corev1.PodSpec, meta *metav1.ObjectMeta) {
			delete(meta.Annotations, "openshift.io/required-scc")
			spec.HostNetwork = true
		}, []string{"hostNetwork"}},
		// The use rule: only the ServiceAccount that the host grants use of the
		// SCC may run pods under it.
		{"another ServiceAccount", func(t *testing.T, spec *corev1.PodSpec, _ *metav1.ObjectMeta) {
			spec.ServiceAccountName = "default"
		}, []string{`[provider "insights-runtime-extractor-scc": Forbidden: not usable by user or serviceaccount]`,
			"ServiceAccount openshift-insights/default may not use SCC insights-runtime-extractor-scc"}},
		{"no ServiceAccount named: default", func(t *testing.T, spec *corev1.PodSpec, _ *metav1.ObjectMeta) {
			spec.ServiceAccountName, spec.DeprecatedServiceAccount = "", ""
		}, []string{"not usable by user or serviceaccount", "ServiceAccount openshift-insights/default may not use"}},
		// The existence rule: a required SCC that does not exist.
		{"a required SCC that does not exist", func(t *testing.T, _ *corev1.PodSpec, meta *metav1.ObjectMeta) {
			meta.Annotations["openshift.io/required-scc"] = "insights-runtime-extractor"
		}, []string{`failed to retrieve the required SCC "insights-runtime-extractor"`,
			`securitycontextconstraints.security.openshift.io "insights-runtime-extractor" not found`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := readDaemonSet(t, originalManifest)
			tc.mutate(t, &ds.Spec.Template.Spec, &ds.Spec.Template.ObjectMeta)
			err := createDaemonSet(kube, ds)
			refusedBy(t, policy, err, tc.words...)
			t.Logf("%v", err)
			refusedBy(t, policy, createPod(kube, podOf(ds, sc.Nodes[0])), tc.words...)
		})
	}

	t.Run("other workloads", func(t *testing.T) {
		bad := readDaemonSet(t, main59c7f46Manifest)
		dep := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-scc-deployment", Namespace: ns},
			Spec:       appsv1.DeploymentSpec{Selector: bad.Spec.Selector, Template: bad.Spec.Template},
		}
		_, err := kube.AppsV1().Deployments(ns).Create(context.Background(), dep, dryRun)
		refusedBy(t, policy, err, "container extractor adds SYS_ADMIN")
	})
}

// TestSCCPolicyUseFollowsRBAC: the use rule asks RBAC, in the pod's
// namespace, as SCC admission does. The namespace's default ServiceAccount
// may not use the SCC; a RoleBinding to the host's ClusterRole lets its
// template through, and once the binding is gone it is refused again.
func TestSCCPolicyUseFollowsRBAC(t *testing.T) {
	_, kube := sccCluster(t)
	ctx := context.Background()
	const grant = "e2e-scc-use-default"
	ds := readDaemonSet(t, originalManifest)
	ds.Spec.Template.Spec.ServiceAccountName = "default"
	rbs := kube.RbacV1().RoleBindings(ns)
	remove := func() {
		if err := rbs.Delete(ctx, grant, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete RoleBinding %s: %v", grant, err)
		}
	}
	remove() // left over by an aborted run
	t.Cleanup(remove)
	const useRefused = "ServiceAccount openshift-insights/default may not use SCC insights-runtime-extractor-scc"
	err := createDaemonSet(kube, ds)
	refusedBy(t, testcluster.SCCPolicyName, err, useRefused)
	t.Logf("not granted: %v", err)

	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: grant, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: testcluster.HostSCCClusterRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "default"}},
	}
	if _, err := rbs.Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create RoleBinding %s: %v", grant, err)
	}
	// RBAC, as the API server's authorizer sees it, follows asynchronously.
	var last error
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, convergeTimeout, true, func(context.Context) (bool, error) {
		last = createDaemonSet(kube, ds)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("granted use, the default ServiceAccount's template is still refused: %v (last: %v)", err, last)
	}

	remove()
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, convergeTimeout, true, func(context.Context) (bool, error) {
		last = createDaemonSet(kube, ds)
		return last != nil, nil
	})
	if err != nil {
		t.Fatalf("the grant removed, the default ServiceAccount's template is still admitted: %v", err)
	}
	refusedBy(t, testcluster.SCCPolicyName, last, useRefused)
}

// TestSCCPolicyJudgesOnlyTheSCCsPods: a template neither requiring the SCC nor
// labelled as the extractor's, or outside openshift-insights, is not the
// SCC's to judge.
func TestSCCPolicyJudgesOnlyTheSCCsPods(t *testing.T) {
	_, kube := sccCluster(t)
	strip := func(ds *appsv1.DaemonSet) *appsv1.DaemonSet {
		labels := map[string]string{"app": "e2e-other"}
		ds.Labels, ds.Spec.Selector.MatchLabels, ds.Spec.Template.Labels = labels, labels, labels
		delete(ds.Spec.Template.Annotations, "openshift.io/required-scc")
		return ds
	}
	if err := createDaemonSet(kube, strip(readDaemonSet(t, main59c7f46Manifest))); err != nil {
		t.Errorf("a DaemonSet that requires no SCC refused: %v", err)
	}
	elsewhere := readDaemonSet(t, main59c7f46Manifest)
	elsewhere.Namespace = metav1.NamespaceDefault
	if err := createDaemonSet(kube, elsewhere); err != nil {
		t.Errorf("a DaemonSet outside %s refused: %v", ns, err)
	}
}

// turnFacts gives the policy's fact variables named in facts the expressions
// there (a copy of the policy that stands for another SCC).
func turnFacts(t *testing.T, policy *admissionregistrationv1.ValidatingAdmissionPolicy, facts map[string]string) {
	t.Helper()
	left := maps.Clone(facts)
	for i, v := range policy.Spec.Variables {
		if expr, ok := left[v.Name]; ok {
			policy.Spec.Variables[i].Expression = expr
			delete(left, v.Name)
		}
	}
	if len(left) != 0 {
		t.Fatalf("the policy has no variables %v", left)
	}
}

// variantLabel marks the objects that the variant policy judges.
const variantLabel = "e2e.insights.openshift.io/scc-variant"

// TestSCCPolicyRulesFollowTheFacts: the SCC allows privileged containers and
// every volume type, so the policy's rules for them never refuse the
// extractor. A copy of the policy with those two facts turned (bound to
// labelled objects only) shows the rules refuse once the facts do.
func TestSCCPolicyRulesFollowTheFacts(t *testing.T) {
	_, kube := sccCluster(t)
	const variant = "e2e-scc-variant"
	policy, binding, err := testcluster.SCCPolicy()
	if err != nil {
		t.Fatal(err)
	}
	turnFacts(t, policy, map[string]string{
		"allowPrivilegedContainer": "false",
		"allowedVolumeTypes":       "['configMap', 'secret', 'emptyDir', 'projected', 'downwardAPI']",
	})
	policy.ObjectMeta = metav1.ObjectMeta{Name: variant}
	binding.ObjectMeta = metav1.ObjectMeta{Name: variant}
	binding.Spec.PolicyName = variant
	binding.Spec.MatchResources = &admissionregistrationv1.MatchResources{
		ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{variantLabel: "true"}},
	}

	ctx := context.Background()
	vaps := kube.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	bindings := kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	host := func() *appsv1.DaemonSet {
		ds := readDaemonSet(t, originalManifest)
		ds.Labels[variantLabel] = "true"
		return ds
	}
	// One DaemonSet stored before the variant judges it, as one the SCC would
	// now refuse; it selects no node, so it has no pods.
	live := host()
	live.Name = "e2e-scc-variant-live"
	live.Spec.Template.Spec.NodeSelector = map[string]string{variantLabel: "nowhere"}
	dss := kube.AppsV1().DaemonSets(ns)
	cleanup := func() {
		if err := bindings.Delete(ctx, variant, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete binding: %v", err)
		}
		if err := vaps.Delete(ctx, variant, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete policy: %v", err)
		}
		if err := dss.Delete(ctx, live.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete DaemonSet: %v", err)
		}
	}
	cleanup() // left over by an aborted run
	t.Cleanup(cleanup)
	if _, err := dss.Create(ctx, live, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create %s: %v", live.Name, err)
	}
	if _, err := vaps.Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := bindings.Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The API server loads policies asynchronously.
	var refusal error
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, convergeTimeout, true, func(context.Context) (bool, error) {
		refusal = createDaemonSet(kube, host())
		return refusal != nil && strings.Contains(refusal.Error(), variant), nil
	})
	if err != nil {
		t.Fatalf("the variant policy never refused the host's DaemonSet: %v (last: %v)", err, refusal)
	}
	refusedBy(t, variant, refusal, "container extractor", "privileged containers are not allowed")
	t.Logf("the variant's refusal: %v", refusal)

	unprivileged := host()
	extractor(t, &unprivileged.Spec.Template.Spec).SecurityContext.Privileged = ptr.To(false)
	refusedBy(t, variant, createDaemonSet(kube, unprivileged), "volume crio-socket of type hostPath", "volume type not allowed")

	admitted := host()
	spec := &admitted.Spec.Template.Spec
	extractor(t, spec).SecurityContext.Privileged = nil
	// Without crio-socket, the hostPath volume.
	spec.Volumes = slices.DeleteFunc(spec.Volumes, func(v corev1.Volume) bool { return v.HostPath != nil })
	ext := extractor(t, spec)
	ext.VolumeMounts = slices.DeleteFunc(ext.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "crio-socket" })
	if err := createDaemonSet(kube, admitted); err != nil {
		t.Errorf("the variant refused a template that it allows: %v", err)
	}

	// A stored object is judged again only when its pod template is written,
	// as SCC admission judges a pod only when it is created.
	touch := func(change func(*appsv1.DaemonSet)) error {
		// The DaemonSet controller writes its status meanwhile.
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := dss.Get(ctx, live.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			change(cur)
			_, err = dss.Update(ctx, cur, metav1.UpdateOptions{})
			return err
		})
	}
	if err := touch(func(ds *appsv1.DaemonSet) { ds.Labels["e2e.insights.openshift.io/touched"] = "true" }); err != nil {
		t.Errorf("a metadata update of a stored DaemonSet refused: %v", err)
	}
	err = touch(func(ds *appsv1.DaemonSet) { ds.Spec.Template.Annotations["e2e.insights.openshift.io/touched"] = "true" })
	refusedBy(t, variant, err, "privileged containers are not allowed")
}
