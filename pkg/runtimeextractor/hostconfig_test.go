package runtimeextractor

import (
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/insights-runtime-extractor/controller/pkg/config"
)

// hostAggregator stands for a host operator's own config type and notifier: a
// bool switch, scheduling of its own, and a buffer-1 channel it sends on with
// blocking sends.
type hostAggregator struct {
	mu          sync.Mutex
	off         bool
	tolerations []corev1.Toleration
	ch          chan struct{}
}

func (a *hostAggregator) ConfigChanged() (<-chan struct{}, func()) { return a.ch, func() {} }

func (a *hostAggregator) set(off bool, tolerations ...corev1.Toleration) {
	a.mu.Lock()
	a.off, a.tolerations = off, tolerations
	a.mu.Unlock()
	a.ch <- struct{}{} // blocking, as the host's aggregator sends
}

func TestConfigFromHost(t *testing.T) {
	host := &hostAggregator{ch: make(chan struct{}, 1)}
	notifier := ConfigFrom(host.ConfigChanged, func() bool {
		host.mu.Lock()
		defer host.mu.Unlock()
		return host.off
	}, WithScheduling(func() config.RuntimeExtractor {
		host.mu.Lock()
		defer host.mu.Unlock()
		return config.RuntimeExtractor{Tolerations: host.tolerations}
	}))
	h := startWith(t, func(h *harness) {
		h.notifier = notifier
		h.limiterOverride = defaultRateLimiter()
	})
	h.waitStored("the DaemonSet", func(ds *appsv1.DaemonSet) bool { return ds != nil })

	gpu := corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	host.set(false, gpu)
	h.waitStored("the host's toleration on the pods", func(ds *appsv1.DaemonSet) bool {
		if ds == nil {
			return false
		}
		for _, tol := range ds.Spec.Template.Spec.Tolerations {
			if tol.Key == "gpu" {
				return true
			}
		}
		return false
	})
	host.set(true)
	h.waitStored("the DaemonSet deleted by the host's switch", func(ds *appsv1.DaemonSet) bool { return ds == nil })
}
