package runtimeextractor

import (
	"slices"
	"sync"
)

// syncList is a record the controller's goroutines append to while the test
// reads it.
type syncList[T any] struct {
	mu    sync.Mutex
	items []T
}

func (l *syncList[T]) add(v T) {
	l.mu.Lock()
	l.items = append(l.items, v)
	l.mu.Unlock()
}

// list returns a copy of what was added so far, in order.
func (l *syncList[T]) list() []T {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]T(nil), l.items...)
}

// any reports whether something added so far satisfies pred.
func (l *syncList[T]) any(pred func(T) bool) bool {
	return slices.ContainsFunc(l.list(), pred)
}
