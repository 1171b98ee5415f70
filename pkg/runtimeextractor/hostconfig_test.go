package runtimeextractor

import (
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/insights-runtime-extractor/controller/pkg/config"
	"github.com/insights-runtime-extractor/controller/pkg/internal/fakeapi"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
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
	api := fakeapi.New()
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
	runWith(t, api, notifier)
	stored := func() *appsv1.DaemonSet { ds, _ := api.Stored(resources.Namespace, resources.DaemonSetName); return ds }
	waitFor(t, "the DaemonSet", func() bool { return stored() != nil })

	gpu := corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	host.set(false, gpu)
	waitFor(t, "the host's toleration on the pods", func() bool {
		ds := stored()
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
	waitFor(t, "the DaemonSet deleted by the host's switch", func() bool { return stored() == nil })
}
