package fsm

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Scenario is a readable event sequence: an initial state and steps, each an event
// with, optionally, the transition expected from it. The text format is
//
//	# comment
//	initial Disabled
//	Enabled                 -> Deploying Apply
//	Applied 1               -> Deploying None
//	RolloutComplete 1       -> Running None
//
// Event arguments: VersionChanged FROM TO; Modified, RolloutComplete, Applied and
// AppliedUnchanged GENERATION; ApplyFailed and DeleteFailed MESSAGE...
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
	n := 0
	for s.Scan() {
		n++
		line := strings.TrimSpace(s.Text())
		if i := strings.Index(line, "#"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if line == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "initial "); ok {
			st, err := ParseState(strings.TrimSpace(rest))
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			sc.Initial = st
			continue
		}
		step, err := parseStep(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		step.Line = n
		sc.Steps = append(sc.Steps, step)
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("read scenario: %w", err)
	}
	return sc, nil
}

func parseStep(line string) (Step, error) {
	evText, want, hasWant := strings.Cut(line, "->")
	ev, err := ParseEvent(strings.Fields(evText))
	if err != nil {
		return Step{}, err
	}
	step := Step{Event: ev}
	if hasWant {
		f := strings.Fields(want)
		if len(f) != 2 {
			return Step{}, fmt.Errorf("expectation %q: want \"STATE ACTION\"", strings.TrimSpace(want))
		}
		if step.WantState, err = ParseState(f[0]); err != nil {
			return Step{}, err
		}
		if step.WantAction, err = ParseAction(f[1]); err != nil {
			return Step{}, err
		}
	}
	return step, nil
}

// ParseEvent builds an event from its name and arguments, e.g. ["Modified", "3"].
func ParseEvent(f []string) (Event, error) {
	if len(f) == 0 {
		return nil, errors.New("empty event")
	}
	name, args := EventName(f[0]), f[1:]
	gen := func() (int64, error) {
		if len(args) != 1 {
			return 0, fmt.Errorf("%s takes one generation argument", name)
		}
		g, err := strconv.ParseInt(args[0], 10, 64)
		if err != nil || g < 0 {
			return 0, fmt.Errorf("%s: invalid generation %q", name, args[0])
		}
		return g, nil
	}
	noArgs := func(ev Event) (Event, error) {
		if len(args) != 0 {
			return nil, fmt.Errorf("%s takes no arguments", name)
		}
		return ev, nil
	}
	message := func() error {
		if len(args) == 0 {
			return errors.New("unspecified failure")
		}
		return errors.New(strings.Join(args, " "))
	}
	switch name {
	case EventEnabled:
		return noArgs(Enabled{})
	case EventDisabled:
		return noArgs(Disabled{})
	case EventDeleted:
		return noArgs(Deleted{})
	case EventDeleteDone:
		return noArgs(DeleteDone{})
	case EventVersionChanged:
		if len(args) != 2 {
			return nil, fmt.Errorf("%s takes FROM and TO versions", name)
		}
		return VersionChanged{From: args[0], To: args[1]}, nil
	case EventModified:
		g, err := gen()
		return Modified{Generation: g}, err
	case EventRolloutComplete:
		g, err := gen()
		return RolloutComplete{Generation: g}, err
	case EventApplied:
		g, err := gen()
		return Applied{Generation: g}, err
	case EventAppliedUnchanged:
		g, err := gen()
		return AppliedUnchanged{Generation: g}, err
	case EventApplyFailed:
		return ApplyFailed{Err: message()}, nil
	case EventDeleteFailed:
		return DeleteFailed{Err: message()}, nil
	}
	return nil, fmt.Errorf("unknown event %q", f[0])
}

// FormatEvent renders an event in the scenario format (the inverse of ParseEvent).
func FormatEvent(ev Event) string {
	_, values := payload(ev)
	return strings.Join(append([]string{string(ev.Name())}, values...), " ")
}

// ParseState parses a state name.
func ParseState(s string) (State, error) {
	for _, st := range States() {
		if string(st) == s {
			return st, nil
		}
	}
	return "", fmt.Errorf("unknown state %q", s)
}

// ParseAction parses an action name.
func ParseAction(s string) (Action, error) {
	for _, a := range Actions() {
		if string(a) == s {
			return a, nil
		}
	}
	return "", fmt.Errorf("unknown action %q", s)
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

// Transcript renders a scenario run in the scenario format itself, with every
// expectation filled in from what the machine did, so it can be diffed against, or
// written over, the scenario file.
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
