package core

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

// step is one thing that happens to the gate, at t0+at, and what the gate
// must answer: a change by names (or a due check), then, when the answer
// is a repair, the repair itself.
type step struct {
	at    time.Duration
	op    string   // "change", "due", "stood"
	names []string // the change's writers
	// The decision: repair now, or wait until t0+wait.
	repair bool
	until  time.Duration
	// fight: the verdict after the step.
	fight bool
	// repairedAtUntil: a due check at t0+until follows and repairs (see undo).
	repairedAtUntil bool
}

func change(at time.Duration, names ...string) step { return step{at: at, op: "change", names: names} }
func due(at time.Duration) step                     { return step{at: at, op: "due"} }

// undo is a change by names that undoes the last repair while the gate
// allows one: the gate waits until the writers have been quiet for 2 s (the
// default Settle), and the due check then repairs. fighting() marks both.
func undo(at time.Duration, names ...string) step {
	s := change(at, names...).waits(at + 2*time.Second)
	s.repairedAtUntil = true
	return s
}

func (s step) repairs() step              { s.repair = true; return s }
func (s step) waits(u time.Duration) step { s.until = u; return s }
func (s step) fighting() step             { s.fight = true; return s }

// play runs steps through the default policy: a decision to repair is
// followed by the repair, made at once.
func play(t *testing.T, p Policy, steps []step) Log {
	t.Helper()
	var l Log
	for i, s := range expand(steps) {
		now := t0.Add(s.at)
		var d Decision
		switch s.op {
		case "change":
			l, d = p.Changed(l, s.names, now)
		case "due":
			l, d = p.Due(l, now)
		case "stood":
			l = p.Stood(l, now)
		}
		if s.op != "stood" {
			want := Decision{Repair: s.repair}
			if !s.repair && s.until > 0 {
				want.At = t0.Add(s.until)
			}
			if d != want {
				t.Fatalf("step %d (%s at %s by %v): decision %s, want %s", i, s.op, s.at, s.names, show(d), show(want))
			}
		}
		if d.Repair {
			l = p.Repaired(l, now)
		}
		if got := p.expire(l.clone(), now).Fighting(); got != s.fight {
			t.Fatalf("step %d (%s at %s by %v): fighting %t, want %t", i, s.op, s.at, s.names, got, s.fight)
		}
	}
	return l
}

// expand writes out the due check that follows an undo.
func expand(steps []step) []step {
	var out []step
	for _, s := range steps {
		if !s.repairedAtUntil {
			out = append(out, s)
			continue
		}
		s.repairedAtUntil = false
		out = append(out, s, step{at: s.until, op: "due", repair: true, fight: s.fight})
	}
	return out
}

func show(d Decision) string {
	switch {
	case d.Repair:
		return "repair now"
	case d.At.IsZero():
		return "nothing to repair"
	}
	return "wait until t0+" + d.At.Sub(t0).String()
}

func TestDecide(t *testing.T) {
	s := time.Second
	m := time.Minute
	ns := time.Nanosecond
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"an isolated edit is repaired at once", []step{
			change(0, "kubectl-edit").repairs(),
		}},
		{"a second edit that undoes the repair waits for the writer to be quiet", []step{
			change(0, "kubectl-edit").repairs(),
			change(10*s, "kubectl-edit").waits(12 * s),
			due(11 * s).waits(12 * s),
			due(12 * s).repairs(),
		}},
		{"a storm is repaired once, 2 s after it ends", []step{
			change(0, "kubectl-patch").repairs(),
			change(60*s, "kubectl-patch").waits(62 * s),
			change(61*s, "kubectl-patch").waits(63 * s),
			change(62*s, "kubectl-patch").waits(64 * s),
			change(70*s, "kubectl-patch").waits(72 * s),
			undo(72*s, "kubectl-patch"),
		}},
		{"a writer that never pauses is repaired 25 s after the change it undid", []step{
			change(0, "loop").repairs(),
			change(1*s, "loop").waits(3 * s),
			change(2*s, "loop").waits(4 * s),
			change(3*s, "loop").waits(5 * s),
			change(25*s, "loop").waits(26 * s), // MaxDefer after the first outstanding change
			due(26 * s).repairs(),
		}},
		{"churning names: the budget gives 6 at once, one more within the minute, then one a minute", []step{
			change(0, "a").repairs(),
			change(1*s, "b").repairs(),
			change(2*s, "c").repairs(),
			change(3*s, "d").repairs(),
			change(4*s, "e").repairs(),
			change(5*s, "f").repairs(), // the first of the other writers
			// g counts as the other writers, whose change was repaired: an
			// undo, which waits for quiet; B(T) allows a 7th repair.
			change(6*s, "g").waits(8 * s),
			change(7*s, "h").waits(9 * s),
			due(9 * s).repairs(),
			// The budget is spent: the other writers are a fight, and wait
			// for the budget.
			change(10*s, "i").waits(1*m + ns).fighting(),
			due(1*m + ns).repairs().fighting(),
		}},
		{"an unnamed writer, a deletion after deletion, counts as one", []step{
			change(0).repairs(),
			undo(5 * s),
		}},
		{"a drain that carries many names is one repair", []step{
			change(0, "a", "b", "c", "d", "e", "f", "g", "h", "i", "j").repairs(),
			undo(1*s, "k"), // the other writers, repaired: an undo
		}},
		{"a fight holds no repair back beyond quiet and the budget", []step{
			change(0, "gitops").repairs(),
			undo(2*s, "gitops"),
			undo(5*s, "gitops"),
			undo(8*s, "gitops").fighting(), // the third undo
			undo(11*s, "gitops").fighting(),
			undo(14*s, "gitops").fighting(),
			change(17*s, "kubectl-edit").repairs().fighting(), // the 7th repair, B(17 s) = 7
			change(18*s, "gitops").waits(1*m + ns).fighting(), // the budget is spent
		}},
		{"a fight ends two minutes after its writer stopped", []step{
			change(0, "w").repairs(),
			undo(1*s, "w"),
			undo(4*s, "w"),
			undo(7*s, "w").fighting(),
			due(2*m + 6*s).fighting(),
			due(2*m + 7*s), // 2 minutes after the last undo
		}},
		{"a periodic sync every 3 minutes is a fight that lasts between syncs", []step{
			change(0, "argocd").repairs(),
			undo(3*m, "argocd"),
			undo(6*m, "argocd"),
			undo(9*m, "argocd").fighting(), // the third undo
			undo(12*m, "argocd").fighting(),
			due(17*m + 59*s).fighting(),
			due(18 * m), // twice its rhythm after its last undo
		}},
		{"a writer that puts the object back itself undid nothing", []step{
			change(0, "w").repairs(),
			change(1*s, "w").waits(3 * s),
			{at: 2 * s, op: "stood"},
			undo(10*s, "w"), // its earlier undo still counts
		}},
		{"burst and pause is reported", []step{
			change(0, "b").repairs(),
			undo(1*s, "b"),
			undo(7*s, "b"),
			undo(15*s, "b").fighting(),
			undo(76*s, "b").fighting(), // 4 repairs spent, 1 refilled: 3 left
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { play(t, DefaultPolicy(), tc.steps) })
	}
}

// The log's writers stay bounded whatever the names.
func TestLogStaysBounded(t *testing.T) {
	p := DefaultPolicy()
	var l Log
	for i := range 10000 {
		l, _ = p.Changed(l, []string{fmt.Sprintf("churn-%d", i), fmt.Sprintf("other-%d", i)}, t0.Add(time.Duration(i)*time.Millisecond))
	}
	if n := len(l.Writers()); n > MaxNamedWriters+2 {
		t.Fatalf("%d writers kept, want at most %d", n, MaxNamedWriters+2)
	}
	for _, w := range l.Writers() {
		if len(w.Undos) > undoTimes {
			t.Fatalf("%s keeps %d undo times", w.Name, len(w.Undos))
		}
	}
}

func TestBound(t *testing.T) {
	p := DefaultPolicy()
	for _, tc := range []struct {
		d    time.Duration
		want int
	}{{0, 6}, {time.Nanosecond, 7}, {time.Minute, 7}, {time.Minute + 1, 8}, {5 * time.Minute, 11}} {
		if got := p.Bound(tc.d); got != tc.want {
			t.Errorf("Bound(%s) = %d, want %d", tc.d, got, tc.want)
		}
	}
}

func TestValid(t *testing.T) {
	if !DefaultPolicy().Valid() {
		t.Fatal("the default policy is not valid")
	}
	for _, f := range []func(*Policy){
		func(p *Policy) { p.Burst = 0 },
		func(p *Policy) { p.Every = 0 },
		func(p *Policy) { p.SlowWindow = p.FightWindow - 1 },
		func(p *Policy) { p.SlowUndos = slowTimes + 1 },
		func(p *Policy) { p.Settle = -1 },
		func(p *Policy) { p.MaxDefer = p.Settle - 1 },
		func(p *Policy) { p.FightUndos = undoTimes + 1 },
	} {
		p := DefaultPolicy()
		f(&p)
		if p.Valid() {
			t.Errorf("%+v is valid", p)
		}
	}
}

// checkBound fails when some window of repairs holds more than the
// policy's bound: the binding windows start and end at a repair.
func checkBound(p Policy, repairs []time.Time) error {
	for i := range repairs {
		for j := i; j < len(repairs); j++ {
			if n, d := j-i+1, repairs[j].Sub(repairs[i]); n > p.Bound(d) {
				return fmt.Errorf("%d repairs in %s (from %s), the budget allows %d", n, d, repairs[i].Sub(t0), p.Bound(d))
			}
		}
	}
	return nil
}

func TestCheckBoundFails(t *testing.T) {
	p := DefaultPolicy()
	var eight []time.Time
	for i := range 8 {
		eight = append(eight, t0.Add(time.Duration(i)*time.Second))
	}
	if checkBound(p, eight[:7]) != nil || checkBound(p, eight) == nil {
		t.Fatal("checkBound does not tell 7 repairs in 6 s from 8 in 7 s")
	}
}

// describe names a pattern for a failure message.
func describe(ws []writerPattern) string {
	var b strings.Builder
	for _, w := range ws {
		fmt.Fprintf(&b, "%+v; ", w)
	}
	return b.String()
}

// A writer counted among the other writers stays there while their record
// lasts, even once a named writer is forgotten: a record of its own would
// forget its undos (found by the model: a periodic sync counted as other
// writers became a newcomer when 5 earlier names expired).
func TestOtherWriterStaysWhileTheRecordLasts(t *testing.T) {
	s, m := time.Second, time.Minute
	play(t, DefaultPolicy(), []step{
		change(0, "a").repairs(),
		change(1*s, "b").repairs(),
		change(2*s, "c").repairs(),
		change(3*s, "d").repairs(),
		change(4*s, "e").repairs(),
		change(5*s, "argocd").repairs(), // the other writers
		undo(10*m, "argocd"),
		// a..e are forgotten 15 minutes after their change
		undo(16*m, "argocd"),
		change(22*m, "argocd").waits(22*m + 2*s).fighting(),
	})
}
