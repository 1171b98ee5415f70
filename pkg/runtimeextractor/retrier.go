package runtimeextractor

import (
	"fmt"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/pkg/metrics"
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
	timer    loopTimer
	failures int           // consecutive failed actions
	lastErr  error         // the latest failure's error
	retryIn  time.Duration // the backoff of the pending retry, 0 for none
}

func newRetrier(l workqueue.TypedRateLimiter[string], clk clock.Clock, m *metrics.Metrics) *retrier {
	return &retrier{limiter: l, metrics: m, timer: loopTimer{clock: clk}}
}

// record counts an action's outcome. A success resets the backoff and
// cancels a pending retry, which would only re-assert.
func (r *retrier) record(a fsm.Action, err error, took time.Duration) {
	result := "success"
	if err != nil {
		result = "error"
		r.failures++
		r.lastErr = err
	} else {
		r.failures, r.lastErr = 0, nil
		r.limiter.Forget(retryKey)
		r.stop()
	}
	if r.metrics != nil {
		r.metrics.ObserveAction(a, result, took)
	}
}

// schedule arms the retry after the limiter's next delay.
func (r *retrier) schedule() {
	d := r.limiter.When(retryKey)
	r.timer.arm(d)
	r.retryIn = d
	if r.metrics != nil {
		r.metrics.SetBackoff(d)
	}
	// Capped as conditions and Events are: the error may quote a refused
	// RELATED_IMAGE_* value at any length, and this line repeats per retry.
	klog.Infof("retrying in %s after %d failure(s): %s", d.Round(time.Millisecond), r.failures, status.CapMessage(fmt.Sprint(r.lastErr)))
}

// pending: a retry is armed.
func (r *retrier) pending() bool { return r.timer.armed() }

// C fires when the retry is due.
func (r *retrier) C() <-chan time.Time { return r.timer.C() }

// fired records that C delivered; the retry is made now.
func (r *retrier) fired() { r.timer.fired() }

// stop cancels a pending retry.
func (r *retrier) stop() {
	r.timer.stop()
	r.retryIn = 0
	if r.metrics != nil {
		r.metrics.SetBackoff(0)
	}
}
