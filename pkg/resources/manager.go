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
	"github.com/openshift/library-go/pkg/operator/resource/resourcehelper"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	appsclientv1 "k8s.io/client-go/kubernetes/typed/apps/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// Result describes one apply.
type Result struct {
	Generation      int64
	Changed         bool // created or updated
	Created         bool
	Rolls           bool // created, or the generation moved: the pods roll
	Object          *appsv1.DaemonSet
	Restored        []string  // the spec fields the write changed on an existing object (after a lost race, the one read again)
	TLSMoved        string    // the TLS profile an existing object's kube-rbac-proxy moved to, if it did
	Replaced        types.UID // someone else's object no update could make ours, deleted (also on error) because ReplacedBecause
	ReplacedBecause string
	Unanswered      bool // with an error: no answer came, so the write may have been made
}

// Manager creates, updates and deletes the DaemonSet, reading through a lister (nothing to do sends no request).
type Manager struct {
	client   kubernetes.Interface
	lister   appslisters.DaemonSetLister
	recorder events.Recorder
	base     Desired

	mu            sync.Mutex
	owned         ownedObject       // last written, or adopted: its generation is the next apply's expected one
	past          []ownedObject     // written before, since deleted or replaced: their late events are own
	expected      *appsv1.DaemonSet // the last own create or spec update, until the cache shows it (or its deletion, or ExpectationTimeout)
	expectedUntil time.Time
	unanswered    *unansweredWrite // the write in flight, or the last unanswered, until seen (ClaimUnanswered) or answered
	clock         clock.Clock
	required      *appsv1.DaemonSet // with its spec hash, for the Desired of JSON requiredKey: building it costs most of a repair
	requiredKey   string
}

type ManagerOption func(*Manager)

// WithClock sets the manager's clock (default: the real one): a controller passes its loop's.
func WithClock(c clock.Clock) ManagerOption { return func(m *Manager) { m.clock = c } }

// NewManager returns a Manager; lister must watch the DaemonSet's namespace, base is what ResourceManager applies.
func NewManager(client kubernetes.Interface, lister appslisters.DaemonSetLister, recorder events.Recorder, base Desired, opts ...ManagerOption) *Manager {
	m := &Manager{client: client, lister: lister, recorder: recorder, base: base, clock: clock.RealClock{}}
	for _, o := range opts {
		o(m)
	}
	return m
}

// Apply makes the DaemonSet match d by ApplyDaemonSet, writing when owned metadata (spec hash too) or generation moved.
// Someone else's object is adopted by one UPDATE or replaced for another selector; a lost race: ErrLostToAnotherWriter.
func (m *Manager) Apply(ctx context.Context, d Desired) (Result, error) {
	required, err := m.requiredFor(d)
	if err != nil {
		return Result{}, fmt.Errorf("apply daemonset: %w", err)
	}
	var (
		result   Result
		tried    *appsv1.DaemonSet // what the last attempt found; nil before it, or none
		lost     int               // lost races so far
		replaced types.UID         // deleted for its selector, because why: reported with the create
		because  string
		sent     bool // a write by the last attempt
	)
	err = m.retryLostRaces(ctx, func() error {
		sent = false
		existing, err := m.readAttempt(ctx, lost, tried)
		lost++
		if err != nil {
			return err
		}
		if lost > 1 && m.lostToAnotherWriter(tried, existing) {
			return ErrLostToAnotherWriter
		}
		tried = existing
		if existing != nil && existing.DeletionTimestamp != nil {
			// Being deleted: a write would be lost with it; the apply after its deletion event creates anew.
			result = Result{Generation: existing.Generation, Object: existing}
			return nil
		}
		expected, adopting := m.expectedGeneration(existing)
		client := prefetchedDaemonSets{DaemonSetInterface: m.client.AppsV1().DaemonSets(Namespace), m: m, existing: existing, sent: &sent}
		// ApplyDaemonSet is SetSpecHashAnnotation and then this; required carries the hash (requiredFor).
		actual, changed, err := resourceapply.ApplyDaemonSetWithForce(ctx, client, writeEventsOnly{m.recorder}, required, expected, false)
		if adopting && isImmutableSelector(err) {
			// Someone else's object, with another selector: no update makes it ours. Delete exactly it, then create.
			err = m.client.AppsV1().DaemonSets(Namespace).Delete(ctx, DaemonSetName, metav1.DeleteOptions{
				Preconditions:     metav1.NewUIDPreconditions(string(existing.UID)),
				PropagationPolicy: ptr.To(metav1.DeletePropagationBackground), // the garbage collector removes its pods
			})
			if err == nil {
				resourcehelper.ReportDeleteEvent(m.recorder, existing, nil)
			} else if !apierrors.IsNotFound(err) {
				return fmt.Errorf("replace object %s with another selector: delete: %w", existing.UID, err)
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
		created := changed && (existing == nil || existing.UID != actual.UID)
		rolls := created || changed && existing.Generation != actual.Generation
		m.mu.Lock()
		if changed || adopting {
			var replacedRV string // what the write replaced, if on the same object
			if existing != nil && existing.UID == actual.UID {
				replacedRV = existing.ResourceVersion
			}
			m.record(actual.UID, actual.Generation, OwnedMetadata(actual), actual.ResourceVersion, replacedRV)
		}
		if rolls { // an own create or spec update the cache has yet to show
			m.expected, m.expectedUntil = actual.DeepCopy(), m.clock.Now().Add(ExpectationTimeout)
		}
		m.mu.Unlock()
		result = Result{Generation: actual.Generation, Changed: changed, Created: created, Rolls: rolls, Object: actual}
		if changed && !created {
			result.Restored, result.TLSMoved = restoredFields(existing, actual), tlsMove(existing, &d)
		}
		if created && replaced != "" {
			result.Replaced, result.ReplacedBecause = replaced, because
		}
		return nil
	})
	unanswered := err != nil && sent && mayHaveWritten(err)
	m.answered(unanswered)
	if err != nil {
		return Result{Replaced: replaced, ReplacedBecause: because, Unanswered: unanswered}, fmt.Errorf("apply daemonset %s/%s: %w", Namespace, DaemonSetName, err)
	}
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

// ApplyRuntimeExtractorResources and the next two are the seed's ResourceManager.
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

// prefetchedDaemonSets (of Namespace) gives ApplyDaemonSet's one Get the object read; its writes carry FieldManager.
type prefetchedDaemonSets struct {
	appsclientv1.DaemonSetInterface // of Namespace
	m                               *Manager
	existing                        *appsv1.DaemonSet // nil: known not to exist
	sent                            *bool             // set by each write
}

func (p prefetchedDaemonSets) DaemonSets(string) appsclientv1.DaemonSetInterface { return p }

func (p prefetchedDaemonSets) Get(_ context.Context, name string, _ metav1.GetOptions) (*appsv1.DaemonSet, error) {
	if p.existing == nil {
		return nil, apierrors.NewNotFound(appsv1.Resource("daemonsets"), name)
	}
	return p.existing.DeepCopy(), nil
}

func (p prefetchedDaemonSets) Create(ctx context.Context, ds *appsv1.DaemonSet, opts metav1.CreateOptions) (*appsv1.DaemonSet, error) {
	opts.FieldManager = FieldManager
	*p.sent = true
	p.m.sending()
	return p.DaemonSetInterface.Create(ctx, ds, opts)
}

func (p prefetchedDaemonSets) Update(ctx context.Context, ds *appsv1.DaemonSet, opts metav1.UpdateOptions) (*appsv1.DaemonSet, error) {
	opts.FieldManager = FieldManager
	*p.sent = true
	p.m.sending()
	return p.DaemonSetInterface.Update(ctx, ds, opts)
}

// writeEventsOnly drops ApplyDaemonSet's warnings for a failed write: a lost race is retried, a final failure returned.
type writeEventsOnly struct{ events.Recorder }

func (writeEventsOnly) Warning(string, string)                  {}
func (writeEventsOnly) Warningf(string, string, ...interface{}) {}

// Delete deletes the cached DaemonSet, else the own write, by UID precondition; returns the UID removed ("" for none).
func (m *Manager) Delete(ctx context.Context) (types.UID, error) {
	m.ObservedDeletion("") // the object is to go: no write of it is awaited any more
	cached, err := m.lister.DaemonSets(Namespace).Get(DaemonSetName)
	target := m.ownedUID()
	switch {
	case err == nil:
		target = cached.UID
	case !apierrors.IsNotFound(err):
		return "", fmt.Errorf("delete daemonset %s/%s: read cache: %w", Namespace, DaemonSetName, err)
	case target == "":
		return "", nil
	}
	daemonSets := m.client.AppsV1().DaemonSets(Namespace)
	for attempt := 1; ; attempt++ {
		err := daemonSets.Delete(ctx, DaemonSetName, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(target))})
		if apierrors.IsConflict(err) && attempt < 3 { // the UID precondition failed: another object holds the name
			var live *appsv1.DaemonSet
			if live, err = daemonSets.Get(ctx, DaemonSetName, metav1.GetOptions{}); err == nil {
				target = live.UID
				continue
			}
			err = fmt.Errorf("get: %w", err) // still IsNotFound if gone
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return "", fmt.Errorf("delete daemonset %s/%s: %w", Namespace, DaemonSetName, err)
		}
		m.mu.Lock()
		m.retire() // the object is gone: no longer owned
		m.owned, m.expected = ownedObject{}, nil
		m.mu.Unlock()
		if err != nil { // gone, perhaps after a failed precondition
			return "", nil
		}
		resourcehelper.ReportDeleteEvent(m.recorder, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: DaemonSetName}}, nil)
		return target, nil
	}
}
