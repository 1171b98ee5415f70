package resources

import (
	"maps"
	"slices"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
)

// IsOwnWrite reports whether object uid at generation is (an older view of) what this manager
// wrote or adopted, also since deleted or replaced; someone else's recreate has a new UID.
func (m *Manager) IsOwnWrite(uid types.UID, generation int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.written(uid)
	return ok && generation <= o.generation
}

// written returns what this manager wrote to uid, now or before (past holds no ""); caller holds m.mu.
func (m *Manager) written(uid types.UID) (ownedObject, bool) {
	if m.owned.uid == uid && uid != "" {
		return m.owned, true
	}
	if i := slices.IndexFunc(m.past, func(o ownedObject) bool { return o.uid == uid }); i >= 0 {
		return m.past[i], true
	}
	return ownedObject{}, false
}

// SpecHashAnnotation is where library-go's resourceapply records the spec's hash.
const SpecHashAnnotation = "operator.openshift.io/spec-hash"

// OwnedAnnotations are the annotations every write sets, sorted: version, spec hash, the manifest's own.
var OwnedAnnotations = sync.OnceValue(func() []string {
	keys := []string{VersionAnnotation, SpecHashAnnotation}
	if ds, err := parsedManifest(); err == nil {
		keys = append(keys, slices.Collect(maps.Keys(ds.Annotations))...)
	}
	slices.Sort(keys)
	return keys
})

// OwnedMetadata maps ds's OwnedLabels and OwnedAnnotations to their values ("" when absent):
// a change of one by someone else is drift, though the generation does not move.
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

// IsOwnMetadata reports whether an update of uid to resourceVersion rv with OwnedMetadata meta is not drift: meta is
// this manager's latest write's, or rv one its writes returned or overwrote. Older values written back are drift.
func (m *Manager) IsOwnMetadata(uid types.UID, rv string, meta map[string]string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.written(uid)
	return ok && (maps.Equal(o.meta, meta) || rv != "" && slices.Contains(o.versions, rv))
}

// Owns reports whether uid is the object this manager last wrote or adopted
// and has not deleted since; uid "" asks whether it owns one at all.
func (m *Manager) Owns(uid types.UID) bool {
	owned := m.ownedUID()
	return owned != "" && (uid == "" || uid == owned)
}

func (m *Manager) ownedUID() types.UID { // "" before any write and after a delete
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.owned.uid
}
