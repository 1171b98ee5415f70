package runtimeextractor

import (
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/insights-runtime-extractor/controller/pkg/core"
	"github.com/insights-runtime-extractor/controller/pkg/metrics"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
)

// DriftKind classifies an external change of the managed DaemonSet (core.DriftKind).
type DriftKind = core.DriftKind

// The drift kinds (the values of the drift_events_total metric's kind label).
const (
	DriftModified = core.DriftModified
	DriftDeleted  = core.DriftDeleted
	DriftMetadata = core.DriftMetadata
)

// observation is one change the informer saw (core.Observation).
type observation = core.Observation

// observed is cur's observation (old: before it, nil for an Add); damaged: owned metadata lost, maybe in an own write.
func observed(kind DriftKind, old, cur *appsv1.DaemonSet, damaged bool) observation {
	edits, likely := changedBy(old, cur)
	return observation{Kind: kind, UID: cur.UID, Generation: cur.Generation, Meta: resources.OwnedMetadata(cur),
		Version: cur.ResourceVersion, MetaDamaged: damaged, WrittenAt: resources.WrittenAt(cur), Edits: edits, Likely: likely}
}

// ownedMetadataDamaged: an ownership label no longer right, or an owned annotation gone or changed (own writes too).
func ownedMetadataDamaged(old, cur *appsv1.DaemonSet) bool {
	for k, v := range resources.OwnedLabels() {
		if old.Labels[k] == v && cur.Labels[k] != v {
			return true
		}
	}
	for _, k := range resources.OwnedAnnotations() {
		if v, had := old.Annotations[k]; had && cur.Annotations[k] != v {
			return true
		}
	}
	return false
}

func ownedMetadataMissing(ds *appsv1.DaemonSet) bool {
	for k, v := range resources.OwnedLabels() {
		if ds.Labels[k] != v {
			return true
		}
	}
	return slices.ContainsFunc(resources.OwnedAnnotations(), func(k string) bool { return ds.Annotations[k] == "" })
}

// maxTiedWriters bounds the writers named on a tie: a client can write thousands of entries with one crafted time.
const maxTiedWriters = 3

// entryKey makes a managedFields entry comparable; hasTime and hasFields tell a missing time or fields from zero ones.
type entryKey struct {
	manager, operation, subresource, apiVersion, fieldsType, fields string
	hasTime, hasFields                                              bool
	time                                                            int64
}

func keyOf(e *metav1.ManagedFieldsEntry) entryKey {
	k := entryKey{manager: e.Manager, operation: string(e.Operation), subresource: e.Subresource,
		apiVersion: e.APIVersion, fieldsType: e.FieldsType}
	if e.Time != nil {
		k.hasTime, k.time = true, e.Time.UnixNano()
	}
	if e.FieldsV1 != nil {
		k.hasFields, k.fields = true, string(e.FieldsV1.Raw)
	}
	return k
}

// changedBy names who changed old (nil: first sight) to cur: cur's newest other writers (the first maxTiedWriters on a
// tie) but none old had (Update leaves a remover none: unnamed beats misnamed); likely: the newest's manager, old or not.
func changedBy(old, cur *appsv1.DaemonSet) (newest []core.Edit, likely string) {
	var had map[entryKey]bool
	if old != nil && old.UID == cur.UID {
		had = make(map[entryKey]bool, len(old.ManagedFields))
		for i := range old.ManagedFields {
			had[keyOf(&old.ManagedFields[i])] = true
		}
	}
	var newestEntry *metav1.ManagedFieldsEntry
	for i := range cur.ManagedFields {
		e := &cur.ManagedFields[i]
		// Not the controller's, nor on the status subresource (the DaemonSet controller's counters), and timed.
		if e.Manager == resources.FieldManager || e.Subresource == "status" || e.Time == nil {
			continue
		}
		if newestEntry == nil || e.Time.After(newestEntry.Time.Time) {
			newestEntry = e
		}
		if len(newest) > 0 && e.Time.Time.Before(newest[0].Time) ||
			len(newest) >= maxTiedWriters && e.Time.Time.Equal(newest[0].Time) || had[keyOf(e)] {
			continue // the lookup last: the times decide as much, for less
		}
		if len(newest) == 0 || e.Time.After(newest[0].Time) {
			newest = newest[:0]
		}
		newest = append(newest, core.Edit{Manager: e.Manager, Operation: string(e.Operation), Time: e.Time.Time})
	}
	for i, w := range newest { // printable once, for the writers kept: a crafted object may have thousands
		newest[i].Manager, newest[i].Operation = resources.PrintableName(w.Manager), resources.PrintableName(w.Operation)
	}
	if newestEntry != nil {
		likely = resources.PrintableName(newestEntry.Manager)
	}
	return newest, likely
}

// repairManagers are the repairs_total label values of one repair (ObserveRepair counts a name given twice once).
func repairManagers(ws []core.Edit) []string {
	if len(ws) == 0 {
		return []string{metrics.UnknownManager}
	}
	out := make([]string, 0, len(ws))
	for _, w := range ws {
		out = append(out, w.Manager)
	}
	return out
}
