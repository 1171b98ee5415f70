package resources

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	"github.com/openshift/library-go/pkg/operator/events"
	"github.com/openshift/library-go/pkg/operator/resource/resourceapply"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/utils/clock"
)

// Result describes one apply.
type Result struct {
	// Generation is the DaemonSet's metadata.generation after the apply.
	Generation int64
	// Changed is true when the apply created or updated the DaemonSet.
	Changed bool
	// Created is true when the apply created the DaemonSet.
	Created bool
	// Rolls is true when the apply created the DaemonSet or moved its
	// generation (its spec changed), so its pods roll; a metadata-only repair
	// changes without rolling.
	Rolls bool
	// Object is the DaemonSet after the apply.
	Object *appsv1.DaemonSet
	// Restored names the spec fields the apply changed on the object it
	// replaced, which for a repair is what it put back ("container extractor
	// image", "removed container sidecar", "tolerations", "spec" for any
	// other spec field): nil unless it changed an existing object's spec. It
	// is computed from the object the write really replaced, which after a
	// lost race is the one read again, not the one the caller saw.
	Restored []string
	// TLSMoved names the TLS profile kube-rbac-proxy moves to when the apply
	// changed its TLS arguments on an existing object ("Modern,
	// --tls-min-version=VersionTLS13", "kept while unknown, ..."); "" when
	// they stay, when the apply created the object or changed nothing, or
	// when the replaced object's arguments were unreadable.
	TLSMoved string
	// Replaced is the UID of an object someone else created that the apply
	// deleted before it created the DaemonSet, because it could not be
	// updated into the desired one; ReplacedBecause says why. It is set on
	// error too, when the delete went through and the create did not.
	Replaced        types.UID
	ReplacedBecause string
	// Unanswered is true, with an error, when the apply's write got no
	// answer: it may have been made (ClaimUnanswered recognises its
	// object).
	Unanswered bool
}

// Manager creates, updates and deletes the runtime extractor DaemonSet.
// It reads through an informer lister, so an apply or delete that finds
// nothing to do sends no API request at all.
//
// It implements the seed's ResourceManager (ApplyRuntimeExtractorResources,
// DeleteRuntimeExtractorResources, ResourcesExists) and, for the state
// machine's executor, Apply/Delete with their outcome.
type Manager struct {
	client   kubernetes.Interface
	lister   appslisters.DaemonSetLister
	recorder events.Recorder
	base     Desired
	backoff  wait.Backoff

	mu sync.Mutex
	// owned is the object this manager last wrote, or adopted as already
	// desired: its generation is the expected generation of the next apply.
	owned ownedObject
	// past are objects it wrote before (since deleted or replaced): late
	// watch events of those writes are still its own.
	past []ownedObject
	// expected is the object as this manager's last create or spec update
	// returned it, until the cache shows it (or its deletion is observed, or
	// ExpectationTimeout passes). Meanwhile the cache is behind our own write,
	// and an apply compares against this instead of writing again or reading
	// the server: the ControllerExpectations pattern, for one object.
	expected      *appsv1.DaemonSet
	expectedUntil time.Time
	// unanswered is the write in flight, or the last one sent without an
	// answer, until its object is seen (ClaimUnanswered) or a later write
	// answers.
	unanswered *unansweredWrite
	// clock times the expectations, the lost races' backoff and the wait
	// for the cache to catch up.
	clock clock.Clock

	// required is the DaemonSet built for the Desired whose JSON is
	// requiredKey, with library-go's spec-hash annotation: building and
	// hashing it cost more than the rest of a repair before its write, and
	// its inputs rarely change. Never modified once built (library-go copies
	// what it writes). The key is a copy by value: Desired holds pointers.
	required    *appsv1.DaemonSet
	requiredKey string
}

// ManagerOption configures a Manager.
type ManagerOption func(*Manager)

// WithClock sets the clock the manager waits and times its expectations on
// (default: the real clock). A controller passes the clock of its loop, so
// that one clock times everything it does.
func WithClock(c clock.Clock) ManagerOption { return func(m *Manager) { m.clock = c } }

// NewManager returns a Manager. lister must come from an informer that
// watches the DaemonSet's namespace (its cache is never written here);
// base is the desired state the seed's ResourceManager methods apply.
func NewManager(client kubernetes.Interface, lister appslisters.DaemonSetLister, recorder events.Recorder, base Desired, opts ...ManagerOption) *Manager {
	m := &Manager{
		client:   client,
		lister:   lister,
		recorder: recorder,
		base:     base,
		backoff:  applyBackoff(),
		clock:    clock.RealClock{},
	}
	for _, o := range opts {
		o(m)
	}
	return m
}

// Apply makes the DaemonSet match d with library-go's ApplyDaemonSet.
//
// ApplyDaemonSet writes when the metadata it owns differs (the spec-hash
// annotation stands for the spec) or when the object's generation is not
// the expected one. The expected generation is that of this manager's last
// write, so a drift that bumped the generation is corrected and an
// unchanged desired state writes nothing.
//
// An object this manager did not write (after a restart, or one recreated by
// someone else) is adopted only when it provably equals the desired one: it
// gets one UPDATE with the whole desired spec, which the API server stores
// only if something differs, additions included. An untouched object thus
// costs one request and no write (its resourceVersion stays, so no pod
// rolls); an edited one is repaired by the same request. The spec-hash
// annotation proves nothing here (whoever edits the spec may keep it), and
// managedFields would not either: any client may write under our field
// manager's name, and an object first written by another manager (the host
// operator's own controller) could never be adopted.
//
// An object someone else created with another selector cannot be adopted:
// spec.selector is immutable, and the UPDATE gets 422 Invalid on that field
// alone. That object is deleted, with a precondition on its UID and
// background propagation (the garbage collector removes its pods, which the
// new selector would not match), and the DaemonSet is created anew. If a
// finalizer holds the old object, the create runs into it (AlreadyExists), a
// fresh read shows it being deleted, and the apply after its deletion event
// creates. An object this manager wrote is never deleted this way.
//
// The first attempt reads the lister; a retry after a Conflict, NotFound or
// AlreadyExists (a stale cache) waits for the cache to show what the write ran
// into, and reads the API server only if it does not within cacheCatchUp.
// Every retry after a second lost race reads the API server. A retry that
// finds another writer's change (ErrLostToAnotherWriter) writes nothing: its
// repair is the caller's repair gate's to decide.
// library-go's Event (to the log) is recorded only when the DaemonSet was
// created or updated.
func (m *Manager) Apply(ctx context.Context, d Desired) (Result, error) {
	required, err := m.requiredFor(d)
	if err != nil {
		return Result{}, fmt.Errorf("apply daemonset: %w", err)
	}

	var (
		result Result
		tried  *appsv1.DaemonSet // what the last attempt found; nil before it, or none
		lost   int               // lost races so far
		// replaced is the object deleted to be replaced (deleteReplaced),
		// because why; reported only with the create that follows.
		replaced types.UID
		because  string
		attempt  = &writeAttempt{m: m}
	)
	err = m.retryLostRaces(ctx, func() error {
		var existing *appsv1.DaemonSet
		var err error
		attempt.at = time.Time{}
		switch lost {
		case 0:
			existing, err = m.read(ctx, false)
		case 1:
			existing, err = m.readAfterLostRace(ctx, tried)
		default:
			// Lost twice: the cache is behind a stream of writes (the
			// DaemonSet controller's status updates during a rollout), and
			// its next copy would lose again.
			existing, err = m.read(ctx, true)
		}
		lost++
		if err != nil {
			return err
		}
		if lost > 1 && m.lostToAnotherWriter(tried, existing) {
			return ErrLostToAnotherWriter
		}
		tried = existing
		if existing != nil && existing.DeletionTimestamp != nil {
			// Being deleted: a write would be lost with it. Its deletion event
			// follows, and the apply after it creates the DaemonSet anew.
			result = Result{Generation: existing.Generation, Object: existing}
			return nil
		}
		expected, adopting := m.expectedGeneration(existing)
		client := prefetchedDaemonSets{
			getter:   m.client.AppsV1(),
			existing: existing,
			attempt:  attempt,
		}
		// ApplyDaemonSet is SetSpecHashAnnotation and then this; required
		// carries the annotation already (requiredFor).
		actual, changed, err := resourceapply.ApplyDaemonSetWithForce(ctx, client, writeEventsOnly{m.recorder}, required, expected, false)
		if adopting && isImmutableSelector(err) {
			// Someone else's object, with another selector: no update makes
			// it ours. Delete exactly it, then create.
			if err := m.deleteReplaced(ctx, existing); err != nil {
				return err
			}
			replaced = existing.UID
			because = fmt.Sprintf("the selector %s is immutable and not ours (%s)",
				metav1.FormatLabelSelector(existing.Spec.Selector), metav1.FormatLabelSelector(required.Spec.Selector))
			existing, client.existing = nil, nil
			actual, changed, err = resourceapply.ApplyDaemonSetWithForce(ctx, client, writeEventsOnly{m.recorder}, required, 0, false)
		}
		if err != nil {
			return err
		}
		if changed && existing != nil && actual.UID == existing.UID && actual.ResourceVersion == existing.ResourceVersion {
			changed = false // the server found nothing to change: adopted
		}
		if changed || adopting {
			m.own(actual, existing)
		}
		rolls := changed && (existing == nil || existing.UID != actual.UID || existing.Generation != actual.Generation)
		if rolls {
			m.expect(actual)
		}
		created := changed && (existing == nil || existing.UID != actual.UID)
		result = Result{Generation: actual.Generation, Changed: changed, Created: created, Rolls: rolls, Object: actual}
		if changed && !created {
			// existing is what this attempt wrote over: after a lost race it
			// is the re-read object, which the caller never saw.
			result.Restored = restoredFields(existing, actual)
			result.TLSMoved = tlsMove(existing, &d)
		}
		if created && replaced != "" {
			result.Replaced, result.ReplacedBecause = replaced, because
		}
		return nil
	})
	if err != nil {
		// The delete of a replaced object may have gone through before the
		// create failed: the caller must still know that it deleted it.
		unanswered := !attempt.at.IsZero() && mayHaveWritten(err)
		m.answered(unanswered)
		return Result{Replaced: replaced, ReplacedBecause: because, Unanswered: unanswered}, fmt.Errorf("apply daemonset %s/%s: %w", Namespace, DaemonSetName, err)
	}
	m.answered(false)
	return result, nil
}

// Current returns the DaemonSet as the informer cache has it (a copy).
func (m *Manager) Current() (*appsv1.DaemonSet, bool) {
	ds, err := m.lister.DaemonSets(Namespace).Get(DaemonSetName)
	if err != nil {
		return nil, false
	}
	return ds.DeepCopy(), true
}

// ApplyRuntimeExtractorResources applies the base desired state with the
// given TLS profile (the seed's ResourceManager).
func (m *Manager) ApplyRuntimeExtractorResources(ctx context.Context, tlsProfile *configv1.TLSSecurityProfile) error {
	d := m.base
	d.TLSProfile = tlsProfile
	_, err := m.Apply(ctx, d)
	return err
}

// DeleteRuntimeExtractorResources deletes the DaemonSet (the seed's
// ResourceManager).
func (m *Manager) DeleteRuntimeExtractorResources(ctx context.Context) error {
	_, err := m.Delete(ctx)
	return err
}

// ResourcesExists reports whether the informer cache holds the DaemonSet
// (the seed's ResourceManager). It sends no API request.
func (m *Manager) ResourcesExists(_ context.Context) bool {
	_, ok := m.Current()
	return ok
}

// read returns the existing DaemonSet or nil. It reads the lister, or the
// object of an own write the cache has not shown yet (see expected). It GETs
// from the API server when live is set, or when the cache is behind an own
// write that is no longer expected.
func (m *Manager) read(ctx context.Context, live bool) (*appsv1.DaemonSet, error) {
	if !live {
		cached, err := m.lister.DaemonSets(Namespace).Get(DaemonSetName)
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("read cache: %w", err)
		}
		if err != nil {
			cached = nil
		}
		if exp := m.expectation(cached); exp != nil {
			return exp, nil
		}
		switch {
		case cached == nil:
			return nil, nil
		case !m.cacheBehind(cached):
			return cached.DeepCopy(), nil
		}
	}
	ds, err := m.client.AppsV1().DaemonSets(Namespace).Get(ctx, DaemonSetName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get: %w", err)
	}
	return ds, nil
}

// requiredFor returns the DaemonSet for d with library-go's spec-hash
// annotation, built once for each new d.
func (m *Manager) requiredFor(d Desired) (*appsv1.DaemonSet, error) {
	key, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("desired daemonset: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.required != nil && m.requiredKey == string(key) {
		return m.required, nil
	}
	ds, err := DesiredDaemonSet(d)
	if err != nil {
		return nil, err
	}
	if err := resourceapply.SetSpecHashAnnotation(&ds.ObjectMeta, ds.Spec); err != nil {
		return nil, fmt.Errorf("hash the desired spec: %w", err)
	}
	m.required, m.requiredKey = ds, string(key)
	return ds, nil
}
