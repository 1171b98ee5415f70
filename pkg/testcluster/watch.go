package testcluster

import (
	"context"

	"k8s.io/apimachinery/pkg/watch"
)

// EachEvent calls record with every event of w, on a goroutine of its own,
// until ctx is done or w ends; then it stops w and closes the channel it
// returned. A retry watcher (k8s.io/client-go/tools/watch) for w makes a
// recording that survives the API server closing its watches.
func EachEvent(ctx context.Context, w watch.Interface, record func(watch.Event)) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				record(ev)
			}
		}
	}()
	return done
}
