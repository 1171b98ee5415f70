package core

import (
	"time"

	"github.com/insights-runtime-extractor/controller/pkg/repairgate"
)

// The loop's side of the repair gate. The rules (the budget, the order of
// repairs inside it, the fight verdict) are package repairgate's, a pure
// function of its log; this keeps the log, whether a repair waits or was
// allowed, and the gate's deadline: the deferred repair, or the first
// fight's end.
type gate struct {
	log      repairgate.Log
	granted  bool // the gate allowed the outstanding repair: its write (or the retry of it) may be made
	deferred bool // a repair waits for the gate: its deadline makes it
	lostRace bool // the level's last apply lost a race to another writer and wrote nothing
}

// FightChange is how one of the gate's steps moved the fight verdict.
type FightChange struct{ Started, Ended bool }

// step runs one of the gate's functions and reports how it moved the
// verdict.
func (s *State) step(f func(repairgate.Log) repairgate.Log) FightChange {
	was := s.gate.log.Fighting()
	s.gate.log = f(s.gate.log)
	is := s.gate.log.Fighting()
	return FightChange{Started: !was && is, Ended: was && !is}
}

// Policy is the repair gate's rules.
func (s *State) Policy() repairgate.Policy { return s.policy }

// Log is the repair gate's log, for what status and the log lines say.
func (s *State) Log() repairgate.Log { return s.gate.log }

// Outstanding: someone else changed the DaemonSet, and no write of the
// controller has undone it yet. The next write that changes the DaemonSet
// is its repair, whatever led to it.
func (s *State) Outstanding() bool { return s.gate.log.Outstanding() }

// Fighting: some writer is in a tug-of-war with the controller.
func (s *State) Fighting() bool { return s.gate.log.Fighting() }

// Changed records someone else's change, by the writers named, that the
// level wants repaired. wait is how long its repair must wait (0: the loop
// repairs it now, and Grants it).
func (s *State) Changed(writers []string, now time.Time) (wait time.Duration, fc FightChange) {
	var dec repairgate.Decision
	fc = s.step(func(l repairgate.Log) repairgate.Log {
		l, dec = s.policy.Changed(l, writers, now)
		return l
	})
	if dec.Repair {
		s.gate.deferred = false
		return 0, fc
	}
	s.gate.granted, s.gate.deferred = false, true
	return dec.At.Sub(now), fc
}

// Deferring: a repair waits for the gate's deadline.
func (s *State) Deferring() bool { return s.gate.deferred }

// RolloutCounts: what the DaemonSet rolls out is what the level wants. It
// is not while a repair waits for the gate, nor after the level's apply lost
// a race to another writer (the other writer's change is the gate's to
// repair): an upgrade not written yet is not complete.
func (s *State) RolloutCounts() bool { return !s.gate.deferred && !s.gate.lostRace }

// MayWrite is the gate's answer for any write that would undo an
// outstanding change (a repair, whatever asked for it: drift, a retry, a
// re-assert, a version or TLS change): true when nothing is outstanding,
// when the gate allowed this repair, or when its budget and quiet allow it
// now. A write it refuses waits for the gate's deadline, which makes it
// when due.
func (s *State) MayWrite(now time.Time) bool {
	if !s.Outstanding() || s.gate.granted {
		return true
	}
	if _, dec := s.policy.Due(s.gate.log, now); dec.Repair {
		return true
	}
	s.gate.deferred = true
	return false
}

// Applied records the outcome of an apply the gate let through: lost, when
// it lost a race to another writer and wrote nothing.
func (s *State) Applied(lost bool) { s.gate.lostRace = lost }

// GateDue answers the gate's deadline: repair is true when the deferred
// repair is due now and the level still wants it (enabled); the loop then
// Grants and makes it. A level that does not want it drops
// the deadline's claim; a write it allows later asks MayWrite.
func (s *State) GateDue(enabled bool, now time.Time) (repair bool, fc FightChange) {
	var dec repairgate.Decision
	fc = s.step(func(l repairgate.Log) repairgate.Log {
		l, dec = s.policy.Due(l, now)
		return l
	})
	switch {
	case !s.gate.deferred:
		return false, fc
	case !enabled: // disabled since, or holding: no repair is due
		s.gate.deferred = false
		return false, fc
	case !dec.Repair:
		return false, fc // the deadline follows the gate; it comes again when due
	}
	s.gate.deferred = false
	return true, fc
}

// Grant lets the outstanding repair through: the gate allowed it now, and
// nothing waits any more.
func (s *State) Grant() { s.gate.granted, s.gate.deferred = true, false }

// Repaired records a repair that wrote: it undid every outstanding change.
func (s *State) Repaired(now time.Time) {
	s.gate.granted, s.gate.deferred = false, false
	s.gate.log = s.policy.Repaired(s.gate.log, now)
}

// Stood records that a repair found nothing to undo: the other writers put
// back what the controller wants.
func (s *State) Stood(now time.Time) {
	s.gate.granted, s.gate.deferred = false, false
	s.gate.log = s.policy.Stood(s.gate.log, now)
}

// ForgetWriters forgets the writers and the outstanding changes (Run ends,
// or the DaemonSet is deleted); it reports whether that ended a fight. The
// budget stays: repairs it paid for were made.
func (s *State) ForgetWriters() (ended bool) {
	ended = s.Fighting()
	s.gate.log = repairgate.ForgetWriters(s.gate.log)
	s.gate.granted, s.gate.deferred = false, false
	s.timers[PartGate].Stop()
	return ended
}

// FollowGate arms the gate's deadline for its next instant, or clears it:
// when the deferred repair may be due, else when the first fight may end.
// A repair under way (an action's retry carries it on) needs no deadline.
func (s *State) FollowGate(now time.Time) {
	next := s.policy.FightEnds(s.gate.log)
	if s.gate.deferred {
		if _, dec := s.policy.Due(s.gate.log, now); dec.Repair {
			next = now
		} else if next.IsZero() || dec.At.Before(next) {
			next = dec.At
		}
	}
	if next.IsZero() {
		s.timers[PartGate].Stop()
		return
	}
	s.timers[PartGate].ArmAt(next)
}
