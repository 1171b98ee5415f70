// The repair gate's rules: pure functions from the gate's log, what happened and the time to the new log and a
// decision. A repair rolls a privileged pod on every node, as does the change it undoes: a human's edit must be
// repaired at once, yet a writer that undoes every repair (another copy of the controller, a GitOps tool
// self-healing the object) must not make the controller roll the fleet without bound.
//
// The budget: repairs draw on one token bucket for all writers (the generic cell rate algorithm: one instant, no
// counters): Burst at once, one more per Every, so a window of length T holds at most B(T) = Burst + ⌈T / Every⌉
// repairs (Policy.Bound), whatever the names. The controller's config, version and TLS writes are not repairs.
//
// The order: a change by a writer that undid no repair is repaired at once while budget is left; one by a writer
// that undid a repair of its own change waits for the writers to be quiet for Settle, at most MaxDefer after the
// first change it would undo, so a writer still writing is not chased write by write. The fight verdict reports,
// never delays.
//
// The fight. A writer is in a tug-of-war with the controller when it undid FightUndos repairs within FightWindow; or
// named writers undid SlowUndos within SlowWindow and it is one of them (a rotating name, a ten-minute job); or its
// change finds the budget spent (a loop that deletes the DaemonSet). An unnamed change (a deletion) is nobody in
// particular: unrelated deletions fight only through the budget. A fight ends once its writer has nothing outstanding
// and undid nothing for twice its slowest rhythm (its longest gap between recent undos), within [FightClearMin,
// FightWindow]: a periodic writer stays reported between syncs, a stopped one clears.

package core

import (
	"cmp"
	"slices"
	"time"
)

// Policy is the gate's rules; DefaultPolicy gives the numbers and their reasons.
type Policy struct {
	Burst         int           // repairs the budget allows at once
	Every         time.Duration // how often the budget allows one more
	Settle        time.Duration // how long the writers must be quiet for a deferred repair
	MaxDefer      time.Duration // the longest wait for quiet after the first outstanding change
	FightUndos    int           // undos within FightWindow that make a writer a fight
	FightWindow   time.Duration // the window FightUndos are counted in
	SlowUndos     int           // undos by named writers within SlowWindow that make each of them a fight
	SlowWindow    time.Duration // the window SlowUndos are counted in
	FightClearMin time.Duration // the least undo-free time that ends a fight
}

// DefaultPolicy is the policy the controller runs with. Why these numbers:
//   - Burst 6, one more a minute: an edit, its correction and another writer's edit during a fight are undone at
//     once; a writer that undoes every repair gets one a minute: about 10 template writes in a 5-minute fight,
//     against 150 with a writer every 2 s and no gate.
//   - Settle 2 s: storms (a script of kubectl patch, a controller's retries) write within a second of each other,
//     so a storm's last change is undone about 2 s after it ends.
//   - MaxDefer 25 s: a writer that never pauses is still repaired and its undos counted. A script's 20 s storm
//     costs one repair; a longer writer, likely a controller on a timer, is reported by its third undo within a
//     minute of its first write.
//   - FightUndos 3 within FightWindow 15 minutes: one undo is a human's second try, two can be a retry, three will
//     go on; 15 minutes catches a GitOps sync (Argo CD self-heals every 3 minutes by default, 5 is usual) by its third.
//   - SlowUndos 6 within SlowWindow 1 hour: a writer that escapes 15 minutes by its period (a 10-minute CronJob) or
//     by rotating names is reported within the hour, after at most 6 rolls; an admin's run of edits stays below it.
//   - FightClearMin 2 minutes: longer than the one-a-minute repair of a writer that reacts at once, so a fight does
//     not clear between its undos; it clears 2 minutes after it stops.
func DefaultPolicy() Policy {
	return Policy{
		Burst:         6,
		Every:         time.Minute,
		Settle:        2 * time.Second,
		MaxDefer:      25 * time.Second,
		FightUndos:    3,
		FightWindow:   15 * time.Minute,
		SlowUndos:     6,
		SlowWindow:    time.Hour,
		FightClearMin: 2 * time.Minute,
	}
}

// Valid reports whether p's numbers make a gate: a replenished budget, windows that hold their undos.
func (p Policy) Valid() bool {
	return p.Burst >= 1 && p.Every > 0 && p.Settle >= 0 &&
		p.MaxDefer >= p.Settle && p.FightUndos >= 2 && p.FightUndos <= undoTimes && p.FightWindow > 0 && p.FightClearMin > 0 &&
		p.SlowUndos >= 1 && p.SlowUndos <= slowTimes && p.SlowWindow >= p.FightWindow
}

// Bound is B(d): the most repairs the budget allows in any closed window of length d.
func (p Policy) Bound(d time.Duration) int { return p.Burst + int((d+p.Every-1)/p.Every) }

// Bounds on the log: a client chooses its manager name, so churning names must not grow it.
const (
	MaxNamedWriters = 5                                      // writers the log keeps apart; the rest count as OtherWriters
	OtherWriters    = "other writers"                        // the writer for all writers beyond MaxNamedWriters
	Unnamed         = "a writer managedFields does not name" // the writer of a change no entry names (a deletion, say)
	undoTimes       = 4                                      // per writer: enough to tell a fight (FightUndos) and its rhythm
	slowTimes       = 8                                      // named writers' undo times, for SlowUndos
)

// Log is what the gate remembers: the budget and a bounded record of recent writers. The zero
// Log has its whole budget and no writers; the functions here never modify their argument.
type Log struct {
	budgetAt    time.Time   // the budget is full from then on; each repair moves it Every later
	writers     []Writer    // by name; at most MaxNamedWriters named, plus OtherWriters and Unnamed
	since, last time.Time   // the first and latest outstanding change; zero when none is
	undos       []time.Time // named writers' latest undo times, oldest first (at most slowTimes)
}

// Writer is the gate's record of one writer.
type Writer struct {
	Name        string
	Outstanding bool // it changed the DaemonSet and no repair undid that yet
	Repaired    bool // the latest repair undid its change and stands: its next change is an undo
	LastChange  time.Time
	Undos       []time.Time // its latest undo times, oldest first (at most undoTimes)
	Fight       bool        // in a tug-of-war with the controller since FightSince
	FightSince  time.Time
	FightUndos  int // its undos since the fight began
}

// Decision is the gate's answer: repair now, or not before At (zero At: nothing to repair).
type Decision struct {
	Repair bool
	At     time.Time
}

// Outstanding reports whether some writer's change waits for a repair.
func (l Log) Outstanding() bool { return !l.since.IsZero() }

// Writers are the writers the log keeps, sorted by name (copies).
func (l Log) Writers() []Writer { return l.clone().writers }

// Fighting reports whether some writer is in a tug-of-war.
func (l Log) Fighting() bool {
	return slices.ContainsFunc(l.writers, func(w Writer) bool { return w.Fight })
}

// Available is the repairs the budget allows at now: k after budgetAt - (Burst-k+1)·Every (B(T) exactly).
func (p Policy) Available(l Log, now time.Time) int {
	if !l.budgetAt.After(now) {
		return p.Burst
	}
	return max(0, p.Burst-int(l.budgetAt.Sub(now)/p.Every))
}

// BudgetAllows is when the budget holds k repairs (in the past if it does now).
func (p Policy) BudgetAllows(l Log, k int) time.Time {
	return l.budgetAt.Add(-time.Duration(p.Burst-k+1)*p.Every + 1)
}

// clone copies l deeply enough for the functions below to change it.
func (l Log) clone() Log {
	l.writers = slices.Clone(l.writers)
	for i := range l.writers {
		l.writers[i].Undos = slices.Clone(l.writers[i].Undos)
	}
	l.undos = slices.Clone(l.undos)
	return l
}

// Changed records a change by names (none or "": Unnamed) at now and decides its repair. A writer that has undone
// nothing is repaired at once while the budget allows, even while another's repair waits (one repair undoes both).
func (p Policy) Changed(l Log, names []string, now time.Time) (Log, Decision) {
	l = p.expire(l.clone(), now)
	if len(names) == 0 {
		names = []string{Unnamed}
	}
	spent := p.Available(l, now) == 0
	contested := false
	for _, n := range names {
		w := &l.writers[l.writerIndex(n)]
		if w.Repaired { // it undoes the controller's repair of its last change
			w.Undos = keepLast(append(w.Undos, now), undoTimes)
			if w.Fight {
				w.FightUndos++
			}
			if w.Name != Unnamed {
				l.undos = keepLast(append(l.undos, now), slowTimes)
				if undosIn(*w, now, p.FightWindow) >= p.FightUndos {
					p.fight(w, w.Undos[len(w.Undos)-p.FightUndos])
				}
			}
		}
		if spent {
			p.fight(w, now)
		}
		w.Outstanding, w.Repaired, w.LastChange = true, false, now
		contested = contested || undosIn(*w, now, p.FightWindow) > 0
	}
	if countSince(l.undos, now.Add(-p.SlowWindow)) >= p.SlowUndos {
		for i := range l.writers {
			if w := &l.writers[i]; w.Name != Unnamed && undosIn(*w, now, p.SlowWindow) > 0 {
				p.fight(w, w.Undos[len(w.Undos)-undosIn(*w, now, p.SlowWindow)])
			}
		}
	}
	if l.since.IsZero() {
		l.since = now
	}
	l.last = now
	return l, p.decide(l, contested, now)
}

// fight marks w fighting from since, unless it already is; its undos since then count.
func (p Policy) fight(w *Writer, since time.Time) {
	if !w.Fight {
		w.Fight, w.FightSince, w.FightUndos = true, since, countSince(w.Undos, since)
	}
}

// Due decides whether the outstanding repair may be made at now, when a Decision's At comes.
func (p Policy) Due(l Log, now time.Time) (Log, Decision) {
	l = p.expire(l.clone(), now)
	if !l.Outstanding() {
		return l, Decision{}
	}
	contested := slices.ContainsFunc(l.writers, func(w Writer) bool { return w.Outstanding && undosIn(w, now, p.FightWindow) > 0 })
	return l, p.decide(l, contested, now)
}

// decide: a repair now, or when it may be made. A change needs one repair of the budget; a
// contested one (some writer of it has undone a repair) quiet as well.
func (p Policy) decide(l Log, contested bool, now time.Time) Decision {
	at := p.BudgetAllows(l, 1)
	if contested {
		quiet := l.last.Add(p.Settle)
		if limit := l.since.Add(p.MaxDefer); limit.Before(quiet) {
			quiet = limit
		}
		if quiet.After(at) {
			at = quiet
		}
	}
	if !at.After(now) {
		return Decision{Repair: true}
	}
	return Decision{At: at}
}

// Repaired records a repair at now, which undid every outstanding change, paid by the budget.
func (p Policy) Repaired(l Log, now time.Time) Log {
	l = l.clone()
	if l.budgetAt.Before(now) {
		l.budgetAt = now
	}
	l.budgetAt = l.budgetAt.Add(p.Every)
	return l.settled(true)
}

// Stood records that a repair found nothing to undo at now: the writers' next change undoes nothing of ours.
func (p Policy) Stood(l Log, now time.Time) Log { return p.expire(l.clone(), now).settled(false) }

// settled ends the outstanding changes; repaired: a repair undid them (their next change is an undo).
func (l Log) settled(repaired bool) Log {
	for i := range l.writers {
		if w := &l.writers[i]; w.Outstanding {
			w.Outstanding, w.Repaired = false, w.Repaired || repaired
		}
	}
	l.since, l.last = time.Time{}, time.Time{}
	return l
}

// FightEnds is when the first fight ends if its writer undoes nothing more; zero: none ends before a repair.
func (p Policy) FightEnds(l Log) time.Time {
	var next time.Time
	for _, w := range l.writers {
		if end := p.fightEnds(w); w.Fight && !w.Outstanding && (next.IsZero() || end.Before(next)) {
			next = end
		}
	}
	return next
}

func undosIn(w Writer, now time.Time, d time.Duration) int { return countSince(w.Undos, now.Add(-d)) }

func countSince(ts []time.Time, from time.Time) int {
	return len(slices.DeleteFunc(slices.Clone(ts), func(t time.Time) bool { return t.Before(from) }))
}

// keepLast is the newest n of ts (oldest first).
func keepLast[T any](ts []T, n int) []T { return ts[max(0, len(ts)-n):] }

// fightEnds is when w's fight ends if it undoes nothing more (rule: top of this file).
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
		return !w.Outstanding && !w.Fight && now.Sub(w.LastChange) > p.SlowWindow && undosIn(w, now, p.SlowWindow) == 0
	})
	return l
}

// writerIndex is the index of the record name's changes count in, added if need be: name's
// own while fewer than MaxNamedWriters are kept and no OtherWriters record lasts, else that.
func (l *Log) writerIndex(name string) int {
	name = cmp.Or(name, Unnamed)
	if i, ok := l.find(name); ok {
		return i
	}
	if name != Unnamed && name != OtherWriters {
		named := len(slices.DeleteFunc(slices.Clone(l.writers), func(w Writer) bool {
			return w.Name == Unnamed || w.Name == OtherWriters
		}))
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
