package resources

import (
	"context"
	"fmt"

	"github.com/openshift/library-go/pkg/operator/resource/resourcehelper"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Delete deletes the DaemonSet and returns the UID it removed ("" for none), by UID precondition
// only the one meant: the cached one, else this manager's write the cache may not show yet; if the
// server holds another of that name (recreated behind the cache), one live read names it and that
// one is deleted. When the cache shows nothing and the manager wrote nothing, no request is sent.
func (m *Manager) Delete(ctx context.Context) (types.UID, error) {
	m.ObservedDeletion("") // the object is to go: no write of it is awaited any more
	var target types.UID
	cached, err := m.lister.DaemonSets(Namespace).Get(DaemonSetName)
	switch {
	case err == nil:
		target = cached.UID
	case apierrors.IsNotFound(err):
		if target = m.ownedUID(); target == "" {
			return "", nil
		}
	default:
		return "", fmt.Errorf("delete daemonset %s/%s: read cache: %w", Namespace, DaemonSetName, err)
	}
	daemonSets := m.client.AppsV1().DaemonSets(Namespace)
	for attempt := 1; ; attempt++ {
		err := daemonSets.Delete(ctx, DaemonSetName, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(target))})
		switch {
		case err == nil:
			m.disown()
			resourcehelper.ReportDeleteEvent(m.recorder, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: DaemonSetName}}, nil)
			return target, nil
		case apierrors.IsNotFound(err):
			m.disown()
			return "", nil
		case apierrors.IsConflict(err) && attempt < 3:
			// The UID precondition failed: another object holds the name.
			live, err := daemonSets.Get(ctx, DaemonSetName, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				m.disown()
				return "", nil
			}
			if err != nil {
				return "", fmt.Errorf("delete daemonset %s/%s: get: %w", Namespace, DaemonSetName, err)
			}
			target = live.UID
		default:
			return "", fmt.Errorf("delete daemonset %s/%s: %w", Namespace, DaemonSetName, err)
		}
	}
}
