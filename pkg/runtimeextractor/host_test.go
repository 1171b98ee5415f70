package runtimeextractor

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/openshift/library-go/pkg/operator/events"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/insights-runtime-extractor/controller/pkg/config"
	"github.com/insights-runtime-extractor/controller/pkg/internal/fakeapi"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
)

// The host operator sends on updateCh and on its config channel (both with a
// buffer of 1) with blocking sends. While an Apply is held open by the API
// server, every such send must still return at once: the controller drains
// both channels off its control loop.
func TestHostSendsNeverBlockWhileAnActionRuns(t *testing.T) {
	api := fakeapi.New()
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	api.Client.PrependReactor("create", "daemonsets", func(clienttesting.Action) (bool, runtime.Object, error) {
		once.Do(func() { close(entered) })
		<-release // the first apply hangs until the test lets it go
		return false, nil, nil
	})
	rec := events.NewInMemoryRecorder("test", clocktesting.NewFakePassiveClock(time.Now()))
	factory := informers.NewSharedInformerFactoryWithOptions(api.Client, 0, informers.WithNamespace(resources.Namespace))
	ri, err := NewResourceInformer(rec, factory)
	if err != nil {
		t.Fatal(err)
	}
	updateCh := make(chan struct{}, 1)
	hostConfig := &stubNotifier{cfg: config.Default(), ch: make(chan struct{}, 1)}
	c := NewRuntimeExtractorController(hostConfig, updateCh, nil, api.Client, rec, ri,
		WithImages(resources.DefaultImages()), WithVersionSource(newSettableVersion("4.21.0")))
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); ri.Run(ctx, 1) }()
	go func() { defer wg.Done(); c.Run(ctx) }()
	defer func() { close(release); cancel(); wg.Wait(); factory.Shutdown() }()

	<-entered
	var longest time.Duration
	for i := 0; i < 20; i++ {
		for _, ch := range []chan struct{}{updateCh, hostConfig.ch} {
			start := time.Now()
			select {
			case ch <- struct{}{}: // what a blocking send would do, bounded here
			case <-time.After(5 * time.Second):
				t.Fatalf("send %d blocked for 5 s while the apply was held open", i)
			}
			longest = max(longest, time.Since(start))
		}
	}
	select {
	case <-release:
		t.Fatal("the apply was released early")
	default:
	}
	t.Logf("longest host send while an apply was held open: %s", longest)
}
