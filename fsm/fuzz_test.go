package fsm

import (
	"slices"
	"testing"
)

// FuzzMachine feeds random event sequences: the machine must never fail on a known
// event, never panic, and always be in one of the six states.
func FuzzMachine(f *testing.F) {
	f.Add([]byte{0, 0, 6, 5})
	f.Add([]byte{2, 2, 3, 6, 4, 1, 9})
	f.Add([]byte{5, 1, 10, 0, 8, 8, 8, 6, 5})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		m := New(States()[int(data[0])%len(States())])
		for _, b := range data[1:] {
			name := EventNames()[int(b)%len(EventNames())]
			ev := sample(name)
			switch name {
			case EventRolloutComplete:
				ev = RolloutComplete{Generation: int64(b / 16)}
			case EventApplied:
				ev = Applied{Generation: int64(b / 16)}
			}
			tr, err := m.Fire(ev)
			if err != nil {
				t.Fatalf("Fire(%s): %v", Describe(ev), err)
			}
			if !slices.Contains(States(), m.State()) || tr.To != m.State() {
				t.Fatalf("machine in %q after %s, transition said %q", m.State(), Describe(ev), tr.To)
			}
			if !slices.Contains(Actions(), tr.Action) {
				t.Fatalf("unknown action %q", tr.Action)
			}
		}
	})
}
