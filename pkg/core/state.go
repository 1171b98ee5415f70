// Package core is the control loop's decisions, as one value: when level
// signals are acted on (the front door), what a drain of someone else's
// drift leads to, whether each apply may be made now and whether it is a
// repair the budget pays for (the repair gate), when a failed action is
// retried, and when each part of the loop next needs it. It is pure: every
// method that decides takes the current time, and nothing here reads a
// clock, arms a timer, starts a goroutine or does I/O. The control loop (package
// runtimeextractor) feeds it what happened, carries out what it answers,
// arms its one timer at State.Deadline and, when that fires, runs the parts
// State.Due names.
package core

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Part names a part of the loop that has a deadline. Parts whose deadlines
// come at the same instant run in this order.
type Part int

const (
	PartDoor    Part = iota // the front door's trailing edge
	PartRetry               // a failed action's retry
	PartExpect              // an own write the cache has yet to show
	PartGate                // a deferred repair, or the end of a fight
	PartRollout             // a rollout's progress deadline
	numParts
)

var partNames = [numParts]string{"door", "retry", "expect", "gate", "rollout"}

func (p Part) String() string { return partNames[p] }

// deadline is when a part next needs the loop: only a time.
type deadline struct {
	at  time.Time // meaningful while set
	set bool
}

func (d *deadline) armAt(at time.Time) { d.at, d.set = at, true }

func (d *deadline) stop() { d.set = false }

func (d *deadline) due(now time.Time) bool { return d.set && !now.Before(d.at) }

// State is the loop's timing and repair decisions. Its zero value is not
// usable: New sets the rules.
type State struct {
	policy  Policy
	inertia time.Duration // how long failures last before they persist
	timers  [numParts]deadline
	door    door
	gate    gate
	retry   retry
	rollout rollout
}

// New returns the state of a loop that has done nothing yet, with the repair
// gate's rules and the failures' inertia.
func New(policy Policy, inertia time.Duration) *State {
	return &State{policy: policy, inertia: inertia}
}

// At is part p's deadline, if it has one.
func (s *State) At(p Part) (time.Time, bool) { return s.timers[p].at, s.timers[p].set }

// Fire clears part p's deadline if it has come at now, and reports whether
// it had: the loop then runs the part.
func (s *State) Fire(p Part, now time.Time) bool {
	if !s.timers[p].due(now) {
		return false
	}
	s.timers[p].stop()
	return true
}

// Deadline is the earliest deadline of the parts: when the loop's one timer
// fires.
func (s *State) Deadline() (time.Time, bool) {
	var at time.Time
	for i := range s.timers {
		if t := &s.timers[i]; t.set && (at.IsZero() || t.at.Before(at)) {
			at = t.at
		}
	}
	return at, !at.IsZero()
}

// Due returns the parts whose deadlines have come at now, earliest first
// (in Part order on a tie). The loop stops each deadline that is still due
// when its turn comes (Fire), and runs the part: an earlier part's action
// may have moved a later one's.
func (s *State) Due(now time.Time) []Part {
	var due []Part
	for p := range numParts {
		if s.timers[p].due(now) {
			due = append(due, p)
		}
	}
	slices.SortStableFunc(due, func(a, b Part) int { return s.timers[a].at.Compare(s.timers[b].at) })
	return due
}

// Key is the state as a canonical string, every time relative to now: two
// states with one key decide the same from now on, whatever brought them
// there. The convergence model merges states by it.
func (s *State) Key(now time.Time) string {
	rel := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.Sub(now).String()
	}
	var b strings.Builder
	for p := range numParts {
		if t := s.timers[p]; t.set {
			fmt.Fprintf(&b, "%s@%s ", p, rel(t.at))
		}
	}
	fmt.Fprintf(&b, "door=%b since=%s last=%s act=%s ", s.door.queued, rel(s.door.queuedSince), rel(s.door.lastSignal), rel(s.door.lastAct))
	fmt.Fprintf(&b, "rollout=%+v since=%s ", s.rollout.progress, rel(s.rollout.since))
	fmt.Fprintf(&b, "deferred=%v granted=%v lost=%v failures=%d own=%v failing since=%s gate: %s",
		s.gate.deferred, s.gate.granted, s.gate.lostRace, s.retry.failures, s.retry.ownInput, rel(s.retry.since), s.gate.log.Key(now))
	return b.String()
}

// Stopped is Run's end: nothing is queued, armed or lost for a later Run.
// The budget and the failures stay: the repairs it paid for were made, and
// the failures were the cluster's answers.
func (s *State) Stopped() {
	s.door.queued = 0
	s.gate.lostRace = false
	s.retry.retryIn = 0
	s.rollout = rollout{}
	for i := range s.timers {
		s.timers[i].stop()
	}
}
