package runtimeextractor

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/pkg/metrics"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/status"
)

// retryKey is the rate limiter's only item: the controller manages one object.
const retryKey = "runtime-extractor"

// retrier keeps the failures of the controller's actions and the backoff of
// their retry: a failed apply or delete is never dropped, it is re-asserted
// after the limiter's delay. Owned by the loop's goroutine.
type retrier struct {
	limiter  workqueue.TypedRateLimiter[string]
	metrics  *metrics.Metrics // nil: none
	wakeAt   deadline         // the next retry, while one is armed
	inertia  time.Duration    // how long failures last before they are Degraded
	failures int              // consecutive failed actions
	since    time.Time        // the first of them
	lastErr  error            // the latest failure's error
	retryIn  time.Duration    // the backoff of the pending retry, 0 for none
}

func newRetrier(l workqueue.TypedRateLimiter[string], clk clock.Clock, m *metrics.Metrics, inertia time.Duration) *retrier {
	return &retrier{limiter: l, metrics: m, wakeAt: deadline{clock: clk}, inertia: inertia}
}

// unfixableByRetry says, in this one place, which failures are Degraded at
// once rather than after the inertia: those of the controller's own input,
// which no retry changes (an unset or invalid RELATED_IMAGE_* value; a
// rejected insights-config is reported apart, as InvalidConfig). Everything
// the cluster answers (an outage, a conflict, a refusal by RBAC or by an
// admission policy) can end without the controller, as a refused upgrade
// does once the policy is lifted, so it waits for the inertia.
func unfixableByRetry(err error) bool {
	return errors.Is(err, resources.ErrImagesUnset) || errors.Is(err, resources.ErrInvalidImage)
}

// persists: the failures have lasted the inertia, or no retry can fix them.
func (r *retrier) persists(now time.Time) bool {
	if r.failures == 0 || r.lastErr == nil {
		return false
	}
	return unfixableByRetry(r.lastErr) || !now.Before(r.since.Add(r.inertia))
}

// record counts an action's outcome. A success resets the backoff and
// cancels a pending retry, which would only re-assert.
func (r *retrier) record(a fsm.Action, err error, took time.Duration) {
	result := "success"
	if err != nil {
		result = "error"
		if r.failures == 0 {
			r.since = r.wakeAt.clock.Now().Add(-took)
		}
		r.failures++
		r.lastErr = err
	} else {
		r.failures, r.lastErr, r.since = 0, nil, time.Time{}
		r.limiter.Forget(retryKey)
		r.stop()
	}
	if r.metrics != nil {
		r.metrics.ObserveAction(a, result, took)
	}
}

// schedule arms the retry after the limiter's next delay, or when the
// failures reach the inertia if that comes first: that retry decides whether
// they persist, so Degraded turns True on time, on an attempt that failed.
func (r *retrier) schedule() {
	d := r.limiter.When(retryKey)
	if until := r.since.Add(r.inertia).Sub(r.wakeAt.clock.Now()); until > 0 && until < d {
		d = until
	}
	r.wakeAt.arm(d)
	r.retryIn = d
	if r.metrics != nil {
		r.metrics.SetBackoff(d)
	}
	// Capped as conditions and Events are: the error may quote a refused
	// RELATED_IMAGE_* value at any length, and this line repeats per retry.
	klog.Infof("retrying in %s after %d failure(s): %s", d.Round(time.Millisecond), r.failures, status.CapMessage(fmt.Sprint(r.lastErr)))
}

// pending: a retry is armed.
func (r *retrier) pending() bool { return r.wakeAt.armed() }

// stop cancels a pending retry.
func (r *retrier) stop() {
	r.wakeAt.stop()
	r.retryIn = 0
	if r.metrics != nil {
		r.metrics.SetBackoff(0)
	}
}
