package resources

import "k8s.io/apimachinery/pkg/types"

// IsOwnWrite reports whether the object uid at generation is (an older view of)
// what this manager last wrote or adopted: the same object at a generation not
// newer than that write. Drift detection uses it to ignore the controller's own
// writes; a recreated object has a new UID, so someone else's recreate is never
// "own".
func (m *Manager) IsOwnWrite(uid types.UID, generation int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.owned.uid != "" && uid == m.owned.uid && generation <= m.owned.generation
}
