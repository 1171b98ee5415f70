package fakeapi

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	clienttesting "k8s.io/client-go/testing"
)

// trackedClientset is what client-go's and openshift/client-go's generated
// fake clientsets have in common.
type trackedClientset interface {
	PrependWatchReactor(resource string, reaction clienttesting.WatchReactionFunc)
	Tracker() clienttesting.ObjectTracker
}

// WatchStarted serves every watch of resource on c from c's tracker, and
// returns a channel closed once the first such watch is registered there.
//
// The fake's watch ignores the resourceVersion its informer listed at, so a
// change made after the informer synced but before its watch started is lost
// for good; a test that changes objects after the sync waits for this first.
// Call it before any reactor of the test's own on the same watch: those run
// before it and may still pass the watch on.
func WatchStarted(c trackedClientset, resource string) <-chan struct{} {
	started := make(chan struct{})
	var once sync.Once
	c.PrependWatchReactor(resource, func(a clienttesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := a.(clienttesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := c.Tracker().Watch(a.GetResource(), a.GetNamespace(), opts)
		if err != nil {
			return true, nil, err
		}
		once.Do(func() { close(started) })
		return true, w, nil
	})
	return started
}

// Closed reports whether ch is closed, for a poll.
func Closed(ch <-chan struct{}) func() bool {
	return func() bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
}
