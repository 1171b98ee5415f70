package status

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	configv1 "github.com/openshift/api/config/v1"
	configv1ac "github.com/openshift/client-go/config/applyconfigurations/config/v1"
	configv1client "github.com/openshift/client-go/config/clientset/versioned/typed/config/v1"
	configv1informers "github.com/openshift/client-go/config/informers/externalversions/config/v1"
	configv1listers "github.com/openshift/client-go/config/listers/config/v1"
	"github.com/openshift/library-go/pkg/config/clusteroperator/v1helpers"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// DefaultClusterOperatorName is the ClusterOperator the conditions go to unless
// another name is given: the Insights Operator's own.
const DefaultClusterOperatorName = "insights"

// FieldManager owns the RuntimeExtractor* conditions on the ClusterOperator. It
// is distinct from every other writer's, so server-side apply merges our three
// entries of status.conditions (a map keyed by type) with theirs.
const FieldManager = "runtime-extractor-controller-status"

// ErrMissing is what Report returns (wrapped) when the ClusterOperator, or the
// ClusterOperator API, does not exist: nothing was written, and the conditions
// are still to be written once it appears.
var ErrMissing = errors.New("clusteroperator not found")

// Reporter writes the RuntimeExtractor* conditions to a ClusterOperator with
// server-side apply of the status subresource: no read before a write, and no
// conflict with another writer's UpdateStatus of the whole list, which keeps
// the entries it does not know. It touches no other condition.
//
// It writes only when the conditions differ from what the server is known to
// carry: what an Observe'd one-object informer shows, or else what it last
// applied. LastTransitionTime is kept from there while a condition's status
// holds. Its methods are safe for concurrent use.
type Reporter struct {
	client configv1client.ClusterOperatorsGetter
	name   string
	clock  clock.PassiveClock

	mu sync.Mutex
	// lister, when set and synced, shows the ClusterOperator as the server
	// has it. Until it has synced (forever on a cluster without the CRD) the
	// Reporter works from what it applied.
	lister configv1listers.ClusterOperatorLister
	synced cache.InformerSynced
	// changed is notified when the observed ClusterOperator changes.
	changed chan struct{}
	// applied holds the conditions last applied (with their transition times);
	// nil when unknown.
	applied []configv1.ClusterOperatorStatusCondition
	// appliedOver is the resourceVersion the lister showed when applied was
	// written: while it still shows that one, the cache has not caught up with
	// our apply, and applied is the better knowledge.
	appliedOver string
	// appliedAs is the resourceVersion our apply returned. A cached version
	// older than it (someone's write just before ours, whose event came after
	// our apply returned) has not caught up either.
	appliedAs string
	// missing is true while the ClusterOperator (or its CRD) is absent; it makes
	// the "not found" line print once per absence rather than on every Report.
	missing bool
}

// NewReporter returns a Reporter for the ClusterOperator called name
// (DefaultClusterOperatorName when empty).
func NewReporter(client configv1client.ClusterOperatorsGetter, name string) *Reporter {
	if name == "" {
		name = DefaultClusterOperatorName
	}
	return &Reporter{client: client, name: name, clock: clock.RealClock{}, changed: make(chan struct{}, 1)}
}

// Name is the ClusterOperator the Reporter writes to.
func (r *Reporter) Name() string { return r.name }

// Observe makes the Reporter compare against the ClusterOperator as informer
// shows it (an informer on that one object), so conditions someone else
// removed or changed are noticed without a read; every change of it is
// signalled on Changed, for the caller to report again. The caller starts the
// informer and waits for its sync before the first Report.
func (r *Reporter) Observe(informer configv1informers.ClusterOperatorInformer) error {
	notifyChanged := func() {
		select {
		case r.changed <- struct{}{}:
		default:
		}
	}
	_, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notifyChanged() },
		UpdateFunc: func(any, any) { notifyChanged() },
		DeleteFunc: func(any) { notifyChanged() },
	})
	if err != nil {
		return fmt.Errorf("observe clusteroperator %s: %w", r.name, err)
	}
	r.mu.Lock()
	r.lister, r.synced = informer.Lister(), informer.Informer().HasSynced
	r.mu.Unlock()
	return nil
}

// Changed is notified (coalesced) whenever the observed ClusterOperator
// changes; it never fires without Observe.
func (r *Reporter) Changed() <-chan struct{} { return r.changed }

// Report brings the ClusterOperator's RuntimeExtractor* conditions in line
// with s, with one apply when they differ from what the server carries and no
// request otherwise. A missing ClusterOperator or CRD is logged once per
// absence and returned as ErrMissing. While an Observe'd informer shows it
// absent, Report makes no request; Changed tells when it appears.
func (r *Reporter) Report(ctx context.Context, s Snapshot) error {
	want := Conditions(s)

	r.mu.Lock()
	defer r.mu.Unlock()
	logger := klog.FromContext(ctx).WithValues("clusterOperator", r.name)

	known, over, shown := r.applied, "", false
	if r.lister != nil && r.synced() {
		co, err := r.lister.Get(r.name)
		switch {
		case apierrors.IsNotFound(err):
			r.setMissing(logger, true)
			r.applied = nil
			return fmt.Errorf("report conditions on clusteroperator %s: %w", r.name, ErrMissing)
		case err != nil:
			return fmt.Errorf("report conditions on clusteroperator %s: read cache: %w", r.name, err)
		}
		over, shown = co.ResourceVersion, true
		if r.applied == nil || over != r.appliedOver && !olderThan(over, r.appliedAs) {
			known = co.Status.Conditions
		}
	}
	if carries(known, want) {
		return nil
	}

	next := owned(known)
	for _, w := range want {
		v1helpers.SetStatusCondition(&next, w, r.clock)
	}
	apply := configv1ac.ClusterOperatorStatus()
	for _, c := range next {
		apply.WithConditions(configv1ac.ClusterOperatorStatusCondition().
			WithType(c.Type).WithStatus(c.Status).WithReason(c.Reason).WithMessage(c.Message).
			WithLastTransitionTime(c.LastTransitionTime))
	}
	result, err := r.client.ClusterOperators().ApplyStatus(ctx, configv1ac.ClusterOperator(r.name).WithStatus(apply),
		metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	switch {
	case isMissing(err) && shown:
		// The informer shows it, the server did not find it: an API server
		// that just restarted serves the custom resource moments later. No
		// change of the object will say when, so this is a failure to
		// retry, not an absence to wait out.
		r.applied = nil
		return fmt.Errorf("report conditions on clusteroperator %s, which the informer shows: %w", r.name, err)
	case isMissing(err):
		r.setMissing(logger, true)
		r.applied = nil
		return fmt.Errorf("report conditions on clusteroperator %s: %w: %w", r.name, ErrMissing, err)
	case err != nil:
		r.applied = nil
		return fmt.Errorf("report conditions on clusteroperator %s: %w", r.name, err)
	}
	r.setMissing(logger, false)
	r.applied, r.appliedOver, r.appliedAs = next, over, result.ResourceVersion
	return nil
}

// olderThan reports whether resourceVersion a is older than b. Both are etcd
// revisions, which only grow; a version that is not a number (another
// storage) is never taken for older, so the cache is believed, at the cost of
// at most one needless apply.
func olderThan(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	return errA == nil && errB == nil && x < y
}

func (r *Reporter) setMissing(logger klog.Logger, missing bool) {
	switch {
	case missing && !r.missing:
		logger.Info("ClusterOperator not found, runtime extractor conditions are not reported until it exists")
	case !missing && r.missing:
		logger.Info("ClusterOperator found, reporting runtime extractor conditions")
	}
	r.missing = missing
}

// isMissing tells a ClusterOperator that does not exist, or a cluster that does not
// serve the ClusterOperator API at all, from real failures.
func isMissing(err error) bool {
	if err == nil {
		return false
	}
	return apierrors.IsNotFound(err) || meta.IsNoMatchError(err)
}

// owned copies the owned conditions out of conds, in ConditionTypes order.
func owned(conds []configv1.ClusterOperatorStatusCondition) []configv1.ClusterOperatorStatusCondition {
	out := make([]configv1.ClusterOperatorStatusCondition, 0, len(ConditionTypes))
	for _, t := range ConditionTypes {
		if c := v1helpers.FindStatusCondition(conds, t); c != nil {
			out = append(out, *c)
		}
	}
	return out
}

// carries reports whether conds holds every condition of want, ignoring
// LastTransitionTime.
func carries(conds, want []configv1.ClusterOperatorStatusCondition) bool {
	if conds == nil {
		return false
	}
	for _, w := range want {
		c := v1helpers.FindStatusCondition(conds, w.Type)
		if c == nil || !sameCondition(*c, w) {
			return false
		}
	}
	return true
}

// sameCondition compares everything but LastTransitionTime.
func sameCondition(a, b configv1.ClusterOperatorStatusCondition) bool {
	return a.Type == b.Type && a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message
}

// SameConditions reports whether a and b hold the same conditions in the same
// order, ignoring LastTransitionTime.
func SameConditions(a, b []configv1.ClusterOperatorStatusCondition) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !sameCondition(a[i], b[i]) {
			return false
		}
	}
	return true
}
