package fsm

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Scenario is a readable event sequence. Its text has an "initial STATE" line and
// one step a line, "EVENT ARGS... [-> STATE ACTION]", with # comments. Arguments:
// VersionChanged FROM TO; Modified, RolloutComplete, Applied and AppliedUnchanged
// GENERATION; ApplyFailed and DeleteFailed MESSAGE...
type Scenario struct {
	Initial State
	Steps   []Step
}

// Step is one event and what the scenario expects of it (empty when unchecked).
type Step struct {
	Line       int
	Event      Event
	WantState  State
	WantAction Action
}

// ParseScenario reads the scenario text format.
func ParseScenario(r io.Reader) (*Scenario, error) {
	sc := &Scenario{Initial: StateDisabled}
	s := bufio.NewScanner(r)
	for n := 1; s.Scan(); n++ {
		line, _, _ := strings.Cut(s.Text(), "#")
		line = strings.TrimSpace(line)
		var err error
		if rest, ok := strings.CutPrefix(line, "initial "); ok {
			sc.Initial, err = ParseState(strings.TrimSpace(rest))
		} else if line != "" {
			var step Step
			step, err = parseStep(line)
			step.Line = n
			sc.Steps = append(sc.Steps, step)
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("read scenario: %w", err)
	}
	return sc, nil
}

// parseStep's step is partial on error; ParseScenario then drops it.
func parseStep(line string) (step Step, err error) {
	evText, want, hasWant := strings.Cut(line, "->")
	if step.Event, err = ParseEvent(strings.Fields(evText)); err != nil || !hasWant {
		return step, err
	}
	f := strings.Fields(want)
	if len(f) != 2 {
		return step, fmt.Errorf("expectation %q: want \"STATE ACTION\"", strings.TrimSpace(want))
	}
	if step.WantState, err = ParseState(f[0]); err == nil {
		step.WantAction, err = ParseAction(f[1])
	}
	return step, err
}

// ParseEvent builds an event from its name and arguments, e.g. ["Modified", "3"].
func ParseEvent(f []string) (Event, error) {
	if len(f) == 0 {
		return nil, errors.New("empty event")
	}
	name, args := EventName(f[0]), f[1:]
	if ev, ok := eventsWithoutArgs[name]; ok {
		if len(args) != 0 {
			return nil, fmt.Errorf("%s takes no arguments", name)
		}
		return ev, nil
	}
	if build, ok := eventsWithGeneration[name]; ok {
		if len(args) != 1 {
			return nil, fmt.Errorf("%s takes one generation argument", name)
		}
		g, err := strconv.ParseInt(args[0], 10, 64)
		if err != nil || g < 0 {
			return nil, fmt.Errorf("%s: invalid generation %q", name, args[0])
		}
		return build(g), nil
	}
	if build, ok := eventsWithMessage[name]; ok {
		message := "unspecified failure"
		if len(args) > 0 {
			message = strings.Join(args, " ")
		}
		return build(errors.New(message)), nil
	}
	if name == EventVersionChanged {
		if len(args) != 2 {
			return nil, fmt.Errorf("%s takes FROM and TO versions", name)
		}
		return VersionChanged{From: args[0], To: args[1]}, nil
	}
	return nil, fmt.Errorf("unknown event %q", f[0])
}

// The events ParseEvent builds, by the arguments they take.
var (
	eventsWithoutArgs = map[EventName]Event{
		EventEnabled: Enabled{}, EventDisabled: Disabled{}, EventDeleted: Deleted{}, EventDeleteDone: DeleteDone{},
	}
	eventsWithGeneration = map[EventName]func(generation int64) Event{
		EventModified:         func(g int64) Event { return Modified{Generation: g} },
		EventRolloutComplete:  func(g int64) Event { return RolloutComplete{Generation: g} },
		EventApplied:          func(g int64) Event { return Applied{Generation: g} },
		EventAppliedUnchanged: func(g int64) Event { return AppliedUnchanged{Generation: g} },
	}
	eventsWithMessage = map[EventName]func(error) Event{
		EventApplyFailed:  func(err error) Event { return ApplyFailed{Err: err} },
		EventDeleteFailed: func(err error) Event { return DeleteFailed{Err: err} },
	}
)

// FormatEvent renders an event in the scenario format (the inverse of ParseEvent).
func FormatEvent(ev Event) string {
	f := []string{string(ev.Name())}
	switch e := ev.(type) {
	case VersionChanged:
		f = append(f, e.From, e.To)
	case generationEvent:
		f = append(f, fmt.Sprint(e.generation()))
	case failureEvent:
		f = append(f, fmt.Sprint(e.failure()))
	}
	return strings.Join(f, " ")
}

// ParseState parses a state name.
func ParseState(s string) (State, error) { return parseName("state", s, States()) }

// ParseAction parses an action name.
func ParseAction(s string) (Action, error) { return parseName("action", s, Actions()) }

func parseName[T ~string](kind, s string, names []T) (T, error) {
	if !slices.Contains(names, T(s)) {
		return "", fmt.Errorf("unknown %s %q", kind, s)
	}
	return T(s), nil
}

// Run plays the scenario on a fresh machine and returns every transition taken.
func (sc *Scenario) Run() ([]Transition, error) {
	m := New(sc.Initial)
	out := make([]Transition, 0, len(sc.Steps))
	for _, st := range sc.Steps {
		t, err := m.Fire(st.Event)
		if err != nil {
			return out, fmt.Errorf("line %d: %w", st.Line, err)
		}
		out = append(out, t)
	}
	return out, nil
}

// Transcript renders a run as a scenario whose expectations are what the machine did.
func Transcript(initial State, ts []Transition) string {
	var b strings.Builder
	fmt.Fprintf(&b, "initial %s\n", initial)
	for _, t := range ts {
		fmt.Fprintf(&b, "%-32s -> %s %s", FormatEvent(t.Event), t.To, t.Action)
		if t.Note != "" {
			fmt.Fprintf(&b, "  # %s", t.Note)
		}
		b.WriteString("\n")
	}
	return b.String()
}
