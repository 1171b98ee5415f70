package runtimeextractor

import (
	"time"

	"k8s.io/utils/clock"
)

// alarm is the loop's one timer, armed for the core's deadline (its parts' earliest).
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

// follow arms the alarm for at, or disarms it when !ok; one armed for a later at keeps its timer
// (one due may have fired, and a timer fires once).
func (a *alarm) follow(at time.Time, ok bool) {
	if ok && a.t != nil && at.Equal(a.at) && a.clock.Now().Before(at) {
		return
	}
	a.stop()
	if ok {
		a.t, a.at = a.clock.NewTimer(max(at.Sub(a.clock.Now()), 0)), at
	}
}

func (a *alarm) stop() {
	if a.t != nil {
		a.t.Stop()
		a.t = nil
	}
}
