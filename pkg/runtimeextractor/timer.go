package runtimeextractor

import (
	"time"

	"k8s.io/utils/clock"
)

// alarm is the loop's one timer: armed for the core's deadline, the
// earliest of its parts', as a raft node's tick drives every timeout of the
// node.
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
