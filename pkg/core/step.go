package core

import "time"

// Input is one thing that woke the loop, with what the core needs to know of the world then.
type Input struct {
	Kind    InputKind
	Signal  Signal // InputSignal: which levels may have moved
	Drift   Drift  // InputDrift
	Part    Part   // InputDeadline: the part the alarm found due
	DueAt   time.Time
	Enabled bool // the level wants a DaemonSet (for the gate's deferred repair)
}

// InputKind names what woke the loop.
type InputKind int

const (
	InputSignal   InputKind = iota // a config, version or TLS notification
	InputDrift                     // a drain of the informer's observations, or a caller's hint
	InputResync                    // the periodic re-assert
	InputDeadline                  // a part's deadline, due at DueAt
)

// Effect is one thing the loop does for an input; Step returns them in the order they are done.
type Effect struct {
	Kind   EffectKind
	Signal Signal        // EffectActOnLevel
	Wait   time.Duration // EffectHold
}

// EffectKind names an effect.
type EffectKind int

const (
	EffectActOnLevel   EffectKind = iota // act on Signal: VersionChanged if the version moved, else re-assert the level
	EffectReassert                       // fire the level (a repair in it asks AskWrite)
	EffectRepair                         // the gate allows the repair: fire the drift (Modified, or Deleted when gone)
	EffectHold                           // the gate holds the repair back for Wait; its deadline makes it
	EffectDeleteDone                     // the controller's delete went through, though its call failed: fire Deleted
	EffectDiagnose                       // the rollout made no progress for its deadline: diagnose it
	EffectFightStarted                   // a writer is in a tug-of-war: report it
	EffectFightEnded                     // the tug-of-war is over
)

// Step decides what the loop does about in, at now; writes are decided when made (AskWrite), counted by Wrote.
func (s *State) Step(in Input, now time.Time) []Effect {
	switch in.Kind {
	case InputSignal:
		if s.Admit(in.Signal, now) {
			return []Effect{{Kind: EffectActOnLevel, Signal: in.Signal}}
		}
	case InputDrift:
		return s.onDrift(in.Drift, now)
	case InputResync:
		return effect(EffectReassert)
	case InputDeadline:
		if !s.Fire(in.Part, in.DueAt) {
			return nil
		}
		switch in.Part { // what the part does once its deadline has come
		case PartDoor:
			if k := s.Take(now); k != 0 {
				return []Effect{{Kind: EffectActOnLevel, Signal: k}}
			}
		case PartRetry:
			return effect(EffectReassert)
		case PartExpect: // an own write the cache never showed: re-read, unless a pending retry will
			if !s.RetryPending() {
				return effect(EffectReassert)
			}
		case PartGate:
			return s.gateDue(in.Enabled, now)
		case PartRollout:
			return effect(EffectDiagnose)
		}
	}
	return nil
}

func effect(k EffectKind) []Effect { return []Effect{{Kind: k}} }
