package core

import (
	"testing"
	"time"
)

// doorRun is a state whose front door has admitted a first signal, at once,
// and acted on it: the start of every scenario here. now is its time.
type doorRun struct {
	s   *State
	now time.Time
}

func doorAfterAction(t *testing.T) *doorRun {
	t.Helper()
	r := &doorRun{s: New(testPolicy(), time.Minute), now: time.Unix(1_000_000, 0)}
	if !r.s.admit(SignalConfig, r.now) {
		t.Fatal("the first signal was held")
	}
	r.s.acted(r.now)
	return r
}

func (r *doorRun) step(d time.Duration) { r.now = r.now.Add(d) }

// fired reports whether the door's trailing edge is due, and then takes what
// it queued, as the control loop does.
func (r *doorRun) fired() (Signal, bool) {
	if !r.s.Fire(PartDoor, r.now) {
		return 0, false
	}
	k := r.s.take(r.now)
	return k, k != 0
}

func TestFrontDoorActsAtOnceAfterQuiet(t *testing.T) {
	r := doorAfterAction(t)
	r.step(LevelQuiet)
	if !r.s.admit(SignalConfig, r.now) {
		t.Fatal("a signal after a quiet spell was held")
	}
	if _, armed := r.s.Deadline(); armed {
		t.Fatal("a deadline is set with nothing queued")
	}
}

func TestFrontDoorMergesABurstIntoOneTrailingEdge(t *testing.T) {
	r := doorAfterAction(t)
	for range 3 {
		r.step(LevelQuiet / 4)
		if r.s.admit(SignalConfig, r.now) {
			t.Fatal("a signal within the quiet window was acted on at once")
		}
	}
	r.s.admit(SignalVersion, r.now)
	r.step(LevelQuiet - time.Millisecond)
	if _, ok := r.fired(); ok {
		t.Fatal("the trailing edge came before the burst was quiet")
	}
	r.step(time.Millisecond)
	k, ok := r.fired()
	if !ok {
		t.Fatal("no trailing edge once the burst was quiet")
	}
	if k != SignalConfig|SignalVersion {
		t.Fatalf("held %b, want both kinds", k)
	}
	if _, armed := r.s.At(PartDoor); armed {
		t.Fatal("still armed after take")
	}
}

// A storm that never pauses is still acted on every LevelMaxDelay.
func TestFrontDoorCapsANeverEndingStorm(t *testing.T) {
	r := doorAfterAction(t)
	const tick = 10 * time.Millisecond
	edges := 0
	for elapsed := time.Duration(0); elapsed < 10*LevelMaxDelay; elapsed += tick {
		r.step(tick)
		r.s.admit(SignalConfig, r.now)
		if _, ok := r.fired(); ok {
			edges++
			r.s.acted(r.now)
		}
	}
	if edges < 9 || edges > 11 {
		t.Fatalf("%d trailing edges in %s of storm, want one per %s", edges, 10*LevelMaxDelay, LevelMaxDelay)
	}
}
