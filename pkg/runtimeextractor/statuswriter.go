package runtimeextractor

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/pkg/status"
)

// statusWriter writes the conditions off the loop, so a slow write delays no repair; offers collapse into the latest.
type statusWriter struct {
	reporter *status.Reporter
	clock    clock.Clock

	mu     sync.Mutex
	latest *pending // only its snapshot and conditions
	wake   chan struct{}
}

// offer replaces the pending snapshot, with its conditions; it never blocks.
func (w *statusWriter) offer(s status.Snapshot, conds []configv1.ClusterOperatorStatusCondition) {
	w.mu.Lock()
	w.latest = &pending{snapshot: s, conditions: conds}
	w.mu.Unlock()
	notify(w.wake)
}

// pending is a change not yet written.
type pending struct {
	snapshot      status.Snapshot
	conditions    []configv1.ClusterOperatorStatusCondition
	since         time.Time // the first unwritten change
	changedAt     time.Time // the last change of the conditions
	retryAt       time.Time // after a failed write, not before this
	absent        bool      // no ClusterOperator: its appearance (Changed) or a change retries
	serverChanged bool      // what was written may be gone from the ClusterOperator
}

// run writes offered snapshots when due, a failed write again after statusRetry. Without a ClusterOperator nothing is
// sent until the Reporter sees one (Changed); when it changes, the last written is reported again (a request if lost).
func (w *statusWriter) run(ctx context.Context) {
	var (
		written      *status.Snapshot // the server last accepted it; nil once no ClusterOperator was found
		writtenConds []configv1.ClusterOperatorStatusCondition
		writtenAt    time.Time
		next         *pending
		timer        = alarm{clock: w.clock} // stopped once fired
	)
	defer timer.stop()
	// A recheck (of the snapshot written) does not count for the spacing of writes.
	attempt := func(now time.Time, recheck bool) {
		rctx, cancel := context.WithTimeout(ctx, statusTimeout)
		err := w.reporter.Report(rctx, next.snapshot)
		cancel()
		switch {
		case err == nil:
			written, writtenConds, next = &next.snapshot, next.conditions, nil
			if !recheck {
				writtenAt = now
			}
		case errors.Is(err, status.ErrMissing): // the Reporter logged it
			written, writtenConds = nil, nil
			next.absent, next.retryAt = true, time.Time{}
		default:
			if !errors.Is(err, context.Canceled) {
				klog.Warningf("report status (retrying in %s): %v", statusRetry, err)
			}
			next.retryAt = now.Add(statusRetry)
			timer.follow(next.retryAt, true)
		}
	}
	recheck := func(now time.Time) {
		next = &pending{snapshot: *written, conditions: writtenConds, since: now, changedAt: now}
		attempt(now, true)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-timer.C():
			timer.stop()
		case <-w.reporter.Changed():
			now := w.clock.Now()
			switch {
			case next != nil && next.absent:
				attempt(now, false) // it may have appeared: the latest at once
			case next != nil:
				next.serverChanged = true // the pending write compares anyway
			case written != nil:
				recheck(now)
			}
			continue
		}
		now := w.clock.Now()
		w.mu.Lock()
		offered := w.latest
		w.latest = nil
		w.mu.Unlock()
		if offered != nil {
			switch {
			case written != nil && status.SameConditions(offered.conditions, writtenConds):
				// Back to what is written: nothing to write, unless the ClusterOperator changed.
				if next != nil && next.serverChanged {
					recheck(now)
				} else {
					next = nil
				}
			case next == nil:
				offered.since, offered.changedAt = now, now
				next = offered
			default:
				if !status.SameConditions(offered.conditions, next.conditions) {
					next.changedAt, next.absent = now, false
				}
				next.snapshot, next.conditions = offered.snapshot, offered.conditions
			}
		}
		if next == nil || next.absent {
			continue
		}
		if due := next.due(writtenConds, writtenAt); now.Before(due) {
			if offered != nil || timer.C() == nil {
				timer.follow(due, true)
			}
			continue
		}
		attempt(now, false)
	}
}

// due is when p is written, given the conditions last written and when: but for a new failure, StatusMaxDelay apart.
func (p *pending) due(written []configv1.ClusterOperatorStatusCondition, writtenAt time.Time) time.Time {
	if reason := degradedReason(p.conditions); reason != "" && reason != degradedReason(written) {
		return laterOf(p.since, p.retryAt) // a new failure: Degraded turns True, or True with another reason
	}
	at := p.since.Add(StatusMaxDelay)
	if !slices.Contains(inProgress, p.snapshot.State) {
		if settled := p.changedAt.Add(StatusSettle); settled.Before(at) {
			at = settled
		}
	}
	if !writtenAt.IsZero() {
		at = laterOf(at, writtenAt.Add(StatusMaxDelay))
	}
	return laterOf(at, p.retryAt)
}

func laterOf(a, b time.Time) time.Time {
	if a.Before(b) {
		return b
	}
	return a
}

// inProgress: states that converge on their own within moments.
var inProgress = []fsm.State{fsm.StateDeploying, fsm.StateUpgrading, fsm.StateDrifted, fsm.StateDeleting}
