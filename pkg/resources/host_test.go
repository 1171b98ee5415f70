package resources

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	"github.com/openshift/library-go/pkg/crypto"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// hostManifest is the host's DaemonSet as its own controller declares it (see
// the file's header for where it comes from).
var hostManifest = filepath.Join("..", "..", "testdata", "original", "daemonset.yaml")

// operationsDoc lists the differences below for admins, between these markers.
var operationsDoc = filepath.Join("..", "..", "docs", "operations.md")

const (
	hostDiffBegin = "<!-- host-template-differences:begin -->"
	hostDiffEnd   = "<!-- host-template-differences:end -->"
)

// hostDifferences is every way the default DaemonSet differs from the host's,
// by field path (containers, volumes and mounts keyed by name), each with its
// reason. A difference not listed here fails TestDefaultDaemonSetDiffersFromTheHostsOnlyAsListed,
// and so does an entry that is no longer a difference. docs/operations.md
// carries the same list (TestHostTemplateDifferencesDocGolden).
var hostDifferences = []struct{ path, reason string }{
	{"metadata.labels[app.kubernetes.io/managed-by]",
		"Marks the DaemonSet as managed; it is owned metadata, so someone removing it is drift and is repaired. Adopting the host's DaemonSet adds it in place; the selector stays the host's (it is immutable)."},
	{"metadata.annotations[" + VersionAnnotation + "]",
		"The release version the DaemonSet was last applied for: status reads from it which version is deployed, and whether an upgrade is not applied yet, a restarted controller too. On the DaemonSet only, so a version number alone rolls no pods."},
	{"spec.template.metadata.labels[app.kubernetes.io/managed-by]",
		"The same label on the pods, so that one selector finds the DaemonSet and its pods (not in the selector, which is immutable)."},
	{"spec.template.spec.containers[kube-rbac-proxy].imagePullPolicy",
		"IfNotPresent: release images are pinned by digest, so a node's copy is the one the release names, and Always would make every pod start depend on the registry (a round trip, and a failed start while it is unreachable). (The host leaves it unset, which the API server defaults to Always for a :latest tag, IfNotPresent for a digest.)"},
	{"spec.template.spec.containers[exporter].imagePullPolicy",
		"IfNotPresent, for the same reason (the host sets Always)."},
	{"spec.template.spec.containers[extractor].imagePullPolicy",
		"IfNotPresent, for the same reason (the host sets Always)."},
	{"spec.template.spec.containers[kube-rbac-proxy].args[--tls-cipher-suites]",
		"The same profile (Intermediate when none is set), but only the suites that Go can negotiate below TLS 1.3 at the profile's minimum version, each once, by its canonical name. The host passes the TLS 1.3 suites too, which cannot be configured in Go."},
}

// hostDaemonSet is the host's DaemonSet completed as its controller completes
// it with no RELATED_IMAGE_* set and no TLS profile: the default images, and
// kube-rbac-proxy's arguments followed by the Intermediate profile's in IANA
// names (those Go knows), then its minimum version.
func hostDaemonSet(t *testing.T) *appsv1.DaemonSet {
	t.Helper()
	ds := &appsv1.DaemonSet{}
	if err := yaml.UnmarshalStrict(readFile(t, hostManifest), ds); err != nil {
		t.Fatalf("%s: %v", hostManifest, err)
	}
	profile := configv1.TLSProfiles[configv1.TLSProfileIntermediateType]
	var ciphers []string
	for _, name := range crypto.OpenSSLToIANACipherSuites(profile.Ciphers) {
		if _, err := crypto.CipherSuite(name); err == nil {
			ciphers = append(ciphers, name)
		}
	}
	images := map[string]string{
		ContainerExtractor:     DefaultExtractorImage,
		ContainerExporter:      DefaultExporterImage,
		ContainerKubeRBACProxy: DefaultKubeRBACProxyImage,
	}
	for i := range ds.Spec.Template.Spec.Containers {
		c := &ds.Spec.Template.Spec.Containers[i]
		if images[c.Name] != c.Image {
			t.Fatalf("%s: container %s has image %q, want the default %q", hostManifest, c.Name, c.Image, images[c.Name])
		}
		if c.Name == ContainerKubeRBACProxy {
			c.Args = append(c.Args, "--tls-cipher-suites="+strings.Join(ciphers, ","), "--tls-min-version="+string(profile.MinTLSVersion))
		}
	}
	return ds
}

// readFile returns the contents of the file at path, failing the test when it
// cannot be read.
func readFile(t *testing.T, path string) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// withAPIDefaults sets what the API server defaults in the fields these
// DaemonSets leave unset, so that "unset" and "the default, spelled out"
// compare equal, as they do on the server.
func withAPIDefaults(ds *appsv1.DaemonSet) *appsv1.DaemonSet {
	ds = ds.DeepCopy()
	pod := &ds.Spec.Template.Spec
	if pod.TerminationGracePeriodSeconds == nil {
		pod.TerminationGracePeriodSeconds = ptr.To[int64](corev1.DefaultTerminationGracePeriodSeconds)
	}
	for i := range pod.Containers {
		c := &pod.Containers[i]
		if c.ImagePullPolicy == "" {
			c.ImagePullPolicy = corev1.PullIfNotPresent
			if _, tag, _ := strings.Cut(lastPathElement(c.Image), ":"); !strings.Contains(c.Image, "@") && (tag == "" || tag == "latest") {
				c.ImagePullPolicy = corev1.PullAlways
			}
		}
		for j := range c.Ports {
			if c.Ports[j].Protocol == "" {
				c.Ports[j].Protocol = corev1.ProtocolTCP
			}
		}
		for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
			if p == nil {
				continue
			}
			for _, f := range []struct {
				field *int32
				def   int32
			}{{&p.TimeoutSeconds, 1}, {&p.PeriodSeconds, 10}, {&p.SuccessThreshold, 1}, {&p.FailureThreshold, 3}} {
				if *f.field == 0 {
					*f.field = f.def
				}
			}
		}
	}
	return ds
}

func lastPathElement(image string) string {
	return image[strings.LastIndex(image, "/")+1:]
}

// fieldDiffs lists the paths at which a and b differ. Lists of objects with a
// name are compared by name, and a different order of the same names is a
// difference of its own ("path (order)").
func fieldDiffs(path string, a, b any) []string {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			return []string{path}
		}
		var out []string
		for _, k := range unionKeys(av, bv) {
			sub := path + "." + k
			if path == "metadata.labels" || path == "metadata.annotations" || strings.HasSuffix(path, ".labels") ||
				strings.HasSuffix(path, ".annotations") || strings.HasSuffix(path, ".nodeSelector") {
				sub = path + "[" + k + "]"
			}
			if path == "" {
				sub = k
			}
			out = append(out, fieldDiffs(sub, av[k], bv[k])...)
		}
		return out
	case []any:
		bv, ok := b.([]any)
		if af, bf, ok := flagsByName(av), flagsByName(bv), ok; ok && af != nil && bf != nil {
			// Command-line flags mean the same in any order: keyed by name.
			var out []string
			for _, k := range unionKeys(af, bf) {
				out = append(out, fieldDiffs(path+"["+k+"]", af[k], bf[k])...)
			}
			return out
		}
		an, aNamed := names(av)
		bn, bNamed := names(bv)
		if !ok || !aNamed || !bNamed {
			if fmt.Sprint(a) != fmt.Sprint(b) {
				return []string{path}
			}
			return nil
		}
		var out []string
		common := func(n []string, other []string) []string {
			return slices.DeleteFunc(slices.Clone(n), func(s string) bool { return !slices.Contains(other, s) })
		}
		if !slices.Equal(common(an, bn), common(bn, an)) {
			out = append(out, path+" (order)")
		}
		byName := func(l []any) map[string]any {
			m := map[string]any{}
			for _, e := range l {
				m[e.(map[string]any)["name"].(string)] = e
			}
			return m
		}
		am, bm := byName(av), byName(bv)
		for _, k := range unionKeys(am, bm) {
			out = append(out, fieldDiffs(path+"["+k+"]", am[k], bm[k])...)
		}
		return out
	default:
		if fmt.Sprint(a) != fmt.Sprint(b) {
			return []string{path}
		}
		return nil
	}
}

// flagsByName maps each --flag=value of l to its value; nil unless every
// element is such a flag, each given once.
func flagsByName(l []any) map[string]any {
	m := map[string]any{}
	for _, e := range l {
		s, ok := e.(string)
		if !ok || !strings.HasPrefix(s, "--") {
			return nil
		}
		name, value, _ := strings.Cut(s, "=")
		if _, dup := m[name]; dup {
			return nil
		}
		m[name] = value
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// names returns the names of l's elements, and whether each is an object
// with a name.
func names(l []any) ([]string, bool) {
	var out []string
	for _, e := range l {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, false
		}
		n, ok := m["name"].(string)
		if !ok {
			return nil, false
		}
		out = append(out, n)
	}
	return out, len(out) > 0
}

func unionKeys(a, b map[string]any) []string {
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

func toMap(t *testing.T, ds *appsv1.DaemonSet) map[string]any {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ds)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The default DaemonSet (default images, no TLS profile, no scheduling
// settings, a version) differs from the host's, field by field, exactly as
// hostDifferences lists: a new difference fails until it is listed with its
// reason, and a listed one that went away fails until it is struck.
func TestDefaultDaemonSetDiffersFromTheHostsOnlyAsListed(t *testing.T) {
	ours, err := DesiredDaemonSet(defaultDesired())
	if err != nil {
		t.Fatal(err)
	}
	got := fieldDiffs("", toMap(t, withAPIDefaults(ours)), toMap(t, withAPIDefaults(hostDaemonSet(t))))
	listed := map[string]bool{}
	for _, d := range hostDifferences {
		listed[d.path] = true
	}
	for _, p := range got {
		if !listed[p] {
			t.Errorf("%s differs from the host's template and is not in hostDifferences: give it a reason there (and in docs/operations.md), or go back to the host's value", p)
		}
		delete(listed, p)
	}
	for p := range listed {
		t.Errorf("%s is listed in hostDifferences but no longer differs from the host's template: strike it", p)
	}
}

// fieldDiffs finds what it must: each kind of change to the host's template
// shows as the path that names it, and nothing else.
func TestFieldDiffsNamesEachChange(t *testing.T) {
	diffs := func(t *testing.T, changed, host *appsv1.DaemonSet) []string {
		return fieldDiffs("", toMap(t, withAPIDefaults(changed)), toMap(t, withAPIDefaults(host)))
	}
	testChanges(t, hostDaemonSet(t), "fieldDiffs", diffs, []changeCase{
		{"none", func(*appsv1.DaemonSet) {}, nil},
		{"probe added", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Containers[1].ReadinessProbe = &corev1.Probe{PeriodSeconds: 10}
		}, []string{"spec.template.spec.containers[exporter].readinessProbe"}},
		{"memory request", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = ds.Spec.Template.Spec.Containers[1].Resources.Requests[corev1.ResourceMemory]
		}, []string{"spec.template.spec.containers[kube-rbac-proxy].resources.requests.memory"}},
		{"containers reordered", func(ds *appsv1.DaemonSet) {
			c := ds.Spec.Template.Spec.Containers
			c[0], c[2] = c[2], c[0]
		}, []string{"spec.template.spec.containers (order)"}},
		{"annotation removed", func(ds *appsv1.DaemonSet) {
			delete(ds.Annotations, "capability.openshift.io/name")
		}, []string{"metadata.annotations[capability.openshift.io/name]"}},
		{"volume renamed", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Volumes[2].Name = "renamed"
		}, []string{"spec.template.spec.volumes[kube-rbac-proxy-cm]", "spec.template.spec.volumes[renamed]"}},
		{"an argument", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Containers[0].Args[1] = "--upstream=http://127.0.0.1:8000/"
		}, []string{"spec.template.spec.containers[kube-rbac-proxy].args[--upstream]"}},
		{"probe timeout", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Containers[2].LivenessProbe.TimeoutSeconds = 15
		}, []string{"spec.template.spec.containers[extractor].livenessProbe.timeoutSeconds"}},
	})
}

// hostDifferencesDoc is the list as docs/operations.md shows it.
func hostDifferencesDoc() string {
	var b strings.Builder
	b.WriteString(hostDiffBegin + "\n")
	b.WriteString("| field | reason |\n|---|---|\n")
	for _, d := range hostDifferences {
		fmt.Fprintf(&b, "| `%s` | %s |\n", d.path, d.reason)
	}
	b.WriteString(hostDiffEnd)
	return b.String()
}

// docs/operations.md lists the same differences with the same reasons
// (go test ./pkg/resources -run HostTemplateDifferencesDoc -update rewrites it).
func TestHostTemplateDifferencesDocGolden(t *testing.T) {
	doc := string(readFile(t, operationsDoc))
	begin, end := strings.Index(doc, hostDiffBegin), strings.Index(doc, hostDiffEnd)
	if begin < 0 || end < begin {
		t.Fatalf("%s has no %s … %s section", operationsDoc, hostDiffBegin, hostDiffEnd)
	}
	current := doc[begin : end+len(hostDiffEnd)]
	want := hostDifferencesDoc()
	if current == want {
		return
	}
	if *update {
		if err := os.WriteFile(operationsDoc, []byte(doc[:begin]+want+doc[end+len(hostDiffEnd):]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's list of differences from the host's template is not hostDifferences' (regenerate with go test ./pkg/resources -run HostTemplateDifferencesDoc -update):\n%s",
		operationsDoc, diff.Diff(current, want))
}

// Every network probe (tcpSocket, httpGet, grpc) names a port its own
// container declares, by number or by name: the kubelet dials the pod's IP,
// and a process that listens only on localhost, or a port nobody declares,
// never answers it. A container that declares no port gets no network probe.
func TestNetworkProbesNameADeclaredPort(t *testing.T) {
	for name, d := range map[string]Desired{"default": defaultDesired(), "scheduling": schedulingDesired()} {
		ds, err := DesiredDaemonSet(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range ds.Spec.Template.Spec.Containers {
			for kind, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe, "startup": c.StartupProbe} {
				if p == nil {
					continue
				}
				var port string
				switch {
				case p.TCPSocket != nil:
					port = p.TCPSocket.Port.String()
				case p.HTTPGet != nil:
					port = p.HTTPGet.Port.String()
				case p.GRPC != nil:
					port = fmt.Sprint(p.GRPC.Port)
				default:
					continue
				}
				if !declaresPort(c, port) {
					t.Errorf("%s: container %s's %s probe dials port %s, which the container does not declare (ports: %v)", name, c.Name, kind, port, c.Ports)
				}
			}
		}
	}
}

func declaresPort(c corev1.Container, port string) bool {
	for _, p := range c.Ports {
		if p.Name == port || fmt.Sprint(p.ContainerPort) == port {
			return true
		}
	}
	return false
}
