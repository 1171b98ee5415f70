package core

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/insights-runtime-extractor/controller/fsm"
)

// The lifecycle's chain: an event fires the machine, its action is an effect the shell carries out, and the
// outcome comes back as an input that fires the next event: every apply is decided (askWrite) and counted (wrote) here.

// Result is what the shell's apply or delete did.
type Result struct {
	Outcome         ApplyOutcome
	Err             error
	OwnInput        bool // Err is of the controller's own input (an unset or invalid image)
	Took            time.Duration
	UID             string
	Generation      int64
	Created, Rolls  bool      // Rolls: the pod template changed
	Restored        []string  // what the apply put back
	TLS             string    // the TLS arguments it moved kube-rbac-proxy to
	Replaced        types.UID // an object someone else created, which the apply deleted
	ReplacedBecause string
	Object          any       // the object written, for its Event; opaque here
	Deleted         types.UID // what a delete removed ("" if nothing)
}

// Machine is the lifecycle machine the core fires; the shell reads its state and listens to it.
func (s *State) Machine() *fsm.Machine { return s.machine }

// fire feeds ev to the machine, unless the controller holds (in.Level is nil), and returns the
// effects of the transition's action.
func (s *State) fire(in Input, ev fsm.Event, now time.Time) []Effect {
	if ev == nil || in.Level == nil {
		return nil
	}
	t, err := s.machine.Fire(ev)
	if err != nil {
		return []Effect{{Kind: EffectMachineError, Err: err}}
	}
	var fx []Effect
	if t.Changed() && s.transitioned(t.To) {
		fx = append(fx, Effect{Kind: EffectFightEnded, Note: "insights-config disables the runtime extractor"})
	}
	switch t.Action {
	case fsm.ActionApply:
		w := s.askWrite(now)
		if !w.Allowed {
			return append(fx, Effect{Kind: EffectHeld, Transition: t})
		}
		s.applying, s.applyingVerdict = t, w
		return append(fx, Effect{Kind: EffectApply, Transition: t, Repair: w.Repair})
	case fsm.ActionDelete:
		return append(fx, Effect{Kind: EffectDelete, Transition: t})
	case fsm.ActionRetry:
		return append(fx, Effect{Kind: EffectRetry})
	}
	return fx
}

// actOnLevel: the door merges signals, so a version signal may carry a config change; VersionChanged
// does nothing in Disabled, so the level is re-asserted too, once the version's chain is done.
func (s *State) actOnLevel(k Signal, in Input, now time.Time) []Effect {
	var fx []Effect
	moved := false
	if k&SignalVersion != 0 {
		var from string
		if from, moved = s.seeVersion(in.Version, s.machine.State() == fsm.StateUpgrading); moved {
			fx = s.fire(in, fsm.VersionChanged{From: from, To: in.Version}, now)
		}
	}
	if !moved || k&^SignalVersion != 0 {
		// A notification may come with nothing changed: the apply writes only what did.
		fx = append(fx, next(Input{Kind: InputReassert}))
	}
	return append(fx, next(Input{Kind: InputActed}))
}

func (s *State) applyDone(in Input, now time.Time) []Effect {
	t, w, r := s.applying, s.applyingVerdict, in.Result
	if r.Replaced != "" {
		s.ownDelete(r.Replaced, false) // its delete event is this apply's, not drift
	}
	var fx []Effect
	if s.wrote(w, r.Outcome, now) {
		fx = append(fx, Effect{Kind: EffectRepairCounted})
	}
	if r.Outcome == ApplyLost {
		// No failure: the other writer's change reaches the gate as drift.
		return append(fx, Effect{Kind: EffectLostRace, Transition: t, Err: r.Err})
	}
	fx = append(fx, s.record(fsm.ActionApply, r.Err, r.OwnInput, r.Took, now))
	if r.Err != nil {
		return append(fx, s.fire(in, fsm.ApplyFailed{Err: r.Err}, now)...)
	}
	if r.Outcome == ApplyChanged {
		cause := s.cause(t, w.Repair, r.TLS)
		if w.Repair {
			cause.Restored = r.Restored
		}
		why := cause.Why(r.Created)
		if r.Replaced != "" {
			why = fmt.Sprintf("replaced %s, which someone else created: %s", r.Replaced, r.ReplacedBecause)
		}
		fx = append(fx, Effect{Kind: EffectAppliedEvent, Note: why, Created: r.Created, Object: r.Object})
	}
	var ev fsm.Event = fsm.AppliedUnchanged{UID: r.UID, Generation: r.Generation}
	if r.Rolls {
		ev = fsm.Applied{UID: r.UID, Generation: r.Generation}
	}
	// An apply that changed nothing brings no watch event: its rollout is read now, after the chain.
	return append(append(fx, s.fire(in, ev, now)...), next(Input{Kind: InputRollout}))
}

func (s *State) deleteDone(in Input, now time.Time) []Effect {
	r := in.Result
	fx := []Effect{s.record(fsm.ActionDelete, r.Err, false, r.Took, now)}
	if r.Err != nil {
		return append(fx, s.fire(in, fsm.DeleteFailed{Err: r.Err}, now)...)
	}
	if r.Deleted != "" {
		s.ownDelete(r.Deleted, true)
		fx = append(fx, Effect{Kind: EffectDeletedEvent})
	}
	return append(fx, s.fire(in, fsm.DeleteDone{}, now)...)
}

// rolledOut fires RolloutComplete when the machine has a use for it; not while an apply waits for
// the gate or lost a race: what is rolled out is not what the level wants.
func (s *State) rolledOut(in Input, now time.Time) []Effect {
	ev := fsm.RolloutComplete{UID: string(in.Seen.UID), Generation: in.Seen.Generation}
	if !in.Seen.Present || !in.Complete || !s.rolloutCounts() || !s.machine.Moves(ev) {
		return nil
	}
	return s.fire(in, ev, now)
}

// record is an action's outcome: a failure is remembered for its retry; a success cancels one.
func (s *State) record(a fsm.Action, err error, ownInput bool, took time.Duration, now time.Time) Effect {
	if err != nil {
		s.failed(err, ownInput, took, now)
	} else {
		s.succeeded()
	}
	return Effect{Kind: EffectRecorded, Action: a, Err: err, Took: took}
}
