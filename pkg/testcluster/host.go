package testcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	configclient "github.com/openshift/client-go/config/clientset/versioned"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientdiscovery "k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
)

// The Insights Operator's own binary on the local cluster (hack/host): what its
// start-up reads beyond what Start creates, and its manifests applied as it
// ships them. The binary runs as a Command (StartCommandWithEnv).

// hostCRDs are the CRDs (in the openshift/api module), beyond openshiftCRDs,
// of the objects the Insights Operator reads when it starts or ships in its
// manifests/.
var hostCRDs = []string{
	crdManifestDir + "/0000_10_config-operator_01_featuregates.crd.yaml",
	crdManifestDir + "/0000_03_config-operator_01_proxies.crd.yaml",
	crdManifestDir + "/0000_10_config-operator_01_networks.crd.yaml",
	crdManifestDir + "/0000_10_config-operator_01_dnses.crd.yaml",
	crdManifestDir + "/0000_10_config-operator_01_insightsdatagathers.crd.yaml",
}

// InstallHostPlatform installs what the Insights Operator reads when it
// starts, beyond Start's objects: the CRDs of hostCRDs and their "cluster"
// singletons, with a FeatureGate whose status lists the Default feature set
// (every gate the operator asks about off) for each of versions, and the
// platform's ClusterRole cluster-reader.
func (c *Cluster) InstallHostPlatform(ctx context.Context, versions []string) error {
	dir, err := openshiftAPIDir(ctx)
	if err != nil {
		return err
	}
	if err := c.installCRDs(ctx, dir, hostCRDs); err != nil {
		return err
	}
	client, err := configclient.NewForConfig(c.RESTConfig)
	if err != nil {
		return fmt.Errorf("create config client: %w", err)
	}
	cfg := client.ConfigV1()
	single := metav1.ObjectMeta{Name: clusterConfigName}
	creates := []struct {
		what   string
		create func() error
	}{
		{"proxy", func() error {
			_, err := cfg.Proxies().Create(ctx, &configv1.Proxy{ObjectMeta: single}, metav1.CreateOptions{})
			return err
		}},
		{"dns", func() error {
			dns := &configv1.DNS{ObjectMeta: single, Spec: configv1.DNSSpec{BaseDomain: "local.example.com"}}
			_, err := cfg.DNSes().Create(ctx, dns, metav1.CreateOptions{})
			return err
		}},
		{"network", func() error {
			network := &configv1.Network{ObjectMeta: single, Spec: configv1.NetworkSpec{
				ClusterNetwork: []configv1.ClusterNetworkEntry{{CIDR: "10.128.0.0/14", HostPrefix: 23}},
				ServiceNetwork: []string{"10.96.0.0/16"},
				NetworkType:    "OVNKubernetes",
			}}
			_, err := cfg.Networks().Create(ctx, network, metav1.CreateOptions{})
			return err
		}},
		{"featuregate", func() error { return c.createFeatureGate(ctx, client, versions) }},
		{"cluster-reader", func() error { return c.createClusterReader(ctx) }},
	}
	for _, cr := range creates {
		if err := cr.create(); ignoreExists(err) != nil {
			return fmt.Errorf("create %s: %w", cr.what, err)
		}
	}
	return nil
}

// createFeatureGate creates FeatureGate "cluster" and records, as the
// cluster-config-operator does, the gates of each version. The operator
// exits when it finds none for its RELEASE_VERSION.
func (c *Cluster) createFeatureGate(ctx context.Context, client configclient.Interface, versions []string) error {
	gates := client.ConfigV1().FeatureGates()
	fg := &configv1.FeatureGate{ObjectMeta: metav1.ObjectMeta{Name: clusterConfigName}}
	created, err := gates.Create(ctx, fg, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create featuregate %s: %w", clusterConfigName, err)
	}
	for _, v := range versions {
		created.Status.FeatureGates = append(created.Status.FeatureGates, configv1.FeatureGateDetails{
			Version:  v,
			Disabled: []configv1.FeatureGateAttributes{{Name: "InsightsConfig"}},
		})
	}
	if _, err := gates.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("set featuregate %s status: %w", clusterConfigName, err)
	}
	return nil
}

// createClusterReader creates OpenShift's ClusterRole cluster-reader, to
// which the Insights Operator's RBAC binds its gather account: read access
// aggregated from the roles labelled to join it, and from view's (which
// leaves secrets out), plus the cluster-scoped and OpenShift reads view does
// not have.
func (c *Cluster) createClusterReader(ctx context.Context) error {
	const joinLabel = "rbac.authorization.k8s.io/aggregate-to-cluster-reader"
	read := []string{"get", "list", "watch"}
	reader := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-reader"},
		AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
			{MatchLabels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
			{MatchLabels: map[string]string{joinLabel: "true"}},
		}},
	}
	extras := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "testcluster:cluster-reader-extras", Labels: map[string]string{joinLabel: "true"}},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes", "namespaces", "persistentvolumes", "componentstatuses"}, Verbs: read},
			{APIGroups: []string{"config.openshift.io", "operator.openshift.io", "apiextensions.k8s.io", "storage.k8s.io",
				"rbac.authorization.k8s.io", "admissionregistration.k8s.io", "scheduling.k8s.io"}, Resources: []string{"*"}, Verbs: read},
		},
	}
	for _, role := range []*rbacv1.ClusterRole{extras, reader} {
		if _, err := c.client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); ignoreExists(err) != nil {
			return fmt.Errorf("create clusterrole %s: %w", role.Name, err)
		}
	}
	return nil
}

// installCRDs creates the CRDs of files (paths in the openshift/api module at
// dir) and waits until each is Established.
func (c *Cluster) installCRDs(ctx context.Context, dir string, files []string) error {
	var objs []*unstructured.Unstructured
	for _, file := range files {
		crd, err := readManifest(filepath.Join(dir, filepath.FromSlash(file)))
		if err != nil {
			return err
		}
		objs = append(objs, crd)
	}
	return c.createEstablished(ctx, objs)
}

// createEstablished creates the CRDs objs (tolerating existing ones) and
// waits until each is Established.
func (c *Cluster) createEstablished(ctx context.Context, objs []*unstructured.Unstructured) error {
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		return fmt.Errorf("create dynamic client: %w", err)
	}
	crds := dyn.Resource(crdResource)
	for _, crd := range objs {
		if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); ignoreExists(err) != nil {
			return fmt.Errorf("create CRD %s: %w", crd.GetName(), err)
		}
	}
	for _, crd := range objs {
		name := crd.GetName()
		if err := c.waitFor(ctx, "CRD "+name+" established", time.Minute, func(ctx context.Context) (bool, error) {
			got, err := crds.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return crdEstablished(got), nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// ApplyManifests creates the objects of a multi-document YAML file, as an
// operator ships them in its manifests/, with the admin client; an object
// that exists is updated to the document. CRDs among them are waited for
// until Established, before the other objects are created, so that a file
// may hold a CRD and its objects. A namespace an object is in is created
// when missing, as the platform's namespaces (openshift-config,
// openshift-monitoring, ...) would exist. Objects of the kinds in skip are
// left out.
func (c *Cluster) ApplyManifests(ctx context.Context, data []byte, skip ...string) error {
	var crds, objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return fmt.Errorf("decode manifest: %w", err)
		}
		switch {
		case len(obj.Object) == 0 || slices.Contains(skip, obj.GetKind()):
			continue // an empty document, or one left out
		case obj.GroupVersionKind().Group == crdResource.Group && obj.GetKind() == "CustomResourceDefinition":
			crds = append(crds, obj)
		default:
			objs = append(objs, obj)
		}
	}
	if err := c.createEstablished(ctx, crds); err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		return fmt.Errorf("create dynamic client: %w", err)
	}
	disco, err := memoryDiscovery(c.RESTConfig)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(disco)
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("map %s: %w", gvk, err)
		}
		var res dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			res = dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
		}
		what := fmt.Sprintf("%s %s/%s", gvk.Kind, obj.GetNamespace(), obj.GetName())
		if ns := obj.GetNamespace(); ns != "" {
			nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
			if _, err := c.client.CoreV1().Namespaces().Create(ctx, nsObj, metav1.CreateOptions{}); ignoreExists(err) != nil {
				return fmt.Errorf("apply %s: create its namespace: %w", what, err)
			}
		}
		_, err = res.Create(ctx, obj, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			var cur *unstructured.Unstructured
			if cur, err = res.Get(ctx, obj.GetName(), metav1.GetOptions{}); err == nil {
				obj.SetResourceVersion(cur.GetResourceVersion())
				_, err = res.Update(ctx, obj, metav1.UpdateOptions{})
			}
		}
		if err != nil {
			return fmt.Errorf("apply %s: %w", what, err)
		}
	}
	return nil
}

func memoryDiscovery(cfg *rest.Config) (clientdiscovery.CachedDiscoveryInterface, error) {
	client, err := clientdiscovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create discovery client: %w", err)
	}
	return memory.NewMemCacheClient(client), nil
}

// FrozenUpdatesPolicy is a ValidatingAdmissionPolicy that refuses every
// UPDATE of the DaemonSet named daemonSet (not of its status), as a cluster's
// admission (a GitOps freeze, a security policy) may. Bind it with Deny.
func FrozenUpdatesPolicy(name, daemonSet string) *admissionregistrationv1.ValidatingAdmissionPolicy {
	return DaemonSetRefusalPolicy(name, daemonSet, admissionregistrationv1.Update,
		"updates of the runtime extractor DaemonSet are frozen by an admission policy")
}

// DaemonSetRefusalPolicy is a ValidatingAdmissionPolicy that refuses every
// request of operation op on the DaemonSet named daemonSet (not on its
// status), with message, in any namespace and from anyone; a caller narrows
// it with the spec's NamespaceSelector and MatchConditions. Bind it with Deny.
func DaemonSetRefusalPolicy(name, daemonSet string, op admissionregistrationv1.OperationType, message string) *admissionregistrationv1.ValidatingAdmissionPolicy {
	return &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					ResourceNames: []string{daemonSet},
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{op},
						// "daemonsets" without "/status": status updates pass.
						Rule: admissionregistrationv1.Rule{
							APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"daemonsets"},
							Scope: ptr.To(admissionregistrationv1.NamespacedScope),
						},
					},
				}},
			},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "false",
				Message:    message,
				Reason:     ptr.To(metav1.StatusReasonForbidden),
			}},
		},
	}
}
