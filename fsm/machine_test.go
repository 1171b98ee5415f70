package fsm

import (
	"errors"
	"slices"
	"testing"
)

// sample returns one event of each name, with a payload the guards accept.
func sample(name EventName) Event {
	switch name {
	case EventEnabled:
		return Enabled{}
	case EventDisabled:
		return Disabled{}
	case EventVersionChanged:
		return VersionChanged{From: "4.21.0", To: "4.22.0"}
	case EventModified:
		return Modified{Generation: 2}
	case EventDeleted:
		return Deleted{}
	case EventRolloutComplete:
		return RolloutComplete{Generation: 1}
	case EventApplied:
		return Applied{Generation: 1}
	case EventAppliedUnchanged:
		return AppliedUnchanged{Generation: 1}
	case EventApplyFailed:
		return ApplyFailed{Err: errors.New("boom")}
	case EventDeleteDone:
		return DeleteDone{}
	case EventDeleteFailed:
		return DeleteFailed{Err: errors.New("boom")}
	}
	return nil
}

type rowKey struct {
	from  State
	event EventName
}

func TestTableIsTotal(t *testing.T) {
	seen := map[rowKey]Row{}
	for i, r := range Table() {
		k := rowKey{r.From, r.Event}
		if prev, dup := seen[k]; dup {
			t.Errorf("#%d: duplicate row for (%s, %s): %v and %v", i, r.From, r.Event, prev, r)
		}
		seen[k] = r
		if !slices.Contains(States(), r.To) {
			t.Errorf("#%d: unknown state %q", i, r.To)
		}
		if !slices.Contains(Actions(), r.Action) {
			t.Errorf("#%d: unknown action %q", i, r.Action)
		}
	}
	for _, s := range States() {
		for _, ev := range EventNames() {
			if _, ok := seen[rowKey{s, ev}]; !ok {
				t.Errorf("missing row for (%s, %s)", s, ev)
			}
		}
	}
	if want := len(States()) * len(EventNames()); len(seen) != want {
		t.Errorf("table has %d distinct rows, want %d", len(seen), want)
	}
}

func TestEveryStateReachableFromDisabled(t *testing.T) {
	reached := map[State]bool{StateDisabled: true}
	queue := []State{StateDisabled}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for _, r := range table {
			if r.From == s && !reached[r.To] {
				reached[r.To] = true
				queue = append(queue, r.To)
			}
		}
	}
	for _, s := range States() {
		if !reached[s] {
			t.Errorf("state %s is unreachable from %s", s, StateDisabled)
		}
	}
}

// TestEveryRow fires each (state, event) pair on a fresh machine and checks the
// machine does what its row says.
func TestEveryRow(t *testing.T) {
	for i, r := range Table() {
		m := New(r.From)
		// The sample rollout is of the object a successful apply left in place.
		m.applied = &RolloutComplete{Generation: 1}
		got, err := m.Fire(sample(r.Event))
		if err != nil {
			t.Fatalf("#%d %s+%s: %v", i, r.From, r.Event, err)
		}
		if got.From != r.From || got.To != r.To || got.Action != r.Action {
			t.Errorf("#%d %s+%s: got %s/%s, want %s/%s", i, r.From, r.Event, got.To, got.Action, r.To, r.Action)
		}
		if m.State() != r.To {
			t.Errorf("#%d %s+%s: machine is in %s, want %s", i, r.From, r.Event, m.State(), r.To)
		}
	}
}

func TestStaleRolloutCompleteIsIgnored(t *testing.T) {
	m := New(StateRunning)
	mustFire(t, m, VersionChanged{From: "4.21.0", To: "4.22.0"})
	mustFire(t, m, Applied{Generation: 5})
	got := mustFire(t, m, RolloutComplete{Generation: 4})
	if got.To != StateUpgrading || got.Action != ActionNone || got.Note == "" {
		t.Fatalf("stale rollout: got %+v, want to stay in Upgrading with a note", got)
	}
	if got := mustFire(t, m, RolloutComplete{Generation: 5}); got.To != StateRunning {
		t.Fatalf("current rollout: got %s, want Running", got.To)
	}
}

type unknownEvent struct{}

func (unknownEvent) Name() EventName { return "Bogus" }

func TestUnknownEventIsAnError(t *testing.T) {
	m := New(StateRunning)
	for _, ev := range []Event{unknownEvent{}, nil} {
		_, err := m.Fire(ev)
		var unknown *UnknownEventError
		if !errors.As(err, &unknown) {
			t.Fatalf("Fire(%v): got %v, want UnknownEventError", ev, err)
		}
	}
	if m.State() != StateRunning {
		t.Fatalf("an unknown event moved the machine to %s", m.State())
	}
}

func TestListenerSeesEveryTransitionIncludingSelf(t *testing.T) {
	m := New(StateDisabled)
	var seen []Transition
	m.OnTransition(func(tr Transition) { seen = append(seen, tr) })
	mustFire(t, m, Enabled{})
	mustFire(t, m, Enabled{})
	if len(seen) != 2 || seen[0].To != StateDeploying || seen[1].From != StateDeploying || seen[1].Changed() {
		t.Fatalf("listener saw %+v", seen)
	}
}

func mustFire(t *testing.T, m *Machine, ev Event) Transition {
	t.Helper()
	tr, err := m.Fire(ev)
	if err != nil {
		t.Fatalf("Fire(%s): %v", Describe(ev), err)
	}
	return tr
}

func BenchmarkFire(b *testing.B) {
	m := New(StateRunning)
	evs := []Event{Modified{Generation: 2}, Applied{Generation: 3}, RolloutComplete{Generation: 3}, Enabled{}, AppliedUnchanged{Generation: 3}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := m.Fire(evs[i%len(evs)]); err != nil {
			b.Fatal(err)
		}
	}
}

// A refused upgrade must not end as Running: after the apply of the new version
// failed, a rollout report of the old object (a status-only update) is not the
// rollout of the desired state. (Issue 11, defect 3.)
func TestRolloutAfterFailedApplyIsIgnored(t *testing.T) {
	m := New(StateDisabled)
	mustFire(t, m, Enabled{})
	mustFire(t, m, Applied{UID: "a", Generation: 1})
	mustFire(t, m, RolloutComplete{UID: "a", Generation: 1})
	mustFire(t, m, VersionChanged{From: "4.21.0", To: "4.22.0"})
	if got := mustFire(t, m, ApplyFailed{Err: errors.New("denied by admission")}); got.Action != ActionRetry {
		t.Fatalf("failed apply: got %+v, want Retry", got)
	}
	got := mustFire(t, m, RolloutComplete{UID: "a", Generation: 1})
	if got.To != StateUpgrading || got.Note == "" {
		t.Fatalf("rollout after a failed apply: got %+v, want to stay in Upgrading with a note", got)
	}
	mustFire(t, m, Enabled{})
	mustFire(t, m, Applied{UID: "a", Generation: 2})
	if got := mustFire(t, m, RolloutComplete{UID: "a", Generation: 2}); got.To != StateRunning {
		t.Fatalf("rollout of the applied generation: got %s, want Running", got.To)
	}
}

// A rollout of a replaced object (same generation, other UID) is not ours.
func TestRolloutOfAnotherObjectIsIgnored(t *testing.T) {
	m := New(StateDisabled)
	mustFire(t, m, Enabled{})
	mustFire(t, m, Applied{UID: "a", Generation: 1})
	if got := mustFire(t, m, RolloutComplete{UID: "b", Generation: 1}); got.To != StateDeploying {
		t.Fatalf("rollout of another object: got %s, want Deploying", got.To)
	}
}

// Enabled is the one answer to "does this state want the DaemonSet?".
func TestStateEnabled(t *testing.T) {
	want := map[State]bool{StateDisabled: false, StateDeploying: true, StateRunning: true, StateUpgrading: true, StateDrifted: true, StateDeleting: false}
	for _, s := range States() {
		if s.Enabled() != want[s] {
			t.Errorf("%s.Enabled() = %v, want %v", s, s.Enabled(), want[s])
		}
	}
	if State("").Enabled() {
		t.Error(`the zero State (not started) is enabled`)
	}
}

// Moves says whether a RolloutComplete would do anything: only for the last
// applied object, and not in Running, where the table's row is a no-op.
func TestMovesAnswersForTheTableAndTheGuard(t *testing.T) {
	m := New(StateDisabled)
	done := RolloutComplete{UID: "a", Generation: 1}
	if m.Moves(done) {
		t.Error("Disabled: a rollout with nothing applied moves")
	}
	mustFire(t, m, Enabled{})
	mustFire(t, m, Applied{UID: "a", Generation: 1})
	if m.Moves(RolloutComplete{UID: "a", Generation: 0}) || m.Moves(RolloutComplete{UID: "b", Generation: 1}) {
		t.Error("Deploying: a stale rollout, or another object's, moves")
	}
	if !m.Moves(done) {
		t.Error("Deploying: the applied object's rollout does not move")
	}
	mustFire(t, m, done)
	if m.Moves(done) {
		t.Error("Running: a rollout moves")
	}
}
