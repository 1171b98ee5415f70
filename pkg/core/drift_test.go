package core

import (
	"maps"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// ownRecord is an Ownership that owns one object, written at a generation with owned metadata.
type ownRecord struct {
	uid        types.UID
	generation int64
	meta       map[string]string
}

func (o ownRecord) Owns(uid types.UID) bool { return uid == "" && o.uid != "" || uid == o.uid }
func (o ownRecord) IsOwnWrite(uid types.UID, generation int64) bool {
	return uid == o.uid && generation <= o.generation
}
func (o ownRecord) IsOwnMetadata(uid types.UID, _ string, meta map[string]string) bool {
	return uid == o.uid && maps.Equal(meta, o.meta)
}
func (ownRecord) ClaimUnanswered(Observation) bool { return false }
func (ownRecord) AwaitsOwnWrite() bool             { return false }
func (ownRecord) ObservedDeletion(types.UID)       {}

// A drain tells whether the view shows the controller's object as it wrote it: then nothing of
// anyone else's is left to repair, whatever the drain held.
func TestClassifyTellsAViewOfTheOwnObject(t *testing.T) {
	meta := map[string]string{"label:app": "x"}
	own := ownRecord{uid: "mine", generation: 2, meta: meta}
	foreignMeta := map[string]string{"label:app": "y"}
	for i, tc := range []struct {
		seen Seen
		want bool
	}{
		{Seen{Present: true, UID: "mine", Generation: 2, Meta: meta}, true},
		{Seen{Present: true, UID: "mine", Generation: 1, Meta: meta}, true}, // an older view of an own write
		{Seen{Present: true, UID: "mine", Generation: 3, Meta: meta}, false},
		{Seen{Present: true, UID: "mine", Generation: 2, Meta: foreignMeta}, false},
		{Seen{Present: true, UID: "mine", Generation: 2, Meta: meta, Terminating: true}, false},
		{Seen{Present: true, UID: "theirs", Generation: 1, Meta: meta}, false},
		{Seen{}, false},
	} {
		if got := New(DefaultPolicy(), time.Minute).Classify(nil, tc.seen, own, true).Clean; got != tc.want {
			t.Errorf("#%d: Clean = %v for %+v, want %v", i, got, tc.seen, tc.want)
		}
	}
}

// A repair owed for a change the view no longer shows is settled by the drain that shows the
// controller's object as it wrote it. Here the repair lost a race: the object it would repair
// was deleted and the controller's own took its place. The next write of the level undoes no
// one's change: it is no repair, and the budget does not pay for it.
func TestADrainShowingTheOwnObjectSettlesTheRepair(t *testing.T) {
	s := New(DefaultPolicy(), time.Minute)
	now := time.Unix(1_000_000, 0)
	if got := kinds(s.decide(drain("kubectl"), now)); !slices.Equal(got, []EffectKind{effectRepair}) {
		t.Fatalf("the change: %v, want a repair", got)
	}
	w := s.askWrite(now)
	if counted := s.wrote(w, ApplyLost, now); counted || !s.Outstanding() {
		t.Fatalf("after a lost race: counted %v, outstanding %v; want uncounted and still owed", counted, s.Outstanding())
	}
	clean := Input{Kind: InputDrained, drift: Drift{Drain: Drain{Gone: true, Clean: true}, Enabled: true, Present: true}}
	if got := s.decide(clean, now); len(got) != 0 {
		t.Errorf("a clean drain: %v, want nothing", kinds(got))
	}
	if w := s.askWrite(now); !w.Allowed || w.Repair {
		t.Errorf("after a clean drain AskWrite = %+v, want an allowed write that is no repair", w)
	}
}
