package manifests

import (
	"bufio"
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
)

//go:embed *.yaml
var embedded embed.FS

// File is one manifest file.
type File struct {
	// Name is the file name, e.g. "02-role.yaml"; names sort in apply order.
	Name string
	// Data is the file's content: one or more YAML documents.
	Data []byte
}

// Files returns the manifest files in apply order.
func Files() ([]File, error) {
	entries, err := fs.ReadDir(embedded, ".") // sorted by name
	if err != nil {
		return nil, fmt.Errorf("read embedded manifests: %w", err)
	}
	var files []File
	for _, e := range entries {
		if e.IsDir() || path.Ext(e.Name()) != ".yaml" {
			continue
		}
		data, err := embedded.ReadFile(e.Name())
		if err != nil {
			return nil, fmt.Errorf("read embedded manifest %s: %w", e.Name(), err)
		}
		files = append(files, File{Name: e.Name(), Data: data})
	}
	return files, nil
}

// Objects decodes every manifest into typed client-go objects, in apply order.
func Objects() ([]runtime.Object, error) {
	files, err := Files()
	if err != nil {
		return nil, err
	}
	var objs []runtime.Object
	for _, f := range files {
		decoded, err := Decode(f.Data)
		if err != nil {
			return nil, fmt.Errorf("manifest %s: %w", f.Name, err)
		}
		objs = append(objs, decoded...)
	}
	return objs, nil
}

// strictDecoder decodes YAML into client-go's types and refuses unknown or
// duplicate fields, so a misspelt field is an error rather than a setting the
// API server would silently drop.
var strictDecoder = json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
	json.SerializerOptions{Yaml: true, Strict: true})

// MonitoringKinds are the kinds of the manifests that client-go's scheme does
// not know: Prometheus Operator custom resources. Decode returns them as
// Unstructured (duplicate fields are still refused); their fields are checked
// against the CRD's schema by the nested module in manifests/schema, and the
// PrometheusRule's alerts by the one in manifests/rules.
var MonitoringKinds = map[schema.GroupVersionKind]bool{
	{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"}: true,
	{Group: "monitoring.coreos.com", Version: "v1", Kind: "PrometheusRule"}: true,
}

// Decode decodes the YAML documents of data (separated by "---") into typed
// objects, or Unstructured for MonitoringKinds; empty documents are skipped.
func Decode(data []byte) ([]runtime.Object, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []runtime.Object
	for i := 0; ; i++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read document %d: %w", i, err)
		}
		if isEmptyDocument(doc) {
			continue
		}
		obj, gvk, err := strictDecoder.Decode(doc, nil, nil)
		if runtime.IsNotRegisteredError(err) && gvk != nil && MonitoringKinds[*gvk] {
			obj, _, err = strictDecoder.Decode(doc, nil, &unstructured.Unstructured{})
		}
		if err != nil {
			return nil, fmt.Errorf("decode document %d: %w", i, err)
		}
		objs = append(objs, obj)
	}
}

// isEmptyDocument reports whether doc holds only comments and blank lines.
func isEmptyDocument(doc []byte) bool {
	for _, line := range bytes.Split(doc, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] != '#' && !bytes.Equal(line, []byte("---")) {
			return false
		}
	}
	return true
}

// CreateAll creates objs in order. An object that already exists is left as it
// is (the namespace usually does), so CreateAll suits a fresh cluster or test,
// not upgrades: use kubectl apply for those.
func CreateAll(ctx context.Context, client kubernetes.Interface, objs []runtime.Object) error {
	opts := metav1.CreateOptions{}
	for _, obj := range objs {
		var err error
		switch o := obj.(type) {
		case *corev1.Namespace:
			_, err = client.CoreV1().Namespaces().Create(ctx, o, opts)
		case *corev1.ServiceAccount:
			_, err = client.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, opts)
		case *corev1.Service:
			_, err = client.CoreV1().Services(o.Namespace).Create(ctx, o, opts)
		case *rbacv1.Role:
			_, err = client.RbacV1().Roles(o.Namespace).Create(ctx, o, opts)
		case *rbacv1.RoleBinding:
			_, err = client.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, opts)
		case *rbacv1.ClusterRole:
			_, err = client.RbacV1().ClusterRoles().Create(ctx, o, opts)
		case *rbacv1.ClusterRoleBinding:
			_, err = client.RbacV1().ClusterRoleBindings().Create(ctx, o, opts)
		case *appsv1.Deployment:
			_, err = client.AppsV1().Deployments(o.Namespace).Create(ctx, o, opts)
		case *networkingv1.NetworkPolicy:
			_, err = client.NetworkingV1().NetworkPolicies(o.Namespace).Create(ctx, o, opts)
		default:
			// A custom resource (ServiceMonitor, PrometheusRule) needs its
			// CRD and a dynamic client: kubectl apply it.
			return fmt.Errorf("create %s: unsupported kind", describe(obj))
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %s: %w", describe(obj), err)
		}
	}
	return nil
}

// describe names obj for an error message, e.g. "Role openshift-insights/x".
func describe(obj runtime.Object) string {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	m, err := meta.Accessor(obj)
	if err != nil {
		return kind
	}
	if m.GetNamespace() == "" {
		return kind + " " + m.GetName()
	}
	return kind + " " + m.GetNamespace() + "/" + m.GetName()
}
