package runtimeextractor

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/insights-runtime-extractor/controller/pkg/metrics"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
)

// fieldWriter is a field manager that changed the DaemonSet, as the object's
// metadata.managedFields says: its name (sanitized), operation and time.
type fieldWriter struct {
	manager   string
	operation string
	time      time.Time
}

func (w fieldWriter) String() string {
	return fmt.Sprintf("%s (%s at %s)", w.manager, w.operation, w.time.UTC().Format(time.RFC3339))
}

// changedBy returns who made the change from old to cur: among cur's
// managedFields entries that are not ours and not on the status subresource
// (the DaemonSet controller's counters), the newest, all of them on a tie.
// An entry old already had as it is did not record this change (a removal
// under Update leaves the remover no entry), so it names no one: better
// unnamed than a wrong name. old is nil for an object seen for the first time.
// It reads only the watch event's objects: no request.
func changedBy(old, cur *appsv1.DaemonSet) []fieldWriter {
	var newest []fieldWriter
	for _, e := range cur.ManagedFields {
		if e.Manager == resources.FieldManager || e.Subresource == "status" || e.Time == nil {
			continue
		}
		if old != nil && old.UID == cur.UID && slices.ContainsFunc(old.ManagedFields, func(o metav1.ManagedFieldsEntry) bool {
			return apiequality.Semantic.DeepEqual(o, e)
		}) {
			continue
		}
		w := fieldWriter{manager: sanitizeManager(e.Manager), operation: sanitizeManager(string(e.Operation)), time: e.Time.Time}
		switch {
		case len(newest) == 0 || w.time.After(newest[0].time):
			newest = []fieldWriter{w}
		case w.time.Equal(newest[0].time):
			newest = append(newest, w)
		}
	}
	return newest
}

// maxManagerBytes bounds a manager name in messages; the API server allows
// 128 characters, and a client may write managedFields itself.
const maxManagerBytes = 64

// sanitizeManager makes a client-chosen name safe to print: non-printable
// runes (control characters, bidi overrides, invalid bytes) become '?', and
// it is cut to maxManagerBytes.
func sanitizeManager(s string) string {
	var b strings.Builder
	for _, r := range s {
		if !unicode.IsPrint(r) || r == unicode.ReplacementChar {
			r = '?'
		}
		if b.Len()+len(string(r)) > maxManagerBytes {
			break
		}
		b.WriteRune(r)
	}
	if b.Len() == 0 {
		return "?"
	}
	return b.String()
}

// mergeWriters adds ws to the writers of one repair, one per manager and
// operation at its newest time, newest first.
func mergeWriters(into, ws []fieldWriter) []fieldWriter {
	for _, w := range ws {
		i := slices.IndexFunc(into, func(x fieldWriter) bool { return x.manager == w.manager && x.operation == w.operation })
		switch {
		case i < 0:
			into = append(into, w)
		case w.time.After(into[i].time):
			into[i] = w
		}
	}
	slices.SortStableFunc(into, func(a, b fieldWriter) int { return b.time.Compare(a.time) })
	return into
}

// maxNamedWriters bounds the writers a message names; the rest are counted.
const maxNamedWriters = 3

// writersWords says who made a repaired change, e.g. ", changed by
// kubectl-patch (Update at 2026-12-02T12:00:01Z)"; "" for a deletion only,
// which names no one and needs no more than "deleted by someone else".
func writersWords(kinds []DriftKind, ws []fieldWriter, unnamed bool) string {
	if len(ws) == 0 {
		if unnamed || slices.ContainsFunc(kinds, func(k DriftKind) bool { return k != DriftDeleted }) {
			return ", by a writer managedFields does not name"
		}
		return ""
	}
	names := make([]string, 0, maxNamedWriters)
	for _, w := range ws[:min(len(ws), maxNamedWriters)] {
		names = append(names, w.String())
	}
	out := ", changed by " + strings.Join(names, ", ")
	if n := len(ws) - maxNamedWriters; n > 0 {
		out += fmt.Sprintf(" and %d more", n)
	}
	if unnamed {
		out += " and a writer managedFields does not name"
	}
	return out
}

// driftSummary is what the log and the Event say about a drain's drift.
func driftSummary(kinds []DriftKind, ws []fieldWriter, unnamed bool) string {
	if len(kinds) == 1 && kinds[0] == DriftDeleted {
		return "deleted by someone else"
	}
	return "changed by someone else (" + driftWords(kinds) + ")" + writersWords(kinds, ws, unnamed)
}

// repairManagers are the repairs_total label values of one repair: each
// writer named, or one unknown.
func repairManagers(ws []fieldWriter) []string {
	if len(ws) == 0 {
		return []string{metrics.UnknownManager}
	}
	out := make([]string, 0, len(ws))
	for _, w := range ws {
		if !slices.Contains(out, w.manager) {
			out = append(out, w.manager)
		}
	}
	return out
}

// maxRestoredFields bounds the fields a repair's Event names; the rest are
// counted.
const maxRestoredFields = 4

// restoredFields names what a repair put back, from the DaemonSet before it
// (someone else's) to the one it wrote: "container extractor image",
// "removed container sidecar", "tolerations"... It compares the fields
// people change; any other difference of the spec is "spec". Nothing is
// read: both objects are at hand.
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
			out = append(out, "removed container "+sanitizeManager(bc.Name))
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

// restoredWords is ": restored container extractor image, tolerations;
// removed container sidecar" for fields, "" for none.
func restoredWords(fields []string) string {
	if len(fields) == 0 {
		return ""
	}
	shown := fields[:min(len(fields), maxRestoredFields)]
	var put, removed []string
	for _, f := range shown {
		if name, ok := strings.CutPrefix(f, "removed "); ok {
			removed = append(removed, name)
		} else {
			put = append(put, f)
		}
	}
	var parts []string
	if len(put) > 0 {
		parts = append(parts, "restored "+strings.Join(put, ", "))
	}
	if len(removed) > 0 {
		parts = append(parts, "removed "+strings.Join(removed, ", "))
	}
	out := ": " + strings.Join(parts, "; ")
	if n := len(fields) - len(shown); n > 0 {
		out += fmt.Sprintf(" and %d more", n)
	}
	return out
}
