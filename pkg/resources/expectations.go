package resources

import (
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ExpectationTimeout bounds how long an own write may stay unseen by the cache (usually milliseconds) before the server is read.
const ExpectationTimeout = 5 * time.Second

// ownedObject is one incarnation of the DaemonSet as this manager wrote it (a recreate restarts at generation 1).
type ownedObject struct {
	uid        types.UID
	generation int64
	meta       map[string]string // OwnedMetadata as last written or adopted
	// versions are the resourceVersions of the last few writes and of what each replaced: a watch event
	// of an older one (or of a status update a later write overwrote) can still arrive after a newer one.
	versions []string
}

const (
	maxOwnedVersions = 8 // the write history kept per object
	maxPast          = 4 // the objects kept after the manager moved on from them
)

// expectedGeneration returns the generation ApplyDaemonSet should expect of existing, and whether to adopt it.
func (m *Manager) expectedGeneration(existing *appsv1.DaemonSet) (int64, bool) {
	if existing == nil {
		return 0, false // library-go creates; the value is unused.
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.owned.uid != "" && m.owned.uid == existing.UID {
		return m.owned.generation, false
	}
	return -1, true // no generation matches: write.
}

// expectation returns a copy of the expected own write while the cache (cached, nil: nothing) lags behind it.
func (m *Manager) expectation(cached *appsv1.DaemonSet) *appsv1.DaemonSet {
	m.mu.Lock()
	defer m.mu.Unlock()
	exp := m.expected
	switch {
	case exp == nil:
		return nil
	case !m.clock.Now().Before(m.expectedUntil):
		m.expected = nil // timed out: read the server (cacheBehind) or trust the cache
		return nil
	case cached == nil:
		return exp.DeepCopy() // our create is not in the cache yet
	case cached.UID == exp.UID && cached.Generation < exp.Generation:
		return exp.DeepCopy() // our update is not in the cache yet
	default:
		m.expected = nil // shown, or another object holds the name: the cache knows better
		return nil
	}
}

// AwaitsOwnWrite reports whether an own write is still awaited in the cache; unlike Expecting, it ends none.
func (m *Manager) AwaitsOwnWrite() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.expected != nil && m.clock.Now().Before(m.expectedUntil)
}

// Expecting reports how long an own write may still be awaited in the cache; a timed-out one is due (0, true) once, then ended.
func (m *Manager) Expecting() (time.Duration, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.expected == nil {
		return 0, false
	}
	left := m.expectedUntil.Sub(m.clock.Now())
	if left <= 0 {
		m.expected = nil
		return 0, true
	}
	return left, true
}

// ObservedDeletion tells the manager that the informer saw object uid
// deleted, or ("") that a live read found none: the cache is to be believed.
func (m *Manager) ObservedDeletion(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.expected != nil && (uid == "" || m.expected.UID == uid) {
		m.expected = nil
	}
}

// cacheBehind reports whether cached predates this manager's last write to it.
func (m *Manager) cacheBehind(cached *appsv1.DaemonSet) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.owned.uid != "" && m.owned.uid == cached.UID && cached.Generation < m.owned.generation
}

// own records ds as written or adopted; replaced is what it replaced (nil: none).
func (m *Manager) own(ds, replaced *appsv1.DaemonSet) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var replacedRV string
	if replaced != nil && replaced.UID == ds.UID {
		replacedRV = replaced.ResourceVersion
	}
	m.record(ds.UID, ds.Generation, OwnedMetadata(ds), ds.ResourceVersion, replacedRV)
}

// record makes object uid at generation, meta and rv (replacing replacedRV, or "") the owned object; caller holds m.mu.
func (m *Manager) record(uid types.UID, generation int64, meta map[string]string, rv, replacedRV string) {
	m.unanswered = nil // this write answered, or is the one that did not
	if m.owned.uid != uid {
		m.retire()
		m.owned = ownedObject{uid: uid}
	}
	m.owned.generation = generation
	m.owned.meta = meta
	m.owned.addVersion(replacedRV)
	m.owned.addVersion(rv)
}

func (o *ownedObject) addVersion(rv string) {
	if rv != "" && !slices.Contains(o.versions, rv) {
		o.versions = append(o.versions, rv)
		o.versions = o.versions[max(len(o.versions)-maxOwnedVersions, 0):]
	}
}

// retire moves the owned object to the past; caller holds m.mu.
func (m *Manager) retire() {
	if m.owned.uid != "" {
		m.past = append(m.past, m.owned)
		m.past = m.past[max(len(m.past)-maxPast, 0):]
	}
}

func (m *Manager) disown() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.retire()
	m.owned, m.expected = ownedObject{}, nil
}
