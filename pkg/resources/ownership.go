package resources

import appsv1 "k8s.io/api/apps/v1"

// IsOwnWrite reports whether ds is (an older view of) what this manager last
// wrote or adopted: the same object (UID) at a generation not newer than that
// write. Drift detection uses it to ignore the controller's own writes; a
// recreated object has a new UID, so someone else's recreate is never "own".
func (m *Manager) IsOwnWrite(ds *appsv1.DaemonSet) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.owned.uid != "" && ds.UID == m.owned.uid && ds.Generation <= m.owned.generation
}
