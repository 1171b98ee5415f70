package fsm

import (
	"context"
	"errors"
	"fmt"
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

type rowKey struct {
	from  State
	event EventName
}

// Machine is the lifecycle state machine. It is driven by one goroutine (Fire is
// serialised by a mutex, so a concurrent caller cannot corrupt it, but the design
// has a single owner); State may be read from any goroutine.
type Machine struct {
	mu          sync.Mutex
	engine      *looplab.FSM
	rows        map[rowKey]Row
	lastApplied int64 // generation of the last apply outcome; guards stale rollouts
	listeners   []func(Transition)
}

// New builds a machine in the initial state from the transition table.
func New(initial State) *Machine {
	rows := make(map[rowKey]Row, len(table))
	descs := make([]looplab.EventDesc, 0, len(table))
	for _, r := range table {
		rows[rowKey{r.From, r.Event}] = r
		descs = append(descs, looplab.EventDesc{Name: string(r.Event), Src: []string{string(r.From)}, Dst: string(r.To)})
	}
	return &Machine{
		engine: looplab.NewFSM(string(initial), descs, nil),
		rows:   rows,
	}
}

// OnTransition registers a listener called synchronously after every Fire,
// including self-transitions, so logs, metrics and status can follow the machine
// without it knowing about them. Listeners must not call Fire.
func (m *Machine) OnTransition(fn func(Transition)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.listeners = append(m.listeners, fn)
}

// State returns the current state.
func (m *Machine) State() State {
	return State(m.engine.Current())
}

// LastAppliedGeneration returns the generation of the last apply outcome fed in.
func (m *Machine) LastAppliedGeneration() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lastApplied
}

// Fire feeds one event and returns the transition taken. Self-transitions are
// normal. A RolloutComplete for a generation older than the last apply outcome is
// stale: it is ignored (the state stays, action None) and the returned Transition
// says so in Note.
func (m *Machine) Fire(ctx context.Context, ev Event) (Transition, error) {
	m.mu.Lock()
	from := State(m.engine.Current())
	if ev == nil {
		m.mu.Unlock()
		return Transition{From: from, To: from, Action: ActionNone}, &UnknownEventError{State: from, Event: ev}
	}
	row, ok := m.rows[rowKey{from, ev.Name()}]
	if !ok {
		m.mu.Unlock()
		return Transition{From: from, To: from, Event: ev, Action: ActionNone}, &UnknownEventError{State: from, Event: ev}
	}
	t := Transition{From: from, To: row.To, Event: ev, Action: row.Action}

	switch e := ev.(type) {
	case RolloutComplete:
		if e.Generation < m.lastApplied {
			t.To, t.Action = from, ActionNone
			t.Note = fmt.Sprintf("stale rollout: generation %d is older than the last applied %d", e.Generation, m.lastApplied)
		}
	case Applied:
		m.lastApplied = e.Generation
	case AppliedUnchanged:
		m.lastApplied = e.Generation
	}

	if t.To != from {
		if err := m.engine.Event(ctx, string(row.Event)); err != nil {
			var noTransition looplab.NoTransitionError
			if !errors.As(err, &noTransition) {
				m.mu.Unlock()
				return Transition{From: from, To: from, Event: ev, Action: ActionNone}, fmt.Errorf("fsm: fire %s in %s: %w", ev.Name(), from, err)
			}
		}
	}
	listeners := m.listeners
	m.mu.Unlock()

	for _, fn := range listeners {
		fn(t)
	}
	return t, nil
}
