package core

import "time"

// gate is the repair gate's state; policy.go has its rules.
type gate struct {
	log      Log
	granted  bool // the gate allowed the outstanding repair: its write (or its retry) may be made
	deferred bool // a repair waits for the gate's deadline
	lostRace bool // the level's last apply lost a race to another writer and wrote nothing
}

// The outstanding repair is granted, held, or settled (made, found nothing to undo, dropped or forgotten).
func (g *gate) grant()  { g.granted, g.deferred = true, false }
func (g *gate) hold()   { g.granted, g.deferred = false, true }
func (g *gate) settle() { g.granted, g.deferred = false, false }

// step runs one of the gate's functions; its effects report how that moved the fight verdict.
func (s *State) step(f func(Log) (Log, Decision)) (dec Decision, fc []Effect) {
	was := s.gate.log.Fighting()
	s.gate.log, dec = f(s.gate.log)
	switch is := s.gate.log.Fighting(); {
	case !was && is:
		return dec, effect(EffectFightStarted)
	case was && !is:
		return dec, effect(EffectFightEnded)
	}
	return dec, nil
}

// Policy is the repair gate's rules.
func (s *State) Policy() Policy { return s.policy }

// Log is the repair gate's log, for what status and the log lines say.
func (s *State) Log() Log { return s.gate.log }

// Outstanding: someone else's change waits for a repair: the next write to the DaemonSet, whatever its cause.
func (s *State) Outstanding() bool { return s.gate.log.Outstanding() }

// Fighting: some writer is in a tug-of-war with the controller.
func (s *State) Fighting() bool { return s.gate.log.Fighting() }

// Drift is what one drain of the informer showed, as the core needs it.
type Drift struct {
	Drain    Drain // someone else's drift in it (Classify)
	Hint     bool  // a caller's informer says something changed
	Present  bool  // the view shows a DaemonSet now
	Enabled  bool  // the level wants a DaemonSet
	Deleting bool  // the machine is deleting it
}

// onDrift decides what the loop does about a drain. Only repairs wait for the gate, not deleting a disabled DaemonSet.
func (s *State) onDrift(d Drift, now time.Time) []Effect {
	if d.Drain.Clean && len(d.Drain.Kinds) == 0 && s.Outstanding() {
		// The change a repair was owed for is gone: a lost race found it deleted, or a write undid it.
		s.gate.settle()
		s.gate.log = s.policy.Stood(s.gate.log, now)
	}
	s.describe(d.Drain)
	changed := d.Hint || len(d.Drain.Kinds) > 0
	switch {
	case changed && d.Enabled:
		dec, fc := s.step(func(l Log) (Log, Decision) { return s.policy.Changed(l, d.Drain.writers(), now) })
		if dec.Repair {
			s.gate.grant()
			return append(fc, Effect{Kind: effectRepair})
		}
		s.gate.hold()
		return append(fc, Effect{Kind: effectHold, Wait: dec.At.Sub(now)})
	case changed: // disabled (a notification may be on its way): delete, never repair
		return effect(effectReassert)
	case d.Drain.Gone && !d.Present && d.Deleting:
		return effect(effectDeleteDone)
	case d.Drain.Gone && !d.Present && d.Enabled:
		// An expected deletion, yet a DaemonSet is wanted: one deleted while disabled, held
		// by a finalizer until enabled again (the apply found it terminating), or replaced.
		return effect(effectReassert)
	}
	return nil
}

// Deferring: a repair waits for the gate's deadline.
func (s *State) Deferring() bool { return s.gate.deferred }

// rolloutCounts: the DaemonSet rolls out what the level wants: not while a repair waits, nor after a lost race.
func (s *State) rolloutCounts() bool { return !s.gate.deferred && !s.gate.lostRace }

// Write is the core's verdict on an apply of the level.
type Write struct {
	Allowed bool // the apply may be made now; one held back waits for the gate's deadline
	Repair  bool // it would undo someone else's outstanding change: gated, and counted if it writes
}

// askWrite decides any apply of the level: one while a change is outstanding is a repair, allowed if granted or due.
func (s *State) askWrite(now time.Time) Write {
	if !s.Outstanding() {
		return Write{Allowed: true}
	}
	if _, dec := s.policy.Due(s.gate.log, now); s.gate.granted || dec.Repair {
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

// wrote records what an apply askWrite allowed (w) did. counted: the budget paid for a repair that
// wrote, or may have (answer lost: its retry undoes nothing). A lost race's winner comes as drift.
func (s *State) wrote(w Write, o ApplyOutcome, now time.Time) (counted bool) {
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

// gateDue answers the gate's deadline: the deferred repair, if due and the level still wants
// it; a level that does not drops the claim (a write it allows later asks askWrite).
func (s *State) gateDue(enabled bool, now time.Time) []Effect {
	dec, fc := s.step(func(l Log) (Log, Decision) { return s.policy.Due(l, now) })
	switch {
	case !s.gate.deferred:
	case !enabled: // disabled since, or holding: no repair is due
		s.gate.settle()
	case dec.Repair:
		s.gate.grant()
		return append(fc, Effect{Kind: effectRepair})
	}
	return fc // a repair not due yet: the deadline follows the gate and comes again when due
}

// forgetWriters forgets the gate's writers (Run ends, or the DaemonSet is deleted); ended: it ended a fight.
func (s *State) forgetWriters() (ended bool) {
	ended = s.Fighting()
	s.next = Repair{}
	s.gate.log = Log{budgetAt: s.gate.log.budgetAt} // the repairs the budget paid for were made
	s.gate.settle()
	s.timers[PartGate] = time.Time{}
	return ended
}

// followGate arms the gate's deadline for when the deferred repair may be due, else the first
// fight may end (none: neither). A repair under way needs none: an action's retry carries it on.
func (s *State) followGate(now time.Time) {
	next := s.policy.FightEnds(s.gate.log)
	if s.gate.deferred {
		if _, dec := s.policy.Due(s.gate.log, now); dec.Repair {
			next = now
		} else if next.IsZero() || dec.At.Before(next) {
			next = dec.At
		}
	}
	s.timers[PartGate] = next
}
