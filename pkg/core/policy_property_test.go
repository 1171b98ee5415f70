package core

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// writerPattern is one other writer of the DaemonSet, as the property test
// plays it.
type writerPattern struct {
	Rhythm string // react, periodic, burst, storm
	Names  string // fixed, churn (a new name each write), unnamed, many (several new names in one write)
	// react: Delay after each repair; periodic: every Period; burst: Burst
	// writes Gap apart, then Pause; storm: a write every Gap.
	Delay, Period, Gap, Pause time.Duration
	Burst                     int
	Start, Stop               time.Duration // active from t0+Start to t0+Stop
}

// randomPattern draws a writer: any rhythm, names and timing.
func randomPattern(rng *rand.Rand) writerPattern {
	d := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	w := writerPattern{
		Rhythm: []string{"react", "periodic", "burst", "storm"}[rng.IntN(4)],
		Names:  []string{"fixed", "fixed", "churn", "unnamed", "many"}[rng.IntN(5)],
		Delay:  d(10*time.Millisecond, 5*time.Second),
		Period: d(5*time.Second, 6*time.Minute),
		Gap:    d(50*time.Millisecond, 8*time.Second),
		Pause:  d(10*time.Second, 3*time.Minute),
		Burst:  1 + rng.IntN(6),
		Start:  d(0, 5*time.Minute),
	}
	w.Stop = w.Start + d(time.Second, 15*time.Minute)
	return w
}

// world plays writers against the gate as the control loop drives it: a
// decision to repair is a repair at once, a deadline is a timer.
type world struct {
	p          Policy
	l          Log
	writers    []writerPattern
	next       []time.Time // each writer's next write; zero: none
	burstN     []int       // writes left in the current burst
	names      int         // names handed out
	repairs    []time.Time
	timer      time.Time // the gate's deadline; zero: none
	fightOn    bool
	everFought bool
	clearLag   time.Duration // the longest a fight outlived the writers
	lastAny    time.Time     // the last foreign write
}

func newWorld(p Policy, ws []writerPattern) *world {
	w := &world{p: p, writers: ws, next: make([]time.Time, len(ws)), burstN: make([]int, len(ws))}
	for i, wp := range ws {
		w.next[i] = t0.Add(wp.Start)
		w.burstN[i] = wp.Burst
	}
	return w
}

// namesOf are the names writer i's write carries.
func (w *world) namesOf(i int) []string {
	wp := w.writers[i]
	fresh := func() string { w.names++; return fmt.Sprintf("n%d", w.names) }
	switch wp.Names {
	case "churn":
		return []string{fresh()}
	case "unnamed":
		return nil
	case "many":
		var ns []string
		for range 3 + w.names%6 {
			ns = append(ns, fresh())
		}
		return ns
	}
	return []string{fmt.Sprintf("w%d", i)}
}

// scheduleAfterWrite sets writer i's next write after one at now.
func (w *world) scheduleAfterWrite(i int, now time.Time) {
	wp := w.writers[i]
	var next time.Time
	switch wp.Rhythm {
	case "react":
		next = time.Time{} // it writes after the next repair
	case "periodic":
		next = now.Add(wp.Period)
	case "storm":
		next = now.Add(wp.Gap)
	case "burst":
		w.burstN[i]--
		if w.burstN[i] > 0 {
			next = now.Add(wp.Gap)
		} else {
			w.burstN[i] = wp.Burst
			next = now.Add(wp.Pause)
		}
	}
	if !next.IsZero() && next.After(t0.Add(wp.Stop)) {
		next = time.Time{}
	}
	w.next[i] = next
}

func (w *world) repair(now time.Time) {
	w.l = w.p.Repaired(w.l, now)
	w.repairs = append(w.repairs, now)
	w.timer = time.Time{}
	for i, wp := range w.writers {
		if wp.Rhythm == "react" && w.next[i].IsZero() {
			if at := now.Add(wp.Delay); !at.After(t0.Add(wp.Stop)) && !at.Before(t0.Add(wp.Start)) {
				w.next[i] = at
			}
		}
	}
}

func (w *world) decided(d Decision, now time.Time) {
	switch {
	case d.Repair:
		w.repair(now)
	case !d.At.IsZero():
		w.timer = d.At
	}
}

// run plays until nothing is left to happen, and fails on the first
// broken promise.
func (w *world) run() error {
	now := t0
	for {
		at := w.timer
		for _, n := range w.next {
			if !n.IsZero() && (at.IsZero() || n.Before(at)) {
				at = n
			}
		}
		if end := w.p.FightEnds(w.l); !end.IsZero() && (at.IsZero() || end.Before(at)) {
			at = end
		}
		if at.IsZero() {
			break
		}
		if at.Before(now) { // a fight whose end passed while its writer's change was outstanding
			at = now
		}
		now = at
		w.l = w.p.expire(w.l.clone(), now)
		var names []string
		wrote := false
		for i, n := range w.next {
			if n.Equal(now) {
				names = append(names, w.namesOf(i)...)
				if w.writers[i].Names == "unnamed" {
					names = append(names, "")
				}
				w.scheduleAfterWrite(i, now)
				wrote = true
			}
		}
		if wrote { // one drain for every write at this instant
			var d Decision
			w.l, d = w.p.Changed(w.l, names, now)
			w.lastAny = now
			w.decided(d, now)
		} else if !w.timer.IsZero() && !now.Before(w.timer) {
			var d Decision
			w.l, d = w.p.Due(w.l, now)
			w.timer = time.Time{}
			w.decided(d, now)
		}
		w.everFought = w.everFought || w.l.Fighting()
		if on := w.l.Fighting(); on != w.fightOn {
			w.fightOn = on
			if !on {
				w.clearLag = max(w.clearLag, now.Sub(w.lastAny))
			}
		}
		if now.Sub(t0) > 24*time.Hour {
			return fmt.Errorf("still going after a day")
		}
	}
	return nil
}

// TestBudgetHoldsForRandomWriters drives the gate with a thousand random
// patterns of one to four writers and checks every promise of the gate on
// each: the bound B(T) on every window, the object ours again soon after
// the writers stop, a writer that reacts to every repair for long enough
// reported, and no fight left once they all stopped.
func TestBudgetHoldsForRandomWriters(t *testing.T) {
	p := DefaultPolicy()
	rng := rand.New(rand.NewPCG(33, 1))
	for trial := range 1000 {
		var ws []writerPattern
		for range 1 + rng.IntN(4) {
			ws = append(ws, randomPattern(rng))
		}
		w := newWorld(p, ws)
		if err := w.run(); err != nil {
			t.Fatalf("trial %d: %v\nwriters: %s", trial, err, describe(ws))
		}
		if err := checkBound(p, w.repairs); err != nil {
			t.Fatalf("trial %d: %v\nwriters: %s\nrepairs: %v", trial, err, describe(ws), offsets(w.repairs))
		}
		if w.lastAny.IsZero() {
			continue
		}
		// The last foreign write is undone within 5 s of the writers'
		// stopping, or when the budget next holds what that repair needs.
		last := w.repairs[len(w.repairs)-1]
		if last.Before(w.lastAny) {
			t.Fatalf("trial %d: the last write at %s was never repaired (last repair %s)\nwriters: %s", trial, w.lastAny.Sub(t0), last.Sub(t0), describe(ws))
		}
		before := slices.DeleteFunc(slices.Clone(w.repairs), func(r time.Time) bool { return !r.Before(w.lastAny) })
		allowed := w.lastAny.Add(5 * time.Second)
		if next := budgetNext(p, before, w.lastAny, 1); next.After(allowed) {
			allowed = next
		}
		if last.After(allowed) {
			t.Fatalf("trial %d: the last write at %s was repaired at %s, want by %s\nwriters: %s\nrepairs: %v",
				trial, w.lastAny.Sub(t0), last.Sub(t0), allowed.Sub(t0), describe(ws), offsets(w.repairs))
		}
		if w.fightOn && w.p.FightEnds(w.l).IsZero() {
			t.Fatalf("trial %d: a fight never ends\nwriters: %s", trial, describe(ws))
		}
		if w.clearLag > p.FightWindow+p.MaxDefer {
			t.Fatalf("trial %d: a fight outlived the writers by %s", trial, w.clearLag)
		}
		if wp := ws[0]; len(ws) == 1 && wp.Rhythm == "react" && wp.Names == "fixed" && wp.Stop-wp.Start >= time.Minute && !w.everFought {
			t.Fatalf("trial %d: a writer that undid every repair for %s was never reported\nwriters: %s", trial, wp.Stop-wp.Start, describe(ws))
		}
	}
}

// budgetNext is when a budget that paid for repairs holds k at or after
// from: the token bucket replayed from the repairs alone.
func budgetNext(p Policy, repairs []time.Time, from time.Time, k int) time.Time {
	var l Log
	for _, r := range repairs {
		l = p.Repaired(l, r)
	}
	at := p.BudgetAllows(l, k)
	if at.Before(from) {
		return from
	}
	return at
}

func offsets(ts []time.Time) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Sub(t0).String())
	}
	return out
}
