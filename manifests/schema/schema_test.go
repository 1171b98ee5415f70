package schema

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	crds "github.com/prometheus-operator/prometheus-operator/example"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

// manifestsDir holds the manifests, one directory up from this module.
const manifestsDir = ".."

// documents splits YAML into its non-empty documents.
func documents(t *testing.T, data []byte) [][]byte {
	t.Helper()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatal(err)
		}
		var probe map[string]any
		if err := yaml.Unmarshal(doc, &probe); err != nil {
			t.Fatal(err)
		}
		if len(probe) > 0 {
			docs = append(docs, doc)
		}
	}
}

// operatorCRDs are the Prometheus Operator's CRDs, by group and kind, as its
// module embeds them.
func operatorCRDs(t *testing.T) map[schema.GroupKind]*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	var buf bytes.Buffer
	if err := crds.PrintAll(&buf); err != nil {
		t.Fatal(err)
	}
	out := map[schema.GroupKind]*apiextensionsv1.CustomResourceDefinition{}
	for _, doc := range documents(t, buf.Bytes()) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(doc, crd); err != nil {
			t.Fatalf("a CRD of the Prometheus Operator: %v", err)
		}
		out[schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}] = crd
	}
	if len(out) == 0 {
		t.Fatal("the Prometheus Operator module embeds no CRD")
	}
	return out
}

// validator checks an object as the API server does for a custom resource
// of one CRD version.
type validator struct {
	namespaced bool
	structural *structuralschema.Structural
	schema     validation.SchemaValidator
	cel        *cel.Validator // nil without x-kubernetes-validations
}

func newValidator(crd *apiextensionsv1.CustomResourceDefinition, version string) (*validator, error) {
	for _, v := range crd.Spec.Versions {
		if v.Name != version {
			continue
		}
		if !v.Served || v.Schema == nil {
			return nil, fmt.Errorf("%s: version %s is not served with a schema", crd.Name, version)
		}
		var internal apiextensions.CustomResourceValidation
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v.Schema, &internal, nil); err != nil {
			return nil, err
		}
		structural, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
		if err != nil {
			return nil, err
		}
		sv, _, err := validation.NewSchemaValidator(internal.OpenAPIV3Schema)
		if err != nil {
			return nil, err
		}
		return &validator{
			namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
			structural: structural,
			schema:     sv,
			cel:        cel.NewValidator(structural, true, celconfig.PerCallLimit),
		}, nil
	}
	return nil, fmt.Errorf("%s has no version %s", crd.Name, version)
}

// validate reports what a create would be refused for with
// fieldValidation=Strict (kubectl's default): unknown fields, which the API
// server would otherwise drop, then the schema and its CEL rules.
func (v *validator) validate(obj map[string]any) field.ErrorList {
	var errs field.ErrorList
	opts := structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}
	for _, path := range pruning.PruneWithOptions(runtime.DeepCopyJSON(obj), v.structural, true, opts) {
		errs = append(errs, field.Forbidden(field.NewPath(path), "unknown field"))
	}
	errs = append(errs, validation.ValidateCustomResource(nil, obj, v.schema)...)
	if v.cel != nil {
		celErrs, _ := v.cel.Validate(context.Background(), nil, v.structural, obj, nil, celconfig.RuntimeCELCostBudget)
		errs = append(errs, celErrs...)
	}
	meta, _ := obj["metadata"].(map[string]any)
	if name, _ := meta["name"].(string); name == "" {
		errs = append(errs, field.Required(field.NewPath("metadata", "name"), ""))
	}
	if ns, _ := meta["namespace"].(string); v.namespaced && ns == "" {
		errs = append(errs, field.Required(field.NewPath("metadata", "namespace"), "the kind is namespaced"))
	}
	return errs
}

// customResource is one manifest document of a CRD's kind.
type customResource struct {
	file string
	obj  map[string]any
	gvk  schema.GroupVersionKind
}

func (c customResource) String() string {
	meta, _ := c.obj["metadata"].(map[string]any)
	return fmt.Sprintf("%s: %s %v", c.file, c.gvk.Kind, meta["name"])
}

// shippedCustomResources returns the manifests of the Prometheus Operator's
// group; any kind of that group without a CRD fails the test.
func shippedCustomResources(t *testing.T, crds map[schema.GroupKind]*apiextensionsv1.CustomResourceDefinition) []customResource {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(manifestsDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s (%v)", manifestsDir, err)
	}
	var out []customResource
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range documents(t, data) {
			obj := map[string]any{}
			if err := yaml.Unmarshal(doc, &obj); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			apiVersion, _ := obj["apiVersion"].(string)
			kind, _ := obj["kind"].(string)
			gv, err := schema.ParseGroupVersion(apiVersion)
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if !strings.HasSuffix(gv.Group, "monitoring.coreos.com") {
				continue // a built-in kind: the manifests package decodes it strictly
			}
			if crds[gv.WithKind(kind).GroupKind()] == nil {
				t.Errorf("%s: no CRD for %s %s", file, apiVersion, kind)
				continue
			}
			out = append(out, customResource{file: filepath.Base(file), obj: obj, gvk: gv.WithKind(kind)})
		}
	}
	return out
}

func validatorFor(t *testing.T, crds map[schema.GroupKind]*apiextensionsv1.CustomResourceDefinition, gvk schema.GroupVersionKind) *validator {
	t.Helper()
	v, err := newValidator(crds[gvk.GroupKind()], gvk.Version)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestManifestsMatchTheirCRDs(t *testing.T) {
	crds := operatorCRDs(t)
	shipped := shippedCustomResources(t, crds)
	kinds := map[string]int{}
	for _, cr := range shipped {
		kinds[cr.gvk.Kind]++
		for _, err := range validatorFor(t, crds, cr.gvk).validate(cr.obj) {
			t.Errorf("%s: %v", cr, err)
		}
	}
	for _, kind := range []string{"ServiceMonitor", "PrometheusRule"} {
		if kinds[kind] != 1 {
			t.Errorf("%d %ss in the manifests, want 1", kinds[kind], kind)
		}
	}
}

// TestValidatorRefusesWhatTheAPIServerWould keeps the check honest: edits
// the API server refuses are refused here too.
func TestValidatorRefusesWhatTheAPIServerWould(t *testing.T) {
	crds := operatorCRDs(t)
	var monitor *customResource
	for _, cr := range shippedCustomResources(t, crds) {
		if cr.gvk.Kind == "ServiceMonitor" {
			monitor = &cr
		}
	}
	if monitor == nil {
		t.Fatal("no ServiceMonitor in the manifests")
	}
	v := validatorFor(t, crds, monitor.gvk)
	endpoint := func(obj map[string]any) map[string]any {
		return obj["spec"].(map[string]any)["endpoints"].([]any)[0].(map[string]any)
	}
	for _, tc := range []struct {
		name   string
		edit   func(obj map[string]any)
		inPath string
	}{
		{"misspelt field", func(o map[string]any) { endpoint(o)["tlsconfig"] = endpoint(o)["tlsConfig"] }, "tlsconfig"},
		{"scheme outside its enum", func(o map[string]any) { endpoint(o)["scheme"] = "httpz" }, "scheme"},
		{"interval that is no duration", func(o map[string]any) { endpoint(o)["interval"] = "30 seconds" }, "interval"},
		{"wrong type", func(o map[string]any) { endpoint(o)["port"] = []any{"https"} }, "port"},
		{"no name", func(o map[string]any) { delete(o["metadata"].(map[string]any), "name") }, "metadata.name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := runtime.DeepCopyJSON(monitor.obj)
			tc.edit(obj)
			errs := v.validate(obj)
			if len(errs) == 0 {
				t.Fatal("accepted")
			}
			if !strings.Contains(errs.ToAggregate().Error(), tc.inPath) {
				t.Errorf("errors %v do not name %s", errs, tc.inPath)
			}
		})
	}
}
