package status

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
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

// DefaultClusterOperatorName is the Insights Operator's ClusterOperator, the default target.
const DefaultClusterOperatorName = "insights"

// FieldManager owns the RuntimeExtractor* conditions, distinct so server-side apply merges them with others'.
const FieldManager = "runtime-extractor-controller-status"

// ErrMissing is wrapped by Report when the ClusterOperator or its API does not exist: nothing was written.
var ErrMissing = errors.New("clusteroperator not found")

// Reporter server-side applies the RuntimeExtractor* conditions of a ClusterOperator's status (no read, no conflict
// with others' UpdateStatus) when they differ from the informer's view, else its last apply. Concurrency-safe.
type Reporter struct {
	client configv1client.ClusterOperatorsGetter
	name   string
	clock  clock.PassiveClock

	mu      sync.Mutex
	lister  configv1listers.ClusterOperatorLister // until synced (forever without the CRD), Report uses applied
	synced  cache.InformerSynced
	changed chan struct{}
	applied []configv1.ClusterOperatorStatusCondition // with transition times; nil when unknown
	// The resourceVersions the lister showed at our apply and the one it returned. While the lister shows appliedOver
	// or one older than appliedAs (a write just before ours, its event after), the cache lags and applied is better.
	appliedOver, appliedAs string
	missing                bool // logs "not found" once per absence, not on every Report
}

// NewReporter returns a Reporter for the ClusterOperator name (DefaultClusterOperatorName when empty).
func NewReporter(client configv1client.ClusterOperatorsGetter, name string) *Reporter {
	return &Reporter{client: client, name: cmp.Or(name, DefaultClusterOperatorName), clock: clock.RealClock{}, changed: make(chan struct{}, 1)}
}

// Name is the ClusterOperator the Reporter writes to.
func (r *Reporter) Name() string { return r.name }

// Observe compares against informer's view and signals its changes on Changed; the caller starts and syncs it.
func (r *Reporter) Observe(informer configv1informers.ClusterOperatorInformer) error {
	notifyChanged := func(any) {
		select {
		case r.changed <- struct{}{}:
		default:
		}
	}
	_, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: notifyChanged,
		UpdateFunc: func(_, obj any) { notifyChanged(obj) }, DeleteFunc: notifyChanged})
	if err != nil {
		return fmt.Errorf("observe clusteroperator %s: %w", r.name, err)
	}
	r.mu.Lock()
	r.lister, r.synced = informer.Lister(), informer.Informer().HasSynced
	r.mu.Unlock()
	return nil
}

// Changed is notified (coalesced) when the observed ClusterOperator changes; never without Observe.
func (r *Reporter) Changed() <-chan struct{} { return r.changed }

// Report applies the conditions of s when they differ from the server's. A missing ClusterOperator or CRD is
// ErrMissing; while an Observe'd informer shows it absent, no request is made.
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
	next := make([]configv1.ClusterOperatorStatusCondition, 0, len(ConditionTypes)) // ours, in ConditionTypes order
	for _, t := range ConditionTypes {
		if c := v1helpers.FindStatusCondition(known, t); c != nil {
			next = append(next, *c)
		}
	}
	if SameConditions(next, want) {
		return nil
	}
	for _, w := range want {
		v1helpers.SetStatusCondition(&next, w, r.clock)
	}
	apply := configv1ac.ClusterOperatorStatus()
	for _, c := range next {
		apply.WithConditions(configv1ac.ClusterOperatorStatusCondition().WithType(c.Type).WithStatus(c.Status).
			WithReason(c.Reason).WithMessage(c.Message).WithLastTransitionTime(c.LastTransitionTime))
	}
	result, err := r.client.ClusterOperators().ApplyStatus(ctx, configv1ac.ClusterOperator(r.name).WithStatus(apply),
		metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	if err != nil {
		r.applied = nil
		switch missing := apierrors.IsNotFound(err) || meta.IsNoMatchError(err); { // the ClusterOperator or its API
		case missing && shown:
			// A restarted API server serves the custom resource moments later, and no change will say when: retry.
			return fmt.Errorf("report conditions on clusteroperator %s, which the informer shows: %w", r.name, err)
		case missing:
			r.setMissing(logger, true)
			return fmt.Errorf("report conditions on clusteroperator %s: %w: %w", r.name, ErrMissing, err)
		}
		return fmt.Errorf("report conditions on clusteroperator %s: %w", r.name, err)
	}
	r.setMissing(logger, false)
	r.applied, r.appliedOver, r.appliedAs = next, over, result.ResourceVersion
	return nil
}

// olderThan: resourceVersion a is older than b, as etcd revisions grow. A non-number (another storage) is never
// older: the cache is believed, at the cost of at most one needless apply.
func olderThan(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	return errA == nil && errB == nil && x < y
}

func (r *Reporter) setMissing(logger klog.Logger, missing bool) {
	if missing != r.missing {
		logger.Info(map[bool]string{true: "ClusterOperator not found, runtime extractor conditions are not reported until it exists",
			false: "ClusterOperator found, reporting runtime extractor conditions"}[missing])
	}
	r.missing = missing
}

// SameConditions reports whether a and b hold the same conditions in order, LastTransitionTime aside.
func SameConditions(a, b []configv1.ClusterOperatorStatusCondition) bool {
	return slices.EqualFunc(a, b, func(a, b configv1.ClusterOperatorStatusCondition) bool {
		return a.Type == b.Type && a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message
	})
}
