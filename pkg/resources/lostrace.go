package resources

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/openshift/library-go/pkg/operator/resource/resourcehelper"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

// Lost races: a write based on a stale cache ran into someone else's change
// (Conflict, NotFound, AlreadyExists), or into an object that cannot be
// updated into the desired one.

// ErrLostToAnotherWriter: an apply lost a race to another writer's change of
// the DaemonSet (its spec or owned metadata, a deletion, a new object), and
// did not write over it: that write would undo the change, a repair the
// caller's repair gate must decide on when the change reaches it as drift.
var ErrLostToAnotherWriter = errors.New("lost a race to another writer's change, left to the repair gate")

// lostToAnotherWriter: after a lost race, now (the object as read again)
// shows a change since before (what the last attempt found) that is not this
// manager's own: someone else's write, which the caller has not seen. A
// status update (the DaemonSet controller's) changes neither the generation
// nor the owned metadata. An attempt that found no object (a create that
// met AlreadyExists) has no change to compare with, and one being deleted
// is written to by no one: both go on as before.
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

// cacheCatchUp bounds the wait for the cache to show what a lost race ran
// into (usually another writer's change, such as the DaemonSet controller's
// status update, delivered within milliseconds) before reading the server.
const cacheCatchUp = time.Second

// catchUpPoll is how often that wait looks at the cache.
const catchUpPoll = 5 * time.Millisecond

// applyBackoff bounds the in-call retries of an apply that lost a race
// (Conflict, or AlreadyExists after a stale cache): 5 attempts, 10 ms
// doubling. Anything longer is the executor's rate-limited retry, which
// re-computes the desired state first. No jitter: one leader writes, and
// the race it loses is with the DaemonSet controller, which jitter would
// not spread; without it the model replays a run exactly.
const (
	applyAttempts     = 5
	applyFirstBackoff = 10 * time.Millisecond
)

func applyBackoff() wait.Backoff {
	return wait.Backoff{Steps: applyAttempts, Duration: applyFirstBackoff, Factor: 2}
}

// retryLostRaces runs attempt until it succeeds, fails other than by a lost
// race (isLostRace), or has lost m.backoff.Steps times, sleeping the
// backoff's step between attempts on the manager's clock.
func (m *Manager) retryLostRaces(ctx context.Context, attempt func() error) error {
	b := m.backoff
	for {
		err := attempt()
		if err == nil || !isLostRace(err) || b.Steps <= 1 || ctx.Err() != nil {
			return err
		}
		m.clock.Sleep(b.Step())
	}
}

// readAfterLostRace returns the DaemonSet after a write based on tried lost
// a race: from the cache once it shows something else than tried (another
// resourceVersion, another object, or none), else from the server.
func (m *Manager) readAfterLostRace(ctx context.Context, tried *appsv1.DaemonSet) (*appsv1.DaemonSet, error) {
	var fresh *appsv1.DaemonSet
	moved := func(context.Context) (bool, error) {
		cached, err := m.lister.DaemonSets(Namespace).Get(DaemonSetName)
		switch {
		case apierrors.IsNotFound(err):
			return tried != nil, nil // gone (an update lost to a delete)
		case err != nil:
			return false, nil
		case tried == nil || cached.UID != tried.UID || cached.ResourceVersion != tried.ResourceVersion:
			fresh = cached.DeepCopy()
			return true, nil
		}
		return false, nil
	}
	for waited := time.Duration(0); ctx.Err() == nil && waited < cacheCatchUp; waited += catchUpPoll {
		if ok, _ := moved(ctx); ok {
			break
		}
		m.clock.Sleep(catchUpPoll)
	}
	if caught, _ := moved(ctx); caught && (fresh == nil || !m.cacheBehind(fresh)) {
		return fresh, nil
	}
	return m.read(ctx, true)
}

// deleteReplaced deletes ds, an object someone else created that cannot be
// updated into the desired one, and only it: by UID precondition (a Conflict
// means another object holds the name, a lost race that the retry re-reads),
// letting the garbage collector delete its pods in the background. NotFound
// means it is gone already.
func (m *Manager) deleteReplaced(ctx context.Context, ds *appsv1.DaemonSet) error {
	uid := ds.UID
	err := m.client.AppsV1().DaemonSets(Namespace).Delete(ctx, DaemonSetName, metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: &uid},
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
	})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("replace object %s with another selector: delete: %w", uid, err)
	}
	resourcehelper.ReportDeleteEvent(m.recorder, ds, nil)
	return nil
}

// isImmutableSelector reports whether err is the API server's 422 Invalid
// for an update that changes spec.selector, and for nothing else: only then
// does a replace cure it.
func isImmutableSelector(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) {
		return false
	}
	details := status.Status().Details
	if details == nil || len(details.Causes) == 0 {
		return false
	}
	for _, c := range details.Causes {
		if c.Field != "spec.selector" {
			return false
		}
	}
	return true
}

// isLostRace reports the errors a fresh read fixes: Conflict (the object
// changed since it was read), AlreadyExists (the cache had not seen it) and
// NotFound (the cache had not seen it deleted).
func isLostRace(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err)
}
