// Package fsmtext is the state machine's text forms, for the binary's offline
// subcommands and `make docs`: scenario transcripts (testdata/fsm) and diagrams.
package fsmtext

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/insights-runtime-extractor/controller/fsm"
)

// Scenario is a readable event sequence. Its text has an "initial STATE" line and
// one step a line, "EVENT ARGS... [-> STATE ACTION]", with # comments. Arguments:
// VersionChanged FROM TO; Modified, RolloutComplete, Applied and AppliedUnchanged
// GENERATION; ApplyFailed and DeleteFailed MESSAGE...
type Scenario struct {
	Initial fsm.State
	Steps   []Step
}

// Step is one event and what the scenario expects of it (empty when unchecked).
type Step struct {
	Line       int
	Event      fsm.Event
	WantState  fsm.State
	WantAction fsm.Action
}

// ParseScenario reads the scenario text format.
func ParseScenario(r io.Reader) (*Scenario, error) {
	sc := &Scenario{Initial: fsm.StateDisabled}
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
	if step.Event, err = parseEvent(strings.Fields(evText)); err != nil || !hasWant {
		return step, err
	}
	f := strings.Fields(want)
	if len(f) != 2 {
		return step, fmt.Errorf("expectation %q: want \"STATE ACTION\"", strings.TrimSpace(want))
	}
	if step.WantState, err = ParseState(f[0]); err == nil {
		step.WantAction, err = parseAction(f[1])
	}
	return step, err
}

// parseEvent builds an event from its name and arguments, e.g. ["Modified", "3"].
func parseEvent(f []string) (fsm.Event, error) {
	if len(f) == 0 {
		return nil, errors.New("empty event")
	}
	name, args := fsm.EventName(f[0]), f[1:]
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
	if name == fsm.EventVersionChanged {
		if len(args) != 2 {
			return nil, fmt.Errorf("%s takes FROM and TO versions", name)
		}
		return fsm.VersionChanged{From: args[0], To: args[1]}, nil
	}
	return nil, fmt.Errorf("unknown event %q", f[0])
}

// The events parseEvent builds, by the arguments they take.
var (
	eventsWithoutArgs = map[fsm.EventName]fsm.Event{
		fsm.EventEnabled: fsm.Enabled{}, fsm.EventDisabled: fsm.Disabled{}, fsm.EventDeleted: fsm.Deleted{}, fsm.EventDeleteDone: fsm.DeleteDone{},
	}
	eventsWithGeneration = map[fsm.EventName]func(generation int64) fsm.Event{
		fsm.EventModified:         func(g int64) fsm.Event { return fsm.Modified{Generation: g} },
		fsm.EventRolloutComplete:  func(g int64) fsm.Event { return fsm.RolloutComplete{Generation: g} },
		fsm.EventApplied:          func(g int64) fsm.Event { return fsm.Applied{Generation: g} },
		fsm.EventAppliedUnchanged: func(g int64) fsm.Event { return fsm.AppliedUnchanged{Generation: g} },
	}
	eventsWithMessage = map[fsm.EventName]func(error) fsm.Event{
		fsm.EventApplyFailed:  func(err error) fsm.Event { return fsm.ApplyFailed{Err: err} },
		fsm.EventDeleteFailed: func(err error) fsm.Event { return fsm.DeleteFailed{Err: err} },
	}
)

// formatEvent renders an event in the scenario format (the inverse of parseEvent).
func formatEvent(ev fsm.Event) string {
	f := []string{string(ev.Name())}
	switch e := ev.(type) {
	case fsm.VersionChanged:
		f = append(f, e.From, e.To)
	case fsm.Modified:
		f = append(f, fmt.Sprint(e.Generation))
	case fsm.RolloutComplete:
		f = append(f, fmt.Sprint(e.Generation))
	case fsm.Applied:
		f = append(f, fmt.Sprint(e.Generation))
	case fsm.AppliedUnchanged:
		f = append(f, fmt.Sprint(e.Generation))
	case fsm.ApplyFailed:
		f = append(f, fmt.Sprint(e.Err))
	case fsm.DeleteFailed:
		f = append(f, fmt.Sprint(e.Err))
	}
	return strings.Join(f, " ")
}

// ParseState parses a state name.
func ParseState(s string) (fsm.State, error) { return parseName("state", s, fsm.States()) }

// parseAction parses an action name.
func parseAction(s string) (fsm.Action, error) { return parseName("action", s, fsm.Actions()) }

func parseName[T ~string](kind, s string, names []T) (T, error) {
	if !slices.Contains(names, T(s)) {
		return "", fmt.Errorf("unknown %s %q", kind, s)
	}
	return T(s), nil
}

// Run plays the scenario on a fresh machine and returns every transition taken.
func (sc *Scenario) Run() ([]fsm.Transition, error) {
	m := fsm.New(sc.Initial)
	out := make([]fsm.Transition, 0, len(sc.Steps))
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
func Transcript(initial fsm.State, ts []fsm.Transition) string {
	var b strings.Builder
	fmt.Fprintf(&b, "initial %s\n", initial)
	for _, t := range ts {
		fmt.Fprintf(&b, "%-32s -> %s %s", formatEvent(t.Event), t.To, t.Action)
		if t.Note != "" {
			fmt.Fprintf(&b, "  # %s", t.Note)
		}
		b.WriteString("\n")
	}
	return b.String()
}
