package core

import "time"

// gate is the repair gate's state; policy.go has its rules.
type gate struct {
	log      Log
	granted  bool // the gate allowed the outstanding repair: its write (or its retry) may be made
	deferred bool // a repair waits for the gate's deadline
	lostRace bool // the level's last apply lost a race to another writer and wrote nothing
}

// The outstanding repair is granted, held for the deadline, or settled (made, found nothing
// to undo, dropped or forgotten).
func (g *gate) grant()  { g.granted, g.deferred = true, false }
func (g *gate) hold()   { g.granted, g.deferred = false, true }
func (g *gate) settle() { g.granted, g.deferred = false, false }

// FightChange is how one of the gate's steps moved the fight verdict.
type FightChange struct{ Started, Ended bool }

// step runs one of the gate's functions and reports how it moved the verdict.
func (s *State) step(f func(Log) Log) FightChange {
	was := s.gate.log.Fighting()
	s.gate.log = f(s.gate.log)
	is := s.gate.log.Fighting()
	return FightChange{Started: !was && is, Ended: was && !is}
}

// Policy is the repair gate's rules.
func (s *State) Policy() Policy { return s.policy }

// Log is the repair gate's log, for what status and the log lines say.
func (s *State) Log() Log { return s.gate.log }

// Outstanding: someone else changed the DaemonSet and no controller write has undone it
// yet. The next write that changes the DaemonSet is its repair, whatever led to it.
func (s *State) Outstanding() bool { return s.gate.log.Outstanding() }

// Fighting: some writer is in a tug-of-war with the controller.
func (s *State) Fighting() bool { return s.gate.log.Fighting() }

// Drift is what one drain of the informer showed, as the core needs it.
type Drift struct {
	Changed  bool     // someone else changed or deleted the DaemonSet (or a caller's informer says so)
	Writers  []string // who did, for the gate (Unnamed for no one in particular)
	Gone     bool     // an expected deletion: the controller's own, or in a state without the DaemonSet
	Present  bool     // the view shows a DaemonSet now
	Enabled  bool     // the level wants a DaemonSet
	Deleting bool     // the machine is deleting it
}

// DriftAction is what the loop does about a drain.
type DriftAction int

const (
	DriftIgnore   DriftAction = iota // nothing to act on
	DriftRepair                      // fire the drift now (Modified, or Deleted when gone): the gate allowed its repair
	DriftWait                        // the gate holds the repair back: its deadline makes it
	DriftReassert                    // re-assert the level (a disabled level deletes, never repairs)
	DriftDeleted                     // the controller's delete went through, though its call failed: fire Deleted
)

// OnDrift decides what the loop does about a drain, and how long a held repair waits. Only
// repairs wait for the gate: drift of a DaemonSet the level disables is deleted at once.
func (s *State) OnDrift(d Drift, now time.Time) (a DriftAction, wait time.Duration, fc FightChange) {
	switch {
	case d.Changed && d.Enabled:
		var dec Decision
		fc = s.step(func(l Log) Log {
			l, dec = s.policy.Changed(l, d.Writers, now)
			return l
		})
		if dec.Repair {
			s.gate.grant()
			return DriftRepair, 0, fc
		}
		s.gate.hold()
		return DriftWait, dec.At.Sub(now), fc
	case d.Changed: // disabled (a notification may be on its way): delete, never repair
		return DriftReassert, 0, fc
	case d.Gone && !d.Present && d.Deleting:
		return DriftDeleted, 0, fc
	case d.Gone && !d.Present && d.Enabled:
		// An expected deletion, yet a DaemonSet is wanted: one deleted while
		// insights-config disabled it, held by a finalizer until after it
		// enabled it again (the apply then found it terminating and could
		// not write it), or one replaced while held.
		return DriftReassert, 0, fc
	}
	return DriftIgnore, 0, fc
}

// Deferring: a repair waits for the gate's deadline.
func (s *State) Deferring() bool { return s.gate.deferred }

// RolloutCounts: the DaemonSet rolls out what the level wants; not while a repair waits,
// nor after the level's apply lost a race: an upgrade not written yet is not complete.
func (s *State) RolloutCounts() bool { return !s.gate.deferred && !s.gate.lostRace }

// Write is the core's verdict on an apply of the level.
type Write struct {
	Allowed bool // the apply may be made now; one held back waits for the gate's deadline
	// Repair: the apply would undo someone else's outstanding change, so it is gated and,
	// if it writes, counted against the budget and its writers.
	Repair bool
}

// AskWrite decides an apply of the level, whatever asked for it. A write while someone
// else's change is outstanding undoes it, so it is a repair, and no other write is; a
// repair is allowed once the gate granted it, or when its budget and quiet allow it now.
func (s *State) AskWrite(now time.Time) Write {
	if !s.Outstanding() {
		return Write{Allowed: true}
	}
	if s.gate.granted {
		return Write{Allowed: true, Repair: true}
	}
	if _, dec := s.policy.Due(s.gate.log, now); dec.Repair {
		return Write{Allowed: true, Repair: true}
	}
	s.gate.hold()
	return Write{Repair: true}
}

// ApplyOutcome is what an allowed apply did.
type ApplyOutcome int

const (
	ApplyChanged    ApplyOutcome = iota // it wrote a change
	ApplyUnchanged                      // the object was as the level wants: nothing to write
	ApplyFailed                         // it failed with an answer: nothing was written
	ApplyUnanswered                     // it failed without an answer: the write may have been made
	ApplyLost                           // it lost a race to another writer's change, and wrote nothing
)

// Wrote records what an apply AskWrite allowed (w) did. counted: the budget paid for a
// repair that wrote, or may have (its answer was lost; the retry then undoes nothing
// outstanding, so it is paid once). After a lost race, the other writer's change is the
// gate's to repair when it arrives as drift.
func (s *State) Wrote(w Write, o ApplyOutcome, now time.Time) (counted bool) {
	s.gate.lostRace = o == ApplyLost
	switch {
	case !w.Repair:
	case o == ApplyChanged || o == ApplyUnanswered:
		s.gate.settle()
		s.gate.log = s.policy.Repaired(s.gate.log, now)
		return true
	case o == ApplyUnchanged:
		s.gate.settle()
		s.gate.log = s.policy.Stood(s.gate.log, now)
	}
	return false
}

// GateDue answers the gate's deadline: repair when the deferred repair is due and the level
// still wants it (enabled). A level that does not want it drops the claim; a later write
// asks AskWrite.
func (s *State) GateDue(enabled bool, now time.Time) (repair bool, fc FightChange) {
	var dec Decision
	fc = s.step(func(l Log) Log {
		l, dec = s.policy.Due(l, now)
		return l
	})
	switch {
	case !s.gate.deferred:
		return false, fc
	case !enabled: // disabled since, or holding: no repair is due
		s.gate.settle()
		return false, fc
	case !dec.Repair:
		return false, fc // the deadline follows the gate; it comes again when due
	}
	s.gate.grant()
	return true, fc
}

// ForgetWriters forgets the gate's writers (Run ends, or the DaemonSet is deleted) and
// reports whether that ended a fight.
func (s *State) ForgetWriters() (ended bool) {
	ended = s.Fighting()
	s.gate.log = ForgetWriters(s.gate.log)
	s.gate.settle()
	s.timers[PartGate].stop()
	return ended
}

// FollowGate arms the gate's deadline for when the deferred repair may be due, else the
// first fight may end. A repair under way needs none: an action's retry carries it on.
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
		s.timers[PartGate].stop()
		return
	}
	s.timers[PartGate].armAt(next)
}
