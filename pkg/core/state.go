// Package core is the control loop's decisions as one pure value: what each wake-up leads to (State.Step), whose
// drift is (Classify), the front door for level signals, the repair gate, retries, deadlines and Event texts (Cause).
// Deciding methods take the current time; nothing here reads a clock, arms a timer, starts a goroutine or does I/O.
// The loop (package runtimeextractor) feeds it what happened, does its effects, and arms one timer at State.Deadline.
package core

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/insights-runtime-extractor/controller/fsm"
)

// Part names a part of the loop with a deadline; parts due at one instant run in this order.
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

// State is the loop's timing and repair decisions. Its zero value is unusable: New sets the rules.
type State struct {
	policy          Policy
	inertia         time.Duration // how long failures last before they persist
	machine         *fsm.Machine
	applying        fsm.Transition      // the transition whose apply the shell is making
	applyingVerdict Write               // askWrite's verdict on it
	running         bool                // between InputStart and InputStop
	timers          [numParts]time.Time // when each part next needs the loop; zero: never
	door            door
	gate            gate
	retry           retry
	rollout         Rollout   // the rollout followed
	rolledAt        time.Time // its last progress
	next            Repair    // what the next repair undoes

	version     string      // the target version last read
	upgradeFrom string      // the version before the current upgrade, for its Event
	deleted     []types.UID // the controller's own deletes, newest last: their events are not drift
	deletedAny  bool        // the controller deleted the DaemonSet as disabled: a create re-enables it
}

// New returns the state of a loop that has done nothing yet.
func New(policy Policy, inertia time.Duration) *State {
	return &State{policy: policy, inertia: inertia, machine: fsm.New(fsm.StateDisabled)}
}

// Version is the target version last read.
func (s *State) Version() string { return s.version }

// seeVersion records the target version v and whether it moved, from what. keepFrom: the upgrade
// (its Event's "from") started earlier: one overtaken by another, or none at a Run's start.
func (s *State) seeVersion(v string, keepFrom bool) (from string, moved bool) {
	from, moved = s.version, v != s.version
	if moved && !keepFrom {
		s.upgradeFrom = from
	}
	s.version = v
	return from, moved
}

// transitioned follows the machine: Running or Disabled ends an upgrade, and in Disabled the
// DaemonSet is gone, however it went, so no change is left to repair. ended: a fight ended.
func (s *State) transitioned(to fsm.State) (ended bool) {
	if to == fsm.StateRunning || to == fsm.StateDisabled {
		s.upgradeFrom = ""
	}
	return to == fsm.StateDisabled && s.forgetWriters()
}

// ownDelete records the controller's delete of uid, whose event is then not drift; disabling: not a replacement.
func (s *State) ownDelete(uid types.UID, disabling bool) {
	s.deleted = keepLast(append(s.deleted, uid), 4) // their events come within moments
	s.deletedAny = s.deletedAny || disabling
}

// At is part p's deadline, if it has one.
func (s *State) At(p Part) (time.Time, bool) { return s.timers[p], !s.timers[p].IsZero() }

// Fire clears p's deadline and reports true if it has come at now; Step then runs p.
func (s *State) Fire(p Part, now time.Time) bool {
	if !s.due(p, now) {
		return false
	}
	s.timers[p] = time.Time{}
	return true
}

func (s *State) due(p Part, now time.Time) bool {
	return !s.timers[p].IsZero() && !now.Before(s.timers[p])
}

// Deadline is the parts' earliest deadline, when the loop's one timer fires.
func (s *State) Deadline() (time.Time, bool) {
	armed := slices.DeleteFunc(slices.Clone(s.timers[:]), time.Time.IsZero)
	if len(armed) == 0 {
		return time.Time{}, false
	}
	return slices.MinFunc(armed, time.Time.Compare), true
}

// Due returns the parts due at now, earliest first (Part order on a tie); each runs if Fire still finds it due.
func (s *State) Due(now time.Time) []Part {
	var due []Part
	for p := range numParts {
		if s.due(p, now) {
			due = append(due, p)
		}
	}
	slices.SortStableFunc(due, func(a, b Part) int { return s.timers[a].Compare(s.timers[b]) })
	return due
}

// Key is the state, the gate's log included, as a canonical string with times relative to now:
// states with one key decide alike from now on (the convergence model merges states by it).
func (s *State) Key(now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s running=%t ", s.machine.State(), s.running)
	for p := range numParts {
		if t := s.timers[p]; !t.IsZero() {
			fmt.Fprintf(&b, "%s@%s ", p, rel(t, now))
		}
	}
	fmt.Fprintf(&b, "door=%b since=%s last=%s act=%s ", s.door.queued,
		rel(s.door.queuedSince, now), rel(s.door.lastSignal, now), rel(s.door.lastAct, now))
	fmt.Fprintf(&b, "rollout=%+v since=%s ", s.rollout, rel(s.rolledAt, now))
	// Versions and UIDs are marked, so that a reader may name them (the model numbers them).
	fmt.Fprintf(&b, "version=V:%s from=V:%s reenable=%t deleted=", s.version, s.upgradeFrom, s.deletedAny)
	for _, uid := range s.deleted {
		fmt.Fprintf(&b, "UID:%s ", uid)
	}
	l, budget := s.gate.log, "full" // a budget refilled long ago is the same as one just refilled
	if l.budgetAt.After(now) {
		budget = rel(l.budgetAt, now)
	}
	fmt.Fprintf(&b, "deferred=%v granted=%v lost=%v failures=%d own=%v failing since=%s gate: budget=%s since=%s last=%s undos=",
		s.gate.deferred, s.gate.granted, s.gate.lostRace, s.retry.failures, s.retry.ownInput, rel(s.retry.since, now),
		budget, rel(l.since, now), rel(l.last, now))
	for _, u := range l.undos {
		b.WriteString(rel(u, now) + ",")
	}
	for _, w := range l.writers {
		fmt.Fprintf(&b, " %s{out=%t rep=%t change=%s fight=%t since=%s n=%d undos=", w.Name, w.Outstanding, w.Repaired,
			rel(w.LastChange, now), w.Fight, rel(w.FightSince, now), w.FightUndos)
		for _, u := range w.Undos {
			b.WriteString(rel(u, now) + ",")
		}
		b.WriteString("}")
	}
	return b.String()
}

// rel renders t relative to now for the keys; "-" for the zero time.
func rel(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Sub(now).String()
}

// stopped is Run's end: nothing stays queued, armed or lost. The budget (its repairs were made) and the failures stay.
func (s *State) stopped() {
	s.running = false
	s.door.queued = 0
	s.gate.lostRace = false
	s.retry.retryIn = 0
	s.rollout, s.rolledAt = Rollout{}, time.Time{}
	s.timers = [numParts]time.Time{}
}
