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

// observation is one candidate drift. The event-time own-write check can lose a
// race (the watch event may arrive before the writer recorded its write), so the
// controller checks UID and generation again when it drains, after its own
// apply has returned. expected marks the deletion of an object already known to
// be gone: it was counted (or was the controller's own) when it became known.
type observation struct {
	kind       DriftKind
	uid        types.UID
	generation int64
	expected   bool
	meta       map[string]string // owned metadata seen, for DriftMetadata
	version    string            // the resourceVersion seen, for DriftMetadata
	// writers made the change, from the event's managedFields (changedBy);
	// none for a deletion, which leaves nothing to read.
	writers []writer
	// likely is the object's newest manager other than the controller
	// (newestOtherManager), for a change no entry records: the API server
	// keeps managedFields times to the second, so a writer's second write
	// within a second leaves its entry as it was.
	likely string
}

// classifyUpdate decides whether an update is someone else's change. Status-only
// updates keep the generation and the owned metadata, and are ignored; so is
// a spec at a generation the controller wrote (own is true for it). One
// update can fold the controller's spec write and someone's metadata change
// at the same generation (a re-list, a live read while the watch is broken),
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

// ownedMetadataDamaged: an ownership label that is no longer right, or an owned
// annotation that was there and is now gone or different. The controller's own
// writes (a new version, a new spec's hash) look the same here; it tells them apart when
// it drains (Manager.IsOwnMetadata).
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

// ownedMetadataMissing: ds lacks an ownership label, or an owned annotation,
// that the controller writes on every object it writes.
func ownedMetadataMissing(ds *appsv1.DaemonSet) bool {
	for k, v := range resources.OwnedLabels() {
		if ds.Labels[k] != v {
			return true
		}
	}
	return slices.ContainsFunc(resources.OwnedAnnotations(), func(k string) bool { return ds.Annotations[k] == "" })
}

// writer is a field manager that changed the DaemonSet, as the object's
// metadata.managedFields says: its name (sanitized), operation and time.
type writer struct {
	manager   string
	operation string
	time      time.Time
}

func (w writer) String() string {
	return fmt.Sprintf("%s (%s at %s)", w.manager, w.operation, w.time.UTC().Format(time.RFC3339))
}

// maxTiedWriters bounds the writers one change names when their entries tie
// on time: a client may write managedFields itself, and thousands of entries
// with one crafted time would otherwise all be named, each an writer of the
// streak and of repairs_total. The first ones, in managedFields order, are
// kept.
const maxTiedWriters = 3

// entryKey is what tells two managedFields entries apart, as comparable
// values: an entry of old with the same key is the same entry. The raw
// FieldsV1 bytes stand for the fields; hasTime and hasFields tell a missing
// time or field set from a zero one.
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

// changedBy returns who made the change from old to cur: among cur's
// managedFields entries that are not ours and not on the status subresource
// (the DaemonSet controller's counters), the newest, the first
// maxTiedWriters of them on a tie. An entry old already had as it is did not
// record this change (a removal under Update leaves the remover no entry), so
// it names no one: better unnamed than a wrong name. old is nil for an object
// seen for the first time. It reads only the watch event's objects, on the
// informer's goroutine, for objects that may carry some 10,000 entries: old's
// entries are looked up in a set, not searched.
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

// byOtherWriter: e is an entry of someone other than the controller, not on
// the status subresource (the DaemonSet controller's counters), with a time.
func byOtherWriter(e *metav1.ManagedFieldsEntry) bool {
	return e.Manager != resources.FieldManager && e.Subresource != "status" && e.Time != nil
}

// newestOtherManager is the manager of ds's newest managedFields entry that
// is not the controller's nor on the status subresource (the first on a
// tie), printable; "" when none.
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

// repairManagers are the repairs_total label values of one repair: each
// writer named, or one unknown.
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
	// likely are, for the unnamed part, the newest other manager of each
	// object changed ("" for none, and for a deletion): the repair gate's
	// guess of whose streak it continues, never a name shown.
	likely []string
	gone   bool // an expected deletion (own, or in a state without the DaemonSet)
}

// ownership tells the controller's own writes apart (resources.Manager).
type ownership interface {
	Owns(uid types.UID) bool
	IsOwnWrite(uid types.UID, generation int64) bool
	IsOwnMetadata(uid types.UID, resourceVersion string, meta map[string]string) bool
}

// classifyDrain decides which observations are someone else's drift, now,
// after the controller's own writes have returned: an own write whose watch
// event beat its bookkeeping is not drift. ds is the DaemonSet the view
// shows (nil: none); deletedByUs tells the controller's own deletes.
//   - a spec change is drift unless it is an own generation;
//   - a metadata change is drift unless it carries exactly the owned
//     metadata last written (a removed label never does), or the object
//     the view shows carries the controller's own again;
//   - a change of an object since gone, or being deleted, is not: its
//     deletion is the drift;
//   - a deletion is drift unless expected, own, of an object the
//     controller no longer owns (replaced, deleted), or the state wants
//     none.
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
			// Only the deletion of the object the controller owns is
			// outstanding: one it has since replaced, deleted or given up
			// (a later own write or delete) needs no repair.
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
