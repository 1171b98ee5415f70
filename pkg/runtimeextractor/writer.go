package runtimeextractor

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	appsv1 "k8s.io/api/apps/v1"
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
