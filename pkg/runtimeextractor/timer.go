package runtimeextractor

import (
	"time"

	"k8s.io/utils/clock"
)

// deadline is when a part of the loop next needs it, on the controller's
// clock. It is only a time: the loop's one alarm fires at the earliest of
// the parts' deadlines (nextDeadline), and the loop then runs each part
// whose deadline has come (onDeadlines). Owned by the loop's goroutine.
type deadline struct {
	clock clock.PassiveClock
	at    time.Time // meaningful while set
	set   bool
}

func (d *deadline) armed() bool { return d.set }

// arm sets the deadline d from now.
func (d *deadline) arm(after time.Duration) { d.at, d.set = d.clock.Now().Add(max(after, 0)), true }

// armAt sets the deadline at at.
func (d *deadline) armAt(at time.Time) { d.at, d.set = at, true }

func (d *deadline) stop() { d.set = false }

// due: the deadline is set and has come.
func (d *deadline) due(now time.Time) bool { return d.set && !now.Before(d.at) }

// alarm is the loop's one timer: armed for the earliest deadline of its
// parts, as a raft node's tick drives every timeout of the node.
type alarm struct {
	clock clock.Clock
	t     clock.Timer
	at    time.Time
}

// C fires once when the alarm is due; nil (never ready) while disarmed.
func (a *alarm) C() <-chan time.Time {
	if a.t == nil {
		return nil
	}
	return a.t.C()
}

// follow arms the alarm for at (at once when at has passed), or disarms it
// when !ok. An alarm armed for at already keeps its timer.
func (a *alarm) follow(at time.Time, ok bool) {
	if ok && a.t != nil && at.Equal(a.at) {
		return
	}
	a.stop()
	if ok {
		a.t, a.at = a.clock.NewTimer(max(at.Sub(a.clock.Now()), 0)), at
	}
}

// fired records that C delivered: the alarm is disarmed.
func (a *alarm) fired() { a.t = nil }

func (a *alarm) stop() {
	if a.t != nil {
		a.t.Stop()
		a.t = nil
	}
}
