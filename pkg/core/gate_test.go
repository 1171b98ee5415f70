package core

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/insights-runtime-extractor/controller/fsm"
)

// What a drain leads to, row by row: only an enabled level's drift asks the
// gate; a disabled one's is deleted, never repaired.
func TestTheGateDecidesWhatADrainLeadsTo(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	for _, tc := range []struct {
		d    Drift
		want []EffectKind
	}{
		{Drift{Drain: Drain{Kinds: []DriftKind{DriftModified}, Edits: []Edit{{Manager: "kubectl"}}}, Enabled: true, Present: true}, []EffectKind{effectRepair}},
		{Drift{Drain: Drain{Kinds: []DriftKind{DriftDeleted}, Likely: []string{""}}, Enabled: true}, []EffectKind{effectRepair}}, // a deletion
		{Drift{Hint: true, Present: true}, []EffectKind{effectReassert}},                                                         // disabled
		{Drift{Drain: Drain{Gone: true}, Deleting: true}, []EffectKind{effectDeleteDone}},                                        // our delete went through
		{Drift{Drain: Drain{Gone: true}, Enabled: true}, []EffectKind{effectReassert}},                                           // gone, yet wanted
		{Drift{Drain: Drain{Gone: true}, Enabled: true, Present: true}, nil},
		{Drift{Drain: Drain{Gone: true}}, nil},
		{Drift{Enabled: true, Present: true}, nil},
	} {
		s := New(DefaultPolicy(), time.Minute)
		if got := kinds(s.decide(Input{Kind: InputDrained, drift: tc.d}, now)); !slices.Equal(got, tc.want) {
			t.Errorf("a drain of %+v: %v, want %v", tc.d, got, tc.want)
		}
	}
}

// Every write that undoes someone else's change is a repair, whatever asked
// for it, and the budget pays for each one that wrote, or may have: with
// the budget spent, the next change waits, and so does any other apply of
// the level (a version change) until the gate's deadline.
func TestEveryWriteThatUndoesAChangeIsGatedAndCounted(t *testing.T) {
	p := DefaultPolicy()
	s := New(p, time.Minute)
	now := time.Unix(1_000_000, 0)
	if w := s.askWrite(now); !w.Allowed || w.Repair {
		t.Fatalf("with nothing outstanding AskWrite = %+v, want an allowed write that is no repair", w)
	}
	counted := 0
	for i := range p.Burst {
		a := kinds(s.decide(drain(fmt.Sprint("writer-", i)), now))
		if !slices.Equal(a, []EffectKind{effectRepair}) {
			t.Fatalf("change %d: %v with the budget not spent", i+1, a)
		}
		w := s.askWrite(now)
		if !w.Allowed || !w.Repair {
			t.Fatalf("change %d: AskWrite = %+v, want an allowed repair", i+1, w)
		}
		outcome := ApplyChanged
		if i == 0 {
			outcome = ApplyUnanswered // its answer lost: it may have written
		}
		if s.wrote(w, outcome, now) {
			counted++
		}
	}
	if counted != p.Burst {
		t.Fatalf("%d repairs counted, want %d", counted, p.Burst)
	}
	if e := s.decide(drain("writer-late"), now); !slices.ContainsFunc(e, func(e Effect) bool { return e.Kind == effectHold && e.Wait > 0 }) {
		t.Fatalf("with the budget spent: %+v; want the repair held", e)
	}
	if w := s.askWrite(now); w.Allowed || !w.Repair {
		t.Fatalf("a version change's apply with the budget spent: %+v, want a held repair", w)
	}
	if s.rolloutCounts() {
		t.Fatal("a held repair's rollout counts as the level's")
	}
	s.followGate(now)
	at, armed := s.At(PartGate)
	if !armed || !at.After(now) {
		t.Fatal("no gate deadline for the held repair")
	}
	if e := kinds(s.decide(Input{Kind: InputDeadline, Part: PartGate, DueAt: at, Level: fsm.Enabled{}}, at)); !slices.Contains(e, effectRepair) {
		t.Fatal("the held repair is not due at the gate's deadline")
	}
	w := s.askWrite(at)
	if !w.Allowed || !w.Repair || !s.wrote(w, ApplyChanged, at) {
		t.Fatalf("the due repair: %+v, not counted", w)
	}
	if s.Outstanding() {
		t.Fatal("a change is outstanding after its repair")
	}
}

// A repair that failed with an answer wrote nothing: it is not counted, and
// the change stays outstanding for its retry. One that found nothing to
// undo is not counted either. A lost race leaves the change to the gate.
func TestWritesThatWroteNothingAreNotCounted(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	for _, o := range []ApplyOutcome{ApplyFailed, ApplyLost, ApplyUnchanged} {
		s := New(DefaultPolicy(), time.Minute)
		s.decide(drain("kubectl"), now)
		if s.wrote(s.askWrite(now), o, now) {
			t.Errorf("outcome %d: counted", o)
		}
		if got, want := s.Outstanding(), o != ApplyUnchanged; got != want {
			t.Errorf("outcome %d: outstanding %v, want %v", o, got, want)
		}
		if got, want := s.rolloutCounts(), o != ApplyLost; got != want {
			t.Errorf("outcome %d: the rollout counts %v, want %v", o, got, want)
		}
	}
}

// drain is a drain of one change by manager, with the level enabled.
func drain(manager string) Input {
	return Input{Kind: InputDrained, drift: Drift{Drain: Drain{Kinds: []DriftKind{DriftModified}, Edits: []Edit{{Manager: manager}}}, Enabled: true, Present: true}}
}

func kinds(effects []Effect) []EffectKind {
	var out []EffectKind
	for _, e := range effects {
		out = append(out, e.Kind)
	}
	return out
}
