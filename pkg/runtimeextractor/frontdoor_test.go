package runtimeextractor

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// fired reports whether the door's trailing edge is due, and then takes what
// it queued, as the control loop does.
func fired(d *frontDoor) (signalKind, bool) {
	if !d.wakeAt.due(d.clock.Now()) {
		return 0, false
	}
	d.wakeAt.stop()
	k := d.take()
	return k, k != 0
}

// doorAfterAction is a new front door that has admitted a first signal, at
// once, and acted on it: the start of every scenario here.
func doorAfterAction(t *testing.T) (*clocktesting.FakeClock, *frontDoor) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Now())
	d := newFrontDoor(clk)
	if !d.admit(signalConfig) {
		t.Fatal("the first signal was held")
	}
	d.acted()
	return clk, d
}

func TestFrontDoorActsAtOnceAfterQuiet(t *testing.T) {
	clk, d := doorAfterAction(t)
	clk.Step(levelQuiet)
	if !d.admit(signalConfig) {
		t.Fatal("a signal after a quiet spell was held")
	}
	if d.wakeAt.armed() {
		t.Fatal("a deadline is set with nothing queued")
	}
}

func TestFrontDoorMergesABurstIntoOneTrailingEdge(t *testing.T) {
	clk, d := doorAfterAction(t)
	for range 3 {
		clk.Step(levelQuiet / 4)
		if d.admit(signalConfig) {
			t.Fatal("a signal within the quiet window was acted on at once")
		}
	}
	d.admit(signalVersion)
	clk.Step(levelQuiet - time.Millisecond)
	if _, ok := fired(d); ok {
		t.Fatal("the trailing edge came before the burst was quiet")
	}
	clk.Step(time.Millisecond)
	k, ok := fired(d)
	if !ok {
		t.Fatal("no trailing edge once the burst was quiet")
	}
	if k != signalConfig|signalVersion {
		t.Fatalf("held %b, want both kinds", k)
	}
	if d.wakeAt.armed() {
		t.Fatal("still armed after take")
	}
}

// A storm that never pauses is still re-asserted every levelMaxDelay.
func TestFrontDoorCapsANeverEndingStorm(t *testing.T) {
	clk, d := doorAfterAction(t)
	const tick = 10 * time.Millisecond
	edges := 0
	for elapsed := time.Duration(0); elapsed < 10*levelMaxDelay; elapsed += tick {
		clk.Step(tick)
		d.admit(signalConfig)
		if _, ok := fired(d); ok {
			edges++
			d.acted()
		}
	}
	if edges < 9 || edges > 11 {
		t.Fatalf("%d trailing edges in %s of storm, want one per %s", edges, 10*levelMaxDelay, levelMaxDelay)
	}
}
