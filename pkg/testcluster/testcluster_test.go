package testcluster_test

import (
	"context"
	"errors"
	"slices"
	"syscall"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	configclient "github.com/openshift/client-go/config/clientset/versioned"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/insights-runtime-extractor/controller/pkg/testcluster"
)

func TestClusterRunsDaemonSetOnEveryNode(t *testing.T) {
	c := testcluster.ForTest(t, testcluster.Options{Nodes: 3})
	t.Logf("warm cluster start: %s", c.StartupDuration.Round(10*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	kc, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		t.Fatalf("load kubeconfig: %v", err)
	}
	client := kubernetes.NewForConfigOrDie(kc) // the written kubeconfig must work on its own
	config := configclient.NewForConfigOrDie(c.RESTConfig).ConfigV1()

	t.Run("nodes", func(t *testing.T) {
		if len(c.Nodes) != 3 {
			t.Fatalf("Nodes = %v, want 3 names", c.Nodes)
		}
		for _, name := range c.Nodes {
			node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("get node: %v", err)
			}
			if !testcluster.NodeReady(node) {
				t.Errorf("node %s not Ready: conditions %v taints %v", name, node.Status.Conditions, node.Spec.Taints)
			}
			if node.Labels["kubernetes.io/os"] != "linux" || node.Annotations["kwok.x-k8s.io/node"] != "fake" {
				t.Errorf("node %s labels %v annotations %v: not a kwok Linux node", name, node.Labels, node.Annotations)
			}
			if _, ok := node.Labels["node-role.kubernetes.io/worker"]; !ok {
				t.Errorf("node %s has no worker role label", name)
			}
		}
	})

	t.Run("openshift objects", func(t *testing.T) {
		cv, err := config.ClusterVersions().Get(ctx, "version", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get clusterversion: %v", err)
		}
		if cv.Status.Desired.Version != testcluster.DefaultVersion {
			t.Errorf("clusterversion desired version %q, want %q", cv.Status.Desired.Version, testcluster.DefaultVersion)
		}
		if _, err := config.APIServers().Get(ctx, "cluster", metav1.GetOptions{}); err != nil {
			t.Errorf("get apiserver cluster: %v", err)
		}
		infra, err := config.Infrastructures().Get(ctx, "cluster", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get infrastructure: %v", err)
		}
		if infra.Status.ControlPlaneTopology != configv1.HighlyAvailableTopologyMode ||
			infra.Status.InfrastructureTopology != configv1.HighlyAvailableTopologyMode {
			t.Errorf("infrastructure topology %q/%q, want HighlyAvailable",
				infra.Status.ControlPlaneTopology, infra.Status.InfrastructureTopology)
		}
		if _, err := config.ClusterOperators().Get(ctx, testcluster.InsightsOperator, metav1.GetOptions{}); err != nil {
			t.Errorf("get clusteroperator: %v", err)
		}
		if _, err := client.CoreV1().ServiceAccounts(testcluster.InsightsNamespace).Get(ctx, testcluster.InsightsServiceAccount, metav1.GetOptions{}); err != nil {
			t.Errorf("get serviceaccount: %v", err)
		}
		if _, err := client.SchedulingV1().PriorityClasses().Get(ctx, testcluster.UserCriticalPriority, metav1.GetOptions{}); err != nil {
			t.Errorf("get priorityclass: %v", err)
		}
		cm, err := client.CoreV1().ConfigMaps("kube-system").Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get extension-apiserver-authentication: %v", err)
		}
		for _, key := range []string{"client-ca-file", "requestheader-client-ca-file", "requestheader-allowed-names"} {
			if cm.Data[key] == "" {
				t.Errorf("extension-apiserver-authentication has no %s", key)
			}
		}
	})

	t.Run("daemonset rolls out on every node", func(t *testing.T) {
		ds := trivialDaemonSet()
		if _, err := client.AppsV1().DaemonSets(testcluster.InsightsNamespace).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create daemonset: %v", err)
		}
		var last *appsv1.DaemonSet
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			got, err := client.AppsV1().DaemonSets(ds.Namespace).Get(ctx, ds.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			last = got
			s := got.Status
			return s.ObservedGeneration == got.Generation && s.DesiredNumberScheduled == 3 &&
				s.UpdatedNumberScheduled == 3 && s.NumberAvailable == 3, nil
		})
		if err != nil {
			t.Fatalf("daemonset not rolled out on 3 nodes: %v; last status %+v", err, last.Status)
		}
		pods, err := client.CoreV1().Pods(ds.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=trivial"})
		if err != nil {
			t.Fatalf("list pods: %v", err)
		}
		onNode := map[string]bool{}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				onNode[p.Spec.NodeName] = true
			}
		}
		for _, n := range c.Nodes {
			if !onNode[n] {
				t.Errorf("no running pod on node %s (pods on %v)", n, onNode)
			}
		}
	})

	// kube-controller-manager marks the pods of a node whose heartbeat is
	// late not ready; the kubelet's next status sync makes them ready again.
	t.Run("a running pod marked not ready is ready again", func(t *testing.T) {
		pods, err := client.CoreV1().Pods(testcluster.InsightsNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=trivial"})
		if err != nil || len(pods.Items) == 0 {
			t.Fatalf("list pods: %v (%d)", err, len(pods.Items))
		}
		pod := pods.Items[0].DeepCopy()
		for i, cond := range pod.Status.Conditions {
			if cond.Type == corev1.PodReady {
				pod.Status.Conditions[i].Status = corev1.ConditionFalse
				pod.Status.Conditions[i].Reason = "NodeNotReady"
			}
		}
		if _, err := client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("mark pod %s not ready: %v", pod.Name, err)
		}
		err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got, err := client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == corev1.PodReady {
					return cond.Status == corev1.ConditionTrue, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("pod %s not ready again: %v", pod.Name, err)
		}
	})

	t.Run("host platform and manifests", func(t *testing.T) {
		versions := []string{"4.22.0", "4.22.1"}
		if err := c.InstallHostPlatform(ctx, versions); err != nil {
			t.Fatalf("install host platform: %v", err)
		}
		fg, err := config.FeatureGates().Get(ctx, "cluster", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get featuregate: %v", err)
		}
		var got []string
		for _, d := range fg.Status.FeatureGates {
			got = append(got, d.Version)
		}
		if !slices.Equal(got, versions) {
			t.Errorf("featuregate versions %v, want %v", got, versions)
		}
		for _, get := range []func() error{
			func() error { _, err := config.Networks().Get(ctx, "cluster", metav1.GetOptions{}); return err },
			func() error { _, err := config.DNSes().Get(ctx, "cluster", metav1.GetOptions{}); return err },
			func() error { _, err := config.Proxies().Get(ctx, "cluster", metav1.GetOptions{}); return err },
		} {
			if err := get(); err != nil {
				t.Error(err)
			}
		}

		// A CRD and its object in one file, as operators ship them; applied
		// twice, the second time updates.
		for _, label := range []string{"one", "two"} {
			if err := c.ApplyManifests(ctx, []byte(hostManifest(label))); err != nil {
				t.Fatalf("apply manifests (%s): %v", label, err)
			}
		}
		role, err := client.RbacV1().Roles("host-manifest-namespace").Get(ctx, "host-manifest-role", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get applied role: %v", err)
		}
		if role.Labels["applied"] != "two" || len(role.Rules) != 1 || role.Rules[0].Verbs[0] != "list" {
			t.Errorf("applied role %+v, want the second document's", role)
		}
		dyn := dynamic.NewForConfigOrDie(c.RESTConfig)
		widget := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
		w, err := dyn.Resource(widget).Get(ctx, "w1", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get the applied custom object: %v", err)
		}
		if w.GetLabels()["applied"] != "two" {
			t.Errorf("custom object labels %v, want applied=two", w.GetLabels())
		}
		gadget := []byte("apiVersion: example.com/v1\nkind: Gadget\nmetadata:\n  name: g\n")
		if err := c.ApplyManifests(ctx, gadget); err == nil {
			t.Error("an unknown kind was applied")
		}
		if err := c.ApplyManifests(ctx, gadget, "Gadget"); err != nil {
			t.Errorf("a skipped kind was applied: %v", err)
		}
	})

	t.Run("stop ends every process", func(t *testing.T) {
		procs := c.Processes()
		if len(procs) != 5 {
			t.Fatalf("Processes() = %v, want etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok", procs)
		}
		if err := c.Stop(); err != nil {
			t.Fatalf("stop: %v", err)
		}
		for _, p := range procs {
			if err := syscall.Kill(p.PID, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("%s (pid %d) still exists after Stop: kill(0) = %v", p.Name, p.PID, err)
			}
		}
		if left := c.Processes(); len(left) != 0 {
			t.Errorf("Processes() after Stop = %v, want none", left)
		}
	})
}

func TestAPIServerRestartKeepsData(t *testing.T) {
	c := testcluster.ForTest(t, testcluster.Options{Nodes: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cms := c.Client().CoreV1().ConfigMaps(testcluster.InsightsNamespace)

	before, err := cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "survivor"},
		Data:       map[string]string{"key": "value"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create configmap: %v", err)
	}
	var oldPID int
	for _, p := range c.Processes() {
		if p.Name == "kube-apiserver" {
			oldPID = p.PID
		}
	}

	if err := c.StopAPIServer(); err != nil {
		t.Fatalf("StopAPIServer: %v", err)
	}
	if err := syscall.Kill(oldPID, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("kube-apiserver pid %d still exists: %v", oldPID, err)
	}
	short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	_, err = cms.Get(short, "survivor", metav1.GetOptions{})
	cancelShort()
	if err == nil {
		t.Fatalf("GET succeeded with kube-apiserver stopped")
	}

	if err := c.StartAPIServer(ctx); err != nil {
		t.Fatalf("StartAPIServer: %v", err)
	}
	after, err := cms.Get(ctx, "survivor", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get configmap after restart: %v", err)
	}
	if after.UID != before.UID || after.Data["key"] != "value" {
		t.Errorf("configmap after restart = uid %s data %v, want uid %s data key=value", after.UID, after.Data, before.UID)
	}
	if n := len(c.Processes()); n != 5 {
		t.Errorf("Processes() after restart lists %d, want 5", n)
	}
}

// BenchmarkStart measures a start of a 3-node cluster with cached binaries,
// through readiness; stopping is not timed. s/start is the mean of Start's own
// figure (ns/op adds the test's set-up around it).
func BenchmarkStart(b *testing.B) {
	var total time.Duration
	for b.Loop() {
		c := testcluster.ForTest(b, testcluster.Options{})
		b.StopTimer()
		total += c.StartupDuration
		if err := c.Stop(); err != nil {
			b.Fatalf("stop: %v", err)
		}
		b.StartTimer()
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "s/start")
}

func trivialDaemonSet() *appsv1.DaemonSet {
	labels := map[string]string{"app": "trivial"}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "trivial", Namespace: testcluster.InsightsNamespace},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					PriorityClassName:  testcluster.UserCriticalPriority,
					ServiceAccountName: testcluster.InsightsServiceAccount,
					NodeSelector:       map[string]string{"kubernetes.io/os": "linux"},
					Containers: []corev1.Container{{
						Name:  "pause",
						Image: "registry.k8s.io/pause:3.10", // never pulled: kwok only fakes the pod
					}},
				},
			},
		},
	}
}

// hostManifest is a file with a CRD, an object of it and a Role in a
// namespace that does not exist yet, each labelled applied=label.
func hostManifest(label string) string {
	return `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
  scope: Cluster
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
---
apiVersion: example.com/v1
kind: Widget
metadata:
  name: w1
  labels: {applied: ` + label + `}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: host-manifest-role
  namespace: host-manifest-namespace
  labels: {applied: ` + label + `}
rules:
  - apiGroups: [""]
    resources: [pods]
    verbs: [list]
`
}
