package runtimeextractor

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/insights-runtime-extractor/controller/pkg/status"
)

// Status writes are bounded and retried on their own schedule.
const (
	statusTimeout = 10 * time.Second
	statusRetry   = 5 * time.Second
)

// statusWriter writes the conditions off the control loop. The loop hands over
// the latest snapshot and never waits for the API server, so a slow or failing
// status write delays neither drift repair nor retries; snapshots that pile up
// meanwhile collapse into the latest.
type statusWriter struct {
	reporter *status.Reporter
	clock    clock.Clock

	mu     sync.Mutex
	latest *status.Snapshot
	wake   chan struct{}
}

func newStatusWriter(r *status.Reporter) *statusWriter {
	return &statusWriter{reporter: r, clock: clock.RealClock{}, wake: make(chan struct{}, 1)}
}

// offer replaces the pending snapshot; it never blocks.
func (w *statusWriter) offer(s status.Snapshot) {
	w.mu.Lock()
	w.latest = &s
	w.mu.Unlock()
	notify(w.wake)
}

// run writes offered snapshots until ctx is done. A failed write is retried
// after statusRetry unless a newer snapshot is written first: a success
// forgets the failed one, which is older.
func (w *statusWriter) run(ctx context.Context) {
	var (
		failed *status.Snapshot
		retry  clock.Timer
		retryC <-chan time.Time
	)
	stopRetry := func() {
		if retry != nil {
			retry.Stop()
		}
		failed, retry, retryC = nil, nil, nil
	}
	defer stopRetry()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-retryC:
			retryC = nil
			w.mu.Lock()
			if w.latest == nil {
				w.latest = failed
			}
			w.mu.Unlock()
		}
		w.mu.Lock()
		s := w.latest
		w.latest = nil
		w.mu.Unlock()
		if s == nil {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, statusTimeout)
		err := w.reporter.Report(rctx, *s)
		cancel()
		switch {
		case err == nil:
			stopRetry()
		case !errors.Is(err, context.Canceled):
			klog.Warningf("report status (retrying in %s): %v", statusRetry, err)
			stopRetry()
			failed, retry = s, w.clock.NewTimer(statusRetry)
			retryC = retry.C()
		}
	}
}
