package runtimeextractor

import (
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	"github.com/insights-runtime-extractor/controller/internal/testwait"
)

// The host operator sends on updateCh and on its config channel (both with a
// buffer of 1) with blocking sends. While an Apply is held open by the API
// server, every such send must still return at once: the controller drains
// both channels off its control loop.
func TestHostSendsNeverBlockWhileAnActionRuns(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hostConfig := newFakeConfig()
	h := startWith(t, func(h *harness) {
		h.api.Client.PrependReactor("create", "daemonsets", func(clienttesting.Action) (bool, runtime.Object, error) {
			once.Do(func() { close(entered) })
			<-release // the first apply hangs until the test lets it go
			return false, nil, nil
		})
		h.notifier = hostConfig
		h.updateCh = make(chan struct{}, 1)
		h.limiterOverride = defaultRateLimiter()
	})
	t.Cleanup(func() { close(release) }) // runs before the harness's: the held apply returns, then Run stops

	<-entered
	var longest time.Duration
	for i := 0; i < 20; i++ {
		for _, ch := range []chan struct{}{h.updateCh, hostConfig.ch} {
			start := time.Now()
			select {
			case ch <- struct{}{}: // what a blocking send would do, bounded here
			case <-time.After(testwait.Patience):
				t.Fatalf("send %d blocked for %s while the apply was held open", i, testwait.Patience)
			}
			longest = max(longest, time.Since(start))
		}
	}
	t.Logf("longest host send while an apply was held open: %s", longest)
}
