package resources

import (
	"maps"
	"slices"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
)

// IsOwnWrite reports whether the object uid at generation is (an older view of)
// what this manager wrote or adopted: the same object at a generation not newer
// than its last write there. Drift detection uses it to ignore the controller's
// own writes, including late events of objects it has since deleted or
// replaced; a recreated object has a new UID, so someone else's recreate is
// never "own".
func (m *Manager) IsOwnWrite(uid types.UID, generation int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.written(uid)
	return ok && generation <= o.generation
}

// written returns what this manager wrote to object uid, now or before; the
// caller holds m.mu.
func (m *Manager) written(uid types.UID) (ownedObject, bool) {
	if uid == "" {
		return ownedObject{}, false
	}
	if m.owned.uid == uid {
		return m.owned, true
	}
	for _, o := range m.past {
		if o.uid == uid {
			return o, true
		}
	}
	return ownedObject{}, false
}

// SpecHashAnnotation is the annotation library-go's resourceapply records the
// desired spec's hash in.
const SpecHashAnnotation = "operator.openshift.io/spec-hash"

// OwnedAnnotations are the annotations every write of the controller sets on
// the DaemonSet's metadata, sorted: the version, the spec hash, and the
// manifest's own (the capability it belongs to, the cluster profiles that
// include it). The apply puts back any of them that is missing or changed.
var OwnedAnnotations = sync.OnceValue(func() []string {
	keys := []string{VersionAnnotation, SpecHashAnnotation}
	if ds, err := parsedManifest(); err == nil {
		keys = append(keys, slices.Collect(maps.Keys(ds.Annotations))...)
	}
	slices.Sort(keys)
	return keys
})

// OwnedMetadata returns the values of the labels and annotations the manager
// owns on ds (an absent key maps to ""): the ownership labels and
// OwnedAnnotations. Someone else changing any of them is drift even though
// the generation does not move.
func OwnedMetadata(ds *appsv1.DaemonSet) map[string]string {
	out := map[string]string{}
	for k := range OwnedLabels() {
		out["label:"+k] = ds.Labels[k]
	}
	for _, k := range OwnedAnnotations() {
		out["annotation:"+k] = ds.Annotations[k]
	}
	return out
}

// IsOwnMetadata reports whether an update of object uid to resourceVersion
// rv, carrying owned metadata meta (from OwnedMetadata), needs no repair as
// drift: the object this manager wrote (now or before), either carrying
// exactly the owned metadata of its latest write there, or at a
// resourceVersion that one of its writes returned or overwrote (a re-list can
// show an older own write only after a later status update, and the event
// reaches the controller after its next write). Older owned values written
// back by someone else (a restore, a GitOps sync of an old version) are drift.
func (m *Manager) IsOwnMetadata(uid types.UID, rv string, meta map[string]string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.written(uid)
	return ok && (maps.Equal(o.meta, meta) || rv != "" && slices.Contains(o.versions, rv))
}

// Owns reports whether uid is the object this manager last wrote or adopted
// and has not deleted since; uid "" (an object not known by name) asks
// whether it owns one at all.
func (m *Manager) Owns(uid types.UID) bool {
	owned := m.ownedUID()
	return owned != "" && (uid == "" || uid == owned)
}

// ownedUID returns the UID of the object this manager last wrote or adopted,
// "" when none (before any write, and after a delete).
func (m *Manager) ownedUID() types.UID {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.owned.uid
}
