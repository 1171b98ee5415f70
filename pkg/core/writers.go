package core

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// FightEnds is when the first fight ends if its writer undoes nothing more; zero when there
// is no fight, or every fight's writer has a change outstanding (its repair comes first).
func (p Policy) FightEnds(l Log) time.Time {
	var next time.Time
	for _, w := range l.writers {
		if end := p.fightEnds(w); w.Fight && !w.Outstanding && (next.IsZero() || end.Before(next)) {
			next = end
		}
	}
	return next
}

// undosIn counts w's undos within window at now.
func (p Policy) undosIn(w Writer, now time.Time, window time.Duration) int {
	return countSince(w.Undos, now.Add(-window))
}

// countSince counts the times in ts at or after from.
func countSince(ts []time.Time, from time.Time) int {
	n := 0
	for _, t := range ts {
		if !t.Before(from) {
			n++
		}
	}
	return n
}

// keepLast is the newest n of ts (oldest first).
func keepLast(ts []time.Time, n int) []time.Time { return ts[max(0, len(ts)-n):] }

// fightEnds is when w's fight ends if it undoes nothing more (rule: top of policy.go).
func (p Policy) fightEnds(w Writer) time.Time {
	var gap time.Duration
	for i := 1; i < len(w.Undos); i++ {
		gap = max(gap, w.Undos[i].Sub(w.Undos[i-1]))
	}
	last := w.LastChange // a writer the spent budget marked may have undone nothing
	if len(w.Undos) > 0 {
		last = w.Undos[len(w.Undos)-1]
	}
	return last.Add(min(max(2*gap, p.FightClearMin), p.FightWindow))
}

// expire ends the fights over by now and drops writers with nothing left to tell. A writer
// is kept a SlowWindow after its last change or undo: one that rotates names comes back.
func (p Policy) expire(l Log, now time.Time) Log {
	for i := range l.writers {
		if w := &l.writers[i]; w.Fight && !w.Outstanding && !now.Before(p.fightEnds(*w)) {
			w.Fight, w.FightSince, w.FightUndos = false, time.Time{}, 0
		}
	}
	l.undos = slices.DeleteFunc(l.undos, func(u time.Time) bool { return now.Sub(u) > p.SlowWindow })
	l.writers = slices.DeleteFunc(l.writers, func(w Writer) bool {
		return !w.Outstanding && !w.Fight && now.Sub(w.LastChange) > p.SlowWindow && p.undosIn(w, now, p.SlowWindow) == 0
	})
	return l
}

// writerIndex is the index of the record name's changes count in, added if need be: name's
// own while fewer than MaxNamedWriters are kept and no OtherWriters record lasts, else that.
func (l *Log) writerIndex(name string) int {
	if name == "" {
		name = Unnamed
	}
	if i, ok := l.find(name); ok {
		return i
	}
	if name != Unnamed && name != OtherWriters {
		named := 0
		for _, w := range l.writers {
			if w.Name != Unnamed && w.Name != OtherWriters {
				named++
			}
		}
		// While the other writers' record lasts, a name not kept apart counts there: it may
		// be one of them (the log does not keep their names), and a record of its own would
		// forget its undos.
		if _, others := l.find(OtherWriters); others || named >= MaxNamedWriters {
			name = OtherWriters
		}
	}
	i, ok := l.find(name)
	if !ok {
		l.writers = slices.Insert(l.writers, i, Writer{Name: name})
	}
	return i
}

func (l *Log) find(name string) (int, bool) {
	return slices.BinarySearchFunc(l.writers, name, func(w Writer, n string) int { return cmp.Compare(w.Name, n) })
}

// Key renders what in l decides the gate's future answers, instants relative to now: logs
// with one key answer every sequence of changes alike (a model checker prunes states by it).
func (l Log) Key(now time.Time) string {
	budget := "full" // a budget refilled long ago is the same as one just refilled
	if l.budgetAt.After(now) {
		budget = rel(l.budgetAt, now)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "budget=%s since=%s last=%s undos=", budget, rel(l.since, now), rel(l.last, now))
	for _, u := range l.undos {
		b.WriteString(rel(u, now) + ",")
	}
	for _, w := range l.writers {
		fmt.Fprintf(&b, " %s{out=%t rep=%t change=%s fight=%t since=%s n=%d undos=", w.Name, w.Outstanding, w.Repaired,
			rel(w.LastChange, now), w.Fight, rel(w.FightSince, now), w.FightUndos)
		for _, u := range w.Undos {
			b.WriteString(rel(u, now) + ",")
		}
		b.WriteString("}")
	}
	return b.String()
}
