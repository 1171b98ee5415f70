package fsm

import (
	"context"
	"fmt"
	"slices"
	"sync"

	looplab "github.com/looplab/fsm"
)

// UnknownEventError is returned by Fire for an event the table has no row for.
type UnknownEventError struct {
	State State
	Event Event
}

func (e *UnknownEventError) Error() string {
	return fmt.Sprintf("fsm: no transition for event %q in state %s", Describe(e.Event), e.State)
}

// Machine is the lifecycle state machine. One goroutine drives it (the mutex only
// guards against a concurrent Fire); State may be read from any goroutine.
type Machine struct {
	mu     sync.Mutex
	engine *looplab.FSM
	// applied is the rollout that completes the last successful apply; nil before
	// any, after a failed one (what is out there is not desired) and once it is gone.
	applied   *RolloutComplete
	listeners []func(Transition)
}

// New builds a machine in the initial state from the transition table.
func New(initial State) *Machine {
	descs := make([]looplab.EventDesc, 0, len(table))
	for _, r := range table {
		descs = append(descs, looplab.EventDesc{Name: string(r.Event), Src: []string{string(r.From)}, Dst: string(r.To)})
	}
	return &Machine{engine: looplab.NewFSM(string(initial), descs, nil)}
}

// OnTransition registers a listener called synchronously after every Fire, self-transitions
// too, so logs, metrics and status can follow the machine. Listeners must not call Fire.
func (m *Machine) OnTransition(fn func(Transition)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.listeners = append(m.listeners, fn)
}

// State returns the current state.
func (m *Machine) State() State { return State(m.engine.Current()) }

// next returns the transition ev would take now (m.mu held); ok is false without a table row.
func (m *Machine) next(ev Event) (t Transition, ok bool) {
	from := State(m.engine.Current())
	t = Transition{From: from, To: from, Event: ev, Action: ActionNone}
	i := slices.IndexFunc(table, func(r Row) bool { return ev != nil && r.From == from && r.Event == ev.Name() })
	if i < 0 {
		return t, false
	}
	r, rollout := ev.(RolloutComplete)
	switch a := m.applied; {
	case !rollout:
	case a == nil:
		t.Note = fmt.Sprintf("rollout of generation %d ignored: no successful apply is in place", r.Generation)
	case r.UID != a.UID:
		t.Note = fmt.Sprintf("rollout of another object ignored: generation %d of uid %q, last applied uid %q", r.Generation, r.UID, a.UID)
	case r.Generation != a.Generation:
		t.Note = fmt.Sprintf("stale rollout: generation %d is not the last applied %d", r.Generation, a.Generation)
	}
	if t.Note == "" {
		t.To, t.Action = table[i].To, table[i].Action
	}
	return t, true
}

// Fire feeds one event and returns the transition taken. A RolloutComplete counts only for the UID and generation of
// the last successful apply; any other is ignored: the state stays, the action is None, and Note says why. Fire takes
// no context: it does no I/O, and looplab/fsm v1.0.3 stays "in transition" for good after a cancelled one.
func (m *Machine) Fire(ev Event) (Transition, error) {
	m.mu.Lock()
	t, ok := m.next(ev)
	if !ok {
		m.mu.Unlock()
		return t, &UnknownEventError{State: t.From, Event: ev}
	}
	switch e := ev.(type) {
	case Applied:
		m.applied = &RolloutComplete{UID: e.UID, Generation: e.Generation}
	case AppliedUnchanged:
		m.applied = &RolloutComplete{UID: e.UID, Generation: e.Generation}
	case ApplyFailed, Deleted, DeleteDone:
		m.applied = nil
	}
	if t.Changed() {
		// No callbacks to cancel; the state moves, so no NoTransitionError either.
		if err := m.engine.Event(context.Background(), string(ev.Name())); err != nil {
			m.mu.Unlock()
			return Transition{From: t.From, To: t.From, Event: ev, Action: ActionNone}, fmt.Errorf("fsm: fire %s in %s: %w", ev.Name(), t.From, err)
		}
	}
	listeners := m.listeners
	m.mu.Unlock()

	for _, fn := range listeners {
		fn(t)
	}
	return t, nil
}

// Moves reports whether firing ev now would change the state or ask for an action, so
// a caller can skip a RolloutComplete that moves nothing; fire apply outcomes regardless.
func (m *Machine) Moves(ev Event) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.next(ev)
	return ok && (t.Changed() || t.Action != ActionNone)
}
