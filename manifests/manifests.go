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
	creators := []createFunc{
		clusterScoped(client.CoreV1().Namespaces()),
		namespaced(client.CoreV1().ServiceAccounts),
		namespaced(client.CoreV1().Services),
		namespaced(client.RbacV1().Roles),
		namespaced(client.RbacV1().RoleBindings),
		clusterScoped(client.RbacV1().ClusterRoles()),
		clusterScoped(client.RbacV1().ClusterRoleBindings()),
		namespaced(client.AppsV1().Deployments),
		namespaced(client.NetworkingV1().NetworkPolicies),
	}
	for _, obj := range objs {
		if err := create(ctx, creators, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %s: %w", describe(obj), err)
		}
	}
	return nil
}

// errUnsupportedKind is the error of creating a kind CreateAll has no typed
// client for. A custom resource (ServiceMonitor, PrometheusRule) needs its CRD
// and a dynamic client: kubectl apply it.
var errUnsupportedKind = errors.New("unsupported kind")

// createFunc creates obj if it is of the kind the function is for; handled
// reports whether it was.
type createFunc func(ctx context.Context, obj runtime.Object) (handled bool, err error)

// create creates obj with the one of creators that is for its kind.
func create(ctx context.Context, creators []createFunc, obj runtime.Object) error {
	for _, c := range creators {
		if handled, err := c(ctx, obj); handled {
			return err
		}
	}
	return errUnsupportedKind
}

// typedObject is what client-go's typed clients create.
type typedObject interface {
	runtime.Object
	metav1.Object
}

// typedClient is the Create method of client-go's typed client for kind T.
type typedClient[T typedObject] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
}

// namespaced creates objects of kind T with the typed client of their namespace.
func namespaced[T typedObject, C typedClient[T]](clientIn func(namespace string) C) createFunc {
	return func(ctx context.Context, obj runtime.Object) (bool, error) {
		o, ok := obj.(T)
		if !ok {
			return false, nil
		}
		_, err := clientIn(o.GetNamespace()).Create(ctx, o, metav1.CreateOptions{})
		return true, err
	}
}

// clusterScoped creates objects of kind T, which have no namespace, with client.
func clusterScoped[T typedObject](client typedClient[T]) createFunc {
	return namespaced(func(string) typedClient[T] { return client })
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
