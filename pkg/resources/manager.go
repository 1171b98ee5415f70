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
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/utils/clock"
)

// Result describes one apply.
type Result struct {
	Generation int64
	Changed    bool // created or updated
	Created    bool
	Rolls      bool // created, or the generation moved: the pods roll
	Object     *appsv1.DaemonSet
	// Restored names the spec fields the write changed on an existing object:
	// after a lost race, the one read again, not the one the caller saw.
	Restored []string
	TLSMoved string // the TLS profile an existing object's kube-rbac-proxy moved to, if it did
	// Replaced is someone else's object the apply deleted as no update could
	// make it the desired one (ReplacedBecause); set on error too, when the
	// delete went through and the create did not.
	Replaced        types.UID
	ReplacedBecause string
	Unanswered      bool // with an error: no answer came, so the write may have been made
}

// Manager creates, updates and deletes the runtime extractor DaemonSet. It
// reads through an informer lister, so an apply or delete with nothing to do
// sends no request. It implements the seed's ResourceManager.
type Manager struct {
	client   kubernetes.Interface
	lister   appslisters.DaemonSetLister
	recorder events.Recorder
	base     Desired

	mu    sync.Mutex
	owned ownedObject   // last written, or adopted: its generation is the next apply's expected one
	past  []ownedObject // written before, since deleted or replaced: their late events are own
	// expected is this manager's last create or spec update, until the cache
	// shows it (or its deletion, or ExpectationTimeout); meanwhile an apply
	// compares against it instead of writing again or reading the server.
	expected      *appsv1.DaemonSet
	expectedUntil time.Time
	// unanswered is the write in flight, or the last one left unanswered,
	// until its object is seen (ClaimUnanswered) or a later write answers.
	unanswered *unansweredWrite
	clock      clock.Clock

	// required, with its spec hash, is built for the Desired whose JSON is
	// requiredKey, as building and hashing cost more than the rest of a repair.
	required    *appsv1.DaemonSet
	requiredKey string
}

type ManagerOption func(*Manager)

// WithClock sets the manager's clock (default: the real one); a controller
// passes its loop's, so that one clock times everything it does.
func WithClock(c clock.Clock) ManagerOption { return func(m *Manager) { m.clock = c } }

// NewManager returns a Manager. lister must watch the DaemonSet's namespace
// (its cache is never written here); base is what ResourceManager applies.
func NewManager(client kubernetes.Interface, lister appslisters.DaemonSetLister, recorder events.Recorder, base Desired, opts ...ManagerOption) *Manager {
	m := &Manager{
		client:   client,
		lister:   lister,
		recorder: recorder,
		base:     base,
		clock:    clock.RealClock{},
	}
	for _, o := range opts {
		o(m)
	}
	return m
}

// Apply makes the DaemonSet match d with library-go's ApplyDaemonSet, which
// writes when the owned metadata differs (the spec-hash annotation stands for
// the spec) or the generation is not that of this manager's last write.
//
// An object this manager did not write (after a restart, or recreated) is
// adopted by one UPDATE of the whole desired spec, which the server stores
// only if something differs: an untouched one costs no write, an edited one
// is repaired. Neither the spec hash (an editor may keep it) nor managedFields
// (anyone may write under our name) would prove it untouched. One someone
// else created with another selector, which is immutable, is replaced.
//
// A retry after a lost race reads the cache once it shows what the write ran
// into (within cacheCatchUp), else, as after a second loss, the server. A
// retry that finds another writer's change returns ErrLostToAnotherWriter.
func (m *Manager) Apply(ctx context.Context, d Desired) (Result, error) {
	required, err := m.requiredFor(d)
	if err != nil {
		return Result{}, fmt.Errorf("apply daemonset: %w", err)
	}

	var (
		result Result
		tried  *appsv1.DaemonSet // what the last attempt found; nil before it, or none
		lost   int               // lost races so far
		// replaced by deleteReplaced, because why: reported with the create
		replaced types.UID
		because  string
		sent     bool // a write by the last attempt
	)
	err = m.retryLostRaces(ctx, func() error {
		var existing *appsv1.DaemonSet
		var err error
		sent = false
		if lost == 1 {
			existing, err = m.readAfterLostRace(ctx, tried)
		} else {
			// Lost twice: the cache is behind a stream of writes (status
			// updates during a rollout), and its next copy would lose again.
			existing, err = m.read(ctx, lost > 1)
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
		client := prefetchedDaemonSets{m: m, existing: existing, sent: &sent}
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
		created := changed && (existing == nil || existing.UID != actual.UID)
		rolls := created || changed && existing.Generation != actual.Generation
		if rolls {
			m.expect(actual)
		}
		result = Result{Generation: actual.Generation, Changed: changed, Created: created, Rolls: rolls, Object: actual}
		if changed && !created {
			result.Restored = restoredFields(existing, actual)
			result.TLSMoved = tlsMove(existing, &d)
		}
		if created && replaced != "" {
			result.Replaced, result.ReplacedBecause = replaced, because
		}
		return nil
	})
	if err != nil {
		unanswered := sent && mayHaveWritten(err)
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

// ApplyRuntimeExtractorResources, DeleteRuntimeExtractorResources and
// ResourcesExists are the seed's ResourceManager.
func (m *Manager) ApplyRuntimeExtractorResources(ctx context.Context, tlsProfile *configv1.TLSSecurityProfile) error {
	d := m.base
	d.TLSProfile = tlsProfile
	_, err := m.Apply(ctx, d)
	return err
}

func (m *Manager) DeleteRuntimeExtractorResources(ctx context.Context) error {
	_, err := m.Delete(ctx)
	return err
}

func (m *Manager) ResourcesExists(_ context.Context) bool {
	_, ok := m.Current()
	return ok
}

// read returns the existing DaemonSet or nil: the lister's, or an own write it
// does not show yet (expected); the server's when live, or when the cache is
// behind an own write no longer expected.
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

// requiredFor returns the DaemonSet for d with its spec hash.
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
