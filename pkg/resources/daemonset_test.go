package resources

import (
	"bytes"
	"flag"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/insights-runtime-extractor/controller/internal/golden"
	"github.com/insights-runtime-extractor/controller/pkg/config"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/resources")

var fakeNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// goldenDir is the repository's top-level testdata/resources.
var goldenDir = filepath.Join("..", "..", "testdata", "resources")

const testVersion = "4.21.3"

func defaultDesired() Desired {
	return Desired{Images: DefaultImages(), Version: testVersion}
}

// schedulingDesired uses every scheduling setting, release-style digest
// images and the Modern TLS profile.
func schedulingDesired() Desired {
	return Desired{
		Images: Images{
			Extractor:     "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:1111111111111111111111111111111111111111111111111111111111111111",
			Exporter:      "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:2222222222222222222222222222222222222222222222222222222222222222",
			KubeRBACProxy: "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:3333333333333333333333333333333333333333333333333333333333333333",
		},
		Version:    testVersion,
		TLSProfile: &configv1.TLSSecurityProfile{Type: configv1.TLSProfileModernType, Modern: &configv1.ModernTLSProfile{}},
		Scheduling: config.RuntimeExtractor{
			Tolerations: []corev1.Toleration{{
				Key:      "node-role.kubernetes.io/infra",
				Operator: corev1.TolerationOpExists,
				Effect:   corev1.TaintEffectNoSchedule,
			}},
			NodeSelector: map[string]string{
				"node-role.kubernetes.io/worker": "",
				OSNodeSelectorKey:                "windows", // must not win
			},
			PriorityClassName: "system-node-critical",
			Resources: config.ContainerResources{
				Extractor: &corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
				},
			},
		},
	}
}

func TestDesiredDaemonSetGolden(t *testing.T) {
	for _, tc := range []struct {
		file    string
		desired Desired
	}{
		{"daemonset-default.yaml", defaultDesired()},
		{"daemonset-scheduling.yaml", schedulingDesired()},
	} {
		t.Run(tc.file, func(t *testing.T) {
			ds, err := DesiredDaemonSet(tc.desired)
			if err != nil {
				t.Fatalf("DesiredDaemonSet: %v", err)
			}
			got, err := yaml.Marshal(ds)
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			path := filepath.Join(goldenDir, tc.file)
			want := golden.Want(t, path, got, *update, "regenerate with go test ./pkg/resources -update")
			if !bytes.Equal(got, want) {
				t.Errorf("desired DaemonSet differs from %s (regenerate with -update and review the diff):\n%s",
					path, diff.Diff(string(want), string(got)))
			}
		})
	}
}

func TestDesiredDaemonSetShape(t *testing.T) {
	ds, err := DesiredDaemonSet(defaultDesired())
	if err != nil {
		t.Fatalf("DesiredDaemonSet: %v", err)
	}
	if ds.Namespace != Namespace || ds.Name != DaemonSetName {
		t.Errorf("object = %s/%s, want %s/%s", ds.Namespace, ds.Name, Namespace, DaemonSetName)
	}
	for k, v := range OwnedLabels() {
		if ds.Labels[k] != v || ds.Spec.Template.Labels[k] != v {
			t.Errorf("label %s=%s missing on the DaemonSet or its pod template", k, v)
		}
	}
	if got := ds.Spec.Selector.MatchLabels; len(got) != 1 || got[LabelName] != NameValue {
		t.Errorf("selector = %v, want only %s=%s", got, LabelName, NameValue)
	}
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	if ds.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType || ru == nil || ru.MaxUnavailable.String() != "33%" {
		t.Errorf("update strategy = %+v, want RollingUpdate with maxUnavailable 33%%", ds.Spec.UpdateStrategy)
	}
	pod := ds.Spec.Template.Spec
	if pod.ServiceAccountName != ServiceAccountName || pod.PriorityClassName != PriorityClassName {
		t.Errorf("serviceAccount/priorityClass = %q/%q", pod.ServiceAccountName, pod.PriorityClassName)
	}
	if pod.NodeSelector[OSNodeSelectorKey] != OSNodeSelectorValue {
		t.Errorf("nodeSelector = %v, want %s=%s", pod.NodeSelector, OSNodeSelectorKey, OSNodeSelectorValue)
	}

	images := map[string]string{
		ContainerExtractor:     DefaultExtractorImage,
		ContainerExporter:      DefaultExporterImage,
		ContainerKubeRBACProxy: DefaultKubeRBACProxyImage,
	}
	if len(pod.Containers) != len(images) {
		t.Fatalf("%d containers, want %d", len(pod.Containers), len(images))
	}
	for _, c := range pod.Containers {
		if c.Image != images[c.Name] {
			t.Errorf("container %s image = %q, want %q", c.Name, c.Image, images[c.Name])
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
			t.Errorf("container %s has no cpu/memory requests", c.Name)
		}
	}
	proxy := findContainer(&pod, ContainerKubeRBACProxy)
	args := strings.Join(proxy.Args, " ")
	for _, want := range KubeRBACProxyTLSArgs(nil) {
		if !strings.Contains(args, want) {
			t.Errorf("kube-rbac-proxy args %q lack %q", args, want)
		}
	}

	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	if v := volumes["crio-socket"]; v.HostPath == nil || v.HostPath.Path != "/run/crio/crio.sock" {
		t.Errorf("crio-socket volume = %+v, want hostPath /run/crio/crio.sock", v)
	}
	if v := volumes["data-volume"]; v.EmptyDir == nil {
		t.Errorf("data-volume = %+v, want emptyDir", v)
	}
	if v := volumes["kube-rbac-proxy-cm"]; v.ConfigMap == nil || v.ConfigMap.Name != KubeRBACProxyConfigMapName {
		t.Errorf("kube-rbac-proxy-cm volume = %+v, want ConfigMap %s", v, KubeRBACProxyConfigMapName)
	}
	if v := volumes[TLSSecretName]; v.Secret == nil || v.Secret.SecretName != TLSSecretName {
		t.Errorf("TLS volume = %+v, want Secret %s", v, TLSSecretName)
	}

	if ds.Annotations[VersionAnnotation] != testVersion || ds.Spec.Template.Annotations[VersionAnnotation] != "" {
		t.Errorf("version annotation: %q on the DaemonSet, %q on the pod template (want it on the DaemonSet only)", ds.Annotations[VersionAnnotation], ds.Spec.Template.Annotations[VersionAnnotation])
	}
	unversioned, err := DesiredDaemonSet(Desired{Images: DefaultImages()})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := unversioned.Annotations[VersionAnnotation]; ok {
		t.Errorf("empty version recorded as annotation")
	}
}

func TestDesiredDaemonSetScheduling(t *testing.T) {
	d := schedulingDesired()
	ds, err := DesiredDaemonSet(d)
	if err != nil {
		t.Fatalf("DesiredDaemonSet: %v", err)
	}
	pod := ds.Spec.Template.Spec
	if !equality.Semantic.DeepEqual(pod.Tolerations, d.Scheduling.Tolerations) {
		t.Errorf("tolerations = %v, want %v", pod.Tolerations, d.Scheduling.Tolerations)
	}
	want := map[string]string{"node-role.kubernetes.io/worker": "", OSNodeSelectorKey: OSNodeSelectorValue}
	if !equality.Semantic.DeepEqual(pod.NodeSelector, want) {
		t.Errorf("nodeSelector = %v, want %v", pod.NodeSelector, want)
	}
	if pod.PriorityClassName != "system-node-critical" {
		t.Errorf("priorityClassName = %q", pod.PriorityClassName)
	}
	if got := findContainer(&pod, ContainerExtractor).Resources; !equality.Semantic.DeepEqual(got, *d.Scheduling.Resources.Extractor) {
		t.Errorf("extractor resources = %v, want the override", got)
	}
	defaults, err := DesiredDaemonSet(defaultDesired())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{ContainerExporter, ContainerKubeRBACProxy} {
		got := findContainer(&pod, name).Resources
		if !equality.Semantic.DeepEqual(got, findContainer(&defaults.Spec.Template.Spec, name).Resources) {
			t.Errorf("container %s resources = %v, want the defaults", name, got)
		}
	}
	if got := findContainer(&pod, ContainerKubeRBACProxy).Args; got[len(got)-1] != "--tls-min-version=VersionTLS13" {
		t.Errorf("kube-rbac-proxy args = %v, want the Modern profile", got)
	}

	// The result owns its memory: changing it changes neither the input nor
	// the next result.
	pod.Tolerations[0].Key = "changed"
	pod.NodeSelector["changed"] = "yes"
	findContainer(&ds.Spec.Template.Spec, ContainerExtractor).Resources.Requests[corev1.ResourceCPU] = resource.MustParse("9")
	if d.Scheduling.Tolerations[0].Key == "changed" || d.Scheduling.Resources.Extractor.Requests.Cpu().String() == "9" {
		t.Errorf("DesiredDaemonSet shares memory with its input")
	}
	again, err := DesiredDaemonSet(schedulingDesired())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := again.Spec.Template.Spec.NodeSelector["changed"]; ok {
		t.Errorf("DesiredDaemonSet shares memory between calls")
	}
}

func TestDesiredDaemonSetDeterministic(t *testing.T) {
	a, err := DesiredDaemonSet(schedulingDesired())
	if err != nil {
		t.Fatal(err)
	}
	b, err := DesiredDaemonSet(schedulingDesired())
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(a, b) {
		t.Errorf("two calls with the same input differ:\n%s", diff.Diff(a, b))
	}
}

func TestDesiredDaemonSetRejectsInvalidImage(t *testing.T) {
	d := defaultDesired()
	d.Images.Exporter = "quay.io/openshift/origin-insights-runtime-exporter:not a tag"
	_, err := DesiredDaemonSet(d)
	if err == nil {
		t.Fatal("DesiredDaemonSet accepted an invalid image")
	}
	if !strings.Contains(err.Error(), ContainerExporter) {
		t.Errorf("error %q does not name the container", err)
	}
	d.Images = Images{}
	if _, err := DesiredDaemonSet(d); err == nil {
		t.Error("DesiredDaemonSet accepted empty images")
	}
}

func TestRolloutComplete(t *testing.T) {
	ds := func(generation, observed int64, desired, updated, available int32) *appsv1.DaemonSet {
		d := &appsv1.DaemonSet{}
		d.Generation = generation
		d.Status = appsv1.DaemonSetStatus{
			ObservedGeneration:     observed,
			DesiredNumberScheduled: desired,
			UpdatedNumberScheduled: updated,
			NumberAvailable:        available,
		}
		return d
	}
	for _, tc := range []struct {
		name string
		ds   *appsv1.DaemonSet
		want bool
	}{
		{"nil", nil, false},
		{"all updated and available", ds(2, 2, 3, 3, 3), true},
		{"no node wants a pod", ds(2, 2, 0, 0, 0), true},
		{"spec not yet observed", ds(3, 2, 3, 3, 3), false},
		{"rolling: not all updated", ds(2, 2, 3, 2, 3), false},
		{"updated, one not available", ds(2, 2, 3, 3, 2), true},
		{"not observed, nothing desired", ds(1, 0, 0, 0, 0), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := RolloutOf(tc.ds).Complete(); got != tc.want {
				t.Errorf("RolloutComplete = %v, want %v", got, tc.want)
			}
		})
	}
}

// Issue 18, defect 3: a pod that stays unavailable on a node that still counts
// (a crash loop, an image that will not pull) does not hold the rollout open:
// every node runs the current template, so there is nothing left to roll out.
// Availability is reported apart from it.
func TestRolloutCompleteWithUnavailablePod(t *testing.T) {
	ds := &appsv1.DaemonSet{}
	ds.Generation = 2
	ds.Status = appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 1000, CurrentNumberScheduled: 1000,
		UpdatedNumberScheduled: 1000, NumberReady: 993, NumberAvailable: 993, NumberUnavailable: 7}
	if !RolloutOf(ds).Complete() {
		t.Fatalf("RolloutComplete = false for 1000/1000 updated, 993 available; want true")
	}
	ds.Status.NumberAvailable, ds.Status.NumberUnavailable = 0, 1000
	if !RolloutOf(ds).Complete() {
		t.Fatalf("RolloutComplete = false for 1000/1000 updated, none available; want true")
	}
}

func TestRolloutFullyAvailable(t *testing.T) {
	ds := &appsv1.DaemonSet{}
	ds.Generation = 2
	ds.Status = appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 3, UpdatedNumberScheduled: 3, NumberAvailable: 2}
	if RolloutOf(ds).FullyAvailable() {
		t.Error("FullyAvailable with 2/3 available")
	}
	ds.Status.NumberAvailable = 3
	if !RolloutOf(ds).FullyAvailable() {
		t.Error("not FullyAvailable with 3/3 updated and available")
	}
	ds.Generation = 3
	if RolloutOf(ds).FullyAvailable() {
		t.Error("FullyAvailable before the new generation is observed")
	}
}

// maxUnavailable resolves as the DaemonSet controller resolves it.
func TestMaxUnavailable(t *testing.T) {
	rolling := func(desired int32, unavailable, surge *intstr.IntOrString) *appsv1.DaemonSet {
		ds := &appsv1.DaemonSet{}
		ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: unavailable, MaxSurge: surge}}
		ds.Status.DesiredNumberScheduled = desired
		return ds
	}
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	num := func(n int) *intstr.IntOrString { v := intstr.FromInt(n); return &v }
	manifest, err := parsedManifest()
	if err != nil {
		t.Fatal(err)
	}
	manifest = manifest.DeepCopy()
	manifest.Status.DesiredNumberScheduled = 1000
	for _, tc := range []struct {
		name string
		ds   *appsv1.DaemonSet
		want int32
		ok   bool
	}{
		{"the manifest's 33% of 1000, rounded up", manifest, 330, true},
		{"33% of 3 rounds up to 1", rolling(3, pct("33%"), num(0)), 1, true},
		{"34% of 1000 rounds up", rolling(1000, pct("34%"), nil), 340, true},
		{"a number", rolling(10, num(2), nil), 2, true},
		{"0 with no surge falls back to 1", rolling(10, num(0), num(0)), 1, true},
		{"0 with surge stays 0", rolling(10, num(0), num(1)), 0, true},
		{"nothing desired", rolling(0, pct("33%"), nil), 0, true},
		{"no rollingUpdate block", &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType}},
			Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 4}}, 1, true},
		{"an invalid percentage", rolling(10, pct("a lot"), nil), 0, false},
		{"OnDelete has no bound", &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}}}, 0, false},
		{"nil", nil, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := MaxUnavailable(tc.ds)
			if got != tc.want || ok != tc.ok {
				t.Errorf("MaxUnavailable = %d, %v; want %d, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// The names in the embedded manifest must be the ones the rest of the
// controller uses.
func TestManifestUsesSharedNames(t *testing.T) {
	ds, err := parsedManifest()
	if err != nil {
		t.Fatal(err)
	}
	if ds.Name != DaemonSetName || ds.Namespace != Namespace {
		t.Errorf("manifest object %s/%s", ds.Namespace, ds.Name)
	}
	if ds.Spec.Template.Spec.ServiceAccountName != ServiceAccountName {
		t.Errorf("manifest service account %q", ds.Spec.Template.Spec.ServiceAccountName)
	}
	if ds.Spec.Template.Spec.PriorityClassName != PriorityClassName {
		t.Errorf("manifest priority class %q", ds.Spec.Template.Spec.PriorityClassName)
	}
}

// A manifest edited to lose what DesiredDaemonSet fills in place is refused
// when parsed, with a message naming what is missing.
func TestManifestMissingPartsAreErrors(t *testing.T) {
	for _, tc := range []struct{ drop, want string }{
		{"        - name: exporter\n", "no container exporter"},
		{"      nodeSelector:\n", "no node selector"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			edited, ok := dropBlock(string(daemonSetManifest), tc.drop)
			if !ok {
				t.Fatalf("the manifest has no line %q", tc.drop)
			}
			if _, err := parseManifest([]byte(edited)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("parseManifest = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// dropBlock removes the line first and the lines indented deeper below it.
func dropBlock(yaml, first string) (string, bool) {
	i := strings.Index(yaml, first)
	if i < 0 {
		return yaml, false
	}
	indent := len(first) - len(strings.TrimLeft(first, " "))
	end := i + len(first)
	for end < len(yaml) {
		line, _, _ := strings.Cut(yaml[end:], "\n")
		if trimmed := strings.TrimLeft(line, " "); trimmed != "" && len(line)-len(trimmed) <= indent {
			break
		}
		end += len(line) + 1
	}
	return yaml[:i] + yaml[min(end, len(yaml)):], true
}

// Every annotation the desired DaemonSet carries on its metadata is owned:
// the apply puts it back, so drift detection must see its removal.
func TestOwnedAnnotationsCoverTheDesiredMetadata(t *testing.T) {
	ds, err := DesiredDaemonSet(defaultDesired())
	if err != nil {
		t.Fatal(err)
	}
	owned := OwnedAnnotations()
	for k := range ds.Annotations {
		if !slices.Contains(owned, k) {
			t.Errorf("the desired DaemonSet sets annotation %s, which OwnedAnnotations leaves out (%v)", k, owned)
		}
	}
	if !slices.Contains(owned, SpecHashAnnotation) {
		t.Errorf("OwnedAnnotations leaves out the spec hash the apply records: %v", owned)
	}
}
