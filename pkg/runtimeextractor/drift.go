package runtimeextractor

import (
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/pkg/metrics"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
)

// DriftKind classifies an external change of the managed DaemonSet.
type DriftKind string

// The drift kinds (the values of the drift_events_total metric's kind label).
const (
	// DriftModified: the spec changed (metadata.generation moved) or the object appeared.
	DriftModified DriftKind = "modified"
	// DriftDeleted: the object was deleted.
	DriftDeleted DriftKind = "deleted"
	// DriftMetadata: an owned label or annotation was removed or changed; the
	// generation does not move for those, so the generation filter alone misses them.
	DriftMetadata DriftKind = "metadata"
)

// observation is one candidate drift. The event-time own-write check can lose
// a race (the event may arrive before the writer recorded its write), so the
// drain checks again, after the controller's own apply has returned.
type observation struct {
	kind       DriftKind
	uid        types.UID
	generation int64
	// expected: the deletion of an object already known gone, counted (or
	// the controller's own) when that became known.
	expected bool
	meta     map[string]string // owned metadata seen, for DriftMetadata
	version  string            // the resourceVersion seen, for DriftMetadata
	writers  []writer          // from the event's managedFields; none for a deletion
	// likely is the newest other manager (newestOtherManager), for a change
	// no entry records: the API server keeps managedFields times to the
	// second, so a second write within a second leaves the entry as it was.
	likely string
}

// classifyUpdate decides whether an update is someone else's change: not a
// status update, nor a spec the controller wrote (own). One update can fold an
// own spec write and someone's metadata change (a re-list, a live read),
// so the owned metadata is checked on that path too; the drain tells an own
// write's new metadata apart (Manager.IsOwnMetadata).
func classifyUpdate(old, cur *appsv1.DaemonSet, own bool) (DriftKind, bool) {
	if (old.UID != cur.UID || cur.Generation != old.Generation) && !own {
		return DriftModified, true
	}
	if ownedMetadataDamaged(old, cur) {
		return DriftMetadata, true
	}
	return "", false
}

// ownedMetadataDamaged: an ownership label no longer right, or an owned
// annotation gone or changed (by an own write's new version or hash too).
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

// ownedMetadataMissing: ds lacks owned metadata the controller always writes.
func ownedMetadataMissing(ds *appsv1.DaemonSet) bool {
	for k, v := range resources.OwnedLabels() {
		if ds.Labels[k] != v {
			return true
		}
	}
	return slices.ContainsFunc(resources.OwnedAnnotations(), func(k string) bool { return ds.Annotations[k] == "" })
}

// writer is a field manager that changed the DaemonSet, from managedFields.
type writer struct {
	manager   string
	operation string
	time      time.Time
}

func (w writer) String() string {
	return fmt.Sprintf("%s (%s at %s)", w.manager, w.operation, w.time.UTC().Format(time.RFC3339))
}

// maxTiedWriters bounds the writers named when entries tie on time: a client
// may write managedFields itself, and thousands of entries with one crafted
// time would all be named (in the streak and repairs_total).
const maxTiedWriters = 3

// entryKey makes a managedFields entry comparable; hasTime and hasFields tell
// a missing time or field set from a zero one.
type entryKey struct {
	manager, operation, subresource, apiVersion, fieldsType string
	hasTime                                                 bool
	time                                                    int64
	hasFields                                               bool
	fields                                                  string
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

// changedBy names who changed old (nil: first sight) to cur: the newest of
// cur's other writers' entries, the first maxTiedWriters on a tie. An entry
// old already had did not record this change (a removal under Update leaves
// the remover none): better unnamed than wrongly named. It runs on the
// informer's goroutine for up to some 10,000 entries, hence the set.
func changedBy(old, cur *appsv1.DaemonSet) []writer {
	var had map[entryKey]struct{}
	if old != nil && old.UID == cur.UID {
		had = make(map[entryKey]struct{}, len(old.ManagedFields))
		for i := range old.ManagedFields {
			had[keyOf(&old.ManagedFields[i])] = struct{}{}
		}
	}
	var newest []writer
	for i := range cur.ManagedFields {
		e := &cur.ManagedFields[i]
		if !byOtherWriter(e) {
			continue
		}
		switch {
		case len(newest) > 0 && e.Time.Time.Before(newest[0].time):
			continue // decides as much as the lookup, for less
		case len(newest) >= maxTiedWriters && e.Time.Time.Equal(newest[0].time):
			continue
		}
		if _, ok := had[keyOf(e)]; ok {
			continue
		}
		w := writer{manager: resources.PrintableName(e.Manager), operation: resources.PrintableName(string(e.Operation)), time: e.Time.Time}
		if len(newest) == 0 || w.time.After(newest[0].time) {
			newest = newest[:0]
		}
		newest = append(newest, w)
	}
	return newest
}

// byOtherWriter: not the controller's, nor on the status subresource (the
// DaemonSet controller's counters), and timed.
func byOtherWriter(e *metav1.ManagedFieldsEntry) bool {
	return e.Manager != resources.FieldManager && e.Subresource != "status" && e.Time != nil
}

// newestOtherManager: the manager of ds's newest byOtherWriter entry (the
// first on a tie), or "".
func newestOtherManager(ds *appsv1.DaemonSet) string {
	var newest *metav1.ManagedFieldsEntry
	for i := range ds.ManagedFields {
		e := &ds.ManagedFields[i]
		if !byOtherWriter(e) {
			continue
		}
		if newest == nil || e.Time.After(newest.Time.Time) {
			newest = e
		}
	}
	if newest == nil {
		return ""
	}
	return resources.PrintableName(newest.Manager)
}

// mergeWriters adds ws to the writers of one repair, one per manager and
// operation at its newest time, newest first.
func mergeWriters(into, ws []writer) []writer {
	for _, w := range ws {
		i := slices.IndexFunc(into, func(x writer) bool { return x.manager == w.manager && x.operation == w.operation })
		switch {
		case i < 0:
			into = append(into, w)
		case w.time.After(into[i].time):
			into[i] = w
		}
	}
	slices.SortStableFunc(into, func(a, b writer) int { return b.time.Compare(a.time) })
	return into
}

// repairManagers are the repairs_total label values of one repair.
func repairManagers(ws []writer) []string {
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

// drain is what one drain of the informer's observations found.
type drain struct {
	kinds   []DriftKind // someone else's drift, each kind once, in order seen
	writers []writer    // who made it, from managedFields
	unnamed bool        // some of it no managedFields entry names
	// likely: for the unnamed part, the newest other manager of each object
	// changed: the repair gate's guess of whose streak it continues, never shown.
	likely []string
	gone   bool // an expected deletion (own, or in a state without the DaemonSet)
}

// ownership tells the controller's own writes apart (resources.Manager).
type ownership interface {
	Owns(uid types.UID) bool
	IsOwnWrite(uid types.UID, generation int64) bool
	IsOwnMetadata(uid types.UID, resourceVersion string, meta map[string]string) bool
}

// classifyDrain decides which observations are someone else's drift, now that
// the controller's own writes have returned (an own write's event may beat its
// bookkeeping). ds is the DaemonSet the view shows (nil: none); a change of an
// object since gone or being deleted is not drift: its deletion is.
func classifyDrain(obs []observation, ds *appsv1.DaemonSet, own ownership, state fsm.State, deletedByUs func(types.UID) bool) drain {
	var d drain
	for _, o := range obs {
		switch o.kind {
		case DriftModified, DriftMetadata:
			if ds == nil || ds.UID != o.uid || ds.DeletionTimestamp != nil {
				continue
			}
			if o.kind == DriftModified && own.IsOwnWrite(o.uid, o.generation) ||
				o.kind == DriftMetadata && own.IsOwnMetadata(o.uid, o.version, o.meta) {
				continue
			}
			// A metadata change the object the view shows no longer carries
			// was undone since, by a write of the controller's.
			if o.kind == DriftMetadata && own.IsOwnMetadata(ds.UID, ds.ResourceVersion, resources.OwnedMetadata(ds)) {
				continue
			}
		case DriftDeleted:
			// Only the object the controller still owns needs repair, not
			// one it has since replaced, deleted or given up.
			if o.expected || deletedByUs(o.uid) || !state.Enabled() || !own.Owns(o.uid) {
				d.gone = true
				continue
			}
		}
		switch {
		case o.kind == DriftDeleted: // nothing to read: no one is named, no one guessed
			d.likely = append(d.likely, "")
		case len(o.writers) == 0:
			d.unnamed = true
			d.likely = append(d.likely, o.likely)
		default:
			d.writers = mergeWriters(d.writers, o.writers)
		}
		if !slices.Contains(d.kinds, o.kind) {
			d.kinds = append(d.kinds, o.kind)
		}
	}
	return d
}
