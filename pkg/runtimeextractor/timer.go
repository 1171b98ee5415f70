package runtimeextractor

import (
	"time"

	"k8s.io/utils/clock"
)

// loopTimer is one of the control loop's timers, on the controller's clock
// (a test's fake clock moves them all). Owned by the loop's goroutine.
type loopTimer struct {
	clock clock.Clock
	t     clock.Timer
	at    time.Time // when it fires; meaningful while armed
}

// C fires once when the timer is due; nil (never ready) while disarmed.
func (l *loopTimer) C() <-chan time.Time {
	if l.t == nil {
		return nil
	}
	return l.t.C()
}

func (l *loopTimer) armed() bool { return l.t != nil }

// arm (re-)arms the timer to fire after d.
func (l *loopTimer) arm(d time.Duration) {
	l.stop()
	d = max(d, 0)
	l.t, l.at = l.clock.NewTimer(d), l.clock.Now().Add(d)
}

// armAt arms the timer for at, unless it is armed for at already: a deadline
// that did not move keeps its timer.
func (l *loopTimer) armAt(at time.Time) {
	if l.t == nil || !at.Equal(l.at) {
		l.arm(at.Sub(l.clock.Now()))
		l.at = at
	}
}

// fired records that C delivered: the timer is disarmed.
func (l *loopTimer) fired() { l.t = nil }

func (l *loopTimer) stop() {
	if l.t != nil {
		l.t.Stop()
		l.t = nil
	}
}
