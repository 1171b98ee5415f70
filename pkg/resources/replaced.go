package resources

import (
	"slices"
	"strings"
	"unicode"

	"github.com/insights-runtime-extractor/controller/pkg/tlsprofile"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// restoredFields names what a write put back, from before to after: the
// fields people change, else "spec"; nil unless both are the same object.
func restoredFields(before, after *appsv1.DaemonSet) []string {
	if before == nil || after == nil || before.UID != after.UID {
		return nil
	}
	var out []string
	differs := func(name string, a, b any) {
		if !apiequality.Semantic.DeepEqual(a, b) {
			out = append(out, name)
		}
	}
	bp, ap := &before.Spec.Template.Spec, &after.Spec.Template.Spec
	for _, ac := range ap.Containers {
		i := slices.IndexFunc(bp.Containers, func(c corev1.Container) bool { return c.Name == ac.Name })
		if i < 0 {
			out = append(out, "container "+ac.Name)
			continue
		}
		bc := bp.Containers[i]
		differs("container "+ac.Name+" image", bc.Image, ac.Image)
		differs("container "+ac.Name+" command", bc.Command, ac.Command)
		differs("container "+ac.Name+" args", bc.Args, ac.Args)
		differs("container "+ac.Name+" env", bc.Env, ac.Env)
		differs("container "+ac.Name+" resources", bc.Resources, ac.Resources)
		differs("container "+ac.Name+" securityContext", bc.SecurityContext, ac.SecurityContext)
		differs("container "+ac.Name+" volumeMounts", bc.VolumeMounts, ac.VolumeMounts)
	}
	for _, bc := range bp.Containers {
		if !slices.ContainsFunc(ap.Containers, func(c corev1.Container) bool { return c.Name == bc.Name }) {
			// Someone else chose this name; it ends up in Events and logs.
			out = append(out, "removed container "+PrintableName(bc.Name))
		}
	}
	differs("initContainers", bp.InitContainers, ap.InitContainers)
	differs("volumes", bp.Volumes, ap.Volumes)
	differs("tolerations", bp.Tolerations, ap.Tolerations)
	differs("nodeSelector", bp.NodeSelector, ap.NodeSelector)
	differs("affinity", bp.Affinity, ap.Affinity)
	differs("priorityClassName", bp.PriorityClassName, ap.PriorityClassName)
	differs("serviceAccountName", bp.ServiceAccountName, ap.ServiceAccountName)
	differs("pod securityContext", bp.SecurityContext, ap.SecurityContext)
	differs("template labels", before.Spec.Template.Labels, after.Spec.Template.Labels)
	differs("template annotations", before.Spec.Template.Annotations, after.Spec.Template.Annotations)
	differs("updateStrategy", before.Spec.UpdateStrategy, after.Spec.UpdateStrategy)
	differs("minReadySeconds", before.Spec.MinReadySeconds, after.Spec.MinReadySeconds)
	if len(out) == 0 && !apiequality.Semantic.DeepEqual(before.Spec, after.Spec) {
		out = append(out, "spec")
	}
	return out
}

// MaxNameBytes bounds a foreign name in messages.
const MaxNameBytes = 64

// PrintableName makes a name someone else chose safe to print: non-printable
// runes (control characters, bidi overrides, invalid bytes) become '?'.
func PrintableName(s string) string {
	var b strings.Builder
	for _, r := range s {
		if !unicode.IsPrint(r) || r == unicode.ReplacementChar {
			r = '?'
		}
		if b.Len()+len(string(r)) > MaxNameBytes {
			break
		}
		b.WriteRune(r)
	}
	if b.Len() == 0 {
		return "?"
	}
	return b.String()
}

// tlsMove names the TLS profile d moves kube-rbac-proxy to from ds, with its
// minimum version if any; "" without ds, or when the arguments stay (in any order).
func tlsMove(ds *appsv1.DaemonSet, d *Desired) string {
	have, ok := KubeRBACProxyTLSArgsOf(ds)
	want := d.TLSArgs()
	if !ok || slices.Equal(slices.Sorted(slices.Values(have)), slices.Sorted(slices.Values(want))) {
		return ""
	}
	name := tlsprofile.Describe(d.TLSProfile)
	if d.KubeRBACProxyTLSArgs != nil {
		name = "kept while unknown" // the caller pinned the arguments, not a profile
	}
	if i := slices.IndexFunc(want, func(arg string) bool { return strings.HasPrefix(arg, flagTLSMinVersion+"=") }); i >= 0 {
		return name + ", " + want[i]
	}
	return name
}
