package runtimeextractor

import (
	"time"

	"k8s.io/utils/clock"
)

// Coalescing of level signals (config and version notifications). The first
// signal after a quiet spell is acted on at once; signals that arrive within
// levelQuiet of the last action, or of each other, merge into one re-assert of
// the latest level once they stop, and a storm that never stops is still
// re-asserted every levelMaxDelay. 200 config toggles thus cost a handful of
// writes instead of 200, and the end state follows the last toggle within
// levelQuiet plus one action.
const (
	levelQuiet    = 200 * time.Millisecond
	levelMaxDelay = time.Second
)

// signalKind says which level a signal may have moved.
type signalKind int

const (
	signalConfig  signalKind = 1 << iota // insights-config (or the host's config)
	signalVersion                        // the cluster version (updateCh, ClusterVersion)
	signalTLS                            // the cluster TLS profile (WithTLSProfileSource)
)

// frontDoor decides when level signals are acted on. It is owned by the
// control loop's goroutine.
type frontDoor struct {
	clock clock.Clock

	lastAct     time.Time  // when the last level action ended
	queued      signalKind // signals queued for the trailing edge
	queuedSince time.Time  // the first queued signal
	lastSignal  time.Time  // the latest queued signal
	wakeAt      deadline   // the trailing edge, while signals are queued
}

func newFrontDoor(c clock.Clock) *frontDoor { return &frontDoor{clock: c, wakeAt: deadline{clock: c}} }

// admit reports whether a signal of kind k is acted on now (leading edge);
// otherwise it is queued, and wakeAt is when its trailing edge may be due.
func (d *frontDoor) admit(k signalKind) bool {
	now := d.clock.Now()
	if d.queued == 0 && now.Sub(d.lastAct) >= levelQuiet {
		return true
	}
	if d.queued == 0 {
		d.queuedSince = now
		d.wakeAt.arm(levelQuiet)
	}
	d.queued |= k
	d.lastSignal = now
	return false
}

// due is when the queued signals are acted on: once they have been quiet for
// levelQuiet, and no later than levelMaxDelay after the first.
func (d *frontDoor) due() time.Time {
	at := d.lastSignal.Add(levelQuiet)
	if capAt := d.queuedSince.Add(levelMaxDelay); capAt.Before(at) {
		return capAt
	}
	return at
}

// take, called when wakeAt comes, returns the queued signals and forgets them if
// they are due; otherwise it waits for the rest and returns 0.
func (d *frontDoor) take() signalKind {
	if d.queued == 0 {
		return 0
	}
	if wait := d.due().Sub(d.clock.Now()); wait > 0 {
		d.wakeAt.arm(wait)
		return 0
	}
	k := d.queued
	d.queued = 0
	d.wakeAt.stop()
	return k
}

// reset forgets queued signals (Run ends).
func (d *frontDoor) reset() {
	d.queued = 0
	d.wakeAt.stop()
}

// acted records the end of a level action; signals within levelQuiet of it
// are queued.
func (d *frontDoor) acted() { d.lastAct = d.clock.Now() }
