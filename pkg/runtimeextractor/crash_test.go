package runtimeextractor

import (
	"strings"
	"sync/atomic"
	"testing"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/insights-runtime-extractor/controller/pkg/config"
	"github.com/insights-runtime-extractor/controller/pkg/internal/logcapture"
)

// panickyConfig is the host's config whose read panics while armed: a bug
// on the control loop's goroutine, as a host's nil config would be.
type panickyConfig struct {
	*fakeConfig
	armed atomic.Bool
}

func (p *panickyConfig) Config() *config.InsightsConfiguration {
	if p.armed.Load() {
		var cfg *config.InsightsConfiguration
		_ = cfg.DataReporting // a nil dereference
	}
	return p.fakeConfig.Config()
}

// A panic in a wake-up of the control loop is logged with its stack and
// ends that wake-up only: the host's process lives on, and the next
// notification is handled as usual.
func TestAPanicInAWakeUpLeavesTheLoopRunning(t *testing.T) {
	logged := logcapture.Klog(t)
	cfg := &panickyConfig{fakeConfig: newFakeConfig()}
	h := startWith(t, func(h *harness) { h.notifier = cfg })
	h.waitStored("the DaemonSet", func(ds *appsv1.DaemonSet) bool { return ds != nil })

	cfg.armed.Store(true)
	cfg.set(true, false)
	notify(cfg.ch)
	h.eventually("the panic to be logged", func() bool {
		return strings.Contains(logged(), "recovered from a panic in the control loop: runtime error: invalid memory address")
	})

	cfg.armed.Store(false)
	notify(cfg.ch)
	h.waitStored("the DaemonSet deleted on the next notification", func(ds *appsv1.DaemonSet) bool { return ds == nil })
}
