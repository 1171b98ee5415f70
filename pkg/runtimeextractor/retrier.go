package runtimeextractor

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/klog/v2"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/status"
)

// retryKey is the rate limiter's only item: the controller manages one object.
const retryKey = "runtime-extractor"

// ownInput: err is of the controller's own input (an unset or invalid RELATED_IMAGE_* value),
// which no retry fixes; the core makes it Degraded at once.
func ownInput(err error) bool {
	return errors.Is(err, resources.ErrImagesUnset) || errors.Is(err, resources.ErrInvalidImage)
}

// record counts an action's outcome. A success resets the backoff and cancels a pending retry,
// which would only re-assert.
func (c *Controller) record(a fsm.Action, err error, took time.Duration) {
	result := "success"
	if err != nil {
		result = "error"
		c.core.Failed(err, ownInput(err), took, c.cfg.clock.Now())
	} else {
		c.core.Succeeded()
		c.cfg.limiter.Forget(retryKey)
		c.setBackoff(0)
	}
	c.cfg.metrics.ObserveAction(a, result, took)
}

func (c *Controller) scheduleRetry() {
	d := c.core.ScheduleRetry(c.cfg.limiter.When(retryKey), c.cfg.clock.Now())
	c.setBackoff(d)
	n, _ := c.core.Failures()
	// Capped as conditions and Events are: the error may quote a refused RELATED_IMAGE_* value at
	// any length, and this line repeats per retry.
	klog.Infof("retrying in %s after %d failure(s): %s", d.Round(time.Millisecond), n, status.CapMessage(fmt.Sprint(c.core.LastError())))
}

// setBackoff: 0 means no retry pending.
func (c *Controller) setBackoff(d time.Duration) { c.cfg.metrics.SetBackoff(d) }
