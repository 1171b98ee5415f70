package status

import (
	"context"
	"fmt"
	"sync"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	configv1client "github.com/openshift/client-go/config/clientset/versioned/typed/config/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/insights-runtime-extractor/controller/pkg/resources"
)

// DefaultClusterOperatorName is the ClusterOperator the conditions go to unless
// another name is given: the Insights Operator's own.
const DefaultClusterOperatorName = "insights"

// DefaultVerifyInterval bounds how long the Reporter trusts its memory of what it
// wrote: after it, the next Report reads the ClusterOperator again, so conditions
// someone else removed or overwrote come back even when the state never changes.
const DefaultVerifyInterval = 10 * time.Minute

// Reporter writes the RuntimeExtractor* conditions to a ClusterOperator. It remembers
// the conditions it last wrote and makes no API call while they stay the same. It
// touches no other condition. Its methods are safe for concurrent use.
type Reporter struct {
	client configv1client.ClusterOperatorsGetter
	name   string
	now    func() time.Time
	// verifyInterval is DefaultVerifyInterval; tests shorten it.
	verifyInterval time.Duration

	mu sync.Mutex
	// written holds the conditions the ClusterOperator is known to carry (written or
	// found there); nil when unknown, which forces a read on the next Report.
	written    []configv1.ClusterOperatorStatusCondition
	verifiedAt time.Time
	// missing is true while the ClusterOperator (or its CRD) is absent; it makes the
	// "not found" line print once per absence rather than on every Report.
	missing bool
}

// NewReporter returns a Reporter for the ClusterOperator called name
// (DefaultClusterOperatorName when empty).
func NewReporter(client configv1client.ClusterOperatorsGetter, name string) *Reporter {
	if name == "" {
		name = DefaultClusterOperatorName
	}
	return &Reporter{client: client, name: name, now: time.Now, verifyInterval: DefaultVerifyInterval}
}

// Report brings the ClusterOperator's RuntimeExtractor* conditions in line with s.
// It returns without an API call when they equal what was last written (ignoring
// LastTransitionTime). Otherwise it reads the ClusterOperator, replaces only the
// three owned conditions (keeping LastTransitionTime where Status did not change)
// and writes the status back under the read resourceVersion, retrying on conflict.
// A missing ClusterOperator or CRD is logged once and is not an error; later calls
// keep trying, so reporting starts when it appears.
func (r *Reporter) Report(ctx context.Context, s Snapshot) error {
	want := Conditions(s)

	r.mu.Lock()
	defer r.mu.Unlock()

	now := r.now()
	if r.written != nil && sameConditions(r.written, want) && now.Sub(r.verifiedAt) < r.verifyInterval {
		return nil
	}

	logger := klog.FromContext(ctx).WithValues("clusterOperator", r.name)
	missing := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		missing = false
		co, err := r.client.ClusterOperators().Get(ctx, r.name, metav1.GetOptions{})
		if isMissing(err) {
			missing = true
			return nil
		}
		if err != nil {
			return err
		}
		updated := co.DeepCopy()
		if !mergeConditions(&updated.Status.Conditions, want, metav1.NewTime(now)) {
			return nil
		}
		_, err = r.client.ClusterOperators().UpdateStatus(ctx, updated, metav1.UpdateOptions{FieldManager: resources.FieldManager})
		if isMissing(err) { // deleted between the read and the write
			missing = true
			return nil
		}
		return err
	})
	switch {
	case err != nil:
		r.written = nil
		return fmt.Errorf("report conditions on clusteroperator %s: %w", r.name, err)
	case missing:
		r.written = nil
		if !r.missing {
			logger.Info("ClusterOperator not found, runtime extractor conditions are not reported until it exists")
			r.missing = true
		}
		return nil
	}
	if r.missing {
		logger.Info("ClusterOperator found, reporting runtime extractor conditions")
		r.missing = false
	}
	r.written = want
	r.verifiedAt = now
	return nil
}

// isMissing tells a ClusterOperator that does not exist, or a cluster that does not
// serve the ClusterOperator API at all, from real failures.
func isMissing(err error) bool {
	if err == nil {
		return false
	}
	return apierrors.IsNotFound(err) || meta.IsNoMatchError(err)
}

// mergeConditions sets every condition of want in conds, in place and leaving every
// other condition as it is. A condition whose Status did not change keeps its
// LastTransitionTime; a new or flipped one gets now. It reports whether conds changed.
func mergeConditions(conds *[]configv1.ClusterOperatorStatusCondition, want []configv1.ClusterOperatorStatusCondition, now metav1.Time) bool {
	changed := false
	for _, w := range want {
		i := indexOf(*conds, w.Type)
		if i < 0 {
			w.LastTransitionTime = now
			*conds = append(*conds, w)
			changed = true
			continue
		}
		existing := (*conds)[i]
		if sameCondition(existing, w) {
			continue
		}
		w.LastTransitionTime = now
		if existing.Status == w.Status {
			w.LastTransitionTime = existing.LastTransitionTime
		}
		(*conds)[i] = w
		changed = true
	}
	return changed
}

func indexOf(conds []configv1.ClusterOperatorStatusCondition, t configv1.ClusterStatusConditionType) int {
	for i := range conds {
		if conds[i].Type == t {
			return i
		}
	}
	return -1
}

// sameCondition compares everything but LastTransitionTime.
func sameCondition(a, b configv1.ClusterOperatorStatusCondition) bool {
	return a.Type == b.Type && a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message
}

func sameConditions(a, b []configv1.ClusterOperatorStatusCondition) bool {
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
