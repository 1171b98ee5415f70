package resources

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/openshift/library-go/pkg/operator/resource/resourcehelper"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

// ErrLostToAnotherWriter is returned by an apply that lost a race to another writer's change: undoing it is for the repair gate.
var ErrLostToAnotherWriter = errors.New("lost a race to another writer's change, left to the repair gate")

// lostToAnotherWriter reports whether now (read again after a lost race) shows a change since before (the last
// attempt's read) not this manager's (a status update is none); without before, or with now being deleted, none.
func (m *Manager) lostToAnotherWriter(before, now *appsv1.DaemonSet) bool {
	switch {
	case before == nil || now != nil && now.DeletionTimestamp != nil:
		return false
	case now == nil || now.UID != before.UID:
		return true
	case now.Generation != before.Generation && !m.IsOwnWrite(now.UID, now.Generation):
		return true
	}
	meta := OwnedMetadata(now)
	return !maps.Equal(OwnedMetadata(before), meta) && !m.IsOwnMetadata(now.UID, now.ResourceVersion, meta)
}

// cacheCatchUp bounds the wait, polling every catchUpPoll, for the cache to show what a lost
// race ran into (usually within milliseconds); applyAttempts bounds an apply's attempts.
const cacheCatchUp, catchUpPoll, applyAttempts = time.Second, 5 * time.Millisecond, 5

// retryLostRaces runs attempt until it succeeds, fails other than by a lost race, or has lost applyAttempts times,
// sleeping on the manager's clock. No jitter: it would not spread the DaemonSet controller, and the model replays exactly.
func (m *Manager) retryLostRaces(ctx context.Context, attempt func() error) error {
	b := wait.Backoff{Steps: applyAttempts, Duration: 10 * time.Millisecond, Factor: 2}
	for {
		err := attempt()
		lostRace := apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err) // a fresh read fixes
		if !lostRace || b.Steps <= 1 || ctx.Err() != nil {
			return err
		}
		m.clock.Sleep(b.Step())
	}
}

// readAfterLostRace returns the DaemonSet after a write based on tried lost a
// race: from the cache once it shows other than tried, else from the server.
func (m *Manager) readAfterLostRace(ctx context.Context, tried *appsv1.DaemonSet) (*appsv1.DaemonSet, error) {
	for waited := time.Duration(0); ; waited += catchUpPoll {
		cached, err := m.lister.DaemonSets(Namespace).Get(DaemonSetName)
		switch {
		case apierrors.IsNotFound(err):
			if tried != nil {
				return nil, nil // gone (an update lost to a delete)
			}
		case err != nil:
		case tried == nil || cached.UID != tried.UID || cached.ResourceVersion != tried.ResourceVersion:
			if m.cacheBehind(cached) {
				return m.read(ctx, true)
			}
			return cached.DeepCopy(), nil
		}
		if ctx.Err() != nil || waited >= cacheCatchUp {
			return m.read(ctx, true)
		}
		m.clock.Sleep(catchUpPoll)
	}
}

// deleteReplaced deletes ds, someone else's object no update makes ours, by UID precondition (a
// Conflict is a lost race); the garbage collector removes its pods, which our selector would not match.
func (m *Manager) deleteReplaced(ctx context.Context, ds *appsv1.DaemonSet) error {
	err := m.client.AppsV1().DaemonSets(Namespace).Delete(ctx, DaemonSetName, metav1.DeleteOptions{
		Preconditions:     metav1.NewUIDPreconditions(string(ds.UID)),
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
	})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("replace object %s with another selector: delete: %w", ds.UID, err)
	}
	resourcehelper.ReportDeleteEvent(m.recorder, ds, nil)
	return nil
}

// isImmutableSelector reports whether err is a 422 Invalid for spec.selector alone, which a replace cures.
func isImmutableSelector(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	causes := status.Status().Details.Causes
	return len(causes) > 0 && !slices.ContainsFunc(causes, func(c metav1.StatusCause) bool { return c.Field != "spec.selector" })
}
