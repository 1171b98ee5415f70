package core

import (
	"time"

	"github.com/insights-runtime-extractor/controller/fsm"
)

// Input is what the shell feeds the core: what woke the loop, or the outcome of an effect, with
// the world as the shell saw it then.
type Input struct {
	Kind         InputKind
	Signal       Signal        // InputSignal: which levels may have moved
	Hint         bool          // InputDrift, InputDrained: a caller's informer says something changed
	Observations []Observation // InputDrained: the informer's queue, drained
	Part         Part          // InputDeadline: the part the alarm found due
	DueAt        time.Time
	Backoff      time.Duration // InputBackoff
	Result       Result        // InputApplied, InputDeleted
	drift        Drift         // InputDrained, once classified

	// The world as the shell saw it when it fed the input.
	Level         fsm.Event // the config as an event: Enabled or Disabled; nil while holding (never a good config)
	Version       string    // the target version
	Seen          Seen      // the DaemonSet in the view
	Complete      bool      // its rollout is complete
	Own           Ownership // the record of the controller's own writes
	DriftQueued   bool      // the informer has drift queued (as a loop wakes)
	Expecting     bool      // an own write the cache has yet to show (InputSettle)
	ExpectTimeout time.Duration
}

// InputKind names what the shell feeds.
type InputKind int

const (
	InputStart    InputKind = iota // Run starts: act on the level as found
	InputStop                      // Run ends: nothing stays armed
	InputSignal                    // a config, version or TLS notification
	InputDrift                     // the informer queued drift, or a caller's informer hints (Hint)
	InputDrained                   // the drift drained (EffectDrain)
	InputReassert                  // re-assert the level: the resync, or a level signal after a version's chain
	InputRollout                   // the DaemonSet's status or generation moved
	InputAlarm                     // the loop's timer fired at Deadline
	InputDeadline                  // a part's deadline, due at DueAt
	InputBackoff                   // the backoff of the retry EffectRetry asked for
	InputApplied                   // the apply's outcome
	InputDeleted                   // the delete's outcome
	InputActed                     // a level signal has been acted on
	InputSettle                    // the wake-up's effects are done
)

// Effect is one thing the shell does; Step returns them in the order they are done.
type Effect struct {
	Kind       EffectKind
	Transition fsm.Transition // EffectApply, EffectDelete, EffectHeld, EffectLostRace
	Repair     bool           // EffectApply: it undoes someone else's change
	Action     fsm.Action     // EffectRecorded
	Err        error          // EffectRecorded, EffectLostRace, EffectMachineError
	Took       time.Duration  // EffectRecorded
	Note       string         // EffectAppliedEvent: why it was made; EffectFightEnded: why the fight ended
	Created    bool           // EffectAppliedEvent
	Object     any            // EffectAppliedEvent: Result.Object
	Hint       bool           // EffectDrain
	Drain      Drain          // EffectDrift
	Wait       time.Duration  // EffectDrift: the repair waits this long for the gate; EffectRetryArmed
	Next       Input          // EffectNext
	signal     Signal         // effectActOnLevel
}

// EffectKind names an effect.
type EffectKind int

const (
	EffectApply         EffectKind = iota // apply the level; feed back InputApplied
	EffectDelete                          // delete the DaemonSet; feed back InputDeleted
	EffectRetry                           // feed back the failed action's backoff (InputBackoff)
	EffectRetryArmed                      // the retry is armed Wait from now
	EffectHeld                            // the apply waits for the repair gate
	EffectLostRace                        // the apply lost a race; the winner comes as drift
	EffectRecorded                        // an action's outcome: metrics, and a Warning for a failure
	EffectRepairCounted                   // the budget paid for a repair of NextRepair
	EffectAppliedEvent                    // the apply wrote: its Event says Note
	EffectDeletedEvent                    // the delete removed the DaemonSet: its Event
	EffectDrain                           // drain the informer's queue; feed back InputDrained
	EffectDrift                           // a drain was acted on: count its drift, and log it
	EffectDiagnose                        // the rollout made no progress for its deadline: diagnose it
	EffectFightStarted                    // a writer is in a tug-of-war: report it
	EffectFightEnded                      // the tug-of-war is over
	EffectMachineError                    // the machine has no row for the event
	EffectStopped                         // Run has ended: the shell forgets its own memory too
	EffectSettled                         // arm the timer at Deadline, and report
	EffectNext                            // feed back Next, after the effects before it

	// The door's and the gate's decisions, which Step turns into the machine's events.
	effectActOnLevel // act on signal: VersionChanged if the version moved, else re-assert the level
	effectReassert   // fire the level
	effectRepair     // the gate allows the repair: fire the drift (Modified, or Deleted when gone)
	effectHold       // the gate holds the repair back for Wait; its deadline makes it
	effectDeleteDone // the controller's delete went through, though its call failed: fire Deleted
)

// Step decides what the loop does about in, at now, and returns what the shell is to do.
func (s *State) Step(in Input, now time.Time) []Effect {
	if in.DriftQueued && in.Kind != InputDrift && in.Kind != InputStart && in.Kind != InputStop {
		// Every wake-up feeds the queued drift first, so that the gate decides a repair before
		// any other input can write: none may make it early or ungated.
		in.DriftQueued = false
		return []Effect{{Kind: EffectDrain}, next(in)}
	}
	switch in.Kind {
	case InputStart:
		s.running = true
		s.seeVersion(in.Version, true) // where a Run starts is no upgrade
		return s.fire(in, in.Level, now)
	case InputStop:
		var fx []Effect
		if s.forgetWriters() {
			fx = append(fx, Effect{Kind: EffectFightEnded, Note: "the controller stopped"})
		}
		s.stopped()
		return append(fx, Effect{Kind: EffectStopped})
	case InputDrift:
		return []Effect{{Kind: EffectDrain, Hint: in.Hint}}
	case InputDrained:
		if in.Level == nil {
			return nil // holding: nothing is acted on
		}
		d := s.Classify(in.Observations, in.Seen, in.Own, s.machine.State().Enabled())
		in.drift = Drift{Drain: d, Hint: in.Hint, Present: in.Seen.Present, Enabled: in.Level == fsm.Enabled{},
			Deleting: s.machine.State() == fsm.StateDeleting}
		decisions := s.decide(in, now)
		var wait time.Duration
		for _, e := range decisions {
			if e.Kind == effectHold {
				wait = e.Wait
			}
		}
		return append(s.act(in, decisions, now), Effect{Kind: EffectDrift, Drain: d, Wait: wait})
	case InputRollout:
		return s.rolledOut(in, now)
	case InputAlarm:
		// The parts due now, earliest first, each if still due after the earlier ones acted.
		var fx []Effect
		for _, p := range s.Due(now) {
			fx = append(fx, next(Input{Kind: InputDeadline, Part: p, DueAt: now}))
		}
		return fx
	case InputBackoff:
		return []Effect{{Kind: EffectRetryArmed, Wait: s.scheduleRetry(in.Backoff, now)}}
	case InputApplied:
		return s.applyDone(in, now)
	case InputDeleted:
		return s.deleteDone(in, now)
	case InputActed:
		s.acted(now)
	case InputSettle:
		if s.running {
			s.followExpect(in.Expecting, in.ExpectTimeout, now)
			s.followGate(now)
			return effect(EffectSettled)
		}
	default:
		return s.act(in, s.decide(in, now), now)
	}
	return nil
}

// decide is the door's and the gate's decision about in.
func (s *State) decide(in Input, now time.Time) []Effect {
	switch in.Kind {
	case InputSignal:
		if s.admit(in.Signal, now) {
			return []Effect{{Kind: effectActOnLevel, signal: in.Signal}}
		}
	case InputDrained:
		return s.onDrift(in.drift, now)
	case InputReassert:
		return effect(effectReassert)
	case InputDeadline:
		if !s.Fire(in.Part, in.DueAt) {
			return nil
		}
		switch in.Part { // what the part does once its deadline has come
		case PartDoor:
			if k := s.take(now); k != 0 {
				return []Effect{{Kind: effectActOnLevel, signal: k}}
			}
		case PartRetry:
			return effect(effectReassert)
		case PartExpect: // an own write the cache never showed: re-read, unless a pending retry will
			if !s.RetryPending() {
				return effect(effectReassert)
			}
		case PartGate:
			return s.gateDue(in.Level == fsm.Enabled{}, now)
		case PartRollout:
			return effect(EffectDiagnose)
		}
	}
	return nil
}

// act turns the decisions into the machine's events, with the world as in saw it.
func (s *State) act(in Input, decisions []Effect, now time.Time) []Effect {
	var fx []Effect
	for _, d := range decisions {
		switch d.Kind {
		case effectActOnLevel:
			fx = append(fx, s.actOnLevel(d.signal, in, now)...)
		case effectReassert:
			fx = append(fx, s.fire(in, in.Level, now)...)
		case effectRepair:
			var ev fsm.Event = fsm.Deleted{}
			if in.Seen.Present {
				ev = fsm.Modified{Generation: in.Seen.Generation}
			}
			fx = append(fx, s.fire(in, ev, now)...)
		case effectDeleteDone:
			fx = append(fx, s.fire(in, fsm.Deleted{}, now)...)
		case effectHold:
		default:
			fx = append(fx, d)
		}
	}
	return fx
}

func effect(k EffectKind) []Effect { return []Effect{{Kind: k}} }

func next(in Input) Effect { return Effect{Kind: EffectNext, Next: in} }
