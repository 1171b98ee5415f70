package testcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/insights-runtime-extractor/controller/pkg/resources"
)

// Objects the local cluster provides because OpenShift's platform does.
const (
	InsightsNamespace      = resources.Namespace
	InsightsServiceAccount = resources.ServiceAccountName
	UserCriticalPriority   = resources.PriorityClassName
	InsightsOperator       = "insights"
	clusterVersionName     = "version"
	clusterConfigName      = "cluster"
	openshiftAPIModule     = "github.com/openshift/api"
	crdManifestDir         = "config/v1/zz_generated.crd-manifests"
	fakeNodePrefix         = "kwok-node-"
)

// openshiftCRDs are the manifests installed, in the Default feature set, from the
// openshift/api module this repository depends on (paths in that module).
var openshiftCRDs = []string{
	crdManifestDir + "/0000_00_cluster-version-operator_01_clusterversions-Default.crd.yaml",
	crdManifestDir + "/0000_00_cluster-version-operator_01_clusteroperators.crd.yaml",
	crdManifestDir + "/0000_10_config-operator_01_apiservers-Default.crd.yaml",
	crdManifestDir + "/0000_10_config-operator_01_infrastructures-Default.crd.yaml",
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// bootstrap creates what OpenShift's platform would already have: the config CRDs
// and their singletons, the insights namespace, ServiceAccount, PriorityClass and
// ClusterOperator, the fake nodes, and the admission policy that stands for the
// runtime extractor's SCC. Every step tolerates objects that exist, so
// a reused Dir starts again. apiDir resolves the openshift/api module directory.
func (c *Cluster) bootstrap(ctx context.Context, apiDir func() (string, error)) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	// The two halves are independent; CRDs take a moment to be established.
	return parallel(
		func() error {
			if err := c.createNodes(ctx); err != nil {
				return err
			}
			if err := c.createPlatformObjects(ctx); err != nil {
				return err
			}
			return c.InstallSCCPolicy(ctx)
		},
		func() error {
			dir, err := apiDir()
			if err != nil {
				return err
			}
			if err := c.installCRDs(ctx, dir, openshiftCRDs); err != nil {
				return err
			}
			return c.createOpenShiftConfig(ctx)
		},
	)
}

// parallel runs fns concurrently and joins their errors.
func parallel(fns ...func() error) error {
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// createNodes registers kwok fake Linux worker nodes, shaped as kwok documents them
// except for its NoSchedule taint: the DaemonSets under test carry no kwok
// toleration, and they must run on these nodes.
func (c *Cluster) createNodes(ctx context.Context) error {
	names := make([]string, c.opts.Nodes)
	for i := range names {
		names[i] = fmt.Sprintf("%s%d", fakeNodePrefix, i)
	}
	// A few creates in flight: a thousand nodes one by one take a minute.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(nodeCreateWorkers)
	for _, name := range names {
		g.Go(func() error {
			if _, err := c.client.CoreV1().Nodes().Create(gctx, fakeNode(name), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create node %s: %w", name, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	c.Nodes = names
	return nil
}

// nodeCreateWorkers bounds the node creates in flight at start.
const nodeCreateWorkers = 16

// AddNode registers one more kwok fake node, shaped as those Start creates, for
// tests and benchmarks that need a node to join the running cluster (kwok
// manages every node). It is not listed in Nodes. kube-controller-manager
// lifts the not-ready taint once kwok reports the node Ready, within seconds.
func (c *Cluster) AddNode(ctx context.Context, name string) error {
	if _, err := c.client.CoreV1().Nodes().Create(ctx, fakeNode(name), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create node %s: %w", name, err)
	}
	return nil
}

func fakeNode(name string) *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				"kubernetes.io/hostname":         name,
				"kubernetes.io/os":               "linux",
				"kubernetes.io/arch":             "amd64",
				"beta.kubernetes.io/os":          "linux",
				"beta.kubernetes.io/arch":        "amd64",
				"node-role.kubernetes.io/worker": "",
				"type":                           "kwok",
			},
			Annotations: map[string]string{
				"kwok.x-k8s.io/node":           "fake",
				"node.alpha.kubernetes.io/ttl": "0",
			},
		},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity,
			NodeInfo: corev1.NodeSystemInfo{
				Architecture:    "amd64",
				OperatingSystem: "linux",
				KubeletVersion:  "fake",
			},
			Phase: corev1.NodeRunning,
		},
	}
}

func (c *Cluster) createPlatformObjects(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: InsightsNamespace,
		Labels: map[string]string{
			"openshift.io/cluster-monitoring":    "true",
			"pod-security.kubernetes.io/enforce": "privileged",
			"pod-security.kubernetes.io/audit":   "privileged",
			"pod-security.kubernetes.io/warn":    "privileged",
		},
		Annotations: map[string]string{"openshift.io/node-selector": ""},
	}}
	if _, err := c.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); ignoreExists(err) != nil {
		return fmt.Errorf("create namespace %s: %w", InsightsNamespace, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: InsightsServiceAccount, Namespace: InsightsNamespace}}
	if _, err := c.client.CoreV1().ServiceAccounts(InsightsNamespace).Create(ctx, sa, metav1.CreateOptions{}); ignoreExists(err) != nil {
		return fmt.Errorf("create serviceaccount %s: %w", InsightsServiceAccount, err)
	}
	preempt := corev1.PreemptLowerPriority
	pc := &schedulingv1.PriorityClass{
		ObjectMeta:       metav1.ObjectMeta{Name: UserCriticalPriority},
		Value:            1000000000,
		PreemptionPolicy: &preempt,
		Description:      "This priority class should be used for user facing OpenShift workload pods only.",
	}
	if _, err := c.client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); ignoreExists(err) != nil {
		return fmt.Errorf("create priorityclass %s: %w", UserCriticalPriority, err)
	}
	return c.ensureAuthenticationConfigMap(ctx)
}

// ensureAuthenticationConfigMap makes sure kube-system/extension-apiserver-authentication
// carries the client CA, as delegated authentication expects. kube-apiserver
// publishes it itself from --client-ca-file; this only fills the gap if it did not.
func (c *Cluster) ensureAuthenticationConfigMap(ctx context.Context) error {
	const ns, name, key = "kube-system", "extension-apiserver-authentication", "client-ca-file"
	cms := c.client.CoreV1().ConfigMaps(ns)
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cm = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Data:       map[string]string{key: string(c.pki.caPEM)},
		}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); ignoreExists(err) != nil {
			return fmt.Errorf("create configmap %s/%s: %w", ns, name, err)
		}
	case err != nil:
		return fmt.Errorf("get configmap %s/%s: %w", ns, name, err)
	case cm.Data[key] == "":
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[key] = string(c.pki.caPEM)
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update configmap %s/%s: %w", ns, name, err)
		}
	}
	return nil
}

func crdEstablished(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, raw := range conds {
		cond, ok := raw.(map[string]any)
		if ok && cond["type"] == "Established" && cond["status"] == "True" {
			return true
		}
	}
	return false
}

// openshiftAPIDir finds the openshift/api module in the module cache, at the
// version go.mod selects, by asking the go command from the module root.
func openshiftAPIDir(ctx context.Context) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	goList := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, stderr.String())
		}
		return strings.TrimSpace(string(out)), nil
	}
	dir, err := goList("list", "-m", "-f", "{{.Dir}}", openshiftAPIModule)
	if err != nil {
		return "", fmt.Errorf("locate %s: %w", openshiftAPIModule, err)
	}
	if dir == "" { // listed but not yet downloaded
		if _, err := goList("mod", "download", openshiftAPIModule); err != nil {
			return "", fmt.Errorf("download %s: %w", openshiftAPIModule, err)
		}
		if dir, err = goList("list", "-m", "-f", "{{.Dir}}", openshiftAPIModule); err != nil || dir == "" {
			return "", fmt.Errorf("locate %s after download: %w", openshiftAPIModule, errors.Join(err, errors.New("empty module dir")))
		}
	}
	return dir, nil
}

func readManifest(path string) (*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open manifest: %w", err)
	}
	defer f.Close()
	obj := &unstructured.Unstructured{}
	if err := utilyaml.NewYAMLOrJSONDecoder(f, 4096).Decode(&obj.Object); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("decode %s: %w", filepath.Base(path), err)
	}
	if obj.GetName() == "" {
		return nil, fmt.Errorf("decode %s: no object", filepath.Base(path))
	}
	return obj, nil
}

// nodesReady lists the nodes (one request, whatever their number) and
// reports whether all of c.Nodes are Ready.
func (c *Cluster) nodesReady(ctx context.Context) (bool, error) {
	list, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	ready := make(map[string]bool, len(list.Items))
	for i := range list.Items {
		ready[list.Items[i].Name] = NodeReady(&list.Items[i])
	}
	for _, name := range c.Nodes {
		if !ready[name] {
			return false, nil
		}
	}
	return true, nil
}

// NodeReady reports whether a node is Ready and free of the not-ready and
// unreachable taints, that is, whether it accepts DaemonSet pods.
func NodeReady(node *corev1.Node) bool {
	ready := false
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			ready = cond.Status == corev1.ConditionTrue
		}
	}
	for _, taint := range node.Spec.Taints {
		if taint.Key == corev1.TaintNodeNotReady || taint.Key == corev1.TaintNodeUnreachable {
			return false
		}
	}
	return ready
}

func (c *Cluster) defaultServiceAccountsExist(ctx context.Context) (bool, error) {
	for _, ns := range []string{metav1.NamespaceDefault, InsightsNamespace} {
		if _, err := c.client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return false, err
		}
	}
	return true, nil
}

func ignoreExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
