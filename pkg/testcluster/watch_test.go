package testcluster

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

func TestEachEventRecordsUntilTheWatchEnds(t *testing.T) {
	w := watch.NewFake()
	var names []string
	done := EachEvent(context.Background(), w, func(ev watch.Event) {
		names = append(names, ev.Object.(*corev1.Pod).Name)
	})
	for _, name := range []string{"a", "b"} {
		w.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}})
	}
	w.Stop()
	<-done
	if len(names) != 2 || names[0] != "a" || names[1] != "b" {
		t.Fatalf("recorded %v, want [a b]", names)
	}
}

func TestEachEventStopsTheWatchWhenCtxIsDone(t *testing.T) {
	w := watch.NewFake()
	ctx, cancel := context.WithCancel(context.Background())
	done := EachEvent(ctx, w, func(watch.Event) { t.Error("no event was sent") })
	cancel()
	<-done
	if !w.IsStopped() {
		t.Fatal("the watch was not stopped")
	}
}
